#!/usr/bin/env bash
# Restores an archive of deploy/backup.sh into the database of DATABASE_URL and into DATA_DIR (both read like
# the gateway reads them: environment, then .env (ENV_FILE), then defaults). Stop the gateway first.
# Usage: deploy/restore.sh [--force] ARCHIVE
# Without --force it restores only into an empty or absent database and a DATA_DIR whose keys are absent or the
# same as the archive's. --force replaces them: an existing SQLite file is kept beside as *.before-restore-<time>,
# a PostgreSQL database is emptied of the gateway's tables first.
source "$(dirname "$0")/../scripts/lib.sh"
source "$(dirname "$0")/settings.sh"

force=0
archive=""
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
    -*) die "unknown option: $1 (see --help)" ;;
    *) [ -z "$archive" ] || die "only one archive, please"; archive="$1" ;;
  esac
  shift
done
[ -n "$archive" ] || die "usage: $0 [--force] ARCHIVE"
[ -f "$archive" ] || die "$archive does not exist"
load_settings

umask 077
work=$(mktemp -d) || die "cannot create a temporary directory"
trap 'rm -rf "$work"' EXIT
if ! tar -xzf "$archive" -C "$work" 2>/dev/null || [ ! -f "$work/manifest" ]; then
  die "$archive is not an archive of deploy/backup.sh"
fi
grep -qx 'format=1' "$work/manifest" || die "$archive has a backup format this version does not know"
kind=$(sed -n 's/^database=//p' "$work/manifest")
[ "$kind" = "$DB_KIND" ] ||
  die "$archive holds a $kind database but DATABASE_URL is $DB_KIND ($(redact "$DATABASE_URL"))"
[ -f "$work/secrets.key" ] || die "$archive has no secrets.key"

# Check everything before changing anything.
for file in "${DATA_FILES[@]}"; do
  if [ -f "$work/$file" ] && [ -f "$DATA_DIR/$file" ] && ! cmp -s "$work/$file" "$DATA_DIR/$file" && [ "$force" -eq 0 ]; then
    die "$DATA_DIR/$file differs from the archive's; --force replaces it (secrets sealed with the current key become unreadable)"
  fi
done
case "$DB_KIND" in
  sqlite)
    [ -f "$work/database.sqlite" ] || die "$archive has no database.sqlite"
    if [ -s "$SQLITE_FILE" ] && [ "$force" -eq 0 ]; then
      die "$SQLITE_FILE already exists; stop the gateway and pass --force to replace it"
    fi
    ;;
  postgres)
    [ -f "$work/database.pgdump" ] || die "$archive has no database.pgdump"
    command -v pg_restore >/dev/null || die "pg_restore is missing: apt-get install postgresql-client"
    tables=$(pg_connection "$DATABASE_URL" && PGCONNECT_TIMEOUT=10 psql "$PG_URL" -qAtc \
      "select count(*) from information_schema.tables where table_schema = current_schema()") ||
      die "cannot connect to $(redact "$DATABASE_URL")"
    if [ "$tables" -gt 0 ] && [ "$force" -eq 0 ]; then
      die "the database $(redact "$DATABASE_URL") is not empty; stop the gateway and pass --force to replace it"
    fi
    ;;
esac

case "$DB_KIND" in
  sqlite)
    say "restoring the SQLite database into $SQLITE_FILE"
    mkdir -p "$(dirname "$SQLITE_FILE")"
    if [ -e "$SQLITE_FILE" ]; then
      saved="$SQLITE_FILE.before-restore-$(date -u +%Y%m%dT%H%M%SZ)"
      for suffix in "" -wal -shm; do
        [ -e "$SQLITE_FILE$suffix" ] && { cp -p "$SQLITE_FILE$suffix" "$saved$suffix" || die "cannot keep $SQLITE_FILE$suffix"; }
      done
      say "the previous database is kept as $saved"
    fi
    sqlite_tool restore "$work/database.sqlite" "$SQLITE_FILE" || die "restoring $SQLITE_FILE failed"
    ;;
  postgres)
    say "restoring the PostgreSQL database $(redact "$DATABASE_URL")"
    clean=()
    [ "$tables" -gt 0 ] && clean=(--clean --if-exists)
    pg_connection "$DATABASE_URL"
    PGCONNECT_TIMEOUT=10 pg_restore --no-owner --no-privileges --single-transaction --exit-on-error "${clean[@]}" \
      --dbname="$PG_URL" "$work/database.pgdump" || die "pg_restore into $(redact "$DATABASE_URL") failed"
    ;;
esac

mkdir -p "$DATA_DIR" || die "cannot create DATA_DIR $DATA_DIR" # 0700: umask 077 above
for file in "${DATA_FILES[@]}"; do
  [ -f "$work/$file" ] || continue
  install -m 600 "$work/$file" "$DATA_DIR/$file" || die "cannot write $DATA_DIR/$file"
done
say "restored $archive ($(sed -n 's/^created_at=//p' "$work/manifest")); start the gateway"
