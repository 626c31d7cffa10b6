#!/usr/bin/env bash
# The output rule of the study scripts and launch/quickstart.sh
# (launch/scripts/output_dir.sh), without the C++ tools: every tool, cmake,
# mpirun and the package tools are stand-ins that log their call and fail.
#   output_rule_test.sh PYTHON REPO WORK
# 1. Each script pointed at a folder that holds a user's files (and at a file
#    of the user's where it writes one file) exits 2, names the script and the
#    path, leaves every file as it was, and starts nothing.
# 2. The claim itself: a new folder and an empty one get the marker; a rerun on
#    the script's own folder is accepted (context_cost.sh and quickstart.sh get
#    past it to their first command); another script's marker, a file and a
#    symbolic link are refused; pf_remove_own removes only the named entries of
#    a claimed folder.
# 3. pf_run: SIGTERM, SIGINT or SIGHUP to the script ends the command it runs
#    and the processes below it, and the script exits with 128 + the signal;
#    a command that ignores SIGTERM gets SIGKILL after PF_STOP_GRACE_S.
# 4. indelible_families.py refuses unbounded sizes (--members ...) when parsing.
set -euo pipefail
py=$1 repo=$2 work=$3
studies=$repo/launch/studies
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Stand-ins: they log "name args" to $RAN_LOG and exit 1. dpkg-query says every
# package is installed, so that install_deps.sh installs nothing.
export RAN_LOG=$work/ran.log
fake=$work/fakebin
build=$work/build
mkdir -p "$fake" "$build/launch"
stub='#!/bin/sh
echo "$(basename "$0") $*" >> "$RAN_LOG"
exit 1'
for t in cmake mpirun apt-get sudo performer-data performer-train performer-eval performer-score \
         performer-generate performer-bench; do
  printf '%s\n' "$stub" > "$fake/$t"
  chmod +x "$fake/$t"
  cp "$fake/$t" "$build/launch/$t"
done
printf '#!/bin/sh\necho "dpkg-query $*" >> "$RAN_LOG"\nprintf "install ok installed"\n' > "$fake/dpkg-query"
chmod +x "$fake/dpkg-query"
touch "$build/CMakeCache.txt"
export PATH=$fake:$PATH BUILD_DIR=$build BUILD=$build PYTHON=$fake/python-none

# A folder of the user's: files at the top and in a subfolder named like an
# output of the script (the entries an unguarded script would remove).
user_folder() {  # DIR [SUBFOLDER...]
  local dir=$1 sub
  shift
  mkdir -p "$dir"
  echo "the user's notes in $dir" > "$dir/notes.txt"
  for sub in "$@"; do
    mkdir -p "$dir/$sub"
    echo "the user's file in $sub" > "$dir/$sub/keep.txt"
  done
}
snapshot() {  # PATH: its entries, types, sizes and contents
  if [ -d "$1" ]; then
    (cd "$1" && find . -printf '%p %y %s\n' | LC_ALL=C sort && find . -type f -exec sha256sum {} + | LC_ALL=C sort)
  else
    sha256sum "$1"
  fi
}

# refused NAME DIR CMD...: CMD exits 2 naming NAME (the script) and DIR, DIR
# is unchanged, and no tool ran.
refused() {
  local name=$1 dir=$2 before rc=0
  shift 2
  before=$(snapshot "$dir")
  rm -f "$RAN_LOG"
  "$@" > "$work/out.txt" 2> "$work/err.txt" < /dev/null || rc=$?
  if [ "$rc" != 2 ]; then
    fail "$name on '$dir': exit $rc, want 2: $(cat "$work/err.txt")"
  elif ! grep -qF "$name" "$work/err.txt" || ! grep -qF "'$dir'" "$work/err.txt"; then
    fail "$name on '$dir': the message names not both the script and the path: $(cat "$work/err.txt")"
  elif [ "$(snapshot "$dir")" != "$before" ]; then
    fail "$name on '$dir': the folder changed"
  elif [ -s "$RAN_LOG" ]; then
    fail "$name on '$dir': started $(cat "$RAN_LOG") before refusing"
  else
    echo "  $name refuses '$dir': $(head -1 "$work/err.txt")"
  fi
}

u=$work/user
# 1. Each script on a user's folder.
user_folder "$u/context_cost" favor softmax
refused context_cost.sh "$u/context_cost" env OUT="$u/context_cost" bash "$studies/context_cost.sh"
user_folder "$u/copy"
touch "$work/ckpt.h5"
refused copy_by_divergence.sh "$u/copy" bash "$studies/copy_by_divergence.sh" "$u/copy" "$work/x.h5:test" "$work" \
  "a=$work/ckpt.h5"
user_folder "$u/family" run1
touch "$work/data.h5"
refused family_kernels.sh "$u/family" bash "$studies/family_kernels.sh" "$work/data.h5" "$u/family" run1:favor:64:1
user_folder "$u/kernel" softmax-mlm-s0 results
refused kernel_study.sh "$u/kernel" env OUT="$u/kernel" bash "$studies/kernel_study.sh"
user_folder "$u/kernel_results"
refused kernel_study.sh "$u/kernel_results" env OUT="$work/new/kernel" RESULTS="$u/kernel_results" \
  bash "$studies/kernel_study.sh"
user_folder "$u/protein" softmax-clm results
refused protein_table.sh "$u/protein" env OUT="$u/protein" bash "$studies/protein_table.sh"
user_folder "$u/protein_results"
refused protein_table.sh "$u/protein_results" env OUT="$work/new/protein" RESULTS="$u/protein_results" \
  bash "$studies/protein_table.sh"
user_folder "$u/packed" concat packed
refused packed_vs_concat.sh "$u/packed" env OUT="$u/packed" bash "$studies/packed_vs_concat.sh"
user_folder "$u/packed_csv"
refused packed_vs_concat.sh "$u/packed_csv" env OUT="$work/new/packed" CSV="$u/packed_csv/notes.txt" \
  bash "$studies/packed_vs_concat.sh"
user_folder "$u/packing" L2048_single
refused packing_throughput.sh "$u/packing" env OUT="$u/packing" bash "$studies/packing_throughput.sh"
user_folder "$u/packing_csv"
refused packing_throughput.sh "$u/packing_csv" env OUT="$work/new/packing" CSV="$u/packing_csv/notes.txt" \
  bash "$studies/packing_throughput.sh"
for d in kernel protein packed packing; do
  [ ! -e "$work/new/$d" ] || fail "a refused RESULTS or CSV folder: OUT '$work/new/$d' was made all the same"
done
user_folder "$u/prepare"
echo "the user's table" > "$u/prepare/prepare_scale.csv"
refused prepare_scale.sh "$u/prepare" env OUT="$u/prepare/prepare_scale.csv" bash "$studies/prepare_scale.sh" "$build"
for s in scaling scaling_nodes streams watchdog_cost; do
  user_folder "$u/$s"
  refused $s.sh "$u/$s" bash "$studies/$s.sh" "$u/$s"
done
user_folder "$u/window"
refused window_cost.sh "$u/window/notes.txt" bash "$studies/window_cost.sh" "$u/window/notes.txt"
user_folder "$u/quickstart" checkpoints
echo '{"the user": 1}' > "$u/quickstart/metrics.jsonl"
refused quickstart.sh "$u/quickstart" env OUT="$u/quickstart" bash "$repo/launch/quickstart.sh"
mkdir -p "$u/other"
echo "output folder of protein_table.sh" > "$u/other/.performer-study-protein_table.sh"
refused context_cost.sh "$u/other" env OUT="$u/other" bash "$studies/context_cost.sh"
grep -qF "protein_table.sh" "$work/err.txt" || fail "another script's marker: the message does not name it"

# 2. The claim: new, empty, own earlier output (accepted), the rest refused.
claim() {  # SCRIPT DIR: pf_claim_output in a subshell, as SCRIPT
  (PF_SCRIPT=$1 && source "$repo/launch/scripts/output_dir.sh" && pf_claim_output OUT "$2")
}
claim context_cost.sh "$work/c/new/deep" 2> "$work/err.txt" && [ -f "$work/c/new/deep/.performer-study-context_cost.sh" ] ||
  fail "a new folder: not created with its marker: $(cat "$work/err.txt")"
mkdir -p "$work/c/empty"
claim context_cost.sh "$work/c/empty" && [ -f "$work/c/empty/.performer-study-context_cost.sh" ] ||
  fail "an empty folder: not claimed"
mkdir -p "$work/c/new/deep/favor" && echo weights > "$work/c/new/deep/favor/ckpt-000000001.h5"
claim context_cost.sh "$work/c/new/deep" || fail "a rerun on the script's own folder: refused"
ln -s "$work/c/empty" "$work/c/link"
echo text > "$work/c/file"
for d in "$work/c/link" "$work/c/file"; do
  rc=0
  claim context_cost.sh "$d" 2> "$work/err.txt" || rc=$?
  [ "$rc" = 2 ] && grep -qF "'$d'" "$work/err.txt" || fail "'$d': exit $rc, $(cat "$work/err.txt")"
done
rc=0
claim protein_table.sh "$work/c/new/deep" 2> "$work/err.txt" || rc=$?
[ "$rc" = 2 ] && grep -qF ".performer-study-context_cost.sh" "$work/err.txt" ||
  fail "another script's folder: exit $rc, $(cat "$work/err.txt")"
echo "the user's" > "$work/c/new/deep/mine.txt"
(PF_SCRIPT=context_cost.sh && source "$repo/launch/scripts/output_dir.sh" && pf_remove_own "$work/c/new/deep" favor)
[ ! -e "$work/c/new/deep/favor" ] && [ -f "$work/c/new/deep/mine.txt" ] && [ -f "$work/c/new/deep/.performer-study-context_cost.sh" ] ||
  fail "pf_remove_own favor: removed the wrong entries: $(ls -A "$work/c/new/deep")"
for args in "$u/context_cost notes.txt" "$work/c/new/deep ../c" "$work/c/new/deep ."; do
  rc=0
  # shellcheck disable=SC2034,SC2086 # PF_SCRIPT is read by output_dir.sh; $args splits on purpose
  (PF_SCRIPT=context_cost.sh && source "$repo/launch/scripts/output_dir.sh" && pf_remove_own $args) 2>/dev/null || rc=$?
  [ "$rc" != 0 ] || fail "pf_remove_own $args: accepted"
done
[ -f "$u/context_cost/notes.txt" ] && [ -d "$work/c" ] || fail "a refused pf_remove_own removed something"
# context_cost.sh and quickstart.sh on their own earlier output get past the
# claim to their first command (here a stand-in that fails), and keep the files.
own=$work/own/context
claim context_cost.sh "$own"
mkdir -p "$own/favor" && echo weights > "$own/favor/ckpt-000000001.h5"
rm -f "$RAN_LOG"
rc=0
OUT=$own bash "$studies/context_cost.sh" > /dev/null 2> "$work/err.txt" || rc=$?
[ "$rc" = 1 ] && grep -q '^cmake --build' "$RAN_LOG" && [ -f "$own/favor/ckpt-000000001.h5" ] ||
  fail "context_cost.sh on its own folder: exit $rc, ran '$(cat "$RAN_LOG" 2>/dev/null)', $(cat "$work/err.txt")"
own=$work/own/quickstart
claim quickstart.sh "$own"
mkdir -p "$own/checkpoints" && echo state > "$own/checkpoints/ckpt-000000750.h5" && echo '{}' > "$own/metrics.jsonl"
before=$(snapshot "$own")
rm -f "$RAN_LOG"
rc=0
OUT=$own bash "$repo/launch/quickstart.sh" > /dev/null 2> "$work/err.txt" || rc=$?
[ "$rc" = 1 ] && grep -q '^cmake -S' "$RAN_LOG" && ! grep -q '^apt-get' "$RAN_LOG" && [ "$(snapshot "$own")" = "$before" ] ||
  fail "quickstart.sh on its own folder: exit $rc, ran '$(cat "$RAN_LOG" 2>/dev/null)', $(cat "$work/err.txt")"
# window_cost.sh: an earlier output of its own is accepted, and a failed run
# leaves it and no temporary file.
printf '# window_cost.sh; cpu: earlier\nwindow,x\n' > "$work/own/window.csv"
rm -f "$RAN_LOG"
rc=0
bash "$studies/window_cost.sh" "$work/own/window.csv" 64 > /dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q '^performer-bench train' "$RAN_LOG" && grep -q earlier "$work/own/window.csv" &&
  [ -z "$(find "$work/own" -maxdepth 1 -name '.window_cost.*')" ] ||
  fail "window_cost.sh on its own CSV: exit $rc, ran '$(cat "$RAN_LOG" 2>/dev/null)', $(ls -A "$work/own")"
echo "  claim: new and empty folders get the marker, own earlier outputs are accepted (context_cost.sh and"
echo "  quickstart.sh go on to their build), links, files and other scripts' folders are refused"

# 3. pf_run: the script's children die with it.
cat > "$work/parent.sh" <<EOF
set -euo pipefail
PF_SCRIPT=parent.sh
source "$repo/launch/scripts/output_dir.sh"
pf_run bash -c '\$0 -c "trap \"\" TERM; sleep 1000" & echo \$! > "$work/grandchild.pid"; echo \$\$ > "$work/child.pid"; wait' "\$CHILD_SHELL"
echo "pf_run returned" >&2
EOF
alive() { local line; read -r line 2>/dev/null < "/proc/$1/stat" || return 1; line=${line##*) }; [ "${line%% *}" != Z ]; }
for sig in TERM INT HUP; do
  rm -f "$work"/*.pid
  # SIGINT is ignored in a background job of a script; the parent gets it back.
  CHILD_SHELL=bash PF_STOP_GRACE_S=1 "$py" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp("bash", ["bash", sys.argv[1]])' "$work/parent.sh" 2> "$work/err.txt" &
  parent=$!
  for _ in $(seq 100); do [ -s "$work/grandchild.pid" ] && [ -s "$work/child.pid" ] && break; sleep 0.05; done
  child=$(cat "$work/child.pid") grandchild=$(cat "$work/grandchild.pid")
  t0=$(date +%s)
  kill -s "$sig" "$parent"
  for _ in $(seq 200); do alive "$parent" || break; sleep 0.1; done
  if alive "$parent"; then
    fail "SIG$sig: the script still runs 20 s after the signal"
    kill -KILL "$parent" "$child" "$grandchild" 2>/dev/null || true
  fi
  rc=0
  wait "$parent" || rc=$?
  want=$((128 + $(kill -l "$sig")))
  sleep 0.2
  if [ "$rc" != "$want" ]; then
    fail "SIG$sig: the script exited $rc, want $want: $(cat "$work/err.txt")"
  elif alive "$child" || alive "$grandchild"; then
    fail "SIG$sig: left running: $(alive "$child" && echo "child $child") $(alive "$grandchild" && echo "grandchild $grandchild")"
    kill -KILL "$child" "$grandchild" 2>/dev/null || true
  elif grep -q "pf_run returned" "$work/err.txt"; then
    fail "SIG$sig: the script went on after the signal"
  else
    echo "  SIG$sig: exit $rc in $(( $(date +%s) - t0 )) s, the child and a grandchild that ignores SIGTERM are gone"
  fi
done

# 4. indelible_families.py: sizes bounded when parsing.
for args in "--members 100000000" "--indel-max 10000000" "--gamma-categories 100000" "--indel-rate 10"; do
  rc=0
  "$py" "$studies/indelible_families.py" "$work/none.fasta" "$work/fam" $args > /dev/null 2> "$work/err.txt" || rc=$?
  if [ "$rc" != 2 ] || ! grep -qF -- "$args" "$work/err.txt" || [ -e "$work/fam" ]; then
    fail "indelible_families.py $args: exit $rc, $(cat "$work/err.txt")"
  else
    echo "  $(tail -1 "$work/err.txt")"
  fi
done

if [ "$failures" != 0 ]; then
  echo "FAIL: $failures check(s) of the output rule failed"
  exit 1
fi
echo "PASS: every study script and quickstart.sh refuses a folder of the user's before starting anything," \
  "accepts its own; children die with the script; indelible_families.py sizes bounded"
