#!/usr/bin/env bash
# Unpacks the .deb files of tests/gpu/pack_deps.sh into a private prefix (never
# into /) on a machine that cannot install packages, and writes the
# environment and CMake settings that make the build and mpiexec use them.
#   tests/gpu/unpack_deps.sh DEBS PREFIX ENV_FILE
# Does nothing (and writes an empty ENV_FILE) when the machine already has
# MPI, HDF5 and GoogleTest; fails naming what is missing when DEBS has no
# .deb files.
set -euo pipefail
debs=$1 prefix=$2 env_file=$3
: >"$env_file"
have() { command -v "$1" >/dev/null 2>&1; }
if have mpiexec && { have h5cc || [ -e /usr/include/hdf5/serial/hdf5.h ] || [ -e /usr/include/hdf5.h ]; } &&
   [ -e /usr/include/gtest/gtest.h ]; then
  echo "unpack_deps: MPI, HDF5 and GoogleTest are installed; nothing to unpack"
  exit 0
fi
shopt -s nullglob
files=("$debs"/*.deb)
if [ ${#files[@]} -eq 0 ]; then
  echo "unpack_deps: this machine lacks MPI, HDF5 or GoogleTest and $debs has no .deb files" >&2
  echo "  (make them on a Debian 12 machine with tests/gpu/pack_deps.sh and carry the folder)" >&2
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
cat >"$env_file" <<ENV
export PATH="$usr/bin:\$PATH"
export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread:$lib/hdf5/serial/lib:$lib/openmpi/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
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
export PF_CMAKE_ARGS="-DMPI_C_COMPILER=$usr/bin/mpicc -DMPI_CXX_COMPILER=$usr/bin/mpicxx -DMPIEXEC_EXECUTABLE=$usr/bin/mpiexec -DBLAS_LIBRARIES=$lib/openblas-pthread/libblas.so -DPF_CBLAS_INCLUDE_DIR=$usr/include/x86_64-linux-gnu/openblas-pthread"
ENV
echo "unpack_deps: ${#files[@]} packages unpacked into $prefix"
