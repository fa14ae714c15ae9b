#!/usr/bin/env bash
# The GPU paths through the command line: training, evaluation, attention export and probes
# with `device: cuda`, in float32 and under `precision: bf16`, against the same run on the
# CPU. Skipped (exit 77) where pelab has no CUDA device: Debian's LibTorch is CPU-only, so
# this runs only on a machine built against a CUDA LibTorch (docs/gpu.md).
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py (a GPU machine: its own python3)
config="$source_dir/tests/fixtures/learning.yaml"
# 40 steps: the loss is still falling fast; runs that differ only in float rounding agree to
# about 1e-8 there, and drift apart chaotically later (relative_key by 3.5% at 200 steps)
common=(--set train.steps=40 --set eval.lengths=[4,8] --set eval.samples=64
        --set analysis.attention_lengths=[8] --set analysis.probe_lengths=[8])

if ! "$PELAB" train "$config" "${common[@]}" --set device=cuda --set train.steps=1 --out probe > probe.log 2>&1; then
  if grep -q "no CUDA device" probe.log; then echo "no CUDA device: skipped"; exit 77; fi
  cat probe.log; exit 1
fi

# causal:SCHEME: a causal model (SDPA with is_causal for none and rope, whose batches have no
# padding; the causal triangle added to alibi's bias)
for variant in none alibi relative_key shaw causal:none causal:rope causal:alibi; do
  scheme=${variant#causal:} causal=false name=${variant/:/_}
  [[ $variant == causal:* ]] && causal=true
  run=("$PELAB" train "$config" "${common[@]}" --set encoding.name=$scheme --set model.causal=$causal)
  "${run[@]}" --set device=cpu --out cpu_$name > /dev/null
  "${run[@]}" --set device=cuda --out cuda_$name > /dev/null
  "${run[@]}" --set device=auto --set precision=bf16 --out bf16_$name > /dev/null
  "$PELAB" export-attention cuda_$name/run.h5 --lengths 4 > /dev/null
  "$py" - "$name" << 'PY'
import sys, h5py, numpy as np
scheme = sys.argv[1]
cpu, cuda, bf16 = (h5py.File(f"{w}_{scheme}/run.h5") for w in ("cpu", "cuda", "bf16"))
assert cuda["environment"].attrs["device"].startswith("cuda"), cuda["environment"].attrs["device"]
assert bf16["environment"].attrs["device"].startswith("cuda"), "device: auto must pick the GPU"
# same seed and data: the GPU's float32 run follows the CPU's curve closely, bf16 loosely
c, g, b = (f["training/loss"][()] for f in (cpu, cuda, bf16))
assert np.allclose(c[0], g[0], rtol=1e-5), (c, g)
assert np.allclose(c[0], b[0], rtol=3e-2), (c, b)
maps = [f["attention/length_8/probs"][()].astype(np.float64) for f in (cpu, cuda, bf16)]
for f, m in zip((cuda, bf16), maps[1:]):
    assert np.all(np.isfinite(f["evaluation/loss"][()])), f.filename
    assert m.shape == maps[0].shape, (m.shape, maps[0].shape)
    assert len(f["probes/layer"][()]) == len(cpu["probes/layer"][()]), f.filename
# the GPU's float32 maps are the CPU's (to float16 storage); rows are distributions
# (stored in float16)
assert np.abs(maps[1] - maps[0]).max() < 2e-3, np.abs(maps[1] - maps[0]).max()
for m in maps[1:]:
    assert np.all(np.abs(m.sum(-1) - 1) < 2e-3), np.abs(m.sum(-1) - 1).max()
    if scheme.startswith("causal"):  # no weight on a later key
        assert np.all(np.triu(m, 1) == 0), np.abs(np.triu(m, 1)).max()
assert "attention/length_4" in cuda
print(scheme, "cpu", c[-1], "cuda", g[-1], "bf16", b[-1])
PY
done

echo "== resumed on the GPU with dropout: the CUDA generator's state comes back (rng/cuda)"
# long enough to be stopped by a signal in the middle (a GPU step of this model takes
# milliseconds); "stripped" resumes the same checkpoint without rng/cuda, so its dropout masks
# start over from the seed: the comparison can fail
resume=("$PELAB" train "$config" "${common[@]}" --set device=cuda --set model.dropout=0.1
        --set train.steps=3000 --set train.checkpoint_every=50 --set train.log_every=25)
"${resume[@]}" --out straight > /dev/null
"${resume[@]}" --out stopped > stopped.log 2>&1 &
pid=$!
for _ in $(seq 1 600); do [[ -e stopped/checkpoint.h5 ]] && break; sleep 0.1; done
kill -TERM "$pid"
status=0; wait "$pid" || status=$?
[[ $status == 75 ]] || { cat stopped.log; echo "expected exit 75 from SIGTERM, got $status"; exit 1; }
cp -r stopped stripped
"$py" - << 'PY'
import h5py
with h5py.File("stripped/checkpoint.h5", "r+") as f:
    assert f["rng/cuda"].dtype == "uint8" and f["rng/cuda"].size > 0, f["rng"].keys()
    del f["rng/cuda"]
PY
"${resume[@]}" --out stopped --resume > /dev/null
"${resume[@]}" --out stripped --resume > /dev/null
"$py" - << 'PY'
import h5py, numpy as np
straight, resumed, stripped = (h5py.File(f"{w}/run.h5")["training/loss"][()] for w in ("straight", "stopped", "stripped"))
assert straight.shape == resumed.shape == stripped.shape, (straight.shape, resumed.shape, stripped.shape)
# float32 on a GPU need not repeat bit for bit (kernels with atomics); other dropout masks
# move the loss by far more than rounding does
near = np.abs(resumed - straight).max()
far = np.abs(stripped - straight).max()
assert near < 1e-4 * np.abs(straight).max(), ("resumed", near)
assert far > 100 * max(near, 1e-7), ("without rng/cuda", far, near)
print("resume on the GPU: max |loss - straight| with rng/cuda", near, "without", far)
PY
