#!/usr/bin/env bash
# A test swarm on this machine: Docker Engines in their own network namespaces on a bridge, a local
# registry every node reaches, node 1 the manager. `up N REGISTRY` / `down N` /
# `stop-node N` / `start-node N REGISTRY`. Names are ours only (br-berthswS, bswS-N, 10.78.S.0/24,
# /var/lib/berth-swarm-test/sS, S = BERTH_SWARM_SLOT, default 0; test/helpers/swarm.ts passes a slot whose
# lock it holds, so that test swarms of separate runs go side by side): nothing of the main engine is
# touched but one DOCKER-USER rule for the bridge (its FORWARD policy is DROP and bridge-nf is on).
set -euo pipefail
SLOT=${BERTH_SWARM_SLOT:-0}
[[ $SLOT =~ ^[0-9]{1,2}$ ]] || { echo "BERTH_SWARM_SLOT must be a number from 0 to 99, not '$SLOT'" >&2; exit 2; }
ROOT=/var/lib/berth-swarm-test/s$SLOT
RUN=/run/berth-swarm-test/s$SLOT
BR=br-berthsw$SLOT
NET=10.78.$SLOT
cmd=$1; nodes=${2:-2}

down() {
  for n in $(seq 1 "$nodes"); do
    if [ -f "$RUN/$n.pid" ]; then kill "$(cat "$RUN/$n.pid")" 2>/dev/null || true; fi
  done
  for n in $(seq 1 "$nodes"); do
    for _ in $(seq 1 50); do [ -f "$RUN/$n.pid" ] && kill -0 "$(cat "$RUN/$n.pid")" 2>/dev/null || break; sleep 0.2; done
    if [ -f "$RUN/$n.pid" ]; then kill -9 "$(cat "$RUN/$n.pid")" 2>/dev/null || true; fi
    # containerd-shims of the node's containers outlive it; they hold its mounts.
    for pid in $(ip netns pids "bsw$SLOT-$n" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "bsw$SLOT-$n" 2>/dev/null || true
    ip link del "vbsw$SLOT-$n" 2>/dev/null || true
    grep " $ROOT/$n" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    grep " $RUN/$n" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    rm -rf "${ROOT:?}/$n" "${RUN:?}/$n" "$RUN/$n.pid" "$RUN/$n.sock" "$RUN/$n.log"
  done
  while iptables -D DOCKER-USER -i $BR -o $BR -j ACCEPT 2>/dev/null; do :; done
  ip link del $BR 2>/dev/null || true
  # Only this slot's folders: the parents may be in use by another slot that is coming up.
  rmdir "$ROOT" "$RUN" 2>/dev/null || true
}

start_node() {
  local n=$1 registry=$2
  # nsenter --net, not `ip netns exec`: that remounts /sys and dockerd loses the cgroup mounts.
  setsid nsenter --net="/var/run/netns/bsw$SLOT-$n" dockerd --data-root "$ROOT/$n" --exec-root "$RUN/$n" \
    -H "unix://$RUN/$n.sock" --pidfile "$RUN/$n.pid" --insecure-registry "$registry" \
    --bip "172.31.$((100 + n)).1/24" >>"$RUN/$n.log" 2>&1 </dev/null &
}

wait_node() {
  for _ in $(seq 1 100); do docker -H "unix://$RUN/$1.sock" info >/dev/null 2>&1 && return; sleep 0.3; done
  tail -20 "$RUN/$1.log"
  exit 1
}

stop_node() {
  local pid
  pid=$(cat "$RUN/$1.pid")
  kill "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -9 "$pid"
}

up() {
  local registry=$3
  down
  mkdir -p "$ROOT" "$RUN"
  ip link add $BR type bridge
  ip addr add $NET.1/24 dev $BR
  ip link set $BR up
  iptables -I DOCKER-USER -i $BR -o $BR -j ACCEPT
  for n in $(seq 1 "$nodes"); do
    ip netns add "bsw$SLOT-$n"
    ip link add "vbsw$SLOT-$n" type veth peer name eth0 netns "bsw$SLOT-$n"
    ip link set "vbsw$SLOT-$n" master $BR up
    ip -n "bsw$SLOT-$n" addr add "$NET.1$n/24" dev eth0
    ip -n "bsw$SLOT-$n" link set eth0 up
    ip -n "bsw$SLOT-$n" link set lo up
    ip -n "bsw$SLOT-$n" route add default via $NET.1
    mkdir -p "$ROOT/$n" "$RUN/$n"
    start_node "$n" "$registry"
  done
  for n in $(seq 1 "$nodes"); do wait_node "$n"; done
  # A heartbeat of 1 s: a lost node is noticed in seconds, not the default 15.
  docker -H "unix://$RUN/1.sock" swarm init --advertise-addr $NET.11 --dispatcher-heartbeat 1s >/dev/null
  token=$(docker -H "unix://$RUN/1.sock" swarm join-token -q worker)
  for n in $(seq 2 "$nodes"); do
    docker -H "unix://$RUN/$n.sock" swarm join --token "$token" $NET.11:2377 >/dev/null
  done
}

case $cmd in
  up) up "$@" ;;
  down) down ;;
  stop-node) stop_node "$2" ;;
  start-node) start_node "$2" "$3"; wait_node "$2" ;;
esac
