#!/usr/bin/env bash
# The CUDA build of pelab, compiled and linked on a machine without a GPU: against the CUDA
# LibTorch 2.x of PyPI's torch (the peer environment's, scripts/peer-env.sh) with the CUDA
# toolkit's nvcc, then the CPU test suite against that LibTorch. A GPU machine then starts
# from a build known to compile (docs/gpu.md says when to run this).
#   scripts/cuda-build-check.sh [BUILD_DIR] [CTEST ARGS...]    (BUILD_DIR default: build-cuda-check)
# The Python extension is built for the peer environment's Python (its torch is the LibTorch
# linked); the tests that need Debian's Python packages beside it (matplotlib, pandas) run
# with it too and are left out where they cannot (the list below, with why).
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
echo "cuda-build-check: $("$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'), $("$nvcc_path" --version | tail -2 | head -1)"
start=$SECONDS
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_prefix" \
        -DCMAKE_CUDA_COMPILER="$nvcc_path" -DPython3_EXECUTABLE="$venv/bin/python" \
        -DPELAB_PEER_VENV="$root/$build_dir/no-peer-venv" ${CMAKE_ARGS:-}
fi
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}"
grep -q "PELAB_WITH_CUDA" "$build_dir/build.ninja" || { echo "cuda-build-check: LibTorch without CUDA" >&2; exit 1; }
echo "cuda-build-check: compiled and linked with CUDA in $((SECONDS - start)) s"
cd "$build_dir"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" -E "slurm_sweep" "$@"
echo "cuda-build-check: ok in $((SECONDS - start)) s"
