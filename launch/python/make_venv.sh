#!/usr/bin/env bash
# Makes the Python environment of the package: a venv over Debian's
# python3-torch, python3-h5py and python3-numpy (--system-site-packages),
# safetensors and transformers from PyPI and this package, installed from this folder (again
# on every run, so the venv holds the checked-out code).
#   launch/python/make_venv.sh VENV        e.g. build/python-venv
# Needs python3-venv and python3-torch (launch/scripts/install_deps.sh).
set -euo pipefail
venv=${1:?usage: make_venv.sh VENV}
here=$(cd "$(dirname "$0")" && pwd)
python=${PF_SYSTEM_PYTHON:-/usr/bin/python3}   # Debian's interpreter: its site packages hold torch
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python" -c "import safetensors" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check "safetensors>=0.4,<1"
fi
# transformers for AutoModel.from_pretrained of an export: 4.49 is the newest
# that runs on Debian's torch 1.13 (4.50 needs torch.distributed.tensor, 4.57
# disables torch < 2.1). Optional: the golden tests say when it is absent.
if ! "$venv/bin/python" -c "import transformers" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check "transformers>=4.46,<4.50" ||
    echo "make_venv: warning: transformers did not install; exports still load with performer_protein"
fi
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$here"
"$venv/bin/python" -c "import performer_protein, torch, h5py, safetensors; print('make_venv: performer_protein in $venv (torch', torch.__version__ + ')')"
