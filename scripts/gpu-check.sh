#!/usr/bin/env bash
# The GPU session in one command (docs/gpu.md): builds build-cuda against Python torch's
# LibTorch with every core, runs the whole test suite there (the GPU tests, cuda_paths and
# gpu_registry, scheduled first), then the tiny-shape benchmark (pelab, PyTorch eager and
# torch.compile for every scheme it lists) with the time left, and prints one summary.
# Carry .gpu-deps/ (scripts/gpu-deps.sh) along.
#   scripts/gpu-check.sh OUT [--deadline-s S] [--no-tests] [--no-bench] [--many-runs] [-- tiny_shape.py args]
# --many-runs: the many-runs benchmark (tests/benchmarks/many_runs.py: K runs as processes,
# under MPS, packed in one process, and the torch.func ensemble) instead of the tiny-shape one.
# Writes under OUT: build.log, ctest.txt, LastTest.log (every test's output), gpu_registry.md
# (the registry-wide table), nvidia-smi.txt, tiny_shape/ (the benchmark) and summary.txt.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$1"; shift
deadline=570 tests=1 bench=1 many=0
while [ $# -gt 0 ]; do
  case "$1" in
    --deadline-s) deadline="$2"; shift 2 ;;
    --no-tests) tests=0; shift ;;
    --no-bench) bench=0; shift ;;
    --many-runs) many=1; shift ;;
    --) shift; break ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
source scripts/gpu-session.sh
gpu_session_begin gpu-check
targets=(--target pelab)
[ "$tests" = 1 ] && targets=()  # everything: pelab, pelab_tests and the test helpers
gpu_build "${targets[@]}"
status=0
if [ "$tests" = 1 ]; then
  # Two OpenMP runtimes (Python torch's and the system's) in every test process: threads
  # per process kept small, or 16 processes x 16 threads x 2 time tests out
  left=$((deadline - (SECONDS - start) - 20))
  ( cd build-cuda &&
    PELAB_TEST_THREADS=2 OMP_NUM_THREADS=2 PELAB_GPU_REGISTRY_TABLE="$out/gpu_registry.md" \
      timeout "$left" ctest -j "$(nproc)" --timeout 420 --output-on-failure ) >"$out/ctest.txt" 2>&1
  status=$?
  cp build-cuda/Testing/Temporary/LastTest.log "$out/LastTest.log" 2>/dev/null
  note "suite exit $status after $((SECONDS - start)) s: $(grep -E 'tests passed|tests failed' "$out/ctest.txt" | tail -1)"
  grep -E '^\s+[0-9]+ - ' "$out/ctest.txt" | sed 's/^/  /' | tee -a "$summary"
  for t in cuda_paths gpu_registry; do
    note "  $t: $(grep -E "Test +#[0-9]+: $t " "$out/ctest.txt" | sed -E 's/.*(Passed|\*\*\*Failed|Skipped|\*\*\*Timeout|Not Run).*/\1/' | tail -1)"
  done
fi
if [ "$bench" = 1 ] && [ "$many" = 1 ]; then
  left=$((deadline - (SECONDS - start) - 30))
  python3 tests/benchmarks/many_runs.py --pelab build-cuda/pelab --deadline-s "$left" --out "$out/many_runs" "$@" \
    >"$out/many_runs.log" 2>&1
  note "many runs (aggregate steps/s):"
  cat "$out/many_runs/many_runs.md" 2>/dev/null | tee -a "$summary"
elif [ "$bench" = 1 ]; then
  left=$((deadline - (SECONDS - start)))
  if [ "$left" -gt 60 ]; then
    # torch.compile of relative_key took over 196 s on 2026-11-26: a process gets at most 90 s
    python3 tests/benchmarks/tiny_shape.py --device cuda --pelab build-cuda/pelab --compile-too --timeout 90 \
      --deadline-s "$left" --out "$out/tiny_shape" "$@" >"$out/tiny_shape.log" 2>&1
    note "tiny shape (steps/s; empty: not measured in time):"
    sed -n '/^|/p' "$out/tiny_shape/tiny_shape.md" 2>/dev/null | tee -a "$summary"
  else
    note "tiny shape: skipped, $left s left"
  fi
fi
note "gpu-check done after $((SECONDS - start)) s"
exit "$status"
