#!/usr/bin/env bash
# Run on a Debian 12 machine with network access: downloads the .deb files of
# the libraries the build needs (MPI, HDF5, BLAS, GoogleTest, CLI11, toml++,
# nlohmann-json, zlib) with their dependencies into a folder, for a GPU
# machine that cannot install packages, and, with PF_PACK_NCCL=1, copies this
# machine's NCCL (nccl.h and libnccl.so*, found as cmake/cuda.cmake finds it;
# Debian 12 has no NCCL package) into FOLDER/nccl. tests/gpu/run.sh unpacks them into a
# private prefix there (tests/gpu/unpack_deps.sh), NCCL only when that
# machine has none; the machine must bring the compiler, CMake, Python and
# the CUDA toolkit itself. NCCL's library holds code for every GPU
# architecture (218 MB for NCCL 2.28 of CUDA 13), more than the 64 MiB a
# remote GPU machine's working tree may carry, so it is left out unless
# PF_PACK_NCCL=1: the remote machine's image has NCCL (the nvidia-nccl wheel,
# which cmake/cuda.cmake and the preflight find).
#   tests/gpu/pack_deps.sh [FOLDER]     default FOLDER: .gpu-deps (git-ignored)
# Left out: packages every Debian/Ubuntu system has (priority required or
# important: the C library, libstdc++, ...) and the toolchain (compilers,
# binutils, Perl), which a prefix must not shadow.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$repo/.gpu-deps}
. "$repo/tests/gpu/deps.sh"
# NCCL first: a machine that has none cannot make a complete folder.
nccl=""
if [ "${PF_PACK_NCCL:-0}" = 1 ]; then
  nccl=$(find_nccl)
  [ -n "$nccl" ] || {
    echo "pack_deps: no NCCL here (nccl.h beside libnccl.so* in NCCL_ROOT, NCCL_HOME, the CUDA toolkit, /usr or" \
      "the nvidia-nccl wheel); set NCCL_ROOT, or leave PF_PACK_NCCL unset for a GPU machine that has NCCL" >&2
    exit 1
  }
fi
packages=(libopenmpi-dev openmpi-bin libhdf5-dev libgtest-dev libgmock-dev libcli11-dev libtomlplusplus-dev
          nlohmann-json3-dev zlib1g-dev libopenblas-dev pkgconf patchelf)
toolchain='^(gcc|g\+\+|cpp|gfortran)(-[0-9]+)?$|^lib(gcc|stdc\+\+|gfortran|objc|go)-[0-9]+-dev$|^binutils|^libbinutils|^libctf|^libgprofng|^lib(a|t|l|ub|hwa)san[0-9]|^libitm|^libcc1|^libmpfr|^libmpc|^libisl|^libc6-dev$|^libc-dev-bin$|^linux-libc-dev$|^lib(crypt|nsl|tirpc)-dev$|^rpcsvc-proto$|^perl|^libperl|^openssh|^auto(make|conf|tools-dev)$|^m4$|^make$|^patch$|^lib(c6|c-bin|stdc\+\+6|gcc-s1)$|^gcc-[0-9]+-base$|^libgomp1$|^dpkg-dev$|^libdpkg-perl$|^manpages|^xauth$'
empty=$(mktemp)
trap 'rm -f "$empty"' EXIT
# Everything the packages need on a system with nothing installed ...
mapfile -t all < <(apt-get install --simulate --no-install-recommends -o Dir::State::status="$empty" -qq \
  "${packages[@]}" | awk '/^Inst /{print $2}')
[ ${#all[@]} -gt 0 ] || { echo "pack_deps: apt resolved no packages (is this Debian 12?)" >&2; exit 1; }
# ... less what every system has, and the toolchain; Open MPI's network
# plugins want libnl, which is "important" but missing from minimal images.
declare -A priority
while read -r name prio; do priority[$name]=$prio; done < <(apt-cache show --no-all-versions "${all[@]}" |
  awk '/^Package:/{p=$2} /^Priority:/{print p, $2}')
keep=()
for p in "${all[@]}"; do
  case "$p" in libnl-3-200|libnl-route-3-200) keep+=("$p"); continue ;; esac
  case "${priority[$p]:-}" in required|important) continue ;; esac
  [[ "$p" =~ $toolchain ]] && continue
  keep+=("$p")
done
mkdir -p "$dest"
rm -f "$dest"/*.deb
(cd "$dest" && apt-get download -qq "${keep[@]}")
printf '%s\n' "${packages[@]}" >"$dest/REQUESTED"
rm -rf "$dest/nccl"
if [ -n "$nccl" ]; then
  read -r nccl_h nccl_lib <<<"$nccl"
  mkdir -p "$dest/nccl/include" "$dest/nccl/lib"
  cp "$nccl_h" "$dest/nccl/include/"
  # libnccl.so and its links, as files and links of their own folder.
  cp -a "$(dirname "$nccl_lib")"/libnccl.so* "$dest/nccl/lib/"
  echo "NCCL $(nccl_version "$nccl_h") from $(dirname "$(dirname "$nccl_h")")," \
    "$("$(find_nvcc)" --version 2>/dev/null | sed -n 's/.*\(release [0-9.]*\).*/packed beside nvcc \1/p' || true)" >"$dest/nccl/SOURCE"
  echo "pack_deps: $(cat "$dest/nccl/SOURCE"), $(du -shL "$dest/nccl" | cut -f1)"
fi
echo "pack_deps: ${#keep[@]} packages, $(du -sh "$dest" | cut -f1), in $dest"
