#!/usr/bin/env bash
# Installs (when missing) and starts Debian's PostgreSQL server, and makes sure a role exists.
# Usage: PG_ROLE_PASSWORD=... scripts/postgres.sh ensure ROLE   prints nothing; exits non-zero on failure
# (the password by environment: arguments are readable by every account on the machine).
source "$(dirname "$0")/lib.sh"

ensure() {
  local role="$1" password="${PG_ROLE_PASSWORD:?PG_ROLE_PASSWORD must hold the password of the role}"
  apt_install postgresql
  local version
  version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
  if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"' | grep -q .; then
    say "creating PostgreSQL $version cluster"
    pg_createcluster "$version" main >/dev/null
  fi
  if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online"' | grep -q .; then
    say "starting PostgreSQL $version"
    pg_ctlcluster "$version" main start
  fi
  for _ in $(seq 1 30); do
    runuser -u postgres -- psql -qAtc 'select 1' >/dev/null 2>&1 && break
    sleep 0.5
  done
  # The role name and password come from our own scripts, never from user input.
  runuser -u postgres -- psql -qv ON_ERROR_STOP=1 >/dev/null <<SQL
do \$\$ begin
  if not exists (select 1 from pg_roles where rolname = '$role') then
    create role "$role" login createdb password '$password';
  else
    alter role "$role" login createdb password '$password';
  end if;
end \$\$;
SQL
}

# enable_tls DIR: serves TLS with a certificate for 127.0.0.1/localhost issued by a CA made for the tests;
# the CA certificate is DIR/ca.crt (for sslmode=verify-full).
enable_tls() {
  local dir="$1"
  apt_install openssl
  mkdir -p "$dir"
  if [ ! -f "$dir/server.crt" ]; then
    say "creating a test CA and server certificate for PostgreSQL in $dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj '/CN=ccp test CA' \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj '/CN=localhost' \
      -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$dir/san.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
      -days 3650 -extfile "$dir/san.ext" -out "$dir/server.crt" 2>/dev/null
    chown postgres:postgres "$dir/server.key" "$dir/server.crt"
    chmod 600 "$dir/server.key"
  fi
  runuser -u postgres -- psql -qv ON_ERROR_STOP=1 >/dev/null <<SQL
alter system set ssl_cert_file = '$dir/server.crt';
alter system set ssl_key_file = '$dir/server.key';
alter system set ssl = on;
select pg_reload_conf();
SQL
}

case "${1:-}" in
  ensure) shift; ensure "$@" ;;
  enable-tls) shift; enable_tls "${1:?usage: $0 enable-tls DIR}" ;;
  *) die "usage: $0 ensure ROLE PASSWORD | enable-tls DIR" ;;
esac
