#!/usr/bin/env bash
# Learning on real proteins: the quickstart model (launch/configs/small.toml,
# 1500 steps, mpirun -np 2 with each sequence split over both ranks) trained
# on the 20,000 UniProt sequences of the mmseqs2 examples must reach, over the
# whole validation split (validated once, at the end), a perplexity at least 0.025 nats per token below this
# data's own unigram (residue and <end> frequencies of the training split
# scored on the validation targets: ppl 18.65), trained and validated in
# packed mode.
# Where a run ends depends on when it leaves the unigram plateau, and that
# depends on the GEMMs' rounding. On one 2-core Xeon with AVX-512, the same
# run ended 0.034 nats below (ppl 18.03) with oneDNN's AVX-512 sgemm, and
# 0.058 below (ppl 17.60) with DNNL_MAX_CPU_ISA=AVX2. Seeds 1 and 2 ended
# 0.056 and 0.054 below, and the AVX2 AMD EPYC machine 0.059 below
# (ppl 17.58). The bound sits under all of these; the amino-acid unigram of
# about 17.8 is not a bound, since one of these runs ended above it.
#   learning_test.sh <performer-data> <performer-train> <mpiexec> [mpiexec flags...]
set -euo pipefail
data_tool=$1; train=$2; shift 2
mpiexec=("$@")
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
dir=$(mktemp -d /tmp/pf-learning-XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$data_tool" prepare --output "$dir/uniprot.h5" /usr/share/doc/mmseqs2/example-data/DB.fasta.gz > /dev/null
read -r uni_loss uni_ppl _ _ < <("$py" "$root/launch/studies/unigram.py" "$dir/uniprot.h5" valid)
"${mpiexec[@]}" -n 2 "$train" --config "$root/launch/configs/small.toml" --set "data.files=[\"$dir/uniprot.h5\"]" \
  --set "checkpoint.dir=\"\"" --set "train.metrics=\"\"" --set train.log_interval=250 --set train.eval_batches=0 --set train.eval_interval=0 \
  > "$dir/log" 2>&1 || { tail -20 "$dir/log"; echo "FAIL: training failed"; exit 1; }
grep -E '^(step|validation)' "$dir/log"
line=$(grep '^validation' "$dir/log" | tail -1)
ppl=$(echo "$line" | sed 's/.*| ppl \([0-9.]*\) |.*/\1/')
loss=$(echo "$line" | sed 's/.*| loss \([0-9.]*\) |.*/\1/')
gain=$(awk -v u="$uni_loss" -v l="$loss" 'BEGIN { printf "%.4f", u - l }')
echo "unigram of this data on the validation split: ppl $uni_ppl (loss $uni_loss); model: ppl $ppl (loss $loss), $gain nats below"
awk -v g="$gain" 'BEGIN { exit !(g >= 0.025) }' ||
  { echo "FAIL: the model is only $gain nats per token below the unigram of this data (needs 0.025)"; exit 1; }
echo "PASS: validation perplexity $ppl, $gain nats per token below the unigram of this data (ppl $uni_ppl)"
