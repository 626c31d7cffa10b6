#!/usr/bin/env bash
# The frame of the MPI tools (launch/core/mpi_program.h) with a ConfigError:
# raised by every rank, the job exits 2 with the message once; raised by one
# rank while the others wait in a collective, the job ends (no hang) with a
# non-zero status and the message naming that rank.
# Usage: mpi_program_test.sh CONFIG_ERROR_RANKS MPIEXEC [MPIEXEC FLAGS...]
set -euo pipefail
program=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

status=0
timeout 120 "$@" -n 2 "$program" all > "$work/out.txt" 2>&1 || status=$?
[ "$status" = 2 ] || fail "every rank refusing: exit $status, expected 2: $(cat "$work/out.txt")"
[ "$(grep -c "config_error_ranks: the value of key x is refused" "$work/out.txt")" = 1 ] ||
  fail "every rank refusing: the message once expected: $(cat "$work/out.txt")"

status=0
timeout 120 "$@" -n 2 "$program" last > "$work/out.txt" 2>&1 || status=$?
[ "$status" != 124 ] || fail "one rank refusing: the job hung (killed after 120 s)"
[ "$status" != 0 ] || fail "one rank refusing: exit 0"
grep -q "config_error_ranks: error on rank 1: the value of key x is refused" "$work/out.txt" ||
  fail "one rank refusing: the message does not name the rank: $(cat "$work/out.txt")"
echo "PASS: a ConfigError of every rank exits 2; of one rank ends the job (exit $status)"
