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

# Node.js: the oldest LTS line the project runs on (engines in package.json), and the one set-up installs.
NODE_MIN_MAJOR=22
NODE_MAJOR=24

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# ensure_node makes `node` a Node.js $NODE_MIN_MAJOR or newer. Where the system's is older (Debian 12 ships 18) or
# missing, it installs the official build that the npm registry carries as the package node-linux-<arch> (binary
# and headers) under /usr/local/lib/nodejs-$NODE_MAJOR, linked from /usr/local/bin. npm builds native modules
# against the headers of the node that runs them.
ensure_node() {
  local arch dest tmp tarball
  if [ "$(node_major)" -lt "$NODE_MIN_MAJOR" ]; then
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64) arch=arm64 ;;
      *) die "no Node.js $NODE_MAJOR build for $(uname -m) in the npm registry; install Node.js $NODE_MAJOR yourself" ;;
    esac
    [ "$(id -u)" -eq 0 ] || die "installing Node.js $NODE_MAJOR needs root (this machine has $(node -v 2>/dev/null || echo none))"
    say "installing Node.js $NODE_MAJOR LTS (npm package node-linux-$arch; this machine has $(node -v 2>/dev/null || echo none))"
    tmp=$(mktemp -d)
    tarball=$(cd "$tmp" && npm pack --loglevel=http "node-linux-$arch@$NODE_MAJOR" | tail -n 1)
    dest=/usr/local/lib/nodejs-$NODE_MAJOR
    rm -rf "$dest.next"
    mkdir -p "$dest.next"
    tar -xzf "$tmp/$tarball" -C "$dest.next" --strip-components=1
    rm -rf "$tmp" "$dest"
    mv "$dest.next" "$dest"
    ln -sf "$dest/bin/node" /usr/local/bin/node
    hash -r
    [ "$(node_major)" -ge "$NODE_MAJOR" ] ||
      die "installed Node.js $NODE_MAJOR in $dest, but 'node' on PATH is still $(node -v); put /usr/local/bin first"
    say "Node.js $(node -v) in $dest"
  fi
  # node-gyp builds native modules against the headers named by nodedir: those of the running node.
  dest=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
  if [ -d "$dest/include/node" ]; then export npm_config_nodedir="$dest"; fi
}

# npm_install installs the workspace's dependencies exactly as package-lock.json pins them, when the lockfile is
# newer than node_modules or node_modules was built by another Node.js.
npm_install() {
  ensure_node
  local stamp=node_modules/.ccp-node-version
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ] ||
    [ "$(cat "$stamp" 2>/dev/null)" != "$(node -v)" ]; then
    say "npm ci with Node.js $(node -v) (native modules compile from source; this takes a minute or two)"
    npm ci --no-audit --no-fund --foreground-scripts --loglevel=http
    node -v >"$stamp"
  fi
}

# pg_connection URL: sets PG_URL to URL without its password and exports PGPASSWORD with it (decoded), where libpq
# finds it: a password in --dbname would be in the process's arguments, which every account on the machine can read.
pg_connection() {
  PG_URL=$(CCP_URL="$1" node -e 'const u = new URL(process.env.CCP_URL); u.password = ""; process.stdout.write(u.href)') ||
    die "not a database URL"
  PGPASSWORD=$(CCP_URL="$1" node -e 'process.stdout.write(decodeURIComponent(new URL(process.env.CCP_URL).password))')
  export PGPASSWORD
}

build() {
  say "building (tsc)"
  npm run --silent build
}

# Every test file of the repository, sorted: what the full suite runs. With `unit`, only the unit tier's files,
# named *.unit.test.ts: they need Node.js and node_modules alone (no tool, root, engine, database server or
# gateway boot) and together run in seconds. Every other *.test.ts is of the integration tier.
test_files() {
  local pattern='*.test.ts'
  [ "${1:-}" = unit ] && pattern='*.unit.test.ts'
  find apps packages test -path '*/node_modules' -prune -o -name "$pattern" -print 2>/dev/null | sort
}

# Runs the given test files, the spec on stdout and TAP into $1, one file at a time unless TEST_CONCURRENCY says
# otherwise (several files share the network lab and the Docker engine); then the summary of test-summary.ts.
run_tests() {
  local tap=$1 status=0
  shift
  mkdir -p "$(dirname "$tap")"
  npx tsx --conditions=source --test --test-concurrency="${TEST_CONCURRENCY:-1}" \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$tap" \
    "$@" || status=$?
  # "N passed, N failed, N skipped", then what was skipped and why (a run without root skips whole suites).
  npx tsx test/support/test-summary.ts "$tap"
  return "$status"
}
