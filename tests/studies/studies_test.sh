#!/usr/bin/env bash
# Tests of the study scripts (CMakeLists.txt of this folder says what each checks).
#   studies_test.sh <python3> indelible_families|aligned_copy|attention_rank|output_rule
# Exit 77 (skipped) when <python3>, indelible, the UniProt example data or
# h5py is missing; run by hand the same way.
set -euo pipefail
py=$1; which=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
"$py" -c 'import sys; assert sys.version_info >= (3, 8)' 2>/dev/null || skip "no Python 3.8+ at '$py' (set PF_STUDY_PYTHON)"
work=$(mktemp -d "${TMPDIR:-/tmp}/pf-studies.XXXXXX")
[ -n "${PF_STUDIES_KEEP:-}" ] && echo "studies_test: keeping $work" || trap 'rm -rf "$work"' EXIT
case "$which" in
  indelible_families)
    command -v indelible > /dev/null || skip "indelible is not installed (launch/scripts/install_deps.sh installs it)"
    roots=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
    [ -f "$roots" ] || skip "$roots is missing (package mmseqs2-examples)"
    "$py" "$here/indelible_families_checks.py" "$repo/launch/studies/indelible_families.py" "$roots" "$work" ;;
  aligned_copy)
    "$py" -c 'import h5py, numpy' 2>/dev/null || skip "$py lacks h5py or numpy (python3-h5py, python3-numpy)"
    "$py" "$here/aligned_copy_checks.py" "$repo/launch/studies" "$work" ;;
  attention_rank)
    "$py" -c 'import h5py, numpy, torch' 2>/dev/null || skip "$py lacks h5py, numpy or torch (python3-h5py, python3-numpy, python3-torch)"
    PYTHONPATH="$repo/launch/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 \
      "$py" "$here/attention_rank_checks.py" "$repo/launch/studies" "$work" ;;
  output_rule)
    bash "$here/output_rule_test.sh" "$py" "$repo" "$work" ;;
  *) echo "studies_test.sh: unknown test '$which'" >&2; exit 2 ;;
esac
