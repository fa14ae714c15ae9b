#!/usr/bin/env bash
# Makes .gpu-deps/ in the project root: pelab's non-torch dependencies (yaml-cpp, HDF5, CLI11,
# fmt, Catch2) and the text task's default corpus (fortunes), unpacked from Debian 12 packages, for a GPU machine that has Python's CUDA
# torch but no package registry. Run it here (a machine with Debian's registry), take
# .gpu-deps/ along, and there, from the project root:
#   source .gpu-deps/env.sh && BUILD_DIR=build-cuda scripts/dev build
# env.sh points CMake at Python torch's LibTorch and at the bundle, and tells scripts/dev to
# install nothing. Tried on an H100 machine (Ubuntu 24.04, gcc 13, CMake 4, torch 2.11+cu130);
# docs/gpu.md.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
dest="$root/.gpu-deps"
pkgs=(libyaml-cpp-dev libyaml-cpp0.7 libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1
      libhdf5-hl-100 libhdf5-hl-cpp-100 libaec0 libsz2 libcli11-dev catch2
      libfmt-dev libfmt9 nlohmann-json3-dev fortunes)
exclude="$(git -C "$root" rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-deps/' "$exclude" 2>/dev/null || echo '/.gpu-deps/' >>"$exclude"
rm -rf "$dest"; mkdir -p "$dest/debs"
chmod 777 "$dest/debs"  # apt-get download drops to the _apt user
( cd "$dest/debs" && apt-get download "${pkgs[@]}" >/dev/null )
for f in "$dest"/debs/*.deb; do dpkg -x "$f" "$dest"; done
rm -rf "$dest/debs" "$dest/usr/share/doc" "$dest/usr/share/man"
# HDF5's static libraries are not needed; Catch2's main is only shipped as one
find "$dest" \( -name "*.a" ! -name "libCatch2*.a" -o -name "*fortran*" \) -delete
cat >"$dest/env.sh" <<'EOS'
# source this on the GPU machine, from the project root
d="$(pwd)/.gpu-deps"
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
# the environment's CMAKE_PREFIX_PATH is a list separated by ':'
export CMAKE_PREFIX_PATH="$torch_prefix:$d/usr:${CMAKE_PREFIX_PATH:-}"
export LD_LIBRARY_PATH="$d/usr/lib/x86_64-linux-gnu:$d/usr/lib/x86_64-linux-gnu/hdf5/serial:${LD_LIBRARY_PATH:-}"
# FindHDF5 finds Debian's multiarch hdf5/serial folder only through the h5cc wrapper,
# which the bundle lacks: name the headers and libraries
hdf5_lib="$d/usr/lib/x86_64-linux-gnu/hdf5/serial"
hdf5_include="$d/usr/include/hdf5/serial"
# Catch2 by its folder: a machine's own Catch2 (another version, or built with LTO by another
# compiler; seen on 2026-11-25) would otherwise be found first, and its library not link
export CMAKE_ARGS="-DHDF5_C_INCLUDE_DIR=$hdf5_include -DHDF5_CXX_INCLUDE_DIR=$hdf5_include \
-DHDF5_hdf5_LIBRARY_RELEASE=$hdf5_lib/libhdf5.so -DHDF5_hdf5_cpp_LIBRARY_RELEASE=$hdf5_lib/libhdf5_cpp.so \
-DCatch2_DIR=$d/usr/lib/cmake/Catch2"
command -v make >/dev/null || export CMAKE_GENERATOR=Ninja  # CMake's default needs make
export PELAB_SKIP_SETUP=1     # scripts/dev: nothing to install (there is no registry)
export PELAB_PYTHON=python3   # tests: the Python with h5py (torch's)
# the text task's default corpus (the text configs and tests read it where Debian puts it)
corpus=/usr/share/games/fortunes/songs-poems
if [ ! -e "$corpus" ]; then
  { mkdir -p "$(dirname "$corpus")" && cp "$d/usr/share/games/fortunes/songs-poems" "$corpus"; } 2>/dev/null ||
    echo "env.sh: cannot write $corpus; the text tests will fail (run as root)" >&2
fi
EOS
du -sh "$dest" | cut -f1 | sed 's/^/bundle size: /'
