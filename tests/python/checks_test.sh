#!/usr/bin/env bash
# Runs one checks script of the package's tests (no C++ tools needed) with a
# temporary folder for the files it writes, removed afterwards.
#   checks_test.sh <python> <checks script>
# Exit 77 (skipped) when <python> lacks torch, h5py, numpy or safetensors.
set -euo pipefail
py=$1 checks=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/package_env.sh"
export OMP_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/pf-$(basename "$checks" .py).XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" "$checks" "$work"
