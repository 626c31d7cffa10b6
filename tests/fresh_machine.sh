#!/usr/bin/env bash
# Runs a command in a fresh Debian 12 root, as a new user on a new machine
# would: nothing installed but a minimal base system (debootstrap minbase),
# the CUDA toolkit of this machine bind-mounted read-only when it has one, and
# a clone of the project's committed HEAD. The command must install whatever
# else it needs itself, so a package that only this machine has cannot make it
# pass.
#
#   tests/fresh_machine.sh [COMMAND]      default COMMAND: tests/run.sh
#   tests/fresh_machine.sh launch/quickstart.sh
#
# Needs root (debootstrap, chroot, mounts in a private mount namespace).
#   PF_FRESH_CACHE  cache folder (default /var/cache/performer-fresh): the base
#                   root as a tarball and the downloaded .deb files. The build
#                   is never cached: every run builds from the clone.
#   PF_FRESH_KEEP   1 keeps the root after the run (its path is printed)
#   PF_FRESH_SUITE  Debian suite (default bookworm)
# These variables are passed into the root when set: CI JOBS CUDA_ARCH STEPS.
set -euo pipefail

command_line=${1:-tests/run.sh}
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${PF_FRESH_CACHE:-/var/cache/performer-fresh}
suite=${PF_FRESH_SUITE:-bookworm}
t0=$(date +%s)

say() { echo "fresh_machine [$(( $(date +%s) - t0 ))s]: $*"; }
die() { echo "fresh_machine: error: $*" >&2; exit 2; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and mounts); run it with sudo"
git -C "$repo" rev-parse --verify -q HEAD >/dev/null || die "$repo is not a git clone with a commit"
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  say "note: uncommitted changes in $repo are not part of the run (the root gets a clone of HEAD)"
fi

if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap on this machine"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

# The mirror this machine's apt already uses (deb822 or one-line sources).
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb / && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}

mkdir -p "$cache/apt-archives/partial" "$cache/roots"
base="$cache/base-$suite-minbase.tar"

# The base root is made once and kept; a lock keeps two runs from making it together.
exec 9>"$cache/lock"
flock 9
if [ ! -s "$base" ]; then
  say "making the base root ($suite minbase from $mirror); kept in $base for later runs"
  tmp=$(mktemp -d "$cache/base.XXXXXX")
  if ! debootstrap --variant=minbase --cache-dir="$cache/apt-archives" "$suite" "$tmp" "$mirror" \
        >"$cache/debootstrap.log" 2>&1; then
    tail -20 "$cache/debootstrap.log" >&2
    rm -rf --one-file-system "$tmp"
    die "debootstrap failed (log: $cache/debootstrap.log)"
  fi
  tar -C "$tmp" -cf "$base.part" .
  mv "$base.part" "$base"
  rm -rf --one-file-system "$tmp"
fi
flock -u 9

root=$(mktemp -d "$cache/roots/root.XXXXXX")
cleanup() {
  if [ "${PF_FRESH_KEEP:-0}" = 1 ]; then
    say "root kept at $root"
  elif findmnt -rn -o TARGET | grep -q "^$root"; then
    echo "fresh_machine: $root still has mounts; not removing it" >&2
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
tar -C "$root" -xf "$base"
# mktemp made the folder 0700 and the tarball's "./" (debootstrap's own
# mktemp folder) is 0700 too: a machine's "/" is 0755, or its system users
# (_apt, munge) cannot run anything.
chmod 755 "$root"

# apt as this machine has it: the same sources and settings (a machine of this
# kind comes with them), minus the hook that deletes downloaded packages, so
# the .deb cache below survives the run.
rm -f "$root/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && cp "$f" "$root$f"
done
# The keys those sources are signed with: the trusted folders and every
# Signed-By file (a source of another vendor names a keyring the base root
# lacks, and apt would refuse it).
for d in /etc/apt/trusted.gpg.d /etc/apt/keyrings; do
  [ -d "$d" ] && mkdir -p "$root$d" && cp -a "$d/." "$root$d/"
done
for key in $(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^Signed-By: *\// {print $2}';
             grep -ho 'signed-by=[^] ]*' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | cut -d= -f2); do
  [ -f "$key" ] && [ ! -e "$root$key" ] && mkdir -p "$(dirname "$root$key")" && cp "$key" "$root$key"
done
for f in /etc/apt/apt.conf.d/*; do
  case "$(basename "$f")" in docker-clean) ;; *) cp "$f" "$root/etc/apt/apt.conf.d/" ;; esac
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
# pip as this machine has it (a machine of this kind comes with the same
# index settings and, where its network needs one, the same CA bundle): a
# copy of /etc/pip.conf whose `cert` names a copy of that bundle, since the
# root's own ca-certificates would rewrite the original path.
if [ -f /etc/pip.conf ]; then
  cert=$(awk -F' *= *' '$1 == "cert" {print $2; exit}' /etc/pip.conf)
  if [ -n "$cert" ] && [ -f "$cert" ]; then
    mkdir -p "$root/etc/ssl"
    cp "$cert" "$root/etc/ssl/pip-ca-bundle.crt"
    sed "s|^cert *=.*|cert = /etc/ssl/pip-ca-bundle.crt|" /etc/pip.conf > "$root/etc/pip.conf"
  else
    cp /etc/pip.conf "$root/etc/pip.conf"
  fi
fi
cp /etc/hosts "$root/etc/hosts"

# The CUDA toolkit, as a machine of this kind has it: a read-only bind mount of
# the same folder, the /usr/local/cuda link and the loader's path entry.
cuda_dir=""
if [ -e /usr/local/cuda/bin/nvcc ]; then
  cuda_dir=$(readlink -f /usr/local/cuda)
  mkdir -p "$root$cuda_dir"
  ln -sfn "$cuda_dir" "$root/usr/local/cuda"
  for f in /etc/ld.so.conf.d/*cuda*; do [ -f "$f" ] && cp "$f" "$root/etc/ld.so.conf.d/"; done
fi

git clone -q "$repo" "$root/work/performer"
say "root $root: $suite minbase, project at $(git -C "$repo" rev-parse --short HEAD)${cuda_dir:+, CUDA from $cuda_dir}"

envs=(HOME=/root LANG=C.UTF-8 TERM=dumb
      PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for v in CI JOBS CUDA_ARCH STEPS; do
  if [ -n "${!v:-}" ]; then envs+=("$v=${!v}"); fi
done

# Mounts live in a private mount namespace: they vanish with it, also when the
# command fails or is interrupted.
set +e
unshare --mount --propagation private -- bash -s "$root" "$cache/apt-archives" "$cuda_dir" "$command_line" \
    "${envs[@]}" <<'INNER'
set -e
root=$1 archives=$2 cuda_dir=$3 command_line=$4
shift 4
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
# A machine's init mounts the cgroup hierarchy (Slurm's slurmd needs it).
if mountpoint -q /sys/fs/cgroup; then mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"; fi
mount --rbind /dev "$root/dev"
mount -t tmpfs -o size=8g tmpfs "$root/dev/shm"
mount --bind "$archives" "$root/var/cache/apt/archives"
if [ -n "$cuda_dir" ]; then
  mount --bind "$cuda_dir" "$root$cuda_dir"
  mount -o remount,bind,ro "$root$cuda_dir"
  chroot "$root" /sbin/ldconfig
fi
exec chroot "$root" /usr/bin/env -i "$@" /bin/bash -c "cd /work/performer && $command_line"
INNER
rc=$?
set -e
say "'$command_line' exited with $rc"
exit $rc
