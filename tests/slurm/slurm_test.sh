#!/usr/bin/env bash
# Training under a real Slurm cluster on this machine (tests/slurm/cluster.sh),
# CPU backend, a tiny model on the 500 UniProt sequences of the MMseqs2
# examples, through launch/scripts/slurm_train.sbatch as users submit it, on
# one node or on NODES namespaced nodes (tests/cluster/nodes.sh: a slurmd
# each, TCP between them, jobs of --nodes=NODES with 4 tasks in all):
#   1. sbatch of 4 tasks with parallel.sp = 2 (dp x sp = 2 x 2) completes, and
#      its losses and final parameters equal those of `mpirun -np 4` (bits);
#   2. preemption: `scancel --signal=TERM` mid-run makes every rank save a
#      checkpoint and end; the resubmitted job resumes from it and finishes;
#      the final parameters equal those of an uninterrupted run (bits);
#   3. `kill -9` of one task ends the whole job within 60 s with Slurm's
#      message about that task, and the last checkpoint is intact (a new run
#      resumes from it and finishes).
# Prints the measured times. Exit 77 (ctest: skipped) where no cluster can run.
#   slurm_test.sh BUILD_DIR NODES MPIEXEC [MPIEXEC FLAGS...]
set -euo pipefail
build=$1 nodes=$2
shift 2
mpiexec=("$@")
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}  # Debian's, with python3-h5py (launch/scripts/install_deps.sh)
work=$(mktemp -d /tmp/pf-slurm-XXXXXX)
cluster=$work/cluster
cleanup() {
  "$repo/tests/slurm/cluster.sh" stop "$cluster" || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
# shellcheck source=tests/cluster/lib.sh
source "$repo/tests/cluster/lib.sh"

t0=$(now)
rc=0
# (NODES_KEEP: a build under /tmp stays visible inside the namespaced nodes)
SLURM_CONF=$(NODES_KEEP=$build "$repo/tests/slurm/cluster.sh" start "$cluster" "$nodes") || rc=$?
[ "$rc" = 0 ] || { [ "$rc" = 77 ] && echo "SKIP: no Slurm cluster can run here"; exit "$rc"; }
# Where jobs' folders live and Slurm's commands run: this host for one node;
# the cluster's shared folder and its node1 (as a login node) for several.
jobs=$work
sl() { "$@"; }
if [ "$nodes" -gt 1 ]; then
  jobs=$cluster/shared
  sl() { "$repo/tests/cluster/nodes.sh" exec "$cluster" node1 "$@"; }
fi
export SLURM_CONF PERFORMER_TRAIN="$build/launch/performer-train" OMP_NUM_THREADS=1
echo "cluster up in $(since "$t0") s"

"$build/launch/performer-data" prepare --output "$jobs/q.h5" /usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz >/dev/null
# write_config NAME STEPS: a tiny model, dp x sp = 2 x 2, checkpoints every 20 steps.
write_config() { tiny_config "$jobs/$1/run.toml" "$jobs/q.h5" "$jobs/$1" "$2" 20 2; }
last_step() { "$py" -c '
import json, sys
steps = [json.loads(l)["step"] for l in open(sys.argv[1]) if l.strip() and "\"eval\"" not in l]
print(steps[-1] if steps else 0)' "$1" 2>/dev/null || echo 0; }
job_state() { sl scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
# Waits are bounded by time, never by a count of polls, and generous: on a
# loaded machine every step, launch and signal takes longer, and the test
# checks what happens, not how fast (the times are printed for the record).
wait_s=${PF_SLURM_WAIT:-300}
within() {  # SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds (0) or SECONDS pass (1)
  local end=$((SECONDS + $1)); shift
  until "$@"; do [ "$SECONDS" -ge "$end" ] && return 1; sleep 0.1; done
}
in_state() {  # JOB STATE...: whether the job is in one of the states
  local job=$1 s want; shift
  s=$(job_state "$job")
  for want in "$@"; do [ "$s" = "$want" ] && return 0; done
  return 1
}
reached() { [ "$(last_step "$1")" -ge "$2" ]; }  # METRICS STEP
wait_state() {  # JOB STATE... : waits up to wait_s for one of the states
  within "$wait_s" in_state "$@" || fail "job $1 did not reach ${*:2} in $wait_s s (state '$(job_state "$1")')"
}
submit() {  # NAME: sbatch of the batch script as users run it; prints the job id
  sl sbatch --parsable --nodes="$nodes" --ntasks-per-node=$((4 / nodes)) --open-mode=append -o "$jobs/$1/job.out" -D "$repo" \
    "$repo/launch/scripts/slurm_train.sbatch" "$jobs/$1/run.toml"
}
final_params_equal() {  # two checkpoint folders: the newest checkpoint's /params, bit for bit
  "$py" "$repo/tests/cluster/same_params.py" "$1" "$2"
}
reference() {  # NAME: the same configuration under mpirun -np 4
  "${mpiexec[@]}" -n 4 "$PERFORMER_TRAIN" --config "$jobs/$1/run.toml" >"$jobs/$1/out.log" 2>&1 ||
    { tail -20 "$jobs/$1/out.log"; fail "reference run $1 failed"; }
}

echo "== 1. sbatch of 4 tasks on $nodes node(s), dp x sp = 2 x 2, against mpirun -np 4"
write_config batch 40
write_config batch_ref 40
t=$(now)
job=$(submit batch)
wait_state "$job" RUNNING COMPLETED FAILED
echo "job $job started $(since "$t") s after sbatch"
wait_state "$job" COMPLETED FAILED CANCELLED
[ "$(job_state "$job")" = COMPLETED ] || { tail -20 "$jobs/batch/job.out"; fail "job $job ended $(job_state "$job")"; }
echo "job $job completed in $(since "$t") s"
placement=$(sed -n 's/^placement: //p' "$jobs/batch/job.out" | head -1)
echo "placement: $placement"
if [ "$nodes" -gt 1 ]; then
  want=$("$py" -c 'import sys; n = int(sys.argv[1]); k = 4 // n
print(" | ".join(f"node{i + 1} ranks " + ",".join(str(i * k + j) for j in range(k)) for i in range(n)))' "$nodes")
  [ "$placement" = "$want" ] || fail "placement '$placement', expected '$want'"
fi
reference batch_ref
"$py" "$repo/tests/gpu/compare_losses.py" 0 "$jobs/batch_ref/metrics.jsonl" "$jobs/batch/metrics.jsonl" ||
  { tail -20 "$jobs/batch/job.out"; fail "the Slurm run's losses differ from mpirun's"; }
final_params_equal "$jobs/batch_ref/ckpt" "$jobs/batch/ckpt" || fail "final parameters differ from mpirun's"

echo "== 2. preemption: SIGTERM to the job's tasks, then the job resubmitted"
write_config preempt 400
write_config preempt_ref 400
job=$(submit preempt)
within "$wait_s" reached "$jobs/preempt/metrics.jsonl" 30 || fail "the job did not reach step 30 in $wait_s s"
t=$(now)
sl scancel --signal=TERM "$job"
wait_state "$job" COMPLETED FAILED CANCELLED
saved=$(grep -o 'saving a checkpoint at step [0-9]*' "$jobs/preempt/job.out" | tail -1 | awk '{print $NF}')
[ -n "$saved" ] || { tail -20 "$jobs/preempt/job.out"; fail "no checkpoint saved after SIGTERM"; }
[ "$saved" -lt 400 ] || fail "the run finished before the signal took effect"
echo "SIGTERM to checkpoint at step $saved and job end ($(job_state "$job")): $(since "$t") s"
[ "$(grep -c 'saving a checkpoint at step' "$jobs/preempt/job.out")" -ge 1 ] || fail "no save logged"
t=$(now)
# The resubmission (a requeue of a finished job waited for Slurm's begin time
# for minutes in some runs here, so the test resubmits, as users do).
job=$(submit preempt)
within "$wait_s" grep -q "resumed from .* at step $saved" "$jobs/preempt/job.out" ||
  { tail -20 "$jobs/preempt/job.out"; fail "the resubmitted job did not resume from step $saved"; }
echo "resubmission to resumed at step $saved: $(since "$t") s"
wait_state "$job" COMPLETED FAILED CANCELLED
[ "$(job_state "$job")" = COMPLETED ] || { tail -20 "$jobs/preempt/job.out"; fail "resubmitted job ended $(job_state "$job")"; }
[ "$(last_step "$jobs/preempt/metrics.jsonl")" = 400 ] || fail "the resubmitted job did not reach step 400"
reference preempt_ref
final_params_equal "$jobs/preempt_ref/ckpt" "$jobs/preempt/ckpt" || fail "preempted and resumed run differs from an uninterrupted one"

echo "== 3. kill -9 of one task"
write_config killed 2000
job=$(submit killed)
within "$wait_s" reached "$jobs/killed/metrics.jsonl" 25 || fail "the job did not reach step 25 in $wait_s s"
victim=$(pgrep -f "performer-train --config $jobs/killed/run.toml" | sort -n | tail -1)
[ -n "$victim" ] || fail "no task of job $job found"
t=$(now)
kill -9 "$victim"
wait_state "$job" COMPLETED FAILED CANCELLED
took=$(since "$t")
echo "kill -9 of task pid $victim to job end ($(job_state "$job")): $took s"
[ "$(job_state "$job")" != COMPLETED ] || fail "a job with a killed task reported COMPLETED"
grep -E 'task [0-9]+: Killed|Killed' "$jobs/killed/job.out" | head -3
grep -qE 'task [0-9]+: Killed' "$jobs/killed/job.out" || fail "no message about the killed task in the job's output"
ls "$jobs/killed/ckpt"
sed -i 's/^steps = 2000/steps = 60/' "$jobs/killed/run.toml"
"${mpiexec[@]}" -n 4 "$PERFORMER_TRAIN" --config "$jobs/killed/run.toml" --resume auto >"$jobs/killed/resume.log" 2>&1 ||
  { tail -20 "$jobs/killed/resume.log"; fail "resuming after the kill failed"; }
grep -m1 'resumed from' "$jobs/killed/resume.log" || fail "the run after the kill did not resume from a checkpoint"
echo "PASS: Slurm submit, preemption and resubmission, and a killed task on $nodes node(s) (cluster and jobs in $(since "$t0") s)"
