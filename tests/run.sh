#!/usr/bin/env bash
# The test command: installs dependencies, builds (CPU backend, plus CUDA for
# one architecture when nvcc exists), and runs the whole suite with ctest.
# GPU tests show as skipped on machines without a GPU.
#   BUILD_DIR   build folder (default: build)
#   JOBS        parallel build jobs (default: number of cores)
#   CUDA_ARCH   CMAKE_CUDA_ARCHITECTURES (default: 90)
#   PF_SKIP_PYTHON=1  test without the Python package's venv (its tests skip)
# The AddressSanitizer build of performer-train and performer-data for the
# signal tests goes to BUILD_DIR-asan.
set -euo pipefail
cd "$(dirname "$0")/.."
launch/scripts/install_deps.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# Open MPI refuses root without these; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The Python package's environment. Without it the Python tests would be
# skipped, so a failure stops here unless PF_SKIP_PYTHON=1 asks for that.
if [ "${PF_SKIP_PYTHON:-0}" = 1 ]; then
  echo "tests/run.sh: PF_SKIP_PYTHON=1: no Python environment; python_golden, python_export_output and python_data_reader will be skipped"
elif ! launch/python/make_venv.sh "$BUILD_DIR/python-venv"; then
  echo "tests/run.sh: error: launch/python/make_venv.sh failed (above; it needs PyPI for safetensors)." >&2
  echo "  Rerun with PF_SKIP_PYTHON=1 to test without the Python package (its tests are then skipped)." >&2
  exit 1
fi
# The signal tests' AddressSanitizer build of the trainer and the data tool
# (CPU only, -O1 to build faster): e2e_signal_stress_asan runs it.
ASAN_DIR=$(realpath -m "$BUILD_DIR-asan")
cmake -S . -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DPF_CUDA=OFF \
  -DPF_SANITIZE=address -DPF_BUILD_TESTS=OFF -DPF_BUILD_BENCH=OFF
cmake --build "$ASAN_DIR" -j "$JOBS" --target performer-train performer-data
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
  -DPF_ASAN_TOOLS_DIR="$ASAN_DIR/launch"
cmake --build "$BUILD_DIR" -j "$JOBS"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" --timeout 900
