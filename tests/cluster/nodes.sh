#!/usr/bin/env bash
# A small cluster of nodes on one machine, for tests and by hand: each node is
# a set of namespaces of its own (network, host name, mounts) held open by one
# process, linked to the others through a bridge that sits in a namespace of
# its own, so nothing of the machine's own network is touched and nothing
# leaves the machine.
#   tests/cluster/nodes.sh start N DIR [RATE]   N nodes node1..nodeN, addresses
#       10.77.0.1..N/24 on eth0, each with a private /tmp and /dev/shm, DIR
#       seen at the same path on every node (DIR/shared is the cluster's shared
#       file system) and the repository too, and each folder of NODES_KEEP
#       (colon-separated: a build folder under /tmp); RATE (a tc rate such as 1gbit)
#       limits each node's link in both directions. Writes DIR/hostfile,
#       DIR/hosts (the nodes' /etc/hosts), DIR/agent (Open MPI's rsh agent:
#       --mca plm_rsh_agent DIR/agent) and DIR/mpirun (mpirun on node1 with
#       that agent, the hostfile and TCP between nodes).
#   tests/cluster/nodes.sh exec DIR NODE CMD...  runs CMD on NODE (its network,
#       host name and mounts, and the root folder of the node, which is that of
#       `start`: a chroot's, when started in one), in the current folder.
#   tests/cluster/nodes.sh link DIR NODE up|down sets NODE's link up or down.
#   tests/cluster/nodes.sh kill DIR NODE   SIGKILL to every process on NODE but
#       the one holding its namespaces (a node whose processes died).
#   tests/cluster/nodes.sh stop DIR  ends every process inside the nodes'
#       namespaces (TERM, then KILL after 5 s), which removes the namespaces,
#       links and bridge with them, and removes DIR.
# Needs root. Exit status 77 means "cannot run here" (not root, no network
# namespaces, no iproute2), for ctest's skip.
set -euo pipefail
cmd=${1:?usage: nodes.sh start N DIR [RATE] | exec DIR NODE CMD... | link DIR NODE up|down | kill DIR NODE | stop DIR}
log() { echo "nodes.sh: $*" >&2; }
subnet=10.77.0
repo=$(cd "$(dirname "$0")/../.." && pwd)

# The PID holding NODE's namespaces ("switch" for the bridge's).
holder() {
  local f="$dir/run/$1.pid"
  [ -s "$f" ] || { log "no node '$1' in $dir (nodes: $(cat "$dir/run/nodes" 2>/dev/null))"; exit 2; }
  cat "$f"
}

# Every process in the namespaces of the holders listed in DIR/run.
cluster_pids() {
  local f pid ns p
  for f in "$dir"/run/*.pid; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    ns=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || continue
    for p in /proc/[0-9]*; do
      if [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ]; then echo "${p#/proc/}"; fi
    done
  done | sort -u
}

stop() {
  [ -d "$dir/run" ] || { log "$dir holds no cluster"; return 0; }
  local pids
  pids=$(cluster_pids)
  # shellcheck disable=SC2086
  if [ -n "$pids" ]; then kill -TERM $pids 2>/dev/null || true; fi
  for _ in $(seq 50); do
    [ -n "$(cluster_pids)" ] || break
    sleep 0.1
  done
  pids=$(cluster_pids)
  # shellcheck disable=SC2086
  if [ -n "$pids" ]; then kill -KILL $pids 2>/dev/null || true; fi
  for _ in $(seq 50); do
    [ -n "$(cluster_pids)" ] || break
    sleep 0.1
  done
  [ -z "$(cluster_pids)" ] || { log "processes left in the cluster's namespaces: $(cluster_pids | paste -sd' ')"; return 1; }
  rm -rf --one-file-system "$dir"
}

case "$cmd" in
  stop)
    dir=${2:?usage: nodes.sh stop DIR}
    stop
    exit $?
    ;;
  exec)
    dir=${2:?usage: nodes.sh exec DIR NODE CMD...}
    node=${3:?usage: nodes.sh exec DIR NODE CMD...}
    shift 3
    exec nsenter -t "$(holder "$node")" -n -u -m -r -w"$PWD" -- "$@"
    ;;
  link)
    dir=${2:?usage: nodes.sh link DIR NODE up|down}
    node=${3:?usage: nodes.sh link DIR NODE up|down}
    state=${4:?usage: nodes.sh link DIR NODE up|down}
    [ "$state" = up ] || [ "$state" = down ] || { log "link state '$state' is neither up nor down"; exit 2; }
    exec nsenter -t "$(holder switch)" -n ip link set "${node#node}" "$state"
    ;;
  kill)
    dir=${2:?usage: nodes.sh kill DIR NODE}
    node=${3:?usage: nodes.sh kill DIR NODE}
    pid=$(holder "$node")
    ns=$(readlink "/proc/$pid/ns/net")
    for p in /proc/[0-9]*; do
      q=${p#/proc/}
      if [ "$q" != "$pid" ] && [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ]; then kill -KILL "$q" 2>/dev/null || true; fi
    done
    exit 0
    ;;
  start) ;;
  *)
    log "unknown command '$cmd' (start, exec, link, kill or stop)"
    exit 2
    ;;
esac

n=${2:?usage: nodes.sh start N DIR [RATE]}
dir=${3:?usage: nodes.sh start N DIR [RATE]}
rate=${4:-}
[[ $n =~ ^[1-9][0-9]?$ ]] && ((n <= 32)) || { log "node count '$n' is not 1..32"; exit 2; }
[ "$(id -u)" -eq 0 ] || { log "needs root (namespaces, mounts)"; exit 77; }
command -v ip >/dev/null || { log "no 'ip' command (Debian package iproute2)"; exit 77; }
unshare --net true 2>/dev/null || { log "cannot make a network namespace here"; exit 77; }
[ ! -e "$dir/run" ] || { log "$dir already holds a cluster (nodes.sh stop $dir first)"; exit 2; }
mkdir -p "$dir/run" "$dir/shared"
dir=$(cd "$dir" && pwd)
trap 'log "start failed; removing what it made"; stop' ERR

# Waits until holder NAME (PID) is up in namespaces of its own: nothing may
# be configured through nsenter before, or it would land in this machine's.
ready() {
  local end=$((SECONDS + 30))
  until [ -e "$dir/run/$1.ready" ]; do
    [ "$SECONDS" -lt "$end" ] && kill -0 "$2" 2>/dev/null || { log "$1 did not come up"; return 1; }
    sleep 0.05
  done
  [ "$(readlink "/proc/$2/ns/net")" != "$(readlink /proc/self/ns/net)" ] || { log "$1 shares this machine's network"; return 1; }
}

# The bridge, in a namespace of its own.
unshare --net -- bash -c 'touch "$1"; exec sleep infinity' switch-holder "$dir/run/switch.ready" &
sw=$!
echo "$sw" >"$dir/run/switch.pid"
ready switch "$sw"
nsenter -t "$sw" -n ip link add br0 type bridge
nsenter -t "$sw" -n ip link set br0 up

{
  echo "127.0.0.1 localhost"
  for k in $(seq "$n"); do echo "$subnet.$k node$k"; done
} >"$dir/hosts"
: >"$dir/hostfile"
# Paths under /tmp that every node sees as the machine does (the private
# /tmp hides the rest).
keep=("$dir" "$repo")
IFS=: read -r -a extra <<<"${NODES_KEEP:-}"
for p in "${extra[@]}"; do
  [ -z "$p" ] || keep+=("$(cd "$p" && pwd -P)")
done
for k in $(seq "$n"); do
  # The node's own host name, /etc/hosts, /tmp and /dev/shm; the kept paths
  # are bound back from the machine's /tmp, reached through the working folder
  # that still points there once the new /tmp covers it.
  # Mounts made here stay on the node: --make-rprivate where / is a mount
  # point; in a chroot it is not, and its mounts are those of the namespace
  # the chroot runs in (private when tests/fresh_machine.sh made it).
  unshare --net --uts --mount --propagation unchanged -- bash -c '
    set -e
    node=$1 dir=$2; shift 2
    mount --make-rprivate / 2>/dev/null || true
    hostname "$node"
    mount --bind "$dir/hosts" /etc/hosts
    mount -t tmpfs -o size=4g,mode=1777 "$node-shm" /dev/shm
    cd /tmp
    mount -t tmpfs -o size=4g,mode=1777 "$node-tmp" /tmp
    for p in "$@"; do
      case $p in /tmp/*) rel=${p#/tmp/}; mkdir -p "/tmp/$rel"; mount --no-canonicalize --bind "$rel" "/tmp/$rel" ;; esac
    done
    cd /
    touch "$dir/run/$node.ready"
    exec sleep infinity' nodes-holder "node$k" "$dir" "${keep[@]}" &
  pid=$!
  echo "$pid" >"$dir/run/node$k.pid"
  ready "node$k" "$pid"
  nsenter -t "$sw" -n ip link add "$k" type veth peer name eth0 netns "$pid"
  nsenter -t "$sw" -n ip link set "$k" master br0 up
  nsenter -t "$pid" -n ip addr add "$subnet.$k/24" dev eth0
  nsenter -t "$pid" -n ip link set eth0 up
  nsenter -t "$pid" -n ip link set lo up
  # A connection with data unacknowledged gives up after about 6 s, not the
  # kernel default's 15 minutes: mpirun learns of a lost node in bounded time
  # (with the keepalives that DIR/mpirun asks for, for idle connections).
  nsenter -t "$pid" -n sh -c 'echo 4 >/proc/sys/net/ipv4/tcp_retries2'
  if [ -n "$rate" ]; then
    nsenter -t "$sw" -n tc qdisc add dev "$k" root tbf rate "$rate" burst 256kb latency 50ms
    nsenter -t "$pid" -n tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
  fi
  echo "node$k slots=$(getconf _NPROCESSORS_ONLN)" >>"$dir/hostfile"
done
seq -f "node%g" "$n" | paste -sd' ' - >"$dir/run/nodes"

cat >"$dir/agent" <<AGENT
#!/usr/bin/env bash
# Open MPI's rsh agent for this cluster: AGENT HOST COMMAND... runs COMMAND
# (a shell command line, as ssh would) on HOST. Like ssh with
# ServerAliveInterval=2 and ServerAliveCountMax=3, it probes the network path
# to HOST from where it runs every 2 s and closes the connection (exit 255)
# after 3 probes without an answer, so that mpirun learns of a lost link.
host=\$1
shift
f="$dir/run/\$host.pid"
[ -s "\$f" ] || { echo "agent: no node '\$host' in $dir" >&2; exit 255; }
address=$subnet.\${host#node}
nsenter -t "\$(cat "\$f")" -n -u -m -r -- /bin/sh -c "\$*" &
child=\$!
trap 'kill -TERM "\$child" 2>/dev/null' TERM INT HUP
# A refused connection answers (the node is there); a probe that times out does not.
answers() { timeout 1 bash -c "exec 3<>/dev/tcp/\$address/9" 2>/dev/null; [ \$? -ne 124 ]; }
misses=0
while kill -0 "\$child" 2>/dev/null; do
  sleep 2 &
  wait \$! 2>/dev/null || true
  kill -0 "\$child" 2>/dev/null || break
  if answers; then misses=0; else misses=\$((misses + 1)); fi
  if [ "\$misses" -ge 3 ]; then
    echo "agent: no answer from \$host (\$address) to 3 probes in a row: closing the connection" >&2
    kill -KILL "\$child" 2>/dev/null
    exit 255
  fi
done
wait "\$child"
AGENT
chmod +x "$dir/agent"
cat >"$dir/mpirun" <<MPIRUN
#!/usr/bin/env bash
# mpirun on node1 of this cluster, starting ranks on the nodes of
# $dir/hostfile through $dir/agent, over TCP between nodes (shared memory
# within a node, as on a real cluster). Waiting ranks yield the core: the
# nodes share this machine's cores, and a rank spinning in MPI starves the
# kernel's packet processing of its peer (8 ms stalls per exchange, measured
# with two ranks on two nodes). Daemons' idle connections send keepalives
# after 5 s (3 probes 2 s apart), so a lost node is noticed in seconds.
# Arguments go to mpirun.
exec nsenter -t "\$(cat "$dir/run/node1.pid")" -n -u -m -r -w"\$PWD" -- mpirun --mca plm_rsh_agent "$dir/agent" \\
  --hostfile "$dir/hostfile" --mca btl tcp,vader,self --mca btl_tcp_if_include $subnet.0/24 \\
  --mca oob_tcp_if_include $subnet.0/24 --mca mpi_yield_when_idle 1 \\
  --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3 "\$@"
MPIRUN
chmod +x "$dir/mpirun"
trap - ERR
log "$n node(s) up in $dir: $(cat "$dir/run/nodes") on $subnet.0/24${rate:+, links at $rate}"
