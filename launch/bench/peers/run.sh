#!/usr/bin/env bash
# Side-by-side benchmark of our FAVOR+ kernels and training step against the
# public peers (performer-pytorch, fast-transformers), in one run, case by
# case and alternating (ours, then the peers, at each case), each measurement
# in its own process so that its peak RSS is its own.
#
#   launch/bench/peers/run.sh BUILD_DIR OUT_DIR
#
# BUILD_DIR: our CPU build (BUILD_DIR/launch/performer-bench). The peers come
# from launch/bench/peers/install.sh (its venv, $PEERS_DIR/venv, default
# .peers/venv). Writes to OUT_DIR:
#   attention.csv, train.csv  one row per measurement: who, case, seconds,
#                             tokens/s, peak RSS, the same run's sgemm GFLOP/s
#   summary.md                the tables with ratios peer / ours, machine, load
#   machine.txt, log.txt      lscpu / uptime at start and end; everything printed
# Environment: THREADS (default: all cores; OMP_NUM_THREADS, OPENBLAS_NUM_THREADS
# and torch.set_num_threads for both sides), OPENBLAS_CORETYPE (default: SkylakeX
# on AVX-512 CPUs, Haswell on AVX2 ones; Debian's OpenBLAS 0.3.21 misdetects
# recent Xeons as Prescott, several times slower; it is set for both sides, ours
# uses oneDNN's sgemm unless built without it), SIZES (default "4096 16384"),
# TRAIN_CAUSAL_N (2048), TRAIN_BIDIR_N (16384), PEERS_FULL=1 to add the slow
# rows skipped by default (see docs/results/peers.md).
set -euo pipefail

die() { echo "run.sh: $*" >&2; exit 1; }
[[ $# -eq 2 ]] || die "usage: run.sh BUILD_DIR OUT_DIR"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
BUILD="$(cd "$1" && pwd)" || die "no build directory '$1'"
BENCH="$BUILD/launch/performer-bench"
[[ -x "$BENCH" ]] || die "no $BENCH (build the CPU tree first)"
PEERS_DIR="${PEERS_DIR:-$REPO/.peers}"
PY="$PEERS_DIR/venv/bin/python"
[[ -x "$PY" ]] || die "no peers' venv at $PEERS_DIR/venv: run launch/bench/peers/install.sh first"
"$PY" -c "import torch, performer_pytorch, fast_transformers.causal_product" 2>/dev/null ||
  die "the peers do not import from $PY: run launch/bench/peers/install.sh first"
[[ -x /usr/bin/time ]] || die "no /usr/bin/time (apt-get install time)"
mkdir -p "$2"
OUT="$(cd "$2" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

THREADS="${THREADS:-$(nproc)}"
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
  if grep -qw avx512f /proc/cpuinfo; then OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then OPENBLAS_CORETYPE=Haswell; fi
fi
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE}
SIZES="${SIZES:-4096 16384}"
TRAIN_CAUSAL_N="${TRAIN_CAUSAL_N:-2048}"
TRAIN_BIDIR_N="${TRAIN_BIDIR_N:-16384}"
PEERS_FULL="${PEERS_FULL:-0}"
LOG="$OUT/log.txt"
: >"$LOG"
log() { echo "[$(date +%T) load $(cut -d' ' -f1 /proc/loadavg)] $*" | tee -a "$LOG" >&2; }

machine() {
  echo "$1: $(date -u +%FT%TZ)"
  echo "  cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores online, $(free -g | awk '/^Mem:/{print $2}') GiB RAM"
  echo "  uptime: $(uptime)"
}
machine start >"$OUT/machine.txt"
{
  echo "  threads: $THREADS, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
  echo "  ours: $BENCH"
  echo "  peers: $("$PY" "$HERE/common.py" versions 2>/dev/null)"
} >>"$OUT/machine.txt"
cat "$OUT/machine.txt" | tee -a "$LOG" >&2

ATT="$OUT/attention.csv"
TRN="$OUT/train.csv"
echo "who,case,impl,mode,n,threads,warmup,reps,fwd_s,bwd_s,seconds,tokens_per_s,peak_rss_bytes,sgemm_gflops,load1" >"$ATT"
echo "who,case,impl,mode,n,threads,warmup,reps,seconds,tokens_per_s,peak_rss_bytes,tracked_peak_bytes,sgemm_gflops,load1" >"$TRN"
load1() { cut -d' ' -f1 /proc/loadavg; }

# Runs "$@" under /usr/bin/time; peak RSS in bytes to $TMP/rss.
timed() {
  /usr/bin/time -f "%M" -o "$TMP/rss.kib" "$@" 2> >(grep -v "CUDA_HOME" >>"$LOG") || die "failed: $* (see $LOG)"
  echo $(($(tail -1 "$TMP/rss.kib") * 1024)) >"$TMP/rss"
}

# Ours: one process per n runs FAVOR+ causal and bidirectional (the kernels
# bench times both; exact softmax off), so both rows carry that process's peak.
ours_kernels() {
  local n=$1
  log "ours: kernels n=$n"
  timed "$BENCH" kernels --sizes "$n" --softmax-max 0 --reps 3 --csv "$TMP/k.csv"
  local rss l
  rss=$(cat "$TMP/rss") l=$(load1)
  # kernel,device,mode,n,batch,heads,d,m,threads,fwd_s,bwd_s,fwd_bwd_s,tokens_per_s,gflop,gflops,peak_sgemm_gflops,...
  awk -F, -v rss="$rss" -v l="$l" 'NR > 1 && $1 == "favor" {
      printf "ours,attn %s n=%s,favor_attention_forward/backward (chunk 64),%s,%s,%s,1,3,%s,%s,%s,%s,%s,%s,%s\n",
             $3, $4, $3, $4, $9, $10, $11, $12, $13, rss, $16, l }' "$TMP/k.csv" >"$TMP/ours_$n.csv"
}

# A peer's attention case: attention.py prints
# who,case,impl,mode,batch,heads,n,d,m,threads,warmup,reps,fwd_s,bwd_s,fwd_bwd_s,tokens_per_s,peak,base,sgemm,core
peer_attention() {
  log "peer: attention.py $*"
  timed "$PY" "$HERE/attention.py" "$@" >"$TMP/p.csv"
  local l
  l=$(load1)
  "$PY" - "$TMP/p.csv" "$l" >>"$ATT" <<'EOF'
import csv, sys
for r in csv.reader(open(sys.argv[1])):
    who, case, impl, mode, n = r[0], r[1], r[2], r[3], r[6]
    print(",".join([who, case, '"' + impl + '"', mode, n, r[9], r[10], r[11], r[12], r[13], r[14], r[15], r[16], r[18],
                    sys.argv[2]]))
EOF
}

peer_train() {
  log "peer: train_step.py $*"
  timed "$PY" "$HERE/train_step.py" "$@" >"$TMP/p.csv"
  local l
  l=$(load1)
  # who,case,impl,mode,batch,n,params,threads,warmup,reps,seconds,tokens_per_s,peak,base,sgemm,core
  "$PY" - "$TMP/p.csv" "$l" >>"$TRN" <<'EOF'
import csv, sys
for r in csv.reader(open(sys.argv[1])):
    print(",".join([r[0], r[1], '"' + r[2] + '"', r[3], r[5], r[7], r[8], r[9], r[10], r[11], r[12], "", r[14],
                    sys.argv[2]]))
EOF
}

# Ours: the training step, after the same run's sgemm (performer-bench gemm at
# 2048, default backend = first row). Best (smallest) of the timed steps.
ours_train() {
  local mode=$1 n=$2 steps=$3
  shift 3
  log "ours: gemm 2048, then train --preset paper --length $n ($mode, $steps timed steps)"
  local sgemm
  sgemm=$("$BENCH" gemm --sizes 2048 --reps 3 | awk -F, 'NR == 2 { print $5 }')
  timed "$BENCH" train --preset paper --length "$n" --batch 1 --steps "$steps" "$@" --csv "$TMP/t.csv"
  local rss l
  rss=$(cat "$TMP/rss") l=$(load1)
  # preset,...,local_length(7),step,seconds(9),tokens_per_s,...,peak_bytes(19)
  awk -F, -v rss="$rss" -v l="$l" -v mode="$mode" -v sg="$sgemm" -v steps="$steps" -v set="$*" '
    BEGIN { gsub(/"/, "", set) }
    NR > 1 && $1 !~ /^#/ { if (best == "" || $9 < best) { best = $9; tps = $10; pk = $19 } n = $7 }
    END { printf "ours,train %s n=%s,\"performer-bench train --preset paper %s\",%s,%s,%s,1,%s,%s,%s,%s,%s,%s,%s\n",
                 mode, n, set, mode, n, ENVIRON["OMP_NUM_THREADS"], steps, best, tps, rss, pk, sg, l }' \
    "$TMP/t.csv" >>"$TRN"
}

# --- attention: per n, ours (both modes) then the peers, causal then bidirectional
for n in $SIZES; do
  ours_kernels "$n"
  grep ",causal," "$TMP/ours_$n.csv" >>"$ATT"
  if ((n <= 4096)); then reps=(--warmup 1 --reps 3); else reps=(--warmup 1 --reps 1); fi
  peer_attention --peer fast-transformers --mode causal -n "$n" "${reps[@]}"
  peer_attention --peer performer-pytorch --mode causal -n "$n" --causal-path ft-cpu "${reps[@]}"
  # performer-pytorch's own CPU-only causal path (torch, 128 chunks) is O(n m d)
  # in memory and ~30 ms per token here: once, without warm-up, at n <= 4096
  # (n = 16384 would need ~27 GB and ~9 min; PEERS_FULL=1 runs it).
  if ((n <= 4096)) || [[ "$PEERS_FULL" == 1 ]]; then
    peer_attention --peer performer-pytorch --mode causal -n "$n" --warmup 0 --reps 1
  fi
  grep ",bidirectional," "$TMP/ours_$n.csv" >>"$ATT"
  peer_attention --peer performer-pytorch --mode bidirectional -n "$n" "${reps[@]}"
  peer_attention --peer fast-transformers --mode bidirectional -n "$n" "${reps[@]}"
done

# --- training step, paper preset sizes, batch 1
ours_train causal "$TRAIN_CAUSAL_N" 3
peer_train --mode causal -n "$TRAIN_CAUSAL_N" --causal-path ft-cpu --warmup 1 --reps 2
if [[ "$PEERS_FULL" == 1 ]]; then  # its own CPU-only causal path: ~7 min per step at 2048 here
  peer_train --mode causal -n "$TRAIN_CAUSAL_N" --warmup 0 --reps 1
fi
ours_train bidirectional "$TRAIN_BIDIR_N" 1 --set 'model.objective="mlm"'
peer_train --mode bidirectional -n "$TRAIN_BIDIR_N" --warmup 1 --reps 1

machine end >>"$OUT/machine.txt"
tail -3 "$OUT/machine.txt" | tee -a "$LOG" >&2

# --- summary: ratio = peer seconds / ours seconds at the same case
"$PY" - "$OUT" <<'EOF' >"$OUT/summary.md"
import csv, sys, os
out = sys.argv[1]
print("# Peers side by side\n")
print("```\n" + open(os.path.join(out, "machine.txt")).read().rstrip() + "\n```\n")
def table(name, title):
    rows = list(csv.DictReader(open(os.path.join(out, name))))
    ours = {r["case"]: float(r["seconds"]) for r in rows if r["who"] == "ours"}
    print(f"## {title}\n")
    print("| case | who | path | warm-up + reps | seconds | tokens/s | peak RSS (GiB) | sgemm GFLOP/s | load | peer / ours |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        s = float(r["seconds"])
        ratio = "" if r["who"] == "ours" or r["case"] not in ours else f"{s / ours[r['case']]:.1f}x"
        print(f"| {r['case']} | {r['who']} | {r['impl']} | {r['warmup']} + {r['reps']} | {s:.3f} | "
              f"{float(r['tokens_per_s']):.0f} | {int(r['peak_rss_bytes']) / 2**30:.2f} | {r['sgemm_gflops']} | "
              f"{r['load1']} | {ratio} |")
    print()
table("attention.csv", "FAVOR+ attention, forward + backward (B 1, H 8, d 64, m 256, fp32)")
table("train.csv", "Training step, paper preset sizes (6 x 512, 8 heads, FFN 2048, m 256, batch 1)")
print("Ours: both attention modes run in one process per n, so their peak RSS is that process's.")
EOF
log "wrote $ATT, $TRN, $OUT/summary.md"
