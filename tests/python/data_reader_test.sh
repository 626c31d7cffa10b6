#!/usr/bin/env bash
# The package's data file reader against files the checks write with h5py
# (no C++ tools needed).
#   data_reader_test.sh <python>
# Exit 77 (skipped) when <python> lacks torch, h5py, numpy or safetensors.
set -euo pipefail
py=$1
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/package_env.sh"
export OMP_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/pf-data-reader.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" "$here/data_reader_checks.py" "$work"
