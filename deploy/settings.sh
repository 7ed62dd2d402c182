# shellcheck shell=bash disable=SC2034  # sourced; its variables are used by the scripts that source it
# The gateway's settings as the gateway reads them: the environment first, then .env, then the defaults.
# Sourced by backup.sh and restore.sh (after scripts/lib.sh). ENV_FILE names another .env.
CCP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ENV_FILE=${ENV_FILE:-$CCP_ROOT/.env}

# setting NAME DEFAULT prints NAME from the environment, else from ENV_FILE, else DEFAULT.
setting() {
  local name="$1" value="${!1:-}"
  if [ -z "$value" ] && [ -f "$ENV_FILE" ]; then
    value=$(sed -n "s/^[[:space:]]*\(export[[:space:]]\{1,\}\)\{0,1\}$name=//p" "$ENV_FILE" | tail -n 1)
    value=${value%$'\r'}
    case "$value" in
      \"*\" | \'*\') value=${value:1:${#value}-2} ;;
    esac
  fi
  printf '%s' "${value:-${2:-}}"
}

# Relative paths are relative to the repository: the gateway's working directory.
absolute() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$CCP_ROOT" "$1" ;; esac; }

# redact URL prints URL without its password, for messages.
redact() { printf '%s' "$1" | sed -E 's#(://[^:/@]*:)[^@]*@#\1***@#'; }

# load_settings sets DATA_DIR, DATABASE_URL, DB_KIND (sqlite or postgres) and, for SQLite, SQLITE_FILE.
load_settings() {
  DATA_DIR=$(absolute "$(setting DATA_DIR data)")
  DATABASE_URL=$(setting DATABASE_URL "sqlite:$DATA_DIR/gateway.db")
  case "$DATABASE_URL" in
    sqlite:* | file:*)
      DB_KIND=sqlite
      SQLITE_FILE=${DATABASE_URL#*:}
      case "$SQLITE_FILE" in ///*) SQLITE_FILE=${SQLITE_FILE#//} ;; esac
      if [ -z "$SQLITE_FILE" ] || [ "$SQLITE_FILE" = ":memory:" ]; then die "DATABASE_URL names no SQLite file"; fi
      SQLITE_FILE=$(absolute "$SQLITE_FILE")
      ;;
    postgres://* | postgresql://*) DB_KIND=postgres ;;
    *) die "DATABASE_URL must start with sqlite:, file:, postgres:// or postgresql:// (got \"$(redact "$DATABASE_URL")\")" ;;
  esac
}

# sqlite_tool ARGS... runs apps/gateway's sqlite-backup (built, or from source when the build is older).
sqlite_tool() {
  local built="$CCP_ROOT/apps/gateway/dist/ops/sqlite-backup.js"
  local source="$CCP_ROOT/apps/gateway/src/ops/sqlite-backup.ts"
  if [ -f "$built" ] && [ "$built" -nt "$source" ]; then
    node "$built" "$@"
  elif [ -x "$CCP_ROOT/node_modules/.bin/tsx" ]; then
    "$CCP_ROOT/node_modules/.bin/tsx" "$source" "$@"
  else
    die "the gateway is not built: run npm run build in $CCP_ROOT"
  fi
}

# Files of DATA_DIR a backup carries: without secrets.key the sealed SSH and egress secrets are lost; the SSH
# proxy's host key keeps users' known_hosts valid.
DATA_FILES=(secrets.key ssh_host_ed25519_key)
