#!/usr/bin/env bash
# Useful tokens per second (residues and <end>, no padding) of the three data
# modes, with the trainer itself (docs/results/packing.md):
#   1. prepare DB.fasta.gz (20,000 UniProt proteins) plus COUNT long proteins
#      of 8,500-35,213 residues made of real residues (long_proteins.py);
#   2. for each sample length L, train the small model (launch/configs/small.toml)
#      STEPS steps in single, concat and packed mode on 2 ranks (dp 1 x sp 2,
#      one thread each), the same tokens per step (B = TOKENS / L);
#   3. from the metrics: tokens/s, useful fraction and useful tokens/s, the
#      mean over the steps after the first WARMUP, into a CSV.
# Variables (defaults in brackets): LENGTHS ["2048 8192 65536"], TOKENS [65536]
# tokens per step, STEPS [8], WARMUP [3], COUNT [8], OUT [out/packing],
# CSV [$OUT/packing_throughput.csv], BUILD_DIR [build]. OUT, and the CSV's
# folder when it is another, are each a new folder, an empty one or an earlier
# output of this script (launch/scripts/output_dir.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source launch/scripts/output_dir.sh
LENGTHS=${LENGTHS:-"2048 8192 65536"}
TOKENS=${TOKENS:-65536}
STEPS=${STEPS:-8}
WARMUP=${WARMUP:-3}
COUNT=${COUNT:-8}
OUT=${OUT:-out/packing}
CSV=${CSV:-$OUT/packing_throughput.csv}
BUILD_DIR=${BUILD_DIR:-build}
bin=$BUILD_DIR/launch
db=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pf_check_output OUT "$OUT"
[ "$(dirname "$CSV")" -ef "$OUT" ] || pf_check_output "CSV's folder" "$(dirname "$CSV")"  # both before either is made
pf_claim_output OUT "$OUT"
[ "$(dirname "$CSV")" -ef "$OUT" ] || pf_claim_output "CSV's folder" "$(dirname "$CSV")"
pf_run python3 launch/studies/long_proteins.py --input "$db" --output "$OUT/long.fasta" --count "$COUNT"
pf_run "$bin/performer-data" prepare --output "$OUT/data.h5" "$db" "$OUT/long.fasta" > "$OUT/prepare.log"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores" >&2
echo "L,mode,batch,steps,tokens_per_s,useful_fraction,useful_tokens_per_s" > "$CSV"
for L in $LENGTHS; do
  B=$(( TOKENS / L > 0 ? TOKENS / L : 1 ))
  for mode in single concat packed; do
    dir=$OUT/L${L}_$mode
    pf_remove_own "$OUT" "L${L}_$mode"
    pf_run mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-train" --config launch/configs/small.toml \
      --set "data.files=[\"$OUT/data.h5\"]" --set "data.mode=\"$mode\"" --set "data.sample_length=$L" \
      --set "data.batch_size=$B" --set "train.steps=$STEPS" --set "optimizer.warmup_steps=1" --set "train.eval_interval=0" \
      --set "train.log_interval=$STEPS" --set "train.metrics=\"$dir/metrics.jsonl\"" \
      --set "checkpoint.dir=\"$dir/ckpt\"" --set "checkpoint.interval=0" --set "checkpoint.resume=\"\"" \
      > "$dir.log" 2>&1 || { echo "packing_throughput: $mode at L=$L failed, see $dir.log" >&2; exit 1; }
    python3 - "$dir/metrics.jsonl" "$L" "$mode" "$B" "$WARMUP" >> "$CSV" <<'PY'
import json, sys
path, L, mode, B, warmup = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
rows = [json.loads(l) for l in open(path) if '"eval"' not in l]
rows = rows[warmup:]
if not rows:
    sys.exit(f"{path}: no steps after the first {warmup}")
mean = lambda k: sum(r[k] for r in rows) / len(rows)
print(f"{L},{mode},{B},{len(rows)},{mean('tokens_per_s'):.1f},{mean('useful_fraction'):.4f},"
      f"{mean('useful_tokens_per_s'):.1f}")
PY
    tail -1 "$CSV" >&2
  done
done
echo "wrote $CSV" >&2
