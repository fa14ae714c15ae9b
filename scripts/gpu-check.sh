#!/usr/bin/env bash
# One command for a GPU machine's scarce time (docs/gpu.md): builds build-cuda against Python
# torch's LibTorch with every core, runs the whole test suite there, then the tiny-shape
# benchmark, each writing under OUT. Carry .gpu-deps/ (scripts/gpu-deps.sh) along.
#   scripts/gpu-check.sh OUT [--deadline-s S] [--no-tests] [--no-bench] [-- tiny_shape.py args]
# Writes OUT/build.log, OUT/ctest.txt (LastTest.log: every test's output), OUT/nvidia-smi.txt
# and OUT/tiny_shape/ (the table).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$1"; shift
deadline=560 tests=1 bench=1
while [ $# -gt 0 ]; do
  case "$1" in
    --deadline-s) deadline="$2"; shift 2 ;;
    --no-tests) tests=0; shift ;;
    --no-bench) bench=0; shift ;;
    --) shift; break ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
start=$SECONDS
mkdir -p "$out"
source .gpu-deps/env.sh
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
{ python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; nproc; } >>"$out/nvidia-smi.txt" 2>&1
export BUILD_DIR=build-cuda
if [ "$tests" = 1 ]; then
  # builds pelab and pelab_tests, then the whole suite with every core
  scripts/dev test --timeout 240 >"$out/ctest.txt" 2>&1
  echo "suite exit $? after $((SECONDS - start)) s" | tee -a "$out/ctest.txt"
  cp build-cuda/Testing/Temporary/LastTest.log "$out/LastTest.log" 2>/dev/null  # every test's output
  tail -n 40 "$out/ctest.txt"
else
  scripts/dev build >"$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }
  echo "built after $((SECONDS - start)) s"
fi
if [ "$bench" = 1 ]; then
  left=$((deadline - (SECONDS - start)))
  python3 tests/benchmarks/tiny_shape.py --device cuda --pelab build-cuda/pelab \
    --deadline-s "$left" --out "$out/tiny_shape" "$@"
  cat "$out/tiny_shape/tiny_shape.md" 2>/dev/null
fi
echo "gpu-check done after $((SECONDS - start)) s"
