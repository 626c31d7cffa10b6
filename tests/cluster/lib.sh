# Helpers of the cluster tests (sourced): a failure message, the tiny
# training configuration they share, and a bounded wait for a launcher.

fail() {
  echo "FAIL: $*"
  exit 1
}

# tiny_config FILE DATA FOLDER STEPS INTERVAL SP: a 2-layer, width-32 model on
# DATA, logging every step to FOLDER/metrics.jsonl, checkpoints in FOLDER/ckpt
# every INTERVAL steps (the newest 4 kept).
tiny_config() {
  mkdir -p "$3"
  cat >"$1" <<TOML
[model]
layers = 2
width = 32
heads = 2
ffn = 64
features = 16
chunk = 16
[data]
files = ["$2"]
sample_length = 64
batch_size = 4
[optimizer]
lr = 3e-3
warmup_steps = 2
[train]
steps = $4
log_interval = 1
eval_interval = 0
metrics = "$3/metrics.jsonl"
[checkpoint]
dir = "$3/ckpt"
interval = $5
keep = 4
[parallel]
sp = $6
TOML
}

# await_exit PID WHAT: waits up to 300 s for PID (a background launcher of this
# shell) to end; sets rc to its exit status. A job that does not end fails.
await_exit() {
  local end=$((SECONDS + 300))
  while kill -0 "$1" 2>/dev/null; do
    [ "$SECONDS" -lt "$end" ] || fail "$2: the job did not end within 300 s of the fault"
    sleep 0.1
  done
  wait "$1" && rc=0 || rc=$?
}

# await_lines FILE N PID WHAT: waits up to 300 s for FILE to hold N lines
# while PID runs.
await_lines() {
  local end=$((SECONDS + 300))
  until [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; do
    [ "$SECONDS" -lt "$end" ] || fail "$4: no $2 lines in $1 within 300 s"
    kill -0 "$3" 2>/dev/null || fail "$4: the run ended before the fault"
    sleep 0.05
  done
}

# The PID of rank R under launcher PID (Open MPI's or MPICH's rank variable).
rank_pid() {
  local child
  for child in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | grep -qxE "(OMPI_COMM_WORLD_RANK|PMI_RANK)=$2"; then
      echo "$child"
      return
    fi
  done
}

now() { date +%s.%N; }
# since T: seconds since T (from now), to 0.1 s.
since() { "${py:-/usr/bin/python3}" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }

# start_cluster N: N namespaced nodes in $cluster (exit 77, ctest's skip,
# where none can run), one OpenMP thread per rank, Open MPI allowed as root,
# and the 500 UniProt sequences prepared by $build's performer-data as
# $cluster/shared/q.h5. Sets shared.
start_cluster() {
  export OMP_NUM_THREADS=1
  [ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  local rc=0
  # The build may lie under /tmp (cmake -B /tmp/build), which each node's
  # private /tmp would hide: it is kept visible, as the repository is.
  NODES_KEEP=$build "$repo/tests/cluster/nodes.sh" start "$1" "$cluster" || rc=$?
  [ "$rc" = 0 ] || {
    [ "$rc" = 77 ] && echo "SKIP: no namespaced cluster can run here"
    exit "$rc"
  }
  shared=$cluster/shared
  "$build/launch/performer-data" prepare --output "$shared/q.h5" /usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz \
    >/dev/null
}
