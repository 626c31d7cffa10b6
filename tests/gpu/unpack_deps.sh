#!/usr/bin/env bash
# Unpacks the .deb files of tests/gpu/pack_deps.sh into a private prefix (never
# into /) on a machine that cannot install packages, and writes the
# environment and CMake settings that make the build and mpiexec use them
# without putting the libraries in front of the system's for other programs.
# Refuses (naming the package) when the machine's glibc is older than the
# packages need.
#   tests/gpu/unpack_deps.sh DEBS PREFIX ENV_FILE
# First it checks every build dependency where CMake looks for it
# (tests/gpu/deps.sh: MPI, HDF5, zlib, GoogleTest, CLI11, toml++,
# nlohmann-json, OpenBLAS, and NCCL where nvcc exists). When none is missing
# it does nothing and writes an empty ENV_FILE (PF_DEPS_FORCE=1 unpacks the
# .deb files all the same). When one of the .deb-packed ones is missing it
# unpacks all the .deb files; when NCCL is missing it copies DEBS/nccl into
# the prefix and points NCCL_ROOT at it. It fails naming what is missing when
# DEBS lacks what would supply it.
set -euo pipefail
debs=$1 prefix=$2 env_file=$3
: >"$env_file"
. "$(dirname "$0")/deps.sh"
missing=$(missing_deps)
need_nccl=0 need_debs=0
for dep in $missing; do
  if [ "$dep" = NCCL ]; then need_nccl=1; else need_debs=1; fi
done
[ "${PF_DEPS_FORCE:-0}" = 1 ] && need_debs=1
if [ "$need_debs$need_nccl" = 00 ]; then
  echo "unpack_deps: MPI, HDF5, zlib, GoogleTest, CLI11, toml++, nlohmann-json, OpenBLAS and" \
    "$([ -n "$(find_nvcc)" ] && echo "NCCL" || echo "(no nvcc, so no need of) NCCL") are installed; nothing to unpack"
  exit 0
fi
echo "unpack_deps: this machine lacks: ${missing:-nothing (PF_DEPS_FORCE=1)}"
shopt -s nullglob
files=("$debs"/*.deb)
nccl_libs=("$debs"/nccl/lib/libnccl.so*)
if [ "$need_nccl" = 1 ] && { [ ! -f "$debs/nccl/include/nccl.h" ] || [ ${#nccl_libs[@]} -eq 0 ]; }; then
  echo "unpack_deps: this machine lacks NCCL (nvcc is $(find_nvcc)) and $debs/nccl has no include/nccl.h and" \
    "lib/libnccl.so* (tests/gpu/pack_deps.sh packs the NCCL of the machine it runs on)" >&2
  exit 1
fi
if [ "$need_debs" = 1 ] && [ ${#files[@]} -eq 0 ]; then
  echo "unpack_deps: this machine lacks ${missing:-what PF_DEPS_FORCE=1 asks for} and $debs has no .deb files" >&2
  echo "  (make them on a Debian 12 machine with tests/gpu/pack_deps.sh and carry the folder)" >&2
  exit 1
fi

# NCCL as packed: nccl.h and libnccl.so*, found by cmake/cuda.cmake through
# NCCL_ROOT; the build's RPATH then holds its folder (CMake adds the folder of
# every library linked by its path).
copy_nccl() {
  rm -rf "$prefix/nccl"
  mkdir -p "$prefix/nccl"
  cp -a "$debs/nccl/include" "$debs/nccl/lib" "$prefix/nccl/" || { echo "unpack_deps: cannot copy $debs/nccl" >&2; exit 1; }
  echo "export NCCL_ROOT=\"$prefix/nccl\"" >>"$env_file"
  echo "unpack_deps: NCCL $(nccl_version "$prefix/nccl/include/nccl.h") copied into $prefix/nccl" \
    "($(cat "$debs/nccl/SOURCE" 2>/dev/null || echo "source not recorded"))"
}

if [ "$need_debs" = 0 ]; then
  copy_nccl
  exit 0
fi

# The packages were built against some glibc (Debian 12: 2.36); on an older
# one every program of theirs fails to load, so say so now, naming the package.
have_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
need_glibc=0 need_pkg=""
for f in "${files[@]}"; do
  v=$(dpkg-deb -f "$f" Depends 2>/dev/null | grep -o 'libc6 (>= [0-9.]*)' | sed 's/.*>= //; s/)//' | sort -V | tail -1 || true)
  if [ -n "$v" ] && [ "$(printf '%s\n%s\n' "$need_glibc" "$v" | sort -V | tail -1)" = "$v" ] && [ "$v" != "$need_glibc" ]; then
    need_glibc=$v need_pkg=$(basename "$f")
  fi
done
echo "unpack_deps: the packages need glibc >= $need_glibc ($need_pkg); this machine has ${have_glibc:-unknown}"
if [ -z "$have_glibc" ] || [ "$(printf '%s\n%s\n' "$have_glibc" "$need_glibc" | sort -V | head -1)" != "$need_glibc" ]; then
  echo "unpack_deps: this machine's glibc ${have_glibc:-unknown} is older than the $need_glibc that $need_pkg needs:" >&2
  echo "  make the folder with tests/gpu/pack_deps.sh on a release with that glibc or older, or install what" >&2
  echo "  this machine lacks (${missing:-nothing: PF_DEPS_FORCE=1}) here" >&2
  exit 1
fi
mkdir -p "$prefix"
for f in "${files[@]}"; do dpkg-deb -x "$f" "$prefix" || { echo "unpack_deps: cannot unpack $f" >&2; exit 1; }; done
usr=$prefix/usr
lib=$usr/lib/x86_64-linux-gnu
# The links Debian's maintainer scripts would have made (update-alternatives).
link() { [ -e "$2" ] || ln -sf "$1" "$2"; }
for tool in mpicc mpicxx mpic++ mpiexec mpirun; do
  [ -e "$usr/bin/$tool.openmpi" ] && link "$tool.openmpi" "$usr/bin/$tool"
done
for blas in libblas.so.3 libblas.so libcblas.so.3 libcblas.so liblapack.so.3; do
  [ -e "$lib/openblas-pthread/$blas" ] && link "openblas-pthread/$blas" "$lib/$blas"
done
# The libraries stay out of every other program's way: the tools the build
# and the steps call (MPI's launcher and compiler wrappers, pkg-config) run
# through wrappers that set LD_LIBRARY_PATH for themselves (and so for the
# ranks mpiexec starts), and the project's programs find them through the
# RPATH of the build (DT_RPATH; -rpath-link lets CMake's own test programs
# link). Python, CMake and the compilers see the system's libraries.
libs="$lib:$lib/openblas-pthread:$lib/hdf5/serial/lib:$lib/openmpi/lib"
# Debian's Open MPI objects carry DT_RUNPATH /usr/lib/x86_64-linux-gnu/openmpi/lib,
# and an object with a RUNPATH makes the loader skip the program's RPATH for
# its own dependencies (libopen-pal, libhwloc, the plugins' libraries): make
# them RPATHs of the prefix's folders, which also serve their dependencies'
# dependencies (orted -> libopen-pal -> libevent in a singleton MPI_Init).
[ -x "$usr/bin/patchelf" ] || {
  echo "unpack_deps: $debs has no patchelf package (made by an older pack_deps.sh?); make it again" >&2
  exit 1
}
find "$lib" "$usr/bin" -type f | while read -r f; do
  r=$("$usr/bin/patchelf" --print-rpath "$f" 2>/dev/null) || continue
  case "$r" in
    */usr/lib/*)
      "$usr/bin/patchelf" --force-rpath --set-rpath "$libs:${r//\/usr\/lib/$usr/lib}" "$f" ||
        { echo "unpack_deps: patchelf could not rewrite the run path of $f" >&2; exit 1; } ;;
  esac
done
wrap=$prefix/wrap
mkdir -p "$wrap"
for tool in mpiexec mpirun mpicc mpicxx mpic++ ompi_info pkg-config pkgconf; do
  real=$usr/bin/$tool
  [ -e "$real" ] || continue
  cat >"$wrap/$tool" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$real" "\$@"
WRAP
  chmod +x "$wrap/$tool"
done
cat >"$env_file" <<ENV
export PATH="$wrap:\$PATH"
export OPAL_PREFIX="$usr"
export PMIX_INSTALL_PREFIX="$lib/pmix2"
export OMPI_MCA_mca_base_component_show_load_errors=0
ENV
# Open MPI wants an ssh or rsh even when every rank runs on this machine.
if ! command -v ssh >/dev/null && ! command -v rsh >/dev/null; then
  echo 'export OMPI_MCA_plm_rsh_agent=false' >>"$env_file"
fi
cat >>"$env_file" <<ENV
export CMAKE_PREFIX_PATH="$usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$lib/pkgconfig:$usr/share/pkgconfig"
export HDF5_ROOT="$lib/hdf5/serial"
export PF_CMAKE_ARGS="-DMPI_C_COMPILER=$wrap/mpicc -DMPI_CXX_COMPILER=$wrap/mpicxx -DMPIEXEC_EXECUTABLE=$wrap/mpiexec -DPKG_CONFIG_EXECUTABLE=$wrap/pkg-config -DBLAS_LIBRARIES=$lib/openblas-pthread/libblas.so -DPF_CBLAS_INCLUDE_DIR=$usr/include/x86_64-linux-gnu/openblas-pthread -DCMAKE_BUILD_RPATH=${libs//:/;} -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath-link,$libs"
ENV
echo "unpack_deps: ${#files[@]} packages unpacked into $prefix"
[ "$need_nccl" = 0 ] || copy_nccl
