#!/usr/bin/env bash
# A one-machine Slurm cluster for tests: munged, slurmctld and slurmd run as
# this script's own processes with a private configuration, state and munge
# key in DIR, on the loopback address and ports of their own, so nothing of
# the machine's own Slurm or munge (if any) is used or touched.
#   tests/slurm/cluster.sh start DIR   installs the Debian packages if missing,
#                                      starts the daemons, waits until the
#                                      node is idle; prints the SLURM_CONF to use
#   tests/slurm/cluster.sh stop DIR    stops them by their PIDs (TERM, then
#                                      KILL after 10 s) and removes DIR
# Needs root (slurmd starts jobs as their users) and a mounted cgroup
# hierarchy (Slurm 22.05's slurmd initialises its cgroup plugin). Exit status
# 77 means "cannot run here" (not root, no cgroups), for ctest's skip.
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}
log() { echo "cluster.sh: $*" >&2; }

stop() {
  local f pid
  for f in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Job steps slurmd started (slurmstepd) end with their jobs; any left over
  # belong to this cluster's spool folder.
  pkill -KILL -f "slurmstepd.*$dir" 2>/dev/null || true
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

mkdir -p "$dir"/state "$dir"/spool "$dir"/log
chmod 755 "$dir"
host=$(hostname -s)
# Eight CPUs whatever the machine has (config_overrides), so that jobs of up
# to 8 tasks start on a 2-core machine, as mpirun --oversubscribe would.
cpus=8
# Free ports for the controller and the node daemon.
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
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus Sockets=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
# PMIx's per-job folders go to DIR too: in /tmp they are named by uid and job
# id only, and one left by a killed cluster breaks the next cluster's job 1.
mkdir -p "$dir/pmix"
echo "PMIxCliTmpDirBase=$dir/pmix" >"$dir/mpi.conf"
export SLURM_CONF="$dir/slurm.conf"
/usr/sbin/slurmctld -f "$SLURM_CONF"
/usr/sbin/slurmd -f "$SLURM_CONF"
# Bounded by time (not a count of polls), generously: a loaded machine is slow to start daemons.
end=$((SECONDS + ${PF_SLURM_WAIT:-300}))
while [ "$SECONDS" -lt "$end" ]; do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [ "$state" = idle ] && { echo "$SLURM_CONF"; exit 0; }
  sleep 0.1
done
log "the node did not become idle in ${PF_SLURM_WAIT:-300} s (state '${state:-none}'); logs in $dir/log"
tail -5 "$dir"/log/*.log >&2 || true
stop
exit 1
