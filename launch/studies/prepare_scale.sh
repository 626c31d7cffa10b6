#!/usr/bin/env bash
# Data preparation at scale: `performer-data prepare` of DB.fasta.gz, then of
# synthetic inputs of COUNTS sequences drawn from its lengths and residue
# frequencies (5 % exact repeats; generated here, removed afterwards), each
# started from this shell so that the peak resident memory it reports is its
# own, once per thread count of THREADS (--threads: one thread parses, the
# others compress); a last run of the largest count with a small budget
# shows the sort spilling to disk. Appends a CSV row per run to OUT and
# writes the machine's description beside it.
#   launch/studies/prepare_scale.sh [BUILD_DIR]
# Environment: COUNTS ("1000000 20000000"), THREADS ("1 2"), SMALL_BUDGET (256MiB; "" skips that run), WORK
# (where the scratch folder is made, a new temporary one removed at the end;
# about 8 GB per 20 M sequences; default TMPDIR or /tmp), OUT
# (docs/results/prepare_scale/prepare_scale.csv). OUT's folder is a new folder,
# an empty one or an earlier output of this script (launch/scripts/output_dir.sh).
set -euo pipefail
source "$(dirname "$0")/../scripts/output_dir.sh"
build=${1:-build}
bin=$build/launch
db=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
counts=${COUNTS:-"1000000 20000000"}
threads=${THREADS:-"1 2"}
small=${SMALL_BUDGET-256MiB}
scratch=${WORK:-${TMPDIR:-/tmp}}
out=${OUT:-docs/results/prepare_scale/prepare_scale.csv}
pf_claim_output "OUT's folder" "$(dirname "$out")"
for t in performer-data performer-bench; do
  [[ -x $bin/$t ]] || { echo "prepare_scale.sh: $bin/$t not built" >&2; exit 2; }
done
mkdir -p "$scratch"
work=$(mktemp -d "$scratch/pf-prepare-scale.XXXXXX")
trap 'rm -rf "$work"' EXIT
{
  echo "date: $(date -u +%FT%TZ)"
  echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1), $(nproc) cores"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
} >"${out%.csv}.machine.txt"
[[ -f $out ]] || echo "label,input_mb,sequences_read,duplicates,kept,residues,budget,threads,sort_runs,seconds,sequences_per_s,residues_per_s,peak_rss_mib,output_mb" >"$out"

# One prepare: its summary lines give the counts, the time and the peak.
measure() { # label input budget threads
  local log=$work/prepare.log h5=$work/out.h5
  pf_run "$bin/performer-data" prepare --output "$h5" --memory-budget "$3" --threads "$4" "$2" 2>"$log" ||
    { tail -20 "$log" >&2; echo "prepare_scale.sh: prepare of $2 failed (above)" >&2; exit 1; }
  local read mb dups kept residues runs seconds peak size
  read=$(sed -n 's/^sequences read: \([0-9]*\) (\([0-9.e+]*\) MB).*/\1/p' "$log")
  mb=$(sed -n 's/^sequences read: [0-9]* (\([0-9.e+]*\) MB).*/\1/p' "$log")
  dups=$(sed -n 's/^duplicates dropped: \([0-9]*\).*/\1/p' "$log")
  runs=$(sed -n 's/^duplicates dropped: [0-9]* (sorted in \([0-9]*\) runs.*/\1/p' "$log")
  kept=$(sed -n 's/^sequences kept: \([0-9]*\), residues: \([0-9]*\).*/\1/p' "$log")
  residues=$(sed -n 's/^sequences kept: [0-9]*, residues: \([0-9]*\).*/\1/p' "$log")
  seconds=$(sed -n 's/^wrote .* in \([0-9.]*\) s; peak resident memory \([0-9]*\) MiB.*/\1/p' "$log")
  peak=$(sed -n 's/^wrote .* in [0-9.]* s; peak resident memory \([0-9]*\) MiB.*/\1/p' "$log")
  size=$(stat -c %s "$h5")
  rm -f "$h5"
  awk -v l="$1" -v mb="$mb" -v r="$read" -v d="$dups" -v k="$kept" -v res="$residues" -v b="$3" -v t="$4" -v runs="${runs:-0}" \
    -v s="$seconds" -v p="$peak" -v z="$size" \
    'BEGIN { printf "%s,%.1f,%.0f,%.0f,%.0f,%.0f,%s,%d,%d,%.1f,%.0f,%.0f,%d,%.1f\n", l, mb, r, d, k, res, b, t, runs, s, r / s, res / s, p, z / 1e6 }' \
    >>"$out"
  tail -1 "$out"
}

for t in $threads; do measure DB.fasta.gz "$db" 2GiB "$t"; done
last=""
for n in $counts; do
  fasta=$work/synthetic-$n.fasta
  pf_run "$bin/performer-bench" synthetic --like "$db" --count "$n" --duplicates 0.05 --seed 1 --output "$fasta"
  for t in $threads; do measure "synthetic-$n" "$fasta" 2GiB "$t"; done
  [[ -n $last ]] && rm -f "$last"
  last=$fasta
done
[[ -n $small ]] && measure "$(basename "$last" .fasta)" "$last" "$small" "$t"
echo "prepare_scale.sh: wrote $out"
