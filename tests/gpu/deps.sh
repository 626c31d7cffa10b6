# The build's dependencies, looked for where cmake/dependencies.cmake and
# cmake/cuda.cmake look (sourced, not run): one answer for the GPU script's
# preflight, tests/gpu/unpack_deps.sh (whether to unpack) and
# tests/gpu/pack_deps.sh (which NCCL to pack).

deps_have() { command -v "$1" >/dev/null 2>&1; }
deps_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }
deps_any() {  # deps_any FILE...: one of them exists
  local f
  for f in "$@"; do [ -e "$f" ] && return 0; done
  return 1
}

# The nvcc cmake/cuda.cmake would use: on PATH, else /usr/local/cuda/bin/nvcc.
find_nvcc() {
  command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true
}

# "HEADER LIBRARY" of the first NCCL (include/nccl.h beside lib/libnccl.so*)
# in NCCL_ROOT, NCCL_HOME, the CUDA toolkit of nvcc, /usr/local/cuda, the
# system, or the nvidia-nccl-cu* wheel (nvidia/nccl/{include,lib}); nothing
# when there is none.
find_nccl() {
  local nvcc toolkit="" wheel root lib
  nvcc=$(find_nvcc)
  [ -n "$nvcc" ] && toolkit=$(cd "$(dirname "$nvcc")/.." && pwd -P)
  wheel=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  for root in "${NCCL_ROOT:-}" "${NCCL_HOME:-}" "$toolkit" /usr/local/cuda /usr "$wheel"; do
    [ -n "$root" ] && [ -f "$root/include/nccl.h" ] || continue
    for lib in "$root"/lib/libnccl.so* "$root"/lib64/libnccl.so* "$root"/lib/x86_64-linux-gnu/libnccl.so*; do
      [ -e "$lib" ] && { echo "$root/include/nccl.h $lib"; return 0; }
    done
  done
}

# The version nccl.h declares, as MAJOR.MINOR.PATCH.
nccl_version() {
  awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep = "."}' "$1"
}

# The names of the build's dependencies this machine lacks, on one line:
# those of cmake/dependencies.cmake (OpenBLAS is required; oneDNN is optional,
# used when present, so it is never missing), and NCCL where nvcc exists
# (cmake/cuda.cmake then builds the CUDA backend, which needs it).
missing_deps() {
  local m=()
  { deps_have mpiexec && deps_have mpicxx; } || m+=(MPI)
  { deps_have h5cc || deps_header hdf5/serial/hdf5.h || deps_header hdf5.h; } || m+=(HDF5)
  deps_header zlib.h || m+=(zlib)
  deps_header gtest/gtest.h || m+=(GoogleTest)
  deps_header CLI/CLI.hpp || m+=(CLI11)
  { deps_have pkg-config && pkg-config --exists tomlplusplus; } || m+=(toml++)
  deps_header nlohmann/json.hpp || m+=(nlohmann-json)
  { deps_any /usr/lib/x86_64-linux-gnu/libopenblas.so /usr/lib64/libopenblas.so /usr/local/lib/libopenblas.so &&
    deps_any /usr/include/x86_64-linux-gnu/openblas*/cblas.h /usr/include/openblas/cblas.h /usr/include/cblas.h \
             /usr/local/include/cblas.h; } || m+=(OpenBLAS)
  [ -z "$(find_nvcc)" ] || [ -n "$(find_nccl)" ] || m+=(NCCL)
  echo "${m[*]}"
}
