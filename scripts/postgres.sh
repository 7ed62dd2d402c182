#!/usr/bin/env bash
# Installs (when missing) and starts Debian's PostgreSQL server, and makes sure a role exists.
# Usage: scripts/postgres.sh ensure ROLE PASSWORD   prints nothing; exits non-zero on failure.
source "$(dirname "$0")/lib.sh"

ensure() {
  local role="$1" password="$2"
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

case "${1:-}" in
  ensure) shift; ensure "$@" ;;
  *) die "usage: $0 ensure ROLE PASSWORD" ;;
esac
