#!/usr/bin/env bash
# Sets up cloud-cli-proxy on this machine and starts the gateway in the foreground.
#   - installs what the gateway needs (Docker engine), npm dependencies, builds, and builds the workspace and
#     egress gateway images locally (a few minutes the first time);
#   - writes .env (mode 0600): a 20-character admin password (shown once), a 48-character JWT secret and the
#     storage; re-running keeps every secret and setting already there (changing the storage is asked for).
# On a terminal it asks which storage to use; otherwise options and environment decide (options win):
#   --storage sqlite|postgres|external  (STORAGE)  a SQLite file in DATA_DIR (default); PostgreSQL installed on
#                          this machine (Debian's server, a role and database with a generated password); or an
#                          external PostgreSQL server
#   --database-url URL     (DATABASE_URL)     the external server, postgres://user:password@host:port/database
#   --ssl MODE             (DATABASE_SSL)     disable, require (encrypted) or verify-full (also checks the certificate)
#   --ssl-ca FILE          (DATABASE_SSL_CA)  the CA certificate verify-full checks the server's certificate with
#   --data-dir DIR         (DATA_DIR)         default ./data
#   --image-variant full|test   --no-start (set up only)   --skip-images (build no images)
#   --config-only          only write .env: no Docker, npm, build or images
#   --non-interactive      never ask, even on a terminal
#   --public-host NAME     (PUBLIC_HOST)      the name or address users reach this machine by; asked on a terminal,
#                          otherwise the address of the interface with the default route
#   --demo                 also build the network lab (test/lab: a fake internet with exit nodes for the six protocols,
#                          on this machine only) and point the egress settings at it, so the README's quickstart ends in
#                          a running, verified host without an upstream or probe of your own
# ENV_FILE names another file than ./.env. The PostgreSQL it installs gets the role ccp and the database
# cloud_cli_proxy (BUILTIN_PG_ROLE, BUILTIN_PG_DATABASE); every DATABASE_URL is checked by connecting.
source "$(dirname "$0")/../scripts/lib.sh"
cd "$(dirname "$0")/.."

start=1
images=1
install=1
interactive=1
data_dir=${DATA_DIR:-}
variant=full
storage=${STORAGE:-}
database_url=${DATABASE_URL:-}
ssl=${DATABASE_SSL:-}
ssl_ca=${DATABASE_SSL_CA:-}
public_host=${PUBLIC_HOST:-}
demo=0
while [ $# -gt 0 ]; do
  case "$1" in
    --no-start) start=0 ;;
    --skip-images) images=0 ;;
    --config-only) install=0 images=0 start=0 ;;
    --non-interactive) interactive=0 ;;
    --data-dir) data_dir="${2:?--data-dir needs a directory}"; shift ;;
    --image-variant) variant="${2:?--image-variant needs full or test}"; shift ;;
    --storage) storage="${2:?--storage needs sqlite, postgres or external}"; shift ;;
    --database-url) database_url="${2:?--database-url needs a postgres:// URL}"; shift ;;
    --ssl) ssl="${2:?--ssl needs disable, require or verify-full}"; shift ;;
    --ssl-ca) ssl_ca="${2:?--ssl-ca needs a file}"; shift ;;
    --public-host) public_host="${2:?--public-host needs a name or address}"; shift ;;
    --demo) demo=1 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) die "unknown option: $1 (see --help)" ;;
  esac
  shift
done
[ -t 0 ] && [ -t 1 ] || interactive=0
case "$variant" in full | test) ;; *) die "--image-variant must be full or test" ;; esac
case "$storage" in "" | sqlite | postgres | external) ;; *) die "--storage must be sqlite, postgres or external" ;; esac
case "$ssl" in "" | disable | require | verify-full) ;; *) die "--ssl must be disable, require or verify-full" ;; esac
[ -z "$database_url" ] || [ -n "$storage" ] || storage=external
pg_role=${BUILTIN_PG_ROLE:-ccp}
pg_database=${BUILTIN_PG_DATABASE:-cloud_cli_proxy}
[[ "$pg_role" =~ ^[a-z_][a-z0-9_]{0,62}$ && "$pg_database" =~ ^[a-z_][a-z0-9_]{0,62}$ ]] ||
  die "BUILTIN_PG_ROLE and BUILTIN_PG_DATABASE must be lower-case SQL names"

if [ "$install" -eq 1 ]; then
  ensure_node
  # v2ray is the tunnel engine the egress test runs on this machine; jq is what the README's examples read JSON with;
  # nftables guards each egress gateway's uplink from this machine (the kill switch nothing in a container can undo);
  # iproute2 and util-linux link workspaces to their gateways.
  apt_install v2ray jq ca-certificates nftables iproute2 util-linux
  bash scripts/docker.sh ensure || warn "the Docker engine is not available; the gateway starts and /healthz reports it"
  bash scripts/folder-mounts.sh ensure || warn "folder mounts (ccp's mount modes) will not be available; see docs/cli.md"
  npm_install
  build
fi
if [ "$images" -eq 1 ]; then
  say "building the workspace images ($variant variant)"
  bash image/build.sh --variant "$variant" all || warn "the images could not be built; hosts cannot start until image/build.sh succeeds"
fi

env_file=${ENV_FILE:-.env}
umask 077
touch "$env_file" || die "cannot write $env_file"
chmod 600 "$env_file"

# env_get NAME prints the value of NAME in .env (empty when absent).
env_get() { sed -n "s/^$1=//p" "$env_file" | tail -n 1; }
# env_set NAME VALUE appends NAME=VALUE unless NAME already has a value.
env_set() { [ -n "$(env_get "$1")" ] || printf '%s=%s\n' "$1" "$2" >>"$env_file"; }
# env_replace NAME VALUE sets NAME to VALUE, dropping its earlier lines.
env_replace() {
  local next="$env_file.next"
  grep -v "^$1=" "$env_file" >"$next" || true
  printf '%s=%s\n' "$1" "$2" >>"$next"
  chmod 600 "$next"
  mv "$next" "$env_file"
}
random_alnum() { LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c "$1" || true; }
redact() { printf '%s' "$1" | sed -E 's#(://[^:/@]*:)[^@]*@#\1***@#'; }
# ask PROMPT DEFAULT prints the answer read from the terminal (DEFAULT when empty).
ask() {
  local answer
  read -r -p "$1 " answer </dev/tty || true
  printf '%s' "${answer:-$2}"
}

new_password=""
if [ -z "$(env_get ADMIN_PASSWORD)" ]; then
  new_password=$(random_alnum 20)
  env_set ADMIN_PASSWORD "$new_password"
fi
env_set ADMIN_USERNAME admin
env_set ADMIN_JWT_SECRET "$(random_alnum 48)"
env_set DATA_DIR "$(realpath -m "${data_dir:-$PWD/data}")"
data_dir=$(env_get DATA_DIR)

# check_postgres URL: connects, so a wrong URL, password or certificate is reported now rather than at start.
check_postgres() {
  command -v psql >/dev/null 2>&1 || apt_install postgresql-client
  local output
  # In the command's own subshell: PGPASSWORD must not reach the gateway this script starts.
  output=$(pg_connection "$1" && PGCONNECT_TIMEOUT=10 psql "$PG_URL" -qAtc 'select 1' 2>&1) ||
    die "cannot connect to $(redact "$1"): ${output//$'\n'/ }"
}

# with_ssl URL MODE CA prints URL with its sslmode (and sslrootcert) replaced.
with_ssl() {
  local base="${1%%\?*}" query="" params
  [[ "$1" != *\?* ]] || query="${1#*\?}"
  params=$(printf '%s' "$query" | tr '&' '\n' | grep -v -E '^(sslmode|sslrootcert)=' | paste -sd '&' || true)
  params="${params:+$params&}sslmode=$2"
  [ "$2" != verify-full ] || params="$params&sslrootcert=$3"
  printf '%s?%s' "$base" "$params"
}

builtin_postgres_url() {
  local existing="$1" password port
  # Re-running keeps the role's password: the one in .env when it already points at this server.
  if [[ "$existing" =~ $builtin_pattern ]]; then
    password=${BASH_REMATCH[1]}
  else
    password=$(random_alnum 32)
  fi
  PG_ROLE_PASSWORD=$password bash scripts/postgres.sh ensure "$pg_role" || die "setting up PostgreSQL failed"
  if [ "$(runuser -u postgres -- psql -qAtc "select 1 from pg_database where datname = '$pg_database'")" != 1 ]; then
    say "creating the database $pg_database"
    runuser -u postgres -- psql -qv ON_ERROR_STOP=1 -c "create database \"$pg_database\" owner \"$pg_role\"" >/dev/null ||
      die "creating the database $pg_database failed"
  fi
  port=$(runuser -u postgres -- psql -qAtc 'show port')
  printf 'postgres://%s:%s@127.0.0.1:%s/%s' "$pg_role" "$password" "$port" "$pg_database"
}

existing_url=$(env_get DATABASE_URL)
builtin_pattern="^postgres://$pg_role:([A-Za-z0-9]+)@127\\.0\\.0\\.1:[0-9]+/$pg_database\$"
# Re-running with the PostgreSQL installed here makes sure it runs (and keeps its password).
[ -n "$storage" ] || [[ ! "$existing_url" =~ $builtin_pattern ]] || storage=postgres
if [ -z "$storage" ] && [ -z "$existing_url" ] && [ "$interactive" -eq 1 ]; then
  echo "Where should the gateway keep its data?"
  echo "  1) a SQLite file in $data_dir (simplest; one machine)"
  echo "  2) PostgreSQL installed on this machine"
  echo "  3) an external PostgreSQL server"
  case "$(ask 'Choice [1]:' 1)" in
    1) storage=sqlite ;;
    2) storage=postgres ;;
    3) storage=external ;;
    *) die "please answer 1, 2 or 3" ;;
  esac
fi
if [ -z "$storage" ] && [ -n "$existing_url" ]; then
  url=$existing_url # re-run: keep the storage
  case "$url" in postgres://* | postgresql://*) check_postgres "$url" ;; esac
else
  case "${storage:-sqlite}" in
    sqlite) url="sqlite:$data_dir/gateway.db" ;;
    postgres)
      url=$(builtin_postgres_url "$existing_url")
      check_postgres "$url"
      ;;
    external)
      if [ -z "$database_url" ] && [ "$interactive" -eq 1 ]; then
        database_url=$(ask 'PostgreSQL URL (postgres://user:password@host:5432/database):' '')
        if [ -z "$ssl" ]; then
          echo "TLS to the server: 1) none  2) require (encrypted)  3) verify-full (encrypted, certificate checked)"
          case "$(ask 'Choice [2]:' 2)" in 1) ssl=disable ;; 2) ssl=require ;; 3) ssl=verify-full ;; *) die "please answer 1, 2 or 3" ;; esac
        fi
        [ "$ssl" != verify-full ] || [ -n "$ssl_ca" ] || ssl_ca=$(ask 'CA certificate file:' '')
      fi
      [ -n "$database_url" ] || die "external PostgreSQL needs --database-url (or DATABASE_URL)"
      [[ "$database_url" =~ ^postgres(ql)?://[^[:space:]\"\'#]+$ ]] ||
        die "the database URL must be postgres://user:password@host:port/database (no spaces, quotes or #)"
      if [ "$ssl" = verify-full ]; then
        [ -n "$ssl_ca" ] || die "--ssl verify-full needs --ssl-ca FILE (the CA that signed the server's certificate)"
        [ -r "$ssl_ca" ] || die "cannot read the CA file $ssl_ca"
        ssl_ca=$(realpath "$ssl_ca")
      fi
      url=$database_url
      [ -z "$ssl" ] || url=$(with_ssl "$database_url" "$ssl" "$ssl_ca")
      check_postgres "$url"
      ;;
  esac
  if [ -n "$existing_url" ] && [ "$url" != "$existing_url" ]; then
    [ "$interactive" -eq 1 ] ||
      die "$env_file already has DATABASE_URL=$(redact "$existing_url"); to change the storage, run this on a terminal or remove that line (moving data: docs/operations.md)"
    [[ "$(ask "Replace DATABASE_URL=$(redact "$existing_url") with $(redact "$url")? The data stays in the old one. [y/N]" n)" =~ ^[yY] ]] ||
      die "kept DATABASE_URL unchanged; nothing else was changed"
  fi
fi
[ "$url" = "$existing_url" ] || env_replace DATABASE_URL "$url"
env_set HTTP_PORT 8080
env_set SSH_PROXY_PORT 2222
# Shared web apps of workspaces, each on a port of its own (docs/access.md): an origin apart from the dashboard's.
env_set SHARE_PORTS 8101-8120

# default_public_host prints the IPv4 address of the interface that holds the default route (a route lookup in
# the kernel's table; nothing is sent), or the host name when there is none.
default_public_host() {
  local dev address
  dev=$(ip -4 route show default 2>/dev/null | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')
  [ -z "$dev" ] || address=$(ip -4 -o addr show dev "$dev" scope global 2>/dev/null | awk '{ split($4, a, "/"); print a[1]; exit }')
  printf '%s' "${address:-$(hostname -f 2>/dev/null || hostname)}"
}
if [ -n "$public_host" ]; then
  env_replace PUBLIC_HOST "$public_host"
elif [ -z "$(env_get PUBLIC_HOST)" ]; then
  public_host=$(default_public_host)
  [ "$interactive" -eq 0 ] ||
    public_host=$(ask "Name or address users reach this machine by (access commands, SSH, desktop) [$public_host]:" "$public_host")
  env_set PUBLIC_HOST "$public_host"
fi
[[ "$(env_get PUBLIC_HOST)" =~ ^[A-Za-z0-9.:_-]+$ ]] || die "PUBLIC_HOST must be a host name or an IP address"

if [ "$demo" -eq 1 ]; then
  say "demo: building the network lab (a fake internet and exit nodes in network namespaces on this machine)"
  bash test/lab/lab.sh up
  # The lab's stand-ins take the place of the public endpoints the gateway verifies with (docs/egress-probe.md).
  while IFS='=' read -r name value; do
    [ -n "$name" ] && env_replace "$name" "$value"
  done < <(bash test/lab/lab.sh env)
  say "demo: egress settings point at the lab (EGRESS_* in $env_file; docs/install.md says how to leave the demo)"
fi
env_set LOG_FORMAT pretty
env_set WORKSPACE_IMAGE_VARIANT "$variant"

port=$(env_get HTTP_PORT)
host=$(env_get PUBLIC_HOST)
echo
echo "cloud-cli-proxy is set up (settings in $(realpath "$env_file"), storage $(redact "$url"))."
echo "  Log in:    http://$host:$port   (on this machine also http://localhost:$port; API under /v1, docs in docs/)"
echo "  Users reach hosts at $host (PUBLIC_HOST in $env_file: change it there, or with --public-host, and restart)"
echo "  Username:  $(env_get ADMIN_USERNAME)"
if [ -n "$new_password" ]; then
  echo "  Password:  $new_password"
  echo "  (shown once; it is also in $env_file and only applies to the first start)"
else
  echo "  Password:  the one shown at the first set-up (ADMIN_PASSWORD in $env_file)"
fi
[ "$demo" -eq 0 ] || echo "  Demo:      the README's quickstart runs as written against the lab's exit 198.51.100.21"
echo

if [ "$start" -eq 1 ]; then
  say "starting the gateway (npm start; Ctrl-C stops it)"
  exec npm start --silent
fi
