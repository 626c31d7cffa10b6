# Sourced by the tests of this folder, with $py (the interpreter) and $repo
# (the checkout) set: exits 77 (skipped) when $py lacks torch, h5py, numpy or
# safetensors, and puts this checkout's package first on PYTHONPATH.
if ! "$py" -c "import torch, h5py, numpy, safetensors" 2>/dev/null; then
  echo "SKIP: '$py' cannot import torch, h5py, numpy and safetensors (tests/run.sh makes that venv:"
  echo "      launch/python/make_venv.sh build/python-venv)"
  exit 77
fi
export PYTHONPATH="$repo/launch/python${PYTHONPATH:+:$PYTHONPATH}"
