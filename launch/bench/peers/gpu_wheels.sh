#!/usr/bin/env bash
# Downloads the wheels of the GPU peers (launch/bench/peers/gpu_attention.py)
# for a GPU machine that cannot reach a package index: pure-Python wheels
# for CPython 3.12, without their dependencies (the machine's own torch,
# Triton, einops and transformers are used), into .whl/ at the repository
# root (git-ignored), which tests/gpu/run.sh installs into a private folder.
#
#   launch/bench/peers/gpu_wheels.sh [DIR]
#
# flash-linear-attention (fla-core: the Triton kernels; the package itself
# for its layers), performer-pytorch and what it imports (local-attention,
# axial-positional-embedding, hyper-connections, torch-einops-utils).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
DIR="${1:-$REPO/.whl}"
mkdir -p "$DIR"
# Only this list's wheels: tests/gpu/run.sh installs every *.whl in DIR, and
# two versions of one package would stop that install.
rm -f "$DIR"/*.whl
wheels=(
  fla-core==0.6.0
  flash-linear-attention==0.6.0
  performer-pytorch==1.1.4
  local-attention==1.11.2
  axial-positional-embedding==0.3.12
  hyper-connections==0.4.11
  torch-einops-utils==0.2.0
)
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$DIR" "${wheels[@]}"
ls -l "$DIR"
