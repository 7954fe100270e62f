#!/bin/sh
# Back up the humanlike database: one compressed pg_dump archive (custom format) per run, checked
# readable, kept BACKUP_KEEP_DAYS days. Run daily by humanlike-backup.timer (systemd) or by the
# compose file's backup service. Prints the archive's path.
#   DATABASE_URL      the database to back up (postgresql://user@host/db; +psycopg is accepted)
#   BACKUP_DIR        where archives go (default /var/backups/humanlike)
#   BACKUP_KEEP_DAYS  delete archives older than this (default 30)
set -eu
: "${DATABASE_URL:?set DATABASE_URL to the database to back up}"
dir="${BACKUP_DIR:-/var/backups/humanlike}"
keep="${BACKUP_KEEP_DAYS:-30}"
url=$(printf '%s' "$DATABASE_URL" | sed -e 's#^postgresql+psycopg://#postgresql://#' -e 's#^postgres://#postgresql://#')
mkdir -p "$dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
partial="$dir/.humanlike-$stamp.dump.partial"
trap 'rm -f "$partial"' EXIT
pg_dump --format=custom --no-owner --no-privileges --file="$partial" "$url"
pg_restore --list "$partial" >/dev/null  # an archive pg_restore can read, or fail loudly
mv "$partial" "$dir/humanlike-$stamp.dump"
find "$dir" -maxdepth 1 -name 'humanlike-*.dump' -mtime +"$keep" -delete
echo "$dir/humanlike-$stamp.dump"
