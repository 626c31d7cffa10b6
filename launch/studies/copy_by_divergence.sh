#!/usr/bin/env bash
# Copy accuracy by divergence (docs/results/family-context.md): for each
# checkpoint and each identity file of indelible_families.py's output folders,
# aligned_copy.py on the families held out by a prepared file's split, then
# one CSV of every result (copy_by_divergence.csv: run, identity, then
# aligned_copy.py's columns). Resumable: a CSV that exists is not recomputed.
#   launch/studies/copy_by_divergence.sh OUT DATA.h5:SPLIT "FAMDIR..." NAME=CKPT...
#   e.g. launch/studies/copy_by_divergence.sh copy ind70.h5:test "fam2k fam2k_b" \
#            softmax=runs/softmax/ckpt-000012000.h5 elu=runs/elu/ckpt-000012000.h5
# FAMDIR holds idX.fasta and idX.aln.fasta for identities X (every one found is
# used); the families of SPLIT must have the same roots there (one generator
# run, or runs with the same roots and seed). Env: BUILD (default build),
# SCORE (the performer-score to run, default BUILD's), PYTHON (python3 with
# h5py, default /usr/bin/python3), THREADS (OMP threads, 1).
# OUT is a new folder, an empty one or an earlier output of this script
# (launch/scripts/output_dir.sh).
set -euo pipefail
usage="usage: copy_by_divergence.sh OUT DATA.h5:SPLIT \"FAMDIR...\" NAME=CKPT..."
out=${1:?$usage}
split=${2:?$usage}
dirs=${3:?$usage}
shift 3
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/launch/scripts/output_dir.sh"
score=${SCORE:-$(realpath "${BUILD:-$repo/build}")/launch/performer-score}
python=${PYTHON:-/usr/bin/python3}
pf_claim_output OUT "$out"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(getconf _NPROCESSORS_ONLN) cores; split: $split" \
  >"$out/machine.txt"
for spec in "$@"; do
  name=${spec%%=*}
  ckpt=${spec#*=}
  [ "$name" != "$spec" ] && [ -f "$ckpt" ] || { echo "bad run '$spec': expected NAME=CKPT, an existing file" >&2; exit 2; }
  for dir in $dirs; do
    for fasta in "$dir"/id*.fasta; do
      case $fasta in *.aln.fasta) continue ;; esac
      id=$(basename "$fasta" .fasta)
      csv=$out/copy_${name}_$id.csv
      [ -s "$csv" ] && continue
      echo "[$(date -u +%H:%M:%S)] $name on $id" >&2
      OMP_NUM_THREADS=${THREADS:-1} pf_run "$python" "$repo/launch/studies/aligned_copy.py" --score "$score" \
        --checkpoint "$ckpt" --families "$fasta" --alignment "$dir/$id.aln.fasta" --split "$split" \
        --output "$csv" >"$out/copy_${name}_$id.txt"
    done
  done
done
# One table of all: run, identity, then the columns of aligned_copy.py.
tmp=$out/copy_by_divergence.csv.tmp
first=1
for csv in "$out"/copy_*_id*.csv; do
  base=$(basename "$csv" .csv)
  run=${base#copy_}
  run=${run%_id*}
  identity=${base##*_id}
  if [ $first = 1 ]; then
    echo "run,identity,$(head -1 "$csv")" >"$tmp"
    first=0
  fi
  tail -n +2 "$csv" | sed "s/^/$run,$identity,/" >>"$tmp"
done
mv "$tmp" "$out/copy_by_divergence.csv"
echo "$out/copy_by_divergence.csv" >&2
