#!/bin/sh
# Restore a backup archive into an EMPTY database (create it first: createdb NAME), all or nothing.
#   restore.sh ARCHIVE TARGET_URL
# Never restore over the live database: restore next to it, check it (docs/deploy.md), then point
# DATABASE_URL at it and restart the app.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: restore.sh ARCHIVE TARGET_URL (an empty database)" >&2
  exit 2
fi
archive=$1
target=$(printf '%s' "$2" | sed -e 's#^postgresql+psycopg://#postgresql://#' -e 's#^postgres://#postgresql://#')
pg_restore --exit-on-error --single-transaction --no-owner --no-privileges --dbname="$target" "$archive"
echo "restored $archive"
