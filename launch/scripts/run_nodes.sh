#!/usr/bin/env bash
# performer-train on several nodes listed in an Open MPI hostfile, e.g.
#   node01 slots=8
#   node02 slots=8
# Usage: launch/scripts/run_nodes.sh HOSTFILE RANKS CONFIG.toml [--set key=value ...]
# Every node needs the build at the same path and the data files readable at
# the paths in the config (a shared file system). One rank per GPU; each rank
# picks its GPU from its node-local rank; ranks of a sequence group are
# consecutive, so keep parallel.sp a divisor of the GPUs per node to keep the
# scan inside a node.
set -euo pipefail
hostfile=${1:?usage: run_nodes.sh HOSTFILE RANKS CONFIG.toml [--set key=value ...]}
ranks=${2:?ranks}
config=${3:?config}
shift 3
root=$(cd "$(dirname "$0")/../.." && pwd)
exec mpirun --hostfile "$hostfile" -np "$ranks" --map-by slot --bind-to none \
  -x OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}" -x PATH -x LD_LIBRARY_PATH \
  "$root/build/launch/performer-train" --config "$config" --resume auto "$@"
