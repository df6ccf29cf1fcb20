#!/bin/sh
# The official mariadb image's contract: MARIADB_USER, MARIADB_PASSWORD (or MARIADB_PASSWORD_FILE, a file
# that holds it: a swarm secret) and MARIADB_DATABASE make the first user and database on an empty
# /var/lib/mysql (a volume); after that the data is left as it is. A first start that did not finish
# (the container stopped or killed meanwhile) leaves no marker, and the next start makes the data again
# from nothing: a user made by half would otherwise never be made.
set -eu
if [ -n "${MARIADB_PASSWORD_FILE:-}" ]; then MARIADB_PASSWORD=$(cat "$MARIADB_PASSWORD_FILE"); fi
datadir=/var/lib/mysql
mkdir -p "$datadir" /run/mysqld
chown -R mysql:mysql "$datadir" /run/mysqld
if [ ! -f "$datadir/.berth-initialized" ]; then
  find "$datadir" -mindepth 1 -delete
  mariadb-install-db --user=mysql --datadir="$datadir" --skip-test-db >/dev/null
  # Bootstrap mode starts without the grant tables; FLUSH PRIVILEGES loads them so users can be made.
  mariadbd --user=mysql --datadir="$datadir" --bootstrap --skip-networking <<SQL
FLUSH PRIVILEGES;
CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;
CREATE USER '$MARIADB_USER'@'%' IDENTIFIED BY '$MARIADB_PASSWORD';
GRANT ALL ON \`$MARIADB_DATABASE\`.* TO '$MARIADB_USER'@'%';
SQL
  touch "$datadir/.berth-initialized"
fi
exec mariadbd --user=mysql --datadir="$datadir" --bind-address=0.0.0.0 --port=3306
