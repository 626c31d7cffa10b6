#!/usr/bin/env bash
# performer-export's output rule, the checkpoint reader's content checks and
# the export loader's, on checkpoints the checks write with h5py (no C++ tools
# needed).
#   export_output_test.sh <python>
# Exit 77 (skipped) when <python> lacks torch, h5py, numpy or safetensors.
set -euo pipefail
py=$1
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/package_env.sh"
export OMP_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/pf-export-output.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" "$here/export_output_checks.py" "$work"
