# Shared helpers for the project's set-up and test scripts (bash).
set -euo pipefail

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

APT_UPDATED=0
# apt_install PKG... installs the Debian packages that are missing, with apt's own progress output.
apt_install() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "installing ${missing[*]} needs root"
  if [ "$APT_UPDATED" -eq 0 ]; then
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    APT_UPDATED=1
  fi
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# npm_install installs the workspace's dependencies when package-lock.json is newer than node_modules.
npm_install() {
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    say "npm install (native modules compile from source; this takes a minute or two)"
    npm install --no-audit --no-fund --foreground-scripts --loglevel=http
  fi
}

build() {
  say "building (tsc)"
  npm run --silent build
}
