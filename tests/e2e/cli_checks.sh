# Shared by the command-line test scripts of this folder (sourced). Needs
# $dir (the script's temporary folder).
#   fail MESSAGE        counts a failure; exits unless KEEP_GOING=1
#   expect_status NAME STATUS TEXT... -- COMMAND...
#                       runs COMMAND: that exit status (never a crash) and
#                       every TEXT in its output
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
  [ -n "${KEEP_GOING:-}" ] || exit 1
}
expect_status() {
  local name=$1 want=$2; shift 2
  local texts=()
  while [ "$1" != "--" ]; do texts+=("$1"); shift; done
  shift
  local rc=0
  "$@" > "$dir/out" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || { tail -3 "$dir/out"; fail "$name: exit status $rc, expected $want"; return; }
  for t in "${texts[@]}"; do
    grep -qF -- "$t" "$dir/out" || { tail -3 "$dir/out"; fail "$name: the message does not say '$t'"; return; }
  done
  echo "ok: $name: exit $rc, $(grep -m1 -F -- "${texts[0]}" "$dir/out" | cut -c1-200)"
}
