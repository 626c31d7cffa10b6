#!/usr/bin/env bash
# The cost of scoring a query given a context of homologs against the
# context's length (docs/results/context-scoring.md): performer-score
# --context with FAVOR+ from the cached state (the context run once, every
# query started from its state), FAVOR+ in one pass per query, and exact
# softmax (one pass per query: it has no fixed-size state), all in the same
# run on the same queries.
#   1. two checkpoints of launch/configs/small.toml (FAVOR+ and softmax), one
#      training step each on the QUERY proteins: the cost does not depend on
#      what the weights learned;
#   2. contexts of about CONTEXTS tokens, made of DB.fasta.gz proteins in
#      file order, and QUERIES proteins of QUERY.fasta.gz;
#   3. each kernel and mode at each length: the tool's own timing line
#      (context seconds, seconds per query), one CSV row each.
# Variables: CONTEXTS ["1000 4000 16000 64000 128000"]
#   SOFTMAX_MAX [64000] longest context given to the one-pass runs
#   QUERIES [8]   OUT [out/context-cost]   BUILD_DIR [build]   OMP_NUM_THREADS [2]
# OUT is a new folder, an empty one or an earlier output of this script
# (launch/scripts/output_dir.sh); a rerun keeps the checkpoints there.
set -euo pipefail
cd "$(dirname "$0")/../.."
source launch/scripts/output_dir.sh
CONTEXTS=${CONTEXTS-"1000 4000 16000 64000 128000"}
SOFTMAX_MAX=${SOFTMAX_MAX:-64000}
QUERIES=${QUERIES:-8}
OUT=${OUT:-out/context-cost}
BUILD_DIR=${BUILD_DIR:-build}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
bin=$BUILD_DIR/launch
db=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
query=/usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz
pf_claim_output OUT "$OUT"
pf_run cmake --build "$BUILD_DIR" -j "$(nproc)" --target performer-data performer-train performer-score > /dev/null

[ -f "$OUT/query.h5" ] || pf_run "$bin/performer-data" prepare --output "$OUT/query.h5" "$query" > "$OUT/prepare.log" 2>&1 ||
  { tail -20 "$OUT/prepare.log" >&2; echo "context_cost.sh: prepare failed (log: $OUT/prepare.log)" >&2; exit 1; }
for kind in favor softmax; do
  ck=$OUT/$kind/ckpt-000000001.h5
  [ -f "$ck" ] && continue
  pf_remove_own "$OUT" "$kind"  # a run that ended before its checkpoint
  pf_run "$bin/performer-train" --config launch/configs/small.toml --set "model.attention=\"$kind\"" \
    --set "data.files=[\"$OUT/query.h5\"]" --set "checkpoint.dir=\"$OUT/$kind\"" --set 'checkpoint.resume=""' \
    --set "train.metrics=\"$OUT/$kind/metrics.jsonl\"" --set train.steps=1 --set optimizer.warmup_steps=0 --set parallel.sp=1 > /dev/null
done

# The first QUERIES query proteins; contexts of whole DB proteins up to each length.
python3 - "$db" "$query" "$OUT" "$QUERIES" $CONTEXTS <<'PY'
import gzip, sys
db, query, out, nq, *lengths = sys.argv[1:]
def records(path):
    name, seq = None, []
    for line in gzip.open(path, "rt"):
        if line.startswith(">"):
            if name: yield name, "".join(seq)
            name, seq = line[1:].split()[0], []
        else:
            seq.append(line.strip())
    if name: yield name, "".join(seq)
with open(f"{out}/queries.fasta", "w") as f:
    for k, (n, s) in zip(range(int(nq)), records(query)):
        f.write(f">{n}\n{s}\n")
for L in map(int, lengths):
    tokens = 0
    with open(f"{out}/context_{L}.fasta", "w") as f:
        for n, s in records(db):
            if tokens >= L: break
            f.write(f">{n}\n{s}\n")
            tokens += len(s) + 1
PY

csv=$OUT/context_cost.csv
echo "kernel,mode,context_tokens,queries,context_s,given_s,per_query_s,context_tokens_run" > "$csv"
for L in $CONTEXTS; do
  for run in favor:cached favor:one-pass softmax:one-pass; do
    kind=${run%%:*} mode=${run#*:}
    [ "$mode" = one-pass ] && [ "$L" -gt "$SOFTMAX_MAX" ] && continue
    log=$OUT/scores_${kind}_${mode}_$L.log
    pf_run "$bin/performer-score" --checkpoint "$OUT/$kind/ckpt-000000001.h5" --context "$OUT/context_$L.fasta" \
      --context-mode "$mode" --output "$OUT/scores_${kind}_${mode}_$L.tsv" "$OUT/queries.fasta" 2>"$log" >/dev/null ||
      { cat "$log" >&2; exit 1; }
    line=$(grep 'context of' "$log")
    echo "$line" | sed -E 's/.*\(([0-9]+) tokens\).*: ([0-9]+) context tokens run; context ([0-9.]+) s, ([0-9]+) queries given it ([0-9.]+) s \(([0-9.]+) s per query\).*/\1 \4 \3 \5 \6 \2/' |
      { read -r tok nq cs gs pq run_tokens; echo "$kind,$mode,$tok,$nq,$cs,$gs,$pq,$run_tokens" | tee -a "$csv"; }
  done
done
echo "wrote $csv (lscpu: $(lscpu | sed -n 's/^Model name: *//p'))"
