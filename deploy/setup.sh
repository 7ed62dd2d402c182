#!/usr/bin/env bash
# Sets up cloud-cli-proxy on this machine and starts the gateway in the foreground.
#   - installs what the gateway needs (Docker engine), npm dependencies, and builds;
#   - writes missing settings to .env (mode 0600): a 20-character admin password, shown once,
#     and a 48-character JWT secret; existing secrets are never overwritten;
#   - storage: the embedded SQLite file in DATA_DIR (the default).
#   - builds the workspace and egress gateway images locally (a few minutes the first time).
# Options: --no-start (set up only), --data-dir DIR, --image-variant full|test.
source "$(dirname "$0")/../scripts/lib.sh"
cd "$(dirname "$0")/.."

start=1
data_dir=""
variant=full
while [ $# -gt 0 ]; do
  case "$1" in
    --no-start) start=0 ;;
    --data-dir) data_dir="${2:?--data-dir needs a directory}"; shift ;;
    --image-variant) variant="${2:?--image-variant needs full or test}"; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) die "unknown option: $1 (see --help)" ;;
  esac
  shift
done

command -v node >/dev/null 2>&1 || apt_install nodejs npm
bash scripts/docker.sh ensure || warn "the Docker engine is not available; the gateway starts and /healthz reports it"
npm_install
build
say "building the workspace images ($variant variant)"
bash image/build.sh --variant "$variant" all || warn "the images could not be built; hosts cannot start until image/build.sh succeeds"

env_file=.env
touch "$env_file"
chmod 600 "$env_file"

# env_get NAME prints the value of NAME in .env (empty when absent).
env_get() { sed -n "s/^$1=//p" "$env_file" | tail -n 1; }
# env_set NAME VALUE appends NAME=VALUE unless NAME already has a value.
env_set() { [ -n "$(env_get "$1")" ] || printf '%s=%s\n' "$1" "$2" >>"$env_file"; }
random_alnum() { LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c "$1"; }

new_password=""
if [ -z "$(env_get ADMIN_PASSWORD)" ]; then
  new_password=$(random_alnum 20)
  env_set ADMIN_PASSWORD "$new_password"
fi
env_set ADMIN_USERNAME admin
env_set ADMIN_JWT_SECRET "$(random_alnum 48)"
env_set DATA_DIR "${data_dir:-$PWD/data}"
env_set DATABASE_URL "sqlite:$(env_get DATA_DIR)/gateway.db"
env_set HTTP_PORT 8080
env_set SSH_PROXY_PORT 2222
env_set LOG_FORMAT pretty
env_set WORKSPACE_IMAGE_VARIANT "$variant"

port=$(env_get HTTP_PORT)
host=$(hostname -f 2>/dev/null || hostname)
echo
echo "cloud-cli-proxy is set up (settings in $PWD/$env_file)."
echo "  Log in:    http://$host:$port   (API: http://$host:$port/v1, docs: docs/)"
echo "  Username:  $(env_get ADMIN_USERNAME)"
if [ -n "$new_password" ]; then
  echo "  Password:  $new_password"
  echo "  (shown once; it is also in $env_file and only applies to the first start)"
else
  echo "  Password:  the one shown at the first set-up (ADMIN_PASSWORD in $env_file)"
fi
echo

if [ "$start" -eq 1 ]; then
  say "starting the gateway (npm start; Ctrl-C stops it)"
  exec npm start --silent
fi
