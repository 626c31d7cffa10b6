#!/usr/bin/env bash
# Homology-aware splits against the real MMseqs2 (docs/data.md#homology-aware-splits),
# on QUERY.fasta.gz and the first 1,500 records of DB.fasta.gz:
#   1. prepare --cluster-identity 0.5: no cluster in two splits, cluster sizes
#      agree with the cluster column (checked with h5py, not the tool);
#   2. the audit's counts equal an independent count from MMseqs2's own
#      result table, for the cluster split and for a sequence-hash split;
#   3. the cluster split passes `audit --identity 0.5`, the sequence split
#      leaks on this data and fails it (exit 3);
#   4. MMseqs2 missing, failing, killed, or stopped by SIGTERM: exit status,
#      a message naming the command, no output file, no scratch folder;
#   5. damaged cluster tables: info fails naming the file and the dataset.
#   cluster_split_test.sh <performer-data>
# Exit 77 (skipped) when mmseqs is not installed.
set -euo pipefail
tool=$1
py=${PYTHON:-/usr/bin/python3}
mmseqs=${MMSEQS:-mmseqs}
command -v "$mmseqs" >/dev/null || {
  echo "SKIP: mmseqs not found (Debian package mmseqs2; launch/scripts/install_deps.sh installs it)"
  exit 77
}
dir=$(mktemp -d /tmp/pf-cluster-split-XXXXXX)
trap '[ -n "${PF_KEEP:-}" ] || rm -rf "$dir"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
data=/usr/share/doc/mmseqs2/example-data
awk '/^>/ {n++} n > 1500 {exit} {print}' < <(zcat "$data/DB.fasta.gz") >"$dir/db_slice.fasta"
cp "$data/QUERY.fasta.gz" "$dir/query.fasta.gz"
inputs=("$dir/query.fasta.gz" "$dir/db_slice.fasta")

# 1. The cluster split.
"$tool" prepare -o "$dir/c.h5" --cluster-identity 0.5 --val-fraction 0.05 --test-fraction 0.05 --threads 1 \
  "${inputs[@]}" 2>"$dir/c.log" || { cat "$dir/c.log"; fail "clustered prepare"; }
grep -q "split by cluster: " "$dir/c.log" || fail "no cluster summary in: $(cat "$dir/c.log")"
"$tool" prepare -o "$dir/s.h5" --val-fraction 0.05 --test-fraction 0.05 "${inputs[@]}" 2>/dev/null
"$tool" info "$dir/c.h5" >"$dir/c.info"
grep -q "split by cluster: [0-9]* clusters (MMseqs2 " "$dir/c.info" || fail "info: $(cat "$dir/c.info")"
"$tool" info "$dir/s.h5" | grep -q "split by sequence hash: unclustered" || fail "info of the sequence split"
"$py" - "$dir/c.h5" <<'PY'
import sys, collections, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
rule = f.attrs["split_rule"]
rule = rule if isinstance(rule, str) else rule[0]
assert (rule.decode() if isinstance(rule, bytes) else rule) == "cluster", rule
owner, count = {}, collections.Counter()
for s in ("train", "valid", "test"):
    c = f[s]["clusters"][:]
    assert len(c) == f[s].attrs["sequences"], s
    for x in set(c.tolist()):
        assert owner.setdefault(x, s) == s, f"cluster {x} in {owner[x]} and {s}"
    count.update(c.tolist())
sizes = f["clusters"]["sizes"][:]
assert len(sizes) == f["clusters"].attrs["count"] == len(f["clusters"]["representatives"])
assert all(count[i] == sizes[i] for i in range(len(sizes))), "sizes disagree with the cluster columns"
assert f["valid"].attrs["sequences"] > 0 and f["test"].attrs["sequences"] > 0
print("clusters:", len(sizes), "largest:", sizes.max(), "valid/test:", f["valid"].attrs["sequences"], f["test"].attrs["sequences"])
PY

# 2. and 3. The audit against MMseqs2's own table.
# One audit per file, as a gate at 0.5: the cluster split passes (0), the
# sequence split leaks on this data (3); the JSON is printed either way.
for split in c s; do
  rc=0
  "$tool" audit "$dir/$split.h5" --identity 0.5 --json --threads 1 >"$dir/$split.json" 2>"$dir/$split.audit.log" ||
    rc=$?
  expected=0
  [ "$split" = c ] || expected=3
  [ "$rc" = "$expected" ] || { cat "$dir/$split.audit.log"; fail "audit --identity 0.5 of $split.h5 exited $rc, expected $expected"; }
  "$py" - "$dir/$split.h5" "$dir/$split.json" "$mmseqs" "$dir/$split-indep" <<'PY'
import sys, os, json, subprocess, h5py
path, report, mmseqs, work = sys.argv[1:]
os.makedirs(work)
f = h5py.File(path, "r")
vocab = f.attrs["vocabulary"]
vocab = vocab if isinstance(vocab, str) else vocab[0]
letters = (vocab.decode() if isinstance(vocab, bytes) else vocab).split(",")
def fasta(split, out, tag):
    g = f[split]; t = g["tokens"][:]; o = g["offsets"][:]
    with open(out, "a") as w:
        for i in range(len(o) - 1):
            w.write(f">{tag}_{i}\n" + "".join(letters[x] for x in t[o[i]:o[i + 1]]) + "\n")
    return len(o) - 1
fasta("train", f"{work}/t.fa", "train")
n = {s: fasta(s, f"{work}/q.fa", s) for s in ("valid", "test")}
r = json.load(open(report))
subprocess.run([mmseqs, "easy-search", f"{work}/q.fa", f"{work}/t.fa", f"{work}/res.m8", f"{work}/tmp",
                "-c", str(r["coverage"]), "--cov-mode", "2", "-e", "1e-3", "--threads", "1", "-v", "1",
                "--format-output", "query,target,fident"], check=True)
best = {}
for line in open(f"{work}/res.m8"):
    q, _, ident = line.split("\t")
    best[q] = max(best.get(q, 0.0), float(ident))
for s in r["splits"]:
    mine = [sum(1 for q, b in best.items() if q.startswith(s["name"] + "_") and b >= t) for t in r["thresholds"]]
    assert s["sequences"] == n[s["name"]], (s, n)
    assert mine == s["with_hit"], f"{path} {s['name']}: audit {s['with_hit']}, MMseqs2's table {mine}"
    print(os.path.basename(path), s["name"], s["sequences"], "with a hit at", r["thresholds"], ":", mine)
PY
done
grep -q "leak: .* have a training hit at identity >= 0.5" "$dir/s.audit.log" ||
  fail "leak message: $(cat "$dir/s.audit.log")"
"$py" -c "import json, sys; j = json.load(open('$dir/c.json')); assert j['failures'] == [], j['failures']"

# 4. MMseqs2 missing, failing, killed, stopped.
no_leftovers() {  # output and scratch of the failed run are gone
  [ ! -e "$dir/x.h5" ] || fail "$1: output file left"
  ! ls "$dir" | grep -q '^x\.h5\.' || fail "$1: left $(ls "$dir" | grep '^x\.h5\.')"
}
expect_failure() {  # name, expected status, message pattern, mmseqs program
  local rc=0
  "$tool" prepare -o "$dir/x.h5" --cluster-identity 0.5 --mmseqs "$4" "$dir/db_slice.fasta" 2>"$dir/x.log" || rc=$?
  [ "$rc" = "$2" ] || fail "$1: exit $rc, expected $2: $(cat "$dir/x.log")"
  grep -q -- "$3" "$dir/x.log" || fail "$1: no '$3' in: $(cat "$dir/x.log")"
  no_leftovers "$1"
}
expect_failure missing 1 "cannot run '$dir/none version': program '$dir/none' not found" "$dir/none"
cat >"$dir/failing" <<'SH'
#!/bin/sh
[ "$1" = version ] && { echo 14-test; exit 0; }
echo "Error: out of memory in prefilter" >&2
exit 1
SH
cat >"$dir/killed" <<'SH'
#!/bin/sh
[ "$1" = version ] && { echo 14-test; exit 0; }
kill -9 $$
SH
cat >"$dir/slow" <<'SH'
#!/bin/sh
[ "$1" = version ] && { echo 14-test; exit 0; }
echo started >"$(dirname "$0")/slow.started"
sleep 299
SH
chmod +x "$dir/failing" "$dir/killed" "$dir/slow"
expect_failure failing 1 "clustering: '$dir/failing easy-linclust .*' exited with status 1" "$dir/failing"
grep -q "Error: out of memory in prefilter" "$dir/x.log" || fail "failing: MMseqs2's own output not quoted"
expect_failure killed 1 "was killed by signal 9" "$dir/killed"
"$tool" prepare -o "$dir/x.h5" --cluster-identity 0.5 --mmseqs "$dir/slow" "$dir/db_slice.fasta" 2>"$dir/x.log" &
pid=$!
for _ in $(seq 1 600); do [ -e "$dir/slow.started" ] && break; sleep 0.5; done
[ -e "$dir/slow.started" ] || fail "the slow mmseqs never started"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 143 ] || fail "SIGTERM during clustering: exit $rc, expected 143: $(cat "$dir/x.log")"
grep -q "stopped on request while running '$dir/slow easy-linclust" "$dir/x.log" || fail "stop: $(cat "$dir/x.log")"
no_leftovers "SIGTERM"
sleep 1
! pgrep -f "$dir/slow" >/dev/null || fail "the slow mmseqs was left running"
! pgrep -fx "sleep 299" >/dev/null || fail "the slow mmseqs' child (sleep 299) was left running"

# 5. Damaged cluster tables.
damage() {  # name, python statement on f, expected message
  cp "$dir/c.h5" "$dir/d.h5"
  "$py" -c "import h5py, numpy as np; f = h5py.File('$dir/d.h5', 'r+'); $2"
  local rc=0
  "$tool" info "$dir/d.h5" >/dev/null 2>"$dir/d.log" || rc=$?
  [ "$rc" = 1 ] || fail "$1: info exited $rc"
  grep -q -- "$3" "$dir/d.log" || fail "$1: no '$3' in: $(cat "$dir/d.log")"
}
damage "index out of range" "d = f['train/clusters']; d[0] = 10**9" "'$dir/d.h5' dataset /train/clusters: entry 0 is cluster 1000000000"
damage "column missing" "del f['test/clusters']" "'$dir/d.h5' dataset /test/clusters is missing"
damage "group missing" "del f['clusters']" "'$dir/d.h5' group /clusters is missing"
damage "sizes wrong" "d = f['clusters/sizes']; d[0] = d[0] + 1" "'$dir/d.h5' dataset /clusters/sizes: cluster 0"
damage "straddling" "t = f['train/clusters']; v = f['valid/clusters']; a, b = t[0], v[0]; t[0] = b; v[0] = a" "has members in /train and /valid"
echo "PASS: cluster split, audit and MMseqs2 failures"
