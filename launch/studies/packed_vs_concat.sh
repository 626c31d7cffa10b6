#!/usr/bin/env bash
# The quickstart's model trained in concat and in packed mode (the same size,
# steps, seed and data), each evaluated one protein at a time on the held-out
# test split (performer-eval --set data.mode="packed": every protein attends
# to itself only), overall and per protein length (docs/results/packing.md).
# Variables (defaults in brackets): STEPS [1500], OUT [out/packed-vs-concat],
# CSV [$OUT/packed_vs_concat.csv], BUILD_DIR [build]. OUT, and the CSV's folder
# when it is another, are each a new folder, an empty one or an earlier output
# of this script (launch/scripts/output_dir.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source launch/scripts/output_dir.sh
STEPS=${STEPS:-1500}
OUT=${OUT:-out/packed-vs-concat}
CSV=${CSV:-$OUT/packed_vs_concat.csv}
BUILD_DIR=${BUILD_DIR:-build}
bin=$BUILD_DIR/launch
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pf_check_output OUT "$OUT"
[ "$(dirname "$CSV")" -ef "$OUT" ] || pf_check_output "CSV's folder" "$(dirname "$CSV")"  # both before either is made
pf_claim_output OUT "$OUT"
[ "$(dirname "$CSV")" -ef "$OUT" ] || pf_claim_output "CSV's folder" "$(dirname "$CSV")"
[ -f "$OUT/uniprot.h5" ] ||
  pf_run "$bin/performer-data" prepare --output "$OUT/uniprot.h5" /usr/share/doc/mmseqs2/example-data/DB.fasta.gz > /dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores" >&2
echo "trained_mode,steps,eval,loss,ppl,accuracy,tokens" > "$CSV"
for mode in concat packed; do
  dir=$OUT/$mode
  pf_remove_own "$OUT" "$mode"
  pf_run mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-train" --config launch/configs/small.toml \
    --set "data.files=[\"$OUT/uniprot.h5\"]" --set "data.mode=\"$mode\"" --set "train.steps=$STEPS" \
    --set "train.metrics=\"$dir/metrics.jsonl\"" --set "checkpoint.dir=\"$dir/ckpt\"" \
    --set "checkpoint.resume=\"\"" > "$dir.log" 2>&1 ||
    { echo "packed_vs_concat: training in $mode mode failed, see $dir.log" >&2; exit 1; }
  last=$(ls "$dir"/ckpt/ckpt-*.h5 | tail -1)
  pf_run mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-eval" --checkpoint "$last" --split test \
    --set "data.files=[\"$OUT/uniprot.h5\"]" --set 'data.mode="packed"' > "$dir.eval" 2>&1 ||
    { echo "packed_vs_concat: evaluating $last failed, see $dir.eval" >&2; exit 1; }
  cat "$dir.eval" >&2
  python3 - "$dir.eval" "$mode" "$STEPS" >> "$CSV" <<'PY'
import re, sys
text, mode, steps = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
num = r"loss ([0-9.]+) \| ppl ([0-9.]+) \| accuracy ([0-9.]+) \| ([0-9]+) tokens"
m = re.search(r"data\.mode packed: " + num, text)
if not m:
    sys.exit(f"{sys.argv[1]}: no overall result")
print(f"{mode},{steps},all,{','.join(m.groups())}")
for name, label in (("<= 1024 residues", "le1024"), ("1025-8192 residues", "1025-8192"), ("> 8192 residues", "gt8192")):
    b = re.search(re.escape(name) + r"\s+" + num, text)
    if b:
        print(f"{mode},{steps},{label},{','.join(b.groups())}")
PY
done
echo "wrote $CSV" >&2
