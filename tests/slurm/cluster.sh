#!/usr/bin/env bash
# A Slurm cluster on this machine for tests: munged, slurmctld and slurmd run
# as this script's own processes with a private configuration, state and
# munge key in DIR, on addresses and ports of their own, so nothing of the
# machine's own Slurm or munge (if any) is used or touched.
#   tests/slurm/cluster.sh start DIR       one node: the daemons on the
#                                          loopback address of this machine
#   tests/slurm/cluster.sh start DIR N     N nodes (2..4): a namespaced cluster
#                                          (tests/cluster/nodes.sh) in DIR,
#                                          slurmctld on node1, one slurmd per
#                                          node; Slurm's commands must run on a
#                                          node (nodes.sh exec DIR node1 ...),
#                                          and job folders belong in DIR/shared
#   Either installs the Debian packages if missing, starts the daemons, waits
#   until every node is idle and prints the SLURM_CONF to use.
#   tests/slurm/cluster.sh stop DIR        stops them by their PIDs (TERM, then
#                                          KILL after 10 s), the nodes with
#                                          them, and removes DIR
# Needs root (slurmd starts jobs as their users) and a mounted cgroup
# hierarchy (Slurm 22.05's slurmd initialises its cgroup plugin). Exit status
# 77 means "cannot run here" (not root, no cgroups, no namespaces), for
# ctest's skip.
set -euo pipefail
cmd=${1:?usage: cluster.sh start DIR [N] | stop DIR}
dir=${2:?usage: cluster.sh start DIR [N] | stop DIR}
nodes=${3:-1}
repo=$(cd "$(dirname "$0")/../.." && pwd)
log() { echo "cluster.sh: $*" >&2; }

stop() {
  local f pid
  for f in "$dir"/slurmd*.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Job steps slurmd started (slurmstepd) end with their jobs; any left over
  # belong to this cluster's spool folder.
  pkill -KILL -f "slurmstepd.*$dir" 2>/dev/null || true
  if [ -d "$dir/run" ]; then "$repo/tests/cluster/nodes.sh" stop "$dir" || true; fi
  case "$dir" in /tmp/*|/var/tmp/*) rm -rf --one-file-system "$dir" ;; *) log "left $dir in place (not under /tmp)" ;; esac
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { log "unknown command '$cmd' (start or stop)"; exit 2; }
[ "$(id -u)" -eq 0 ] || { log "needs root (slurmd starts jobs as their users)"; exit 77; }
if ! ls /sys/fs/cgroup/*/ >/dev/null 2>&1 && [ ! -e /sys/fs/cgroup/cgroup.controllers ]; then
  log "no cgroup hierarchy mounted at /sys/fs/cgroup (slurmd needs one)"
  exit 77
fi
packages=(slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$dir.apt.log" 2>&1; then
    tail -30 "$dir.apt.log" >&2
    log "installing ${missing[*]} failed (log above)"
    rm -f "$dir.apt.log"
    exit 1
  fi
  rm -f "$dir.apt.log"
fi

[[ $nodes =~ ^[1-4]$ ]] || { log "node count '$nodes' is not 1..4"; exit 2; }
on_node() { shift; "$@"; }  # NODE COMMAND...: runs COMMAND where that node's daemons run
if [ "$nodes" -gt 1 ]; then
  rc=0
  "$repo/tests/cluster/nodes.sh" start "$nodes" "$dir" >&2 || rc=$?
  [ "$rc" = 0 ] || exit "$rc"
  on_node() { local node=$1; shift; "$repo/tests/cluster/nodes.sh" exec "$dir" "$node" "$@"; }
fi
mkdir -p "$dir"/state "$dir"/spool "$dir"/log
chmod 755 "$dir"
host=$(hostname -s)
ctld_addr=127.0.0.1
if [ "$nodes" -gt 1 ]; then host=node1 ctld_addr=10.77.0.1; fi
# Eight CPUs whatever the machine has (config_overrides), so that jobs of up
# to 8 tasks start on a 2-core machine, as mpirun --oversubscribe would.
cpus=8
# Free ports for the controller and the node daemon.
# (In a namespaced cluster the ports are the nodes' own, free all the same.)
read -r ctld_port slurmd_port < <(python3 -c '
import socket
ports = []
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0)); ports.append(s.getsockname()[1])
print(*ports)')
head -c 1024 /dev/urandom >"$dir/munge.key"
chmod 400 "$dir/munge.key"
/usr/sbin/munged --force --origin=127.0.0.1 --key-file="$dir/munge.key" --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed"
cat >"$dir/slurm.conf" <<CONF
ClusterName=pftest
SlurmctldHost=$host($ctld_addr)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
SlurmdParameters=config_overrides
KillWait=5
MinJobAge=300
CONF
if [ "$nodes" = 1 ]; then
  names=$host
  echo "NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN" >>"$dir/slurm.conf"
else
  names=$(seq -f 'node%g' "$nodes" | paste -sd, -)
  for k in $(seq "$nodes"); do
    echo "NodeName=node$k NodeAddr=10.77.0.$k NodeHostname=node$k CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN" >>"$dir/slurm.conf"
  done
fi
echo "PartitionName=test Nodes=$names Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8" >>"$dir/slurm.conf"
# PMIx's per-job folders go to DIR too: in /tmp they are named by uid and job
# id only, and one left by a killed cluster breaks the next cluster's job 1.
# On namespaced nodes each node's private /tmp is new with the cluster, and
# the folder must be the node's own (a shared one clashes between nodes).
pmix=$dir/pmix
[ "$nodes" = 1 ] || pmix=/tmp/pf-pmix
for k in $(seq "$nodes"); do on_node "node$k" mkdir -p "$pmix"; done
echo "PMIxCliTmpDirBase=$pmix" >"$dir/mpi.conf"
export SLURM_CONF="$dir/slurm.conf"
mkdir -p "$dir/spool/$host"
on_node node1 /usr/sbin/slurmctld -f "$SLURM_CONF"
if [ "$nodes" = 1 ]; then
  /usr/sbin/slurmd -f "$SLURM_CONF"
else
  for k in $(seq "$nodes"); do
    mkdir -p "$dir/spool/node$k"
    on_node "node$k" /usr/sbin/slurmd -f "$SLURM_CONF" -N "node$k"
  done
fi
# Bounded by time (not a count of polls), generously: a loaded machine is slow to start daemons.
end=$((SECONDS + ${PF_SLURM_WAIT:-300}))
while [ "$SECONDS" -lt "$end" ]; do
  state=$(on_node node1 sinfo -h -o %T 2>/dev/null | sort -u | paste -sd' ' - || true)
  [ "$state" = idle ] && { echo "$SLURM_CONF"; exit 0; }
  sleep 0.1
done
log "the nodes did not become idle in ${PF_SLURM_WAIT:-300} s (state '${state:-none}'); logs in $dir/log"
tail -5 "$dir"/log/*.log >&2 || true
stop
exit 1
