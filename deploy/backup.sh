#!/usr/bin/env bash
# Backs up the gateway into one timestamped archive: the database and DATA_DIR's secrets key and SSH host key.
#   BACKUP_DIR      where archives go (default /var/backups/cloud-cli-proxy)
#   RETENTION_DAYS  after a successful backup, this script's archives older than this many days are deleted
#                   (default 7; 0 keeps every archive); no other file in BACKUP_DIR is touched
#   DATABASE_URL, DATA_DIR are read like the gateway reads them: environment, then .env (ENV_FILE), then defaults.
# SQLite is copied with its online backup API (consistent while the gateway writes); PostgreSQL with pg_dump in
# custom format. Prints the archive's path; exits non-zero with a message on any failure. Restore: deploy/restore.sh.
source "$(dirname "$0")/../scripts/lib.sh"
source "$(dirname "$0")/settings.sh"

case "${1:-}" in
  -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
  "") ;;
  *) die "unknown option: $1 (see --help)" ;;
esac

backup_dir=${BACKUP_DIR:-/var/backups/cloud-cli-proxy}
retention=${RETENTION_DAYS:-7}
[[ "$retention" =~ ^[0-9]+$ ]] || die "RETENTION_DAYS must be a whole number of days (got \"$retention\")"
load_settings
[ -f "$DATA_DIR/secrets.key" ] ||
  die "$DATA_DIR/secrets.key is missing: without it the encrypted SSH and egress secrets are lost (is DATA_DIR right?)"

umask 077 # the archive holds the secrets key
mkdir -p "$backup_dir" 2>/dev/null || die "cannot create BACKUP_DIR $backup_dir"
work=$(mktemp -d "$backup_dir/.cloud-cli-proxy-partial.XXXXXX" 2>/dev/null) ||
  die "cannot write to BACKUP_DIR $backup_dir"
trap 'rm -rf "$work"' EXIT
mkdir "$work/backup"

case "$DB_KIND" in
  sqlite)
    say "backing up the SQLite database $SQLITE_FILE"
    sqlite_tool backup "$SQLITE_FILE" "$work/backup/database.sqlite" || die "the SQLite backup of $SQLITE_FILE failed"
    ;;
  postgres)
    command -v pg_dump >/dev/null || die "pg_dump is missing: apt-get install postgresql-client"
    say "backing up the PostgreSQL database $(redact "$DATABASE_URL")"
    pg_connection "$DATABASE_URL"
    PGCONNECT_TIMEOUT=${PGCONNECT_TIMEOUT:-10} pg_dump --format=custom --no-owner --no-privileges \
      --file="$work/backup/database.pgdump" --dbname="$PG_URL" ||
      die "pg_dump of $(redact "$DATABASE_URL") failed"
    ;;
esac

for file in "${DATA_FILES[@]}"; do
  [ -f "$DATA_DIR/$file" ] || continue
  cp "$DATA_DIR/$file" "$work/backup/$file" || die "cannot copy $DATA_DIR/$file"
done
{
  echo "format=1"
  echo "created_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "database=$DB_KIND"
  echo "gateway_version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$CCP_ROOT/apps/gateway/package.json")"
} >"$work/backup/manifest" || die "cannot write to BACKUP_DIR $backup_dir"

tar -C "$work/backup" -czf "$work/archive.tar.gz" . || die "writing the archive in $backup_dir failed (disk full?)"
sync "$work/archive.tar.gz" || die "writing the archive in $backup_dir failed (disk full?)"
stamp() { date -u +%Y%m%dT%H%M%SZ; }
archive="$backup_dir/cloud-cli-proxy-$(stamp).tar.gz"
while [ -e "$archive" ]; do # two backups within one second
  sleep 1
  archive="$backup_dir/cloud-cli-proxy-$(stamp).tar.gz"
done
mv "$work/archive.tar.gz" "$archive" || die "cannot move the archive into $backup_dir"

if [ "$retention" -gt 0 ]; then
  find "$backup_dir" -maxdepth 1 -type f \
    -name 'cloud-cli-proxy-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9]Z.tar.gz' \
    -mmin +$((retention * 1440)) -print -delete | sed 's/^/deleted old backup /' >&2 ||
    die "deleting backups older than $retention days from $backup_dir failed"
fi
say "backup written: $archive ($(du -h "$archive" | cut -f1))"
echo "$archive"
