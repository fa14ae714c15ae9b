#!/usr/bin/env bash
# Builds pelab against Debian 13's LibTorch 2.x (CPU) and runs its test suite there, on a
# Debian 12 machine, inside a Debian 13 (trixie) root made by debootstrap: the LibTorch 2.x
# code paths without a GPU machine. Needs root and Debian's registry; about 1.5 GB in ROOT.
#   scripts/debian13-check.sh [ROOT] [CTEST ARGS...]    (ROOT default: /var/tmp/pelab-trixie)
# ROOT is kept and reused: a second run only updates the checkout, rebuilds and tests. The
# checkout is this repository's HEAD (commit first). The tests build with Debian 13's
# Catch2 3 there (tests/catch.h; Debian 12 has Catch2 2). Slurm and clang are not installed
# there, so slurm_sweep and fuzz_config are left out or skipped.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="${1:-/var/tmp/pelab-trixie}"
shift || true
[[ $(id -u) -eq 0 ]] || { echo "debian13-check: needs root (debootstrap, chroot)" >&2; exit 2; }
packages=(build-essential cmake pkg-config git ca-certificates libtorch-dev libopenblas0-openmp
          libyaml-cpp-dev libhdf5-dev libcli11-dev catch2 libfmt-dev fortunes
          python3 python3-h5py python3-numpy python3-matplotlib)

if [[ ! -x "$root/usr/bin/g++" ]]; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
  echo "debian13-check: debootstrap trixie into $root"
  debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian >/dev/null
fi

mounted=()
cleanup() { for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done; }
trap cleanup EXIT
for fs in proc sys dev dev/pts; do
  if ! mountpoint -q "$root/$fs"; then
    if [[ $fs == proc ]]; then mount -t proc proc "$root/proc"; else mount --bind "/$fs" "$root/$fs"; fi
    mounted+=("$root/$fs")
  fi
done
cp /etc/resolv.conf "$root/etc/resolv.conf"

if [[ ! -f "$root/usr/include/catch2/catch_all.hpp" ]]; then  # (a root from before kept Debian 12's Catch2)
  chroot "$root" env DEBIAN_FRONTEND=noninteractive bash -c \
    "apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends ${packages[*]} >/dev/null"
fi

echo "debian13-check: $(chroot "$root" dpkg-query -W -f='${Package} ${Version}, ' libtorch-dev catch2)$(chroot "$root" g++ --version | head -1)"
# a checkout of HEAD; its build folder (ignored by git) is kept between runs
if [[ -d "$root/root/pelab/.git" ]]; then
  git -C "$root/root/pelab" fetch -q "$repo" HEAD && git -C "$root/root/pelab" reset -q --hard FETCH_HEAD
else
  git clone -q "$repo" "$root/root/pelab"
fi
chroot "$root" env PELAB_SKIP_SETUP=1 JOBS="$(nproc)" bash -c 'cd /root/pelab && scripts/dev build'
chroot "$root" bash -c 'cd /root/pelab/build && ctest --output-on-failure -j "$(nproc)" -E slurm_sweep "$@"' ctest "$@"
