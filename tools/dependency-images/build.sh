#!/usr/bin/env bash
# Builds the docker provider's default dependency images without any image registry: a minimal Debian
# root filesystem (debootstrap from Debian's mirror) with Debian's postgresql, mariadb-server and
# redis-server, s3rver from npm on the Node binary that runs Berth, imported four times with the command
# of each: berth-deps/{postgres,mariadb,redis,s3}. Each is tagged with a hash of what it is made from
# (this folder and the Debian suite) and `latest`; a hash already built is not built again.
# Usage: tools/dependency-images/build.sh (as root: debootstrap needs it). BERTH_NODE: the Node binary
# s3rver runs on (default: the `node` on PATH; any Node from 14 on will do).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suite=bookworm
mirror=${BERTH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=postgresql,mariadb-server,redis-server
s3rver=3.7.1
node=$(readlink -f "${BERTH_NODE:-$(command -v node)}")
hash=$(cat "$here"/* <(echo "$suite $packages $s3rver") | sha256sum | cut -c1-12)
kinds=(postgres mariadb redis s3)

built() {
  for kind in "${kinds[@]}"; do docker image inspect "berth-deps/$kind:$hash" >/dev/null 2>&1 || return 1; done
}
tag_latest() {
  for kind in "${kinds[@]}"; do docker tag "berth-deps/$kind:$hash" "berth-deps/$kind:latest"; done
  echo "berth-deps images: $hash"
}

# One build at a time: a second caller waits for the first and then finds the images.
exec 9>/var/lock/berth-deps-images.lock
flock 9
if built; then
  tag_latest
  exit 0
fi

started=$SECONDS
work=$(mktemp -d /var/tmp/berth-deps-images-XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
cache=${BERTH_DEBOOTSTRAP_CACHE:-/var/cache/berth-deps-debs}
mkdir -p "$cache"
debootstrap --variant=minbase --include="$packages" --cache-dir="$cache" "$suite" "$root" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log"; exit 1; }
# The clusters and caches the packages' scripts made are not the images' data: their volumes are (the
# cluster's settings would also point psql at the port the chroot found free, not 5432).
rm -rf "$root"/var/lib/postgresql/* "$root"/etc/postgresql/* "$root"/var/lib/mysql/* "$root"/var/lib/redis/* \
  "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
  "$root"/usr/share/locale/*
install -m 0755 "$here/postgres-entry.sh" "$root/usr/local/bin/berth-postgres"
install -m 0755 "$here/mariadb-entry.sh" "$root/usr/local/bin/berth-mariadb"
install -m 0755 "$node" "$root/usr/local/bin/node"
mkdir -p "$root/opt/s3" "$root/data"
install -m 0644 "$here/s3-server.cjs" "$root/opt/s3/server.cjs"
npm install --prefix "$root/opt/s3" --no-audit --no-fund --omit=dev --no-package-lock "s3rver@$s3rver" >/dev/null
tar -C "$root" -cf "$work/root.tar" .

import_as() {
  docker import "${@:3}" "$work/root.tar" "berth-deps/$1:$hash" >/dev/null
  echo "berth-deps/$1:$hash ($2)"
}
import_as postgres 5432 --change 'ENV PGDATA=/var/lib/postgresql/data' --change 'EXPOSE 5432' \
  --change 'CMD ["/usr/local/bin/berth-postgres"]'
import_as mariadb 3306 --change 'EXPOSE 3306' --change 'CMD ["/usr/local/bin/berth-mariadb"]'
import_as redis 6379 --change 'EXPOSE 6379' --change 'WORKDIR /data' \
  --change 'CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data", "--appendonly", "yes"]'
import_as s3 4568 --change 'EXPOSE 4568' --change 'CMD ["/usr/local/bin/node", "/opt/s3/server.cjs"]'
tag_latest
echo "built in $((SECONDS - started)) s"
