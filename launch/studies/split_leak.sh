#!/usr/bin/env bash
# The same model trained and tested on two splits of the quickstart data
# (DB.fasta.gz, default fractions): by sequence hash and by MMseqs2 cluster
# at 50 % identity. The small config (launch/configs/small.toml, STEPS steps,
# 2 ranks) trains on each split's /train; performer-eval reports perplexity
# on its /test over every test protein. The gap between the two test
# perplexities is what near-copies in training were worth. Writes OUT (CSV).
#   launch/studies/split_leak.sh [BUILD_DIR]
# Environment: STEPS (1500), WORK (out/split-leak), OUT
# (docs/results/homology/split_leak.csv).
set -euo pipefail
build=${1:-build}
bin=$build/launch
db=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
steps=${STEPS:-1500}
work=${WORK:-out/split-leak}
out=${OUT:-docs/results/homology/split_leak.csv}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work" "$(dirname "$out")"
echo "split,steps,test_sequences,test_tokens,test_loss,test_ppl,test_accuracy,valid_ppl_last,cpu" >"$out"
cpu="$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
for split in sequence cluster; do
  h5=$work/$split.h5
  extra=()
  [[ $split == cluster ]] && extra=(--cluster-identity 0.5)
  [[ -f $h5 ]] || "$bin/performer-data" prepare --output "$h5" "${extra[@]}" "$db" 2>"$work/$split.prepare.log"
  rm -rf "$work/$split-ckpt" "$work/$split-metrics.jsonl"
  mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-train" --config launch/configs/small.toml \
    --set "data.files=[\"$h5\"]" --set "checkpoint.dir=\"$work/$split-ckpt\"" --set 'checkpoint.resume=""' \
    --set "train.metrics=\"$work/$split-metrics.jsonl\"" --set "train.steps=$steps" >"$work/$split.train.log" 2>&1
  last=$(ls "$work/$split-ckpt"/ckpt-*.h5 | tail -1)
  mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-eval" --checkpoint "$last" --split test \
    --batches 0 --set "data.files=[\"$h5\"]" >"$work/$split.eval.log" 2>&1
  line=$(grep '^checkpoint ' "$work/$split.eval.log")
  loss=$(sed -n 's/.*: loss \([0-9.]*\) .*/\1/p' <<<"$line")
  ppl=$(sed -n 's/.* ppl \([0-9.]*\) .*/\1/p' <<<"$line")
  acc=$(sed -n 's/.* accuracy \([0-9.]*\) .*/\1/p' <<<"$line")
  tokens=$(sed -n 's/.* | \([0-9]*\) tokens$/\1/p' <<<"$line")
  seqs=$("$bin/performer-data" info "$h5" | sed -n 's/^ *test: \([0-9]*\) sequences.*/\1/p' | head -1)
  vppl=$(sed -n 's/^validation at step [0-9]* | loss [0-9.]* | ppl \([0-9.]*\) .*/\1/p' "$work/$split.train.log" | tail -1)
  echo "$split,$steps,$seqs,$tokens,$loss,$ppl,$acc,$vppl,$cpu" | tee -a "$out"
done
