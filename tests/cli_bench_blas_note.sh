#!/usr/bin/env bash
# A user's OPENBLAS_CORETYPE is kept even when it is below what the CPU runs (no re-exec:
# the bench reports the kernels asked for), and `pelab bench` says which kernels the CPU
# would run. Skipped (exit 77) where the BLAS is not OpenBLAS (a CUDA build's LibTorch with
# MKL, say).
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
OPENBLAS_CORETYPE=Prescott "$PELAB" bench --lengths 16 --warmup 0 --repeats 1 --threads 1 --schemes alibi > bench.txt
cat bench.txt
if grep -q "BLAS: not OpenBLAS" bench.txt; then echo "not OpenBLAS: skipped"; exit 77; fi
grep -q "BLAS: OpenBLAS, Prescott kernels)" bench.txt
grep -Eq "^note: OPENBLAS_CORETYPE=Prescott is set, and pelab keeps it; this CPU runs OpenBLAS's (Sandybridge|Haswell|SkylakeX) kernels \(unset it, or set it to (Sandybridge|Haswell|SkylakeX), to use them\)$" bench.txt
# the kernels the CPU runs at their widest: no note
best=$(sed -n "s/^note: .* this CPU runs OpenBLAS's \([A-Za-z]*\) kernels.*/\1/p" bench.txt)
OPENBLAS_CORETYPE="$best" "$PELAB" bench --lengths 16 --warmup 0 --repeats 1 --threads 1 --schemes alibi > best.txt
grep -q "BLAS: OpenBLAS, $best kernels)" best.txt
! grep -q "^note: OPENBLAS_CORETYPE" best.txt
