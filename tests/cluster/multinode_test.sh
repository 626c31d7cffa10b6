#!/usr/bin/env bash
# Training across the nodes of a namespaced cluster (tests/cluster/nodes.sh),
# over TCP between nodes, against the same runs with every rank on this host.
# CPU backend, a tiny model on the 500 UniProt sequences of the MMseqs2
# examples, 4 ranks:
#   NODES=2: sp = 4 over 2 nodes x 2 ranks; dp 2 x sp 2 with each sequence
#     group split across the nodes (--map-by node); each gives the losses of
#     the one-host run (1e-6 relative, bit-identical where printed 0) and the
#     placement line names each node's ranks in node-local order; a run
#     stopped at step 6 and resumed across the nodes ends with the parameters
#     of the uninterrupted run (bits); its step-6 checkpoint resumes on one
#     host to the same parameters.
#   NODES=4: sp = 4 over 4 nodes x 1 and dp 4 over 4 nodes, against one host;
#     a checkpoint written on 4 nodes resumes on 2 nodes and on 1 host, each
#     ending with the uninterrupted run's parameters (bits).
# Exit 77 (ctest: skipped) where no cluster can run.
#   multinode_test.sh BUILD_DIR NODES MPIEXEC [MPIEXEC FLAGS...]
set -euo pipefail
build=$1
nodes=$2
shift 2
mpiexec=("$@")
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3} # Debian's, with python3-h5py
work=$(mktemp -d /tmp/pf-multinode-XXXXXX)
cluster=$work/cluster
cleanup() {
  "$repo/tests/cluster/nodes.sh" stop "$cluster" || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
# shellcheck source=tests/cluster/lib.sh
source "$repo/tests/cluster/lib.sh"
start_cluster "$nodes"
train=$build/launch/performer-train

# write_config NAME SP: 12 steps, checkpoints every 6, in the shared folder.
write_config() { tiny_config "$shared/$1/run.toml" "$shared/q.h5" "$shared/$1" 12 6 "$2"; }
# on_host NAME [ARGS...]: the run with all 4 ranks on this host.
on_host() {
  local name=$1
  shift
  "${mpiexec[@]}" -n 4 "$train" --config "$shared/$name/run.toml" "$@" >>"$shared/$name/out.log" 2>&1 ||
    {
      tail -20 "$shared/$name/out.log"
      fail "run $name on one host failed"
    }
}
# on_cluster NAME MAP [ARGS...]: the run with 4 ranks across the nodes,
# placed --map-by MAP (slot: consecutive ranks share a node; node: round robin).
on_cluster() {
  local name=$1 map=$2
  shift 2
  "$cluster/mpirun" -n 4 --map-by "$map" --bind-to none -x OMP_NUM_THREADS "$train" --config "$shared/$name/run.toml" \
    "$@" >>"$shared/$name/out.log" 2>&1 ||
    {
      tail -20 "$shared/$name/out.log"
      fail "run $name across $nodes nodes failed"
    }
}
same_losses() { "$py" "$repo/tests/gpu/compare_losses.py" 1e-6 "$shared/$1/metrics.jsonl" "$shared/$2/metrics.jsonl"; }
same_params() { "$py" "$repo/tests/cluster/same_params.py" "$shared/$1/ckpt" "$shared/$2/ckpt"; }
placed() { # NAME EXPECTED: the run's placement line
  local line
  line=$(sed -n 's/^placement: //p' "$shared/$1/out.log" | head -1)
  echo "$1: placement $line"
  [ "$line" = "$2" ] || fail "$1: placement '$line', expected '$2'"
}
# A checkpoint folder holding the step-6 checkpoint of run FROM.
copy_step6() { # FROM TO
  mkdir -p "$shared/$2/ckpt"
  cp "$shared/$1/ckpt/ckpt-000000006.h5" "$shared/$2/ckpt/"
}

if [ "$nodes" = 2 ]; then
  echo "== sp 4 over 2 nodes x 2 ranks"
  write_config host_sp4 4
  write_config nodes_sp4 4
  on_host host_sp4
  on_cluster nodes_sp4 slot
  placed nodes_sp4 "node1 ranks 0,1 | node2 ranks 2,3"
  same_losses host_sp4 nodes_sp4 || fail "sp 4 across 2 nodes: losses differ from one host"
  same_params host_sp4 nodes_sp4 || fail "sp 4 across 2 nodes: parameters differ from one host"

  echo "== dp 2 x sp 2, each sequence group split across the 2 nodes"
  write_config host_sp2 2
  write_config nodes_sp2 2
  on_host host_sp2
  on_cluster nodes_sp2 node
  placed nodes_sp2 "node1 ranks 0,2 | node2 ranks 1,3"
  same_losses host_sp2 nodes_sp2 || fail "dp 2 x sp 2 across 2 nodes: losses differ from one host"

  echo "== stopped at step 6 and resumed across the nodes; its step-6 checkpoint resumed on one host"
  write_config resumed 4
  on_cluster resumed slot --set train.stop_at=6
  grep -q "train.stop_at = 6 reached" "$shared/resumed/out.log" && [ -f "$shared/resumed/ckpt/ckpt-000000006.h5" ] ||
    fail "the run with train.stop_at = 6 did not stop with a step-6 checkpoint"
  write_config resumed_host 4
  copy_step6 resumed resumed_host
  on_cluster resumed slot --resume auto
  grep -q "resumed from .* at step 6" "$shared/resumed/out.log" || fail "the run across nodes did not resume at step 6"
  same_params nodes_sp4 resumed || fail "stopped and resumed across nodes: parameters differ from the uninterrupted run"
  on_host resumed_host --resume auto
  grep -q "resumed from .* at step 6" "$shared/resumed_host/out.log" || fail "the one-host run did not resume at step 6"
  same_params nodes_sp4 resumed_host || fail "2-node checkpoint resumed on one host: parameters differ"
elif [ "$nodes" = 4 ]; then
  echo "== sp 4 over 4 nodes x 1 rank"
  write_config host_sp4 4
  write_config nodes_sp4 4
  on_host host_sp4
  on_cluster nodes_sp4 node
  placed nodes_sp4 "node1 ranks 0 | node2 ranks 1 | node3 ranks 2 | node4 ranks 3"
  same_losses host_sp4 nodes_sp4 || fail "sp 4 across 4 nodes: losses differ from one host"
  same_params host_sp4 nodes_sp4 || fail "sp 4 across 4 nodes: parameters differ from one host"

  echo "== dp 4 over 4 nodes"
  write_config host_dp4 1
  write_config nodes_dp4 1
  on_host host_dp4
  on_cluster nodes_dp4 node
  same_losses host_dp4 nodes_dp4 || fail "dp 4 across 4 nodes: losses differ from one host"

  echo "== a checkpoint written on 4 nodes resumed on 2 nodes and on one host"
  write_config stopped 4
  on_cluster stopped node --set train.stop_at=6
  [ -f "$shared/stopped/ckpt/ckpt-000000006.h5" ] || fail "the 4-node run left no step-6 checkpoint"
  write_config on_two 4
  write_config on_one 4
  copy_step6 stopped on_two
  copy_step6 stopped on_one
  # Two nodes: ranks 0 and 1 on node1, 2 and 3 on node2 (host list, 2 slots each).
  "$cluster/mpirun" -n 4 -H node1:2,node2:2 --bind-to none -x OMP_NUM_THREADS "$train" \
    --config "$shared/on_two/run.toml" --resume auto >>"$shared/on_two/out.log" 2>&1 ||
    {
      tail -20 "$shared/on_two/out.log"
      fail "resuming on 2 nodes failed"
    }
  placed on_two "node1 ranks 0,1 | node2 ranks 2,3"
  on_host on_one --resume auto
  for run in on_two on_one; do
    grep -q "resumed from .* at step 6" "$shared/$run/out.log" || fail "$run did not resume at step 6"
    same_params nodes_sp4 "$run" || fail "4-node checkpoint resumed as $run: parameters differ from the uninterrupted run"
  done
else
  fail "NODES is 2 or 4, not '$nodes'"
fi
echo "PASS: training across $nodes namespaced nodes over TCP equals one host"
