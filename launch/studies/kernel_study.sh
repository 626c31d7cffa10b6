#!/usr/bin/env bash
# The attention kernels side by side on UniProt proteins, with the trainer
# itself (docs/results/kernel-study.md): exact softmax, FAVOR+ and the exp
# kernel with trained projections at m = d, 2d, 4d, the ReLU kernel and
# elu + 1, causal and masked LM, several model seeds:
#   1. prepare the 20,000 mmseqs2 example sequences as protein_table.sh does
#      (whole organisms held out in /ood, the valid and test splits by MMseqs2
#      cluster at CLUSTER_IDENTITY);
#   2. train every KERNELS x OBJECTIVES x SEEDS model with the same data order,
#      model size, steps and schedule (one rank, OMP_NUM_THREADS cores), and
#      evaluate it on /test and /ood;
#   3. the effective rank of each model's attention matrices on held-out
#      proteins (attention_rank.py);
#   4. tables and a plot (kernel_study_report.py).
# Resumable: a run whose folder holds `done` is not trained again, so the study
# can be spread over several sessions with the same variables.
# Variables (defaults in brackets):
#   STEPS [1000]   OBJECTIVES ["mlm clm"]   SEEDS ["0 1 2"] (model.seed = 1234 + k)
#   KERNELS ["softmax favor:32 favor:64 favor:128 exp:32 exp:64 exp:128 relu:64 elu:32"]
#     kind[:m]; the model is launch/configs/small.toml (head dim d = 32), concat samples
#   CLUSTER_IDENTITY [0.5]   OOD_ORGANISMS ["Drosophila Mycobacterium"]
#   OUT [out/kernel-study]   RESULTS [$OUT/results]   BUILD_DIR [build]   OMP_NUM_THREADS [2]
#   PYTHON [$BUILD_DIR/python-venv/bin/python] (the performer_protein package, for the ranks)
#   RANK_PROTEINS [16] held-out proteins of 64-256 residues per model
# OUT and RESULTS are each a new folder, an empty one or an earlier output of
# this script (launch/scripts/output_dir.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source launch/scripts/output_dir.sh
STEPS=${STEPS:-1000}
OBJECTIVES=${OBJECTIVES-"mlm clm"}
SEEDS=${SEEDS-"0 1 2"}
KERNELS=${KERNELS-"softmax favor:32 favor:64 favor:128 exp:32 exp:64 exp:128 relu:64 elu:32"}
CLUSTER_IDENTITY=${CLUSTER_IDENTITY:-0.5}
OOD_ORGANISMS=${OOD_ORGANISMS:-"Drosophila Mycobacterium"}
OUT=${OUT:-out/kernel-study}
RESULTS=${RESULTS:-$OUT/results}
BUILD_DIR=${BUILD_DIR:-build}
RANK_PROTEINS=${RANK_PROTEINS:-16}
PY=${PYTHON:-$BUILD_DIR/python-venv/bin/python}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
FASTA=${FASTA:-/usr/share/doc/mmseqs2/example-data/DB.fasta.gz}
pf_check_output OUT "$OUT"
pf_check_output RESULTS "$RESULTS"  # both before either is made
pf_claim_output OUT "$OUT"
pf_claim_output RESULTS "$RESULTS"

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  pf_run cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPF_CUDA=OFF > /dev/null
fi
pf_run cmake --build "$BUILD_DIR" -j "${BUILD_JOBS:-2}" --target performer-data performer-train performer-eval > /dev/null
[ -x "$PY" ] || pf_run launch/python/make_venv.sh "$BUILD_DIR/python-venv"
bin=$BUILD_DIR/launch
study_start=$(date +%s)
data=$OUT/uniprot-ood.h5
one_rank=(mpirun --oversubscribe -np 1 -x "OMP_NUM_THREADS=$OMP_NUM_THREADS")

if [ ! -f "$data" ]; then
  echo "== prepare: $FASTA, holding out OS= ${OOD_ORGANISMS}, cluster split at $CLUSTER_IDENTITY"
  prep_args=(--cluster-identity "$CLUSTER_IDENTITY")
  for o in $OOD_ORGANISMS; do prep_args+=(--ood-organism "$o"); done
  pf_run "$bin/performer-data" prepare --output "$data.tmp" "${prep_args[@]}" "$FASTA" 2> "$OUT/prepare.log"
  mv "$data.tmp" "$data"
  pf_run "$bin/performer-data" info "$data" > "$OUT/data-info.txt"
fi

common=(--config launch/configs/small.toml --set "data.files=[\"$data\"]" --set 'data.mode="concat"'
        --set parallel.sp=1 --set checkpoint.resume=\"\" --set checkpoint.interval=0 --set checkpoint.keep=1
        --set train.log_interval=50 --set train.eval_batches=8 --set "train.steps=$STEPS"
        --set "train.eval_interval=$(( STEPS >= 8 ? STEPS / 8 : 1 ))"
        --set "optimizer.warmup_steps=$(( STEPS >= 1000 ? 50 : STEPS / 20 ))")
[ -f "$OUT/runs.csv" ] || echo "run,attention,features,objective,seed,steps,wall_s,max_rss_kib" > "$OUT/runs.csv"
[ -f "$OUT/evals.csv" ] || echo "run,split,loss,ppl,accuracy,tokens" > "$OUT/evals.csv"

# run_one RUN KIND M OBJECTIVE SEED: train, evaluate on test and ood, mark done.
run_one() {
  local run=$1 kind=$2 m=$3 obj=$4 seed=$5 dir=$OUT/$1
  pf_remove_own "$OUT" "$run"
  mkdir -p "$dir"
  local sets=(--set "model.attention=\"$kind\"" --set "model.objective=\"$obj\"" --set "model.seed=$((1234 + seed))"
              --set "checkpoint.dir=\"$dir/checkpoints\"" --set "train.metrics=\"$dir/metrics.jsonl\"")
  [ -n "$m" ] && sets+=(--set "model.features=$m")
  echo "== train $run ($STEPS steps)"
  local t0 t1
  t0=$(date +%s.%N)
  pf_run /usr/bin/time -f "%M" -o "$dir/max_rss_kib" "${one_rank[@]}" "$bin/performer-train" "${common[@]}" "${sets[@]}" \
    > "$dir/train.log" 2>&1 || { tail -20 "$dir/train.log"; exit 1; }
  t1=$(date +%s.%N)
  local ck
  ck=$(ls "$dir/checkpoints"/ckpt-*.h5 | tail -1)
  for split in test ood; do
    local line
    pf_run "${one_rank[@]}" "$bin/performer-eval" --checkpoint "$ck" --split "$split" \
      --set "data.files=[\"$data\"]" --set parallel.sp=1 > "$dir/eval_$split.txt"
    line=$(grep '^checkpoint ' "$dir/eval_$split.txt")
    echo "   $split: ${line#*: }"
    echo "$line" | sed -E "s/.*loss ([0-9.naif]+) \| ppl ([0-9.naif]+) \| accuracy ([0-9.naif]+) \| ([0-9]+) tokens.*/$run,$split,\1,\2,\3,\4/" \
      >> "$OUT/evals.csv"
  done
  echo "$run,$kind,${m:-0},$obj,$seed,$STEPS,$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}"),$(tail -1 "$dir/max_rss_kib")" \
    >> "$OUT/runs.csv"
  pf_run "$PY" launch/studies/attention_rank.py --data "$data" --proteins "$RANK_PROTEINS" --output "$dir/rank.csv" "$ck" \
    > /dev/null
  touch "$dir/done"
}

for seed in $SEEDS; do
  for obj in $OBJECTIVES; do
    for spec in $KERNELS; do
      kind=${spec%%:*}
      m=""
      [ "$spec" != "$kind" ] && m=${spec#*:}
      run="$kind${m:+-m$m}-$obj-s$seed"
      if [ -f "$OUT/$run/done" ]; then echo "== $run: done before"; continue; fi
      run_one "$run" "$kind" "$m" "$obj" "$seed"
    done
  done
done

echo "== tables and plot -> $RESULTS"
pf_run "$PY" launch/studies/kernel_study_report.py --out "$OUT" --data "$data" --results "$RESULTS"
echo "study: $(( $(date +%s) - study_start )) s this call, STEPS=$STEPS OBJECTIVES=$OBJECTIVES SEEDS=$SEEDS"
