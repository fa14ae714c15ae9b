#!/usr/bin/env bash
# pelab bench --device and --precision: a device name outside cpu|cuda|auto is refused by the
# parser; --device cuda is a clear error without CUDA (exit 2) and, with it, measures on the
# GPU (its own matmul peak, the caching allocator's peak memory); --device auto with bf16
# runs wherever it is.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
small=(--lengths 16 --warmup 1 --repeats 2 --threads 1 --d-model 32 --heads 2 --layers 1 --d-ff 64)

if "$PELAB" bench --device tpu "${small[@]}" > tpu.txt 2>&1; then cat tpu.txt; exit 1; fi
grep -q -- "--device: tpu not in {cpu,cuda,auto}" tpu.txt || { cat tpu.txt; exit 1; }

set +e
"$PELAB" bench --device cuda --schemes alibi "${small[@]}" > cuda.txt 2>&1
status=$?
set -e
if grep -q "no CUDA device" cuda.txt; then
  [[ $status == 2 ]] || { echo "exit $status, expected 2"; cat cuda.txt; exit 1; }
  grep -q "^pelab bench: device: cuda was requested but this LibTorch has no CUDA device available" cuda.txt \
    || { cat cuda.txt; exit 1; }
  grep -q "round 1/1" cuda.txt && { echo "measured without a device"; exit 1; }
else
  [[ $status == 0 ]] || { cat cuda.txt; exit 1; }
  grep -Eq "^device: cuda:0; matmul peak: [0-9.]+ GFLOP/s \(8192 x 8192 float32" cuda.txt || { cat cuda.txt; exit 1; }
  grep -Eq "^\| alibi \| 16 \| [0-9.]+ \| [0-9.]+ \| n/a \| n/a \| [0-9.]*[1-9][0-9.]* \|" cuda.txt || { cat cuda.txt; exit 1; }
fi

"$PELAB" bench --device auto --precision bf16 --schemes rope "${small[@]}" > auto.txt 2>&1 || { cat auto.txt; exit 1; }
grep -Eq "1 round\(s\); device auto, bf16$" auto.txt || { cat auto.txt; exit 1; }
grep -Eq "^\| rope \| 16 \| [0-9.]+ \|" auto.txt || { cat auto.txt; exit 1; }
echo ok
