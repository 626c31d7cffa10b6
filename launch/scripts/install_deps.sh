#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the trainer builds, tests and runs with.
# Does nothing when they are all present. Needs root or sudo for apt-get.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libopenmpi-dev openmpi-bin            # MPI (ranks on CPUs, NCCL bootstrap)
  libhdf5-dev hdf5-tools                # data shards and checkpoints
  libdnnl-dev libopenblas-dev           # CPU GEMM (oneDNN preferred, CBLAS fallback)
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev zlib1g-dev
  python3 python3-matplotlib python3-numpy python3-h5py   # plots and format checks
  python3-torch python3-venv            # the PyTorch package (launch/python) and its golden tests
  mmseqs2-examples emboss-test          # real protein data: UniProt FASTA, Swiss-Prot
  mmseqs2                               # homology clustering, cluster splits and the leakage audit
  indelible                             # protein families of known divergence (launch/studies/indelible_families.py)
  iproute2                              # the namespaced test cluster (ip, tc)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_deps: done"
