#!/usr/bin/env bash
# Installs the two public peers of our FAVOR+ kernels, for the side-by-side
# harness in this folder (run.sh). Nothing in the build or CI uses them.
#
#   launch/bench/peers/install.sh            (Debian 12; root, or sudo for apt-get)
#
# - apt-get: Debian's python3-torch (1.13, CPU only, BLAS = Debian's OpenBLAS)
#   and libtorch-dev (the C++ headers torch.utils.cpp_extension compiles
#   against), pybind11-dev (which torch/extension.h includes, and which
#   libtorch-dev only recommends), python3-setuptools (which
#   torch.utils.cpp_extension imports), python3-venv, python3-dev, g++,
#   ninja-build;
# - a virtual environment over Debian's /usr/bin/python3 (not a pyenv or
#   conda python on PATH) with --system-site-packages, so Debian's torch is
#   the torch it imports, in $PEERS_DIR/venv (default: .peers/ at the
#   repository root, git-ignored);
# - from PyPI, all with --no-deps (pip never touches torch; a constraint file
#   pins it to Debian's version as a second guard): performer-pytorch and its
#   small pure-Python dependencies (einops, local-attention,
#   axial-positional-embedding, at versions of performer-pytorch's time that
#   run on torch 1.13), and pytorch-fast-transformers, whose setup.py is
#   replaced by one that builds only the CPU causal-product extension
#   (fast_transformers.causal_product.causal_product_cpu). Its other CPU
#   extensions and all its CUDA extensions are not built (the upstream
#   setup.py builds every CUDA extension whenever nvcc is on PATH).
# Re-running is safe: it recreates nothing that is already in place except
# the fast-transformers build.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
PEERS_DIR="${PEERS_DIR:-$REPO/.peers}"
VENV="$PEERS_DIR/venv"
SYS_PY=/usr/bin/python3

PERFORMER_PYTORCH_VERSION=1.1.4
FAST_TRANSFORMERS_VERSION=0.4.0
EINOPS_VERSION=0.6.1
LOCAL_ATTENTION_VERSION=1.4.4
AXIAL_POS_VERSION=0.2.1

die() { echo "install.sh: $*" >&2; exit 1; }

[[ -r /etc/debian_version ]] || die "this script targets Debian 12 (no /etc/debian_version)"
case "$(cut -d. -f1 /etc/debian_version)" in
  12) ;;
  *) echo "install.sh: warning: Debian $(cat /etc/debian_version), tested on 12 only" >&2 ;;
esac

# --- 1. Debian packages -------------------------------------------------------
APT_PACKAGES=(python3-torch libtorch-dev pybind11-dev python3-setuptools python3-venv python3-dev g++ ninja-build time)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install.sh: apt-get install ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then SUDO=(); elif command -v sudo >/dev/null; then SUDO=(sudo); else
    die "need root or sudo to run: apt-get install ${missing[*]}"
  fi
  "${SUDO[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
TORCH_DEB="$(dpkg-query -W -f='${Version}' python3-torch)"

# Debian's torch must import from Debian's python, and its headers must be there.
"$SYS_PY" - <<'EOF' || die "Debian's torch does not import from /usr/bin/python3"
import torch, torch.utils.cpp_extension as ce, os
assert torch.__file__.startswith("/usr/lib/python3/dist-packages/"), torch.__file__
inc = ce.include_paths()[0]
assert os.path.exists(os.path.join(inc, "torch", "extension.h")), "no torch/extension.h under " + inc + " (libtorch-dev)"
assert os.path.exists("/usr/include/pybind11/pybind11.h"), "no /usr/include/pybind11/pybind11.h (pybind11-dev)"
EOF

# --- 2. the virtual environment -----------------------------------------------
mkdir -p "$PEERS_DIR"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "install.sh: creating $VENV over $SYS_PY (--system-site-packages)"
  "$SYS_PY" -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"
TORCH_PY_VERSION="$("$PY" -c 'import torch; print(torch.__version__)')"
printf 'torch==%s\n' "$TORCH_PY_VERSION" >"$PEERS_DIR/constraints.txt"
PIP=("$PY" -m pip --disable-pip-version-check)
PIPI=("${PIP[@]}" install --no-deps --constraint "$PEERS_DIR/constraints.txt")

# --- 3. performer-pytorch and its pure-Python dependencies ----------------------
"${PIPI[@]}" "einops==$EINOPS_VERSION" "local-attention==$LOCAL_ATTENTION_VERSION" \
  "axial-positional-embedding==$AXIAL_POS_VERSION" "performer-pytorch==$PERFORMER_PYTORCH_VERSION"

# --- 4. pytorch-fast-transformers: CPU causal product only ---------------------
SRC="$PEERS_DIR/src"
rm -rf "$SRC" && mkdir -p "$SRC"
# The sdist's setup.py imports torch to build its metadata: no build isolation,
# so it sees Debian's torch through the venv.
"${PIP[@]}" download --no-deps --no-binary :all: --no-build-isolation -d "$SRC" \
  "pytorch-fast-transformers==$FAST_TRANSFORMERS_VERSION"
tar -xzf "$SRC/pytorch-fast-transformers-$FAST_TRANSFORMERS_VERSION.tar.gz" -C "$SRC"
FT="$SRC/pytorch-fast-transformers-$FAST_TRANSFORMERS_VERSION"
mv "$FT/setup.py" "$FT/setup.py.upstream"
cat >"$FT/setup.py" <<'EOF'
# Written by launch/bench/peers/install.sh in place of the upstream setup.py
# (kept as setup.py.upstream): the same package, version and Python modules,
# but only the CPU causal-product extension, with upstream's compile flags.
from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

version = None
with open("fast_transformers/__init__.py") as f:
    for line in f:
        if line.startswith("__version__"):
            version = line.split("=")[1].strip().strip('"')
setup(
    name="pytorch-fast-transformers",
    version=version,
    packages=find_packages(exclude=["docs", "tests", "scripts", "examples"]),
    ext_modules=[
        CppExtension(
            "fast_transformers.causal_product.causal_product_cpu",
            sources=["fast_transformers/causal_product/causal_product_cpu.cpp"],
            extra_compile_args=["-fopenmp", "-ffast-math"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
EOF
rm -rf "$FT"/*.egg-info
echo "install.sh: building fast_transformers.causal_product.causal_product_cpu against Debian's torch"
(cd "$FT" && MAX_JOBS="${MAX_JOBS:-2}" "${PIPI[@]}" --no-build-isolation --no-cache-dir .)

# --- 5. check and report --------------------------------------------------------
"$PY" - "$TORCH_DEB" <<'EOF'
import importlib, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
assert torch.__file__.startswith("/usr/lib/python3/dist-packages/"), "torch is not Debian's: " + torch.__file__
from importlib.metadata import version
import fast_transformers.causal_product as cp
import fast_transformers, performer_pytorch
print("install.sh: installed")
print(f"  python               {sys.executable} ({sys.version.split()[0]}, base {sys.base_prefix})")
print(f"  torch                {torch.__version__} (Debian python3-torch {sys.argv[1]}) from {os.path.dirname(torch.__file__)}")
for d in ["performer-pytorch", "pytorch-fast-transformers", "einops", "local-attention", "axial-positional-embedding"]:
    print(f"  {d:<20} {version(d)}")
print(f"  fast_transformers extension: {cp.causal_dot_product_cpu.__module__} "
      f"({os.path.basename(importlib.import_module('fast_transformers.causal_product.causal_product_cpu').__file__)})")
print(f"  fast_transformers CUDA causal product: {'built' if cp.causal_dot_product_cuda else 'not built (CPU-only install)'}")
EOF
echo "install.sh: done. Run: launch/bench/peers/run.sh \$BUILD_DIR \$OUT_DIR"
