#!/usr/bin/env bash
# The CUDA build of pelab, compiled and linked on a machine without a GPU: against the CUDA
# LibTorch 2.x of PyPI's torch (the peer environment's, scripts/peer-env.sh) with the CUDA
# toolkit's nvcc, then the CPU test suite against that LibTorch. A GPU machine then starts
# from a build known to compile (docs/gpu.md says when to run this).
#   scripts/cuda-build-check.sh [BUILD_DIR] [CTEST ARGS...]    (BUILD_DIR default: build-cuda-check)
# The Python extension is built for the peer environment's Python (its torch is the LibTorch
# linked), which has pandas and matplotlib for the Python tests; two tests are left out
# (below, with why). Took 25 minutes of two cores for a fresh build, 7.5 for the tests.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${1:-build-cuda-check}"
shift || true
venv="${PELAB_PEER_VENV:-$root/build/peer-venv}"
[[ -n "${PELAB_SKIP_SETUP:-}" ]] || { bash scripts/setup-deps.sh test && bash scripts/peer-env.sh "$venv"; }
nvcc_path="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
[[ -x "$nvcc_path" ]] || { echo "cuda-build-check: no nvcc (the CUDA toolkit) on this machine" >&2; exit 2; }
torch_prefix="$("$venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
torch_lib="$("$venv/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
echo "cuda-build-check: $("$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'), $("$nvcc_path" --version | tail -2 | head -1)"
start=$SECONDS
# The CUDA libraries torch's wheels depend on (nvidia-*: NCCL, cuDNN, ...) are linked from the
# venv, not from the CUDA toolkit's copies that ldconfig knows (an older NCCL there lacks
# symbols libtorch_cuda.so needs)
nvidia_libs="$(ls -d "$venv"/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null | paste -sd: -)"
link_flags="-Wl,-rpath-link,$nvidia_libs"
generator=()
[[ -f "$build_dir/CMakeCache.txt" ]] || generator=(-G Ninja)
mkdir -p "$build_dir"
# c10_LIBRARY: TorchConfig's find_library(c10) searches the system before torch's own folder,
# and finds Debian's libtorch-dev's libc10.so.1.13: two c10s in one process abort at start-up
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_prefix" \
      -Dc10_LIBRARY="$torch_lib/libc10.so" -DCMAKE_CUDA_COMPILER="$nvcc_path" \
      -DPython3_EXECUTABLE="$venv/bin/python" \
      -DCMAKE_EXE_LINKER_FLAGS="$link_flags" -DCMAKE_SHARED_LINKER_FLAGS="$link_flags" \
      -DCMAKE_MODULE_LINKER_FLAGS="$link_flags" \
      -DPELAB_PEER_VENV="$root/$build_dir/no-peer-venv" ${CMAKE_ARGS:-} > "$build_dir/configure.log" ||
  { cat "$build_dir/configure.log"; exit 1; }
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}"
grep -q "PELAB_WITH_CUDA" "$build_dir/build.ninja" || { echo "cuda-build-check: LibTorch without CUDA" >&2; exit 1; }
echo "cuda-build-check: compiled and linked with CUDA in $((SECONDS - start)) s"
cd "$build_dir"
# left out: slurm_sweep (the one-node cluster of the main suite), pip_install (it installs into
# a venv of Debian's Python, whose torch 1.13 is not the LibTorch this build links)
ctest --output-on-failure -j "${JOBS:-$(nproc)}" -E "^(slurm_sweep|pip_install)$" "$@"
echo "cuda-build-check: ok in $((SECONDS - start)) s"
