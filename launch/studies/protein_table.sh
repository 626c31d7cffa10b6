#!/usr/bin/env bash
# Exact softmax vs FAVOR+ vs ReLU-kernel attention on UniProt proteins, both
# objectives, with the trainer itself (docs/results/protein-study.md):
#   1. prepare the 20,000 mmseqs2 example sequences with whole organisms held
#      out in /ood; the in-distribution valid and test splits by MMseqs2
#      cluster (SPLIT=cluster, the default: no test protein has a training
#      relative at CLUSTER_IDENTITY or more) or by sequence hash
#      (SPLIT=sequence, only exact copies kept apart);
#   2. train softmax, favor and relu models with identical data, steps and
#      seed, causal LM and masked LM (6 runs, one rank, OMP_NUM_THREADS cores);
#   3. evaluate each on /test and /ood (loss, perplexity, accuracy);
#   4. drop-in (DROPIN=1): the softmax causal model evaluated with FAVOR+ unchanged, then
#      fine-tuned briefly with FAVOR+ (checkpoint.init_from) and evaluated again;
#   5. features sweep: the FAVOR+ causal model evaluated with m random features
#      at test time, SEEDS independent draws each (model.feature_draw);
#   6. run-to-run spread: the causal runs of all three kinds repeated with
#      other model seeds (initialisation, random features; same data order);
#   7. unigram baselines, CSV tables and PNG curves (protein_table_report.py).
# Variables (defaults in brackets):
#   STEPS [1000] training steps per run     FT_STEPS [STEPS/4] drop-in fine-tune steps
#   FEATURES ["32 64 128 256 512"] ("" skips the sweep)   SEEDS [3] feature draws per m
#   DROPIN [1] 0 skips the drop-in         SPLIT [cluster] cluster | sequence
#   CLUSTER_IDENTITY [0.5] MMseqs2 identity of the cluster split
#   OBJECTIVES ["clm mlm"] objectives trained (clm is needed by the drop-in and sweep; "" trains
#     none of the first runs, for repeats alone)
#   REPEAT_SEEDS ["2 3"] extra model.seed values of the repeated runs (model.seed = 1234 + k)
#   REPEAT_OBJECTIVES ["clm"] objectives repeated with those seeds ("" for none)
#   OOD_ORGANISMS ["Drosophila Mycobacterium"]   OS= substrings held out
#   OUT [out/protein-study] work folder    RESULTS [$OUT/results] tables and plots
#   BUILD_DIR [build]                      OMP_NUM_THREADS [2]
# OUT and RESULTS are each a new folder, an empty one or an earlier output of
# this script (launch/scripts/output_dir.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source launch/scripts/output_dir.sh
STEPS=${STEPS:-1000}
FT_STEPS=${FT_STEPS:-$((STEPS / 4))}
FEATURES=${FEATURES-"32 64 128 256 512"}
DROPIN=${DROPIN:-1}
SPLIT=${SPLIT:-cluster}
CLUSTER_IDENTITY=${CLUSTER_IDENTITY:-0.5}
SEEDS=${SEEDS:-3}
OBJECTIVES=${OBJECTIVES-"clm mlm"}
REPEAT_SEEDS=${REPEAT_SEEDS-"2 3"}
REPEAT_OBJECTIVES=${REPEAT_OBJECTIVES-"clm"}
OOD_ORGANISMS=${OOD_ORGANISMS:-"Drosophila Mycobacterium"}
OUT=${OUT:-out/protein-study}
RESULTS=${RESULTS:-$OUT/results}
BUILD_DIR=${BUILD_DIR:-build}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
FASTA=${FASTA:-/usr/share/doc/mmseqs2/example-data/DB.fasta.gz}
PY=${PYTHON:-/usr/bin/python3}
prep_args=()
for o in $OOD_ORGANISMS; do prep_args+=(--ood-organism "$o"); done
case $SPLIT in
  cluster) prep_args+=(--cluster-identity "$CLUSTER_IDENTITY") ;;
  sequence) ;;
  *) echo "protein_table.sh: SPLIT must be cluster or sequence, not '$SPLIT'" >&2; exit 2 ;;
esac
pf_check_output OUT "$OUT"
pf_check_output RESULTS "$RESULTS"  # both before either is made
pf_claim_output OUT "$OUT"
pf_claim_output RESULTS "$RESULTS"

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  pf_run cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPF_CUDA=OFF > /dev/null
fi
pf_run cmake --build "$BUILD_DIR" -j "${BUILD_JOBS:-2}" --target performer-data performer-train performer-eval > /dev/null
bin=$BUILD_DIR/launch
study_start=$(date +%s)
data=$OUT/uniprot-ood.h5
one_rank=(mpirun --oversubscribe -np 1 -x "OMP_NUM_THREADS=$OMP_NUM_THREADS")

echo "== prepare: $FASTA, holding out OS= ${OOD_ORGANISMS}, split by $SPLIT"
pf_run "$bin/performer-data" prepare --output "$data" "${prep_args[@]}" "$FASTA" 2> "$OUT/prepare.log"
pf_run "$bin/performer-data" info "$data" > "$OUT/data-info.txt"
cat "$OUT/data-info.txt"

# Concat samples, as in the recorded results (the quickstart config now packs).
common=(--config launch/configs/small.toml --set "data.files=[\"$data\"]" --set 'data.mode="concat"' --set parallel.sp=1
        --set checkpoint.resume=\"\" --set checkpoint.interval=0 --set checkpoint.keep=1
        --set train.log_interval=50 --set train.eval_batches=8)
evals=$OUT/evals.csv
echo "run,split,variant,features,draw,loss,ppl,accuracy,tokens" > "$evals"
runs=$OUT/runs.csv
echo "run,attention,objective,steps,wall_s,max_rss_kib" > "$runs"

# evaluate RUN SPLIT VARIANT FEATURES DRAW CHECKPOINT [--set ...]
evaluate() {
  local run=$1 split=$2 variant=$3 m=$4 draw=$5 ckpt=$6
  shift 6
  local line log=$OUT/$run/eval_${split}_$variant${m:+_m$m}${draw:+_d$draw}.txt
  pf_run "${one_rank[@]}" "$bin/performer-eval" --checkpoint "$ckpt" --split "$split" \
    --set "data.files=[\"$data\"]" --set parallel.sp=1 "$@" > "$log"
  line=$(grep '^checkpoint ' "$log")
  echo "   $run $split $variant m=$m draw=$draw: ${line#*: }"
  echo "$line" | sed -E "s/.*loss ([0-9.naif]+) \| ppl ([0-9.naif]+) \| accuracy ([0-9.naif]+) \| ([0-9]+) tokens.*/$run,$split,$variant,$m,$draw,\1,\2,\3,\4/" >> "$evals"
}

# train RUN ATTENTION OBJECTIVE STEPS EVAL_INTERVAL [--set ...] (each key once)
train() {
  local run=$1 att=$2 obj=$3 steps=$4 eval_interval=$5
  shift 5
  pf_remove_own "$OUT" "$run"
  mkdir -p "$OUT/$run"
  echo "== train $run: attention $att, objective $obj, $steps steps"
  local t0 t1
  t0=$(date +%s.%N)
  pf_run /usr/bin/time -f "%M" -o "$OUT/$run/max_rss_kib" "${one_rank[@]}" "$bin/performer-train" "${common[@]}" \
    --set "model.attention=\"$att\"" --set "model.objective=\"$obj\"" --set "train.steps=$steps" \
    --set "train.eval_interval=$eval_interval" \
    --set "checkpoint.dir=\"$OUT/$run/checkpoints\"" --set "train.metrics=\"$OUT/$run/metrics.jsonl\"" "$@" \
    > "$OUT/$run/train.log" 2>&1 || { tail -20 "$OUT/$run/train.log"; exit 1; }
  t1=$(date +%s.%N)
  grep -E '^(validation|done)' "$OUT/$run/train.log" | tail -2 | sed 's/^/   /'
  echo "$run,$att,$obj,$steps,$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}"),$(tail -1 "$OUT/$run/max_rss_kib")" >> "$runs"
}

last_checkpoint() { ls "$OUT/$1/checkpoints"/ckpt-*.h5 | tail -1; }

for obj in $OBJECTIVES; do
  for att in softmax favor relu; do
    train "$att-$obj" "$att" "$obj" "$STEPS" $(( STEPS >= 8 ? STEPS / 8 : 1 ))
    ck=$(last_checkpoint "$att-$obj")
    for split in test ood; do evaluate "$att-$obj" "$split" trained "" "" "$ck"; done
  done
done

if [ "$DROPIN" = 1 ]; then
  echo "== drop-in: softmax-clm evaluated with FAVOR+ (no training), then fine-tuned $FT_STEPS steps"
  sm=$(last_checkpoint softmax-clm)
  for split in test ood; do
    evaluate softmax-clm "$split" favor-dropin 64 0 "$sm" --set 'model.attention="favor"' --set model.features=64
  done
  train favor-ft-clm favor clm "$FT_STEPS" $(( FT_STEPS >= 4 ? FT_STEPS / 4 : 1 )) \
    --set "checkpoint.init_from=\"$sm\"" --set optimizer.warmup_steps=10 --set optimizer.lr=1e-3 --set optimizer.min_lr=1e-4
  ft=$(last_checkpoint favor-ft-clm)
  for split in test ood; do evaluate favor-ft-clm "$split" trained "" "" "$ft"; done
fi

if [ -n "$FEATURES" ]; then
  echo "== features sweep: favor-clm with m in {$FEATURES}, draws 1..$SEEDS (draw 0 is the training draw)"
  fv=$(last_checkpoint favor-clm)
  for m in $FEATURES; do
    for d in $(seq 1 "$SEEDS"); do
      evaluate favor-clm test sweep "$m" "$d" "$fv" --set model.features="$m" --set model.feature_draw="$d"
    done
  done
fi

for obj in $REPEAT_OBJECTIVES; do
  for k in $REPEAT_SEEDS; do
    echo "== repeat: $obj runs with model.seed $((1234 + k))"
    for att in softmax favor relu; do
      train "$att-$obj-seed$k" "$att" "$obj" "$STEPS" $(( STEPS >= 8 ? STEPS / 8 : 1 )) --set model.seed=$((1234 + k))
      ck=$(last_checkpoint "$att-$obj-seed$k")
      for split in test ood; do evaluate "$att-$obj-seed$k" "$split" trained "" "" "$ck"; done
    done
  done
done

echo "== unigram baselines, tables and plots -> $RESULTS"
pf_run "$PY" launch/studies/protein_table_report.py --out "$OUT" --data "$data" --results "$RESULTS"
echo "study: $(( $(date +%s) - study_start )) s, STEPS=$STEPS FT_STEPS=$FT_STEPS OBJECTIVES=$OBJECTIVES" \
  "REPEAT_SEEDS=$REPEAT_SEEDS REPEAT_OBJECTIVES=$REPEAT_OBJECTIVES SPLIT=$SPLIT DROPIN=$DROPIN FEATURES=$FEATURES"
