#!/usr/bin/env bash
# Learning on real proteins: the quickstart model (launch/configs/small.toml,
# 1500 steps, mpirun -np 2 with each sequence split over both ranks) trained
# on the 20,000 UniProt sequences of the mmseqs2 examples must reach a
# validation perplexity, over the whole validation split, below the
# amino-acid unigram baseline of about 17.8 (the unigram fitted on this data's
# training split scores 18.48 on its validation split; the model reaches 17.67).
#   learning_test.sh <performer-data> <performer-train> <mpiexec> [mpiexec flags...]
set -euo pipefail
data_tool=$1; train=$2; shift 2
mpiexec=("$@")
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d /tmp/pf-learning-XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$data_tool" prepare --output "$dir/uniprot.h5" /usr/share/doc/mmseqs2/example-data/DB.fasta.gz > /dev/null
"${mpiexec[@]}" -n 2 "$train" --config "$root/launch/configs/small.toml" --set "data.files=[\"$dir/uniprot.h5\"]" \
  --set "checkpoint.dir=\"\"" --set "train.metrics=\"\"" --set train.log_interval=250 --set train.eval_batches=0 \
  > "$dir/log" 2>&1 || { tail -20 "$dir/log"; echo "FAIL: training failed"; exit 1; }
grep -E '^(step|validation)' "$dir/log"
ppl=$(grep '^validation' "$dir/log" | tail -1 | sed 's/.*| ppl \([0-9.]*\) |.*/\1/')
awk -v p="$ppl" 'BEGIN { exit !(p < 17.8) }' || { echo "FAIL: validation perplexity $ppl is not below 17.8"; exit 1; }
echo "PASS: validation perplexity $ppl on the whole validation split (unigram baseline about 17.8; 18.48 on this split)"
