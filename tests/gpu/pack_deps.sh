#!/usr/bin/env bash
# Run on a Debian 12 machine with network access: downloads the .deb files of
# the libraries the build needs (MPI, HDF5, BLAS, GoogleTest, CLI11, toml++,
# nlohmann-json, zlib) with their dependencies into a folder, for a GPU
# machine that cannot install packages. tests/gpu/run.sh unpacks them into a
# private prefix there (tests/gpu/unpack_deps.sh); the machine must bring the
# compiler, CMake, Python and the CUDA toolkit itself.
#   tests/gpu/pack_deps.sh [FOLDER]     default FOLDER: .gpu-deps (git-ignored)
# Left out: packages every Debian/Ubuntu system has (priority required or
# important: the C library, libstdc++, ...) and the toolchain (compilers,
# binutils, Perl), which a prefix must not shadow.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$repo/.gpu-deps}
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
echo "pack_deps: ${#keep[@]} packages, $(du -sh "$dest" | cut -f1), in $dest"
