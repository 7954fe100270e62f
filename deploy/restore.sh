#!/bin/sh
# Restore a backup archive into an EMPTY database (create it first: createdb NAME), all or nothing,
# then re-apply the withdrawals made since the backup (the withdrawal journal, kept outside the
# database: `humanlike withdrawals reapply`), so nobody who withdrew comes back with the backup.
#   restore.sh ARCHIVE TARGET_URL
# Needs the server's environment: SECRET_KEY (the withdrawals are keyed hashes under it) and
# HUMANLIKE_WITHDRAWALS or HUMANLIKE_INSTANCE (where the journal is); read from HUMANLIKE_ENV_FILE
# (default /etc/humanlike/humanlike.env) when SECRET_KEY is not set. HUMANLIKE_BIN names the
# humanlike command (default: the venv beside this folder, else humanlike on PATH).
# Never restore over the live database: restore next to it, check it (docs/deploy.md), then point
# DATABASE_URL at it and restart the app.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: restore.sh ARCHIVE TARGET_URL (an empty database)" >&2
  exit 2
fi
archive=$1
target=$(printf '%s' "$2" | sed -e 's#^postgresql+psycopg://#postgresql://#' -e 's#^postgres://#postgresql://#')
envfile="${HUMANLIKE_ENV_FILE:-/etc/humanlike/humanlike.env}"
if [ -z "${SECRET_KEY:-}" ] && [ -r "$envfile" ]; then
  set -a
  # shellcheck disable=SC1090
  . "$envfile"
  set +a
fi
here=$(cd "$(dirname "$0")" && pwd)
humanlike="${HUMANLIKE_BIN:-}"
if [ -z "$humanlike" ]; then
  for candidate in "$here/../venv/bin/humanlike" "$here/../.venv/bin/humanlike"; do
    if [ -z "$humanlike" ] && [ -x "$candidate" ]; then humanlike=$candidate; fi
  done
  humanlike=${humanlike:-humanlike}
fi
pg_restore --exit-on-error --single-transaction --no-owner --no-privileges --dbname="$target" "$archive"
echo "restored $archive"
if ! "$humanlike" withdrawals reapply --database-url "$target"; then
  echo "restore.sh: $archive was restored into $target, but the withdrawals made since were NOT" \
       "re-applied: do not serve this database; run \`humanlike withdrawals reapply" \
       "--database-url $target\` with the server's SECRET_KEY and withdrawal journal" >&2
  exit 1
fi
