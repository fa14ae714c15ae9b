#!/usr/bin/env bash
# PELAB_CPU_KERNELS: a run on the baseline copy of pelab's CPU kernels records it in
# /environment/cpu_kernels and trains as the widest copy does, to float rounding; an unknown
# copy stops `pelab train` and `pelab bench` with a message naming the variable and the
# copies this CPU runs.
set -euo pipefail
source_dir="$1"; out="$2"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py
rm -rf "$out"; mkdir -p "$out"
train() {  # train DIR: 20 steps of the quickstart config with rope (attention kernels with rotations)
  "$PELAB" train "$source_dir/configs/quickstart.yaml" --out "$1" --set encoding.name=rope \
    --set train.steps=20 --set train.log_every=5 --set eval.samples=16 --set threads=1 > "$1.log"
}
train "$out/widest"
PELAB_CPU_KERNELS=baseline train "$out/baseline"
"$py" - "$out/widest/run.h5" "$out/baseline/run.h5" <<'PY'
import sys
import h5py
import numpy as np
widest, baseline = (h5py.File(p, "r") for p in sys.argv[1:])
kernels = [f["environment"].attrs["cpu_kernels"] for f in (widest, baseline)]
kernels = [k.decode() if isinstance(k, bytes) else str(k) for k in kernels]
print("cpu_kernels:", kernels)
assert kernels[0] in ("baseline", "avx2", "avx512"), kernels
assert kernels[1] == "baseline", kernels
loss_w, loss_b = widest["training/loss"][()], baseline["training/loss"][()]
print("loss:", loss_w, loss_b)
# the copies differ in float rounding only (FMA, the order of sums): the same training
assert np.allclose(loss_w, loss_b, rtol=1e-3, atol=1e-4), (loss_w, loss_b)
PY
"$py" "$source_dir/analysis/summarize_run.py" "$out/baseline/run.h5" | tee "$out/summary.txt"
grep -Eq "^run 'quickstart[^']*': .*, cpu \(baseline CPU kernels\), 1 threads" "$out/summary.txt"
# an unknown copy: an error naming the variable, before any training
if PELAB_CPU_KERNELS=sse9 "$PELAB" train "$source_dir/configs/quickstart.yaml" --out "$out/refused" \
     --set train.steps=2 > "$out/refused.log" 2>&1; then
  echo "PELAB_CPU_KERNELS=sse9 was accepted"; exit 1
fi
cat "$out/refused.log"
grep -Eq "PELAB_CPU_KERNELS=sse9: this CPU runs pelab's baseline(, avx2(, avx512)?)? CPU kernels" "$out/refused.log"
test ! -e "$out/refused/run.h5"
if PELAB_CPU_KERNELS=sse9 "$PELAB" bench --lengths 16 --warmup 0 --repeats 1 --threads 1 --schemes alibi \
     > "$out/bench_refused.txt" 2>&1; then
  echo "pelab bench accepted PELAB_CPU_KERNELS=sse9"; exit 1
fi
grep -q "^pelab bench: PELAB_CPU_KERNELS=sse9: this CPU runs pelab's baseline" "$out/bench_refused.txt"
# pelab bench says which copy runs
PELAB_CPU_KERNELS=baseline "$PELAB" bench --lengths 16 --warmup 0 --repeats 1 --threads 1 --schemes alibi \
  > "$out/bench.txt"
grep -q "^pelab's CPU kernels (attention, GELU, LayerNorm): baseline, as PELAB_CPU_KERNELS asks$" "$out/bench.txt"
grep -q "| alibi | 16 |" "$out/bench.txt"
