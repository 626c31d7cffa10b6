#!/usr/bin/env bash
# performer-bench --csv follows the output-path rule (data/output_path.h): it
# writes a new file, replaces an earlier CSV of the same benchmark (also one
# written before the benchmark's last columns were added), and refuses
# (status 2, naming --csv and the path) anything else, leaving it as it was;
# performer-bench data stopped by SIGINT removes its scratch folder, and
# performer-bench synthetic stopped by SIGINT or SIGTERM leaves its earlier
# output as it was and no temporary file; performer-bench kernels --only and
# --modes time only the rows named; counts that are not positive, and
# train's options that reach its configuration, are usage errors (status 2).
# Usage: bench_csv_test.sh PERFORMER_BENCH
set -euo pipefail
bench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$bench" watchdog --ops 1000 --csv "$1" 2> "$work/err.txt"; }

run "$work/w.csv" || fail "a new CSV: exit $?: $(cat "$work/err.txt")"
[ "$(head -1 "$work/w.csv")" = "setting,threads,ops,ns_per_op" ] || fail "header: $(head -1 "$work/w.csv")"
[ "$(wc -l < "$work/w.csv")" = 7 ] || fail "expected 6 rows and a header: $(cat "$work/w.csv")"
run "$work/w.csv" || fail "replacing an earlier CSV of the benchmark: $(cat "$work/err.txt")"
printf 'setting,threads,ops\n1,2,3\n' > "$work/older.csv"   # an earlier version: the last column added since
run "$work/older.csv" || fail "replacing a CSV of an earlier version of the benchmark: $(cat "$work/err.txt")"
[ "$(head -1 "$work/older.csv")" = "setting,threads,ops,ns_per_op" ] || fail "older.csv: $(head -1 "$work/older.csv")"

printf 'my notes\n' > "$work/notes.txt"
printf 'kernel,device\n1,2\n' > "$work/other.csv"   # another benchmark's CSV
printf 'setting\n1\n' > "$work/one.csv"               # one column: not taken for an earlier version
mkdir "$work/folder"
ln -s "$work/nowhere" "$work/dangling.csv"
for target in notes.txt other.csv one.csv folder dangling.csv; do
  status=0
  run "$work/$target" || status=$?
  [ "$status" = 2 ] || fail "--csv $target: exit $status, expected 2"
  grep -q -- "--csv '$work/$target'" "$work/err.txt" || fail "--csv $target: message does not name it: $(cat "$work/err.txt")"
  grep -q "refusing to replace it" "$work/err.txt" || fail "--csv $target: $(cat "$work/err.txt")"
done
[ "$(cat "$work/notes.txt")" = "my notes" ] || fail "notes.txt was changed"
[ "$(head -1 "$work/other.csv")" = "kernel,device" ] || fail "other.csv was changed"
[ -L "$work/dangling.csv" ] || fail "the dangling link was replaced"
leftover=$(find "$work" -name '*.tmp-*' | wc -l)
[ "$leftover" = 0 ] || fail "temporary files left: $(find "$work" -name '*.tmp-*')"
# kernels --only/--modes: exactly the rows asked for; an unknown row is a
# usage error that lists the device's rows.
"$bench" kernels --sizes 64 --heads 1 -m 16 --reps 1 --only favor window256 --modes causal \
  --csv "$work/k.csv" 2> "$work/err.txt" || fail "kernels --only: $(cat "$work/err.txt")"
rows=$(tail -n +2 "$work/k.csv" | cut -d, -f1,3 | tr '\n' ' ')
[ "$rows" = "favor,causal window256,causal " ] || fail "kernels --only favor window256 --modes causal gave: $rows"
status=0
"$bench" kernels --sizes 64 --only favor_tf32 2> "$work/err.txt" > /dev/null || status=$?
[ "$status" = 2 ] && grep -q "only favor_tf32: no such row on cpu; the rows are: favor softmax window256" \
  "$work/err.txt" || fail "kernels --only favor_tf32 on the CPU: exit $status: $(cat "$work/err.txt")"
mkdir "$work/scratch"
status=0
timeout --preserve-status -s INT 1 "$bench" data --input /usr/share/doc/mmseqs2/example-data/DB.fasta.gz \
  --tmp "$work/scratch" > /dev/null 2> "$work/err.txt" || status=$?
[ "$status" = 1 ] && grep -q "stopped" "$work/err.txt" || fail "bench data after SIGINT: exit $status: $(cat "$work/err.txt")"
[ -z "$(ls -A "$work/scratch")" ] || fail "bench data left its scratch folder: $(ls "$work/scratch")"
mkdir "$work/syn"
"$bench" synthetic --like /usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz --count 100 \
  --output "$work/syn/s.fa" 2> "$work/err.txt" || fail "synthetic: $(cat "$work/err.txt")"
before=$(md5sum < "$work/syn/s.fa")
for sig in INT TERM; do
  status=0
  timeout --preserve-status -s "$sig" 1 "$bench" synthetic --like /usr/share/doc/mmseqs2/example-data/DB.fasta.gz \
    --count 100000000 --output "$work/syn/s.fa" 2> "$work/err.txt" || status=$?
  expected=$(( 128 + $(kill -l "$sig") ))
  [ "$status" = "$expected" ] && grep -q "stopped by signal" "$work/err.txt" ||
    fail "synthetic after SIG$sig: exit $status (expected $expected): $(cat "$work/err.txt")"
  [ "$(md5sum < "$work/syn/s.fa")" = "$before" ] || fail "synthetic after SIG$sig changed its earlier output"
  [ "$(ls "$work/syn")" = s.fa ] || fail "synthetic after SIG$sig left: $(ls "$work/syn")"
done
# Counts, sizes and repetitions that are not positive are usage errors
# (status 2, naming the option and the value), never a crash (a division by
# zero, an empty timing list) or a row of inf; so are train's options that
# reach its configuration, under the names typed.
cd "$work"
for args in "posops --vocab 0" "comm --min-bytes 0" "comm --reps 0" "approx -n 0" "approx --seeds 0" \
    "generate --tail-tokens -5" "watchdog --ops 0" "gemm --reps 0" "gemm --sizes 0" "linattn --chunks 0" \
    "softmax --sizes nan" "feature_map --rows -1" "data --reps 0" "train --length 0" "train --batch 0"; do
  set -- $args
  status=0
  "$bench" $args > "$work/out.txt" 2> "$work/err.txt" || status=$?
  [ "$status" = 2 ] && grep -q -- "^$2: '$3' is not a positive number" "$work/err.txt" ||
    fail "performer-bench $args: exit $status: $(cat "$work/err.txt")"
  [ ! -s "$work/out.txt" ] || fail "performer-bench $args wrote rows: $(cat "$work/out.txt")"
done
for args in "train --cap 16XB:--cap: config error: --cap: unknown unit 'XB'" "train --preset huge:--preset: huge not in" \
    "train --checkpointing on:--checkpointing requires --longest" "train --confirm:--confirm requires --longest"; do
  status=0
  "$bench" ${args%%:*} > /dev/null 2> "$work/err.txt" || status=$?
  [ "$status" = 2 ] && grep -q -- "${args#*:}" "$work/err.txt" ||
    fail "performer-bench ${args%%:*}: exit $status: $(cat "$work/err.txt")"
done
cd - > /dev/null
echo "PASS: new, earlier and refused --csv paths; kernels --only/--modes; bench data cleans up after SIGINT; synthetic after SIGINT and SIGTERM; counts that are not positive and train's bad options refused with status 2"
