#!/usr/bin/env bash
# Data preparation at scale: one prepare of DB.fasta.gz, then of synthetic
# inputs of COUNTS sequences drawn from its lengths and residue frequencies
# (5 % exact repeats; generated here, never kept), each in its own process
# so that its peak RSS is its own; a last run of the largest count with a
# small budget shows the sort spilling to disk. Appends to OUT (CSV) and
# writes the machine's description beside it.
#   launch/scripts/prepare_scale.sh [BUILD_DIR]
# Environment: COUNTS ("1000000 20000000"), SMALL_BUDGET (256MiB), WORK
# (scratch folder, needs about 8 GB per 20 M sequences), OUT
# (docs/results/prepare_scale/prepare_scale.csv).
set -euo pipefail
build=${1:-build}
bench=$build/launch/performer-bench
db=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
counts=${COUNTS:-"1000000 20000000"}
small=${SMALL_BUDGET:-256MiB}
work=${WORK:-${TMPDIR:-/tmp}/pf-prepare-scale}
out=${OUT:-docs/results/prepare_scale/prepare_scale.csv}
[[ -x $bench ]] || { echo "prepare_scale.sh: $bench not built" >&2; exit 2; }
mkdir -p "$work" "$(dirname "$out")"
trap 'rm -rf "$work"' EXIT
{
  echo "date: $(date -u +%FT%TZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1), $(nproc) cores"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
} >"${out%.csv}.machine.txt"
"$bench" prepare_scale --input "$db" --output "$work/db.h5" --label DB.fasta.gz --csv "$out"
last=""
for n in $counts; do
  fasta=$work/synthetic-$n.fasta
  "$bench" synthetic --like "$db" --count "$n" --duplicates 0.05 --seed 1 --output "$fasta"
  "$bench" prepare_scale --input "$fasta" --output "$work/synthetic-$n.h5" --label "synthetic-$n" --csv "$out"
  [[ -n $last ]] && rm -f "$last"
  last=$fasta
done
"$bench" prepare_scale --input "$last" --output "$work/small.h5" --budget "$small" \
  --label "$(basename "$last" .fasta)-budget-$small" --csv "$out"
echo "prepare_scale.sh: wrote $out"
