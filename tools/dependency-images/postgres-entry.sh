#!/bin/sh
# The official postgres image's contract: POSTGRES_USER, POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE, a
# file that holds it: a swarm secret) and POSTGRES_DB make the first user and database on an empty PGDATA
# (a volume); after that the data is left as it is. A first start that did not finish (the container
# stopped or killed meanwhile) leaves no marker, and the next start makes the data again from nothing.
set -eu
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then POSTGRES_PASSWORD=$(cat "$POSTGRES_PASSWORD_FILE"); fi
PGDATA=${PGDATA:-/var/lib/postgresql/data}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -f "$PGDATA/.berth-initialized" ]; then
  find "$PGDATA" -mindepth 1 -delete
  pwfile=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
  chown postgres "$pwfile"
  runuser -u postgres -- "$bin/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  if [ "${POSTGRES_DB:-$POSTGRES_USER}" != "$POSTGRES_USER" ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\"" |
      runuser -u postgres -- "$bin/postgres" --single -D "$PGDATA" -j postgres >/dev/null
  fi
  touch "$PGDATA/.berth-initialized"
fi
exec runuser -u postgres -- "$bin/postgres" -D "$PGDATA" -c listen_addresses='*'
