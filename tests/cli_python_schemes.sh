#!/usr/bin/env bash
# Schemes written in Python through the command line (docs/python-schemes.md): pelab list
# --schemes, a config's `schemes:` in pelab train (its parameters in the run file), SIGTERM and
# --resume equal to an uninterrupted run bit for bit, a sweep whose children load the file,
# pelab eval, export-attention and report on its runs, pelab check-scheme (a table; exit 1
# for a scheme that leaks the future), encoding_mix with a built-in scheme, and the errors.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
py="${PELAB_PYTHON:-/usr/bin/python3}"
config="$source_dir/tests/fixtures/python_schemes/decay.yaml"
tutorial="$source_dir/examples/schemes/dynamic_position_bias.py"

echo "== pelab list --schemes"
"$PELAB" list --schemes "$tutorial" > list.txt
grep -Eq "^  dynamic_position_bias_py +an MLP of the offset" list.txt
grep -Eq "^      log_distance +bool = false  feed sign" list.txt
grep -Eq "^      depth +int = 2, in \[1, 16\]" list.txt
"$PELAB" list > plain.txt
! grep -q dynamic_position_bias_py plain.txt   # only when asked for

echo "== pelab train: the scheme's parameters are the run's"
"$PELAB" train "$config" --out straight > straight.log
"$py" - straight/run.h5 <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    names = []
    f["checkpoint"].visit(names.append)
    assert any(n.endswith("position_encoding.mlp.0.weight") for n in names), names
    assert "schemes: [" in f["config"][()].decode(), "the resolved config names the file"
    counts = dict(f["parameter_counts"].attrs)
    assert counts["position_encoding"] > 0, counts
print("parameters stored:", counts["position_encoding"])
PY

echo "== SIGTERM, then --resume: bit for bit the uninterrupted run"
"$PELAB" train "$config" --out stopped > stopped.log 2>&1 &
pid=$!
for _ in $(seq 1 600); do [[ -e stopped/checkpoint.h5 ]] && break; sleep 0.1; done
kill -TERM "$pid"
status=0; wait "$pid" || status=$?
test "$status" = 75 || { cat stopped.log; exit 1; }
"$PELAB" train "$config" --out stopped --resume > resumed.log
"$py" - straight/run.h5 stopped/run.h5 <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
for key in ("loss", "step"):
    assert np.array_equal(a["training"][key][()], b["training"][key][()]), key
for name in a["checkpoint"]:
    pa, pb = a["checkpoint"][name], b["checkpoint"][name]
    if isinstance(pa, h5py.Dataset):
        assert np.array_equal(pa[()], pb[()]), name
assert np.array_equal(a["evaluation"]["per_token_accuracy"][()], b["evaluation"]["per_token_accuracy"][()])
print("resumed = uninterrupted")
PY

echo "== a sweep: every child loads the file; pelab eval, export-attention, report"
cat > sweep.yaml <<YAML
name: py_sweep
base: $config
set: {train.steps: 20, train.checkpoint_every: 0, analysis.probes: false}
grid:
  encoding.log_distance: [true, false]
output: sweep
YAML
"$PELAB" sweep sweep.yaml --jobs 2 > sweep.log
sed 's/^output: sweep$/output: packed/' sweep.yaml > packed.yaml
"$PELAB" sweep packed.yaml --runs-per-process 2 > packed.log   # both runs in one process
test "$(ls packed/runs/*/run.h5 | wc -l)" = 2
first=$(ls -d sweep/runs/*/ | head -1)
"$PELAB" eval "${first}run.h5" --lengths 16 > eval.log
"$PELAB" report sweep > report.txt
grep -q "16" report.txt
"$PELAB" export-attention "${first}run.h5" --lengths 10 > export.log

echo "== encoding_mix: the Python scheme beside a built-in one"
"$PELAB" train "$config" --set train.steps=10 --set encoding_mix.name=rope --set encoding_mix.every=2 \
    --set train.checkpoint_every=0 --out mixed > mixed.log

echo "== pelab check-scheme"
"$PELAB" check-scheme dynamic_position_bias_py --schemes "$tutorial" --set log_distance=true --no-randomized > check.txt
cat check.txt
grep -Eq "^  padding invariance +logits [0-9.e-]+, attention to padding 0 +pass" check.txt
grep -Eq "^  no leak from the future +logits before t 0, bidirectional [0-9.e-]+ +pass" check.txt
grep -Eq "^  shift invariance +all positions \+ 37: [0-9.e-]+ +pass" check.txt
grep -q "every property holds" check.txt
cat > leaky.py <<'PY'
import torch
import pelab

class Leaky(pelab.Scheme):
    """adds the mean of every later token's input to each query: a leak from the future"""
    name = "leaky"
    relative = True

    def embed(self, x, positions, layer):
        later = x.flip(1).cumsum(1).flip(1)  # (B, T, D): the sum over t' >= t
        return x + 0.1 * later
PY
status=0; "$PELAB" check-scheme leaky --schemes leaky.py --mode causal --no-randomized > leaky.txt || status=$?
cat leaky.txt
test "$status" = 1
grep -Eq "^  no leak from the future .* FAIL \(outputs at position t change with the tokens after t\)" leaky.txt
status=0; "$PELAB" check-scheme nonexistent > /dev/null 2> unknown.err || status=$?
test "$status" = 2 && grep -q "unknown position encoding 'nonexistent'" unknown.err

echo "== errors: one line each"
fail_with() {  # expected status, pattern, command...
  local expected="$1" pattern="$2"; shift 2
  local status=0
  "$@" > err.out 2> err.txt || status=$?
  cat err.txt
  test "$status" = "$expected" || { echo "exit $status, expected $expected"; cat err.out; exit 1; }
  grep -Eq -- "$pattern" err.txt || { echo "no match for: $pattern"; exit 1; }
  test "$(grep -c . err.txt)" = 1 || { echo "not one line"; exit 1; }
  ! grep -q "frame #" err.txt
}
cat > bad.yaml <<YAML
threads: 1
schemes: [nowhere.py]
encoding: {name: nowhere}
YAML
fail_with 2 "bad.yaml:2:11: schemes: .*/nowhere.py does not exist" "$PELAB" train bad.yaml --set train.steps=1
printf 'import pelab\nclass Broken(pelab.Scheme)\n    pass\n' > broken.py
printf 'threads: 1\nschemes: [broken.py]\nencoding: {name: broken}\n' > broken.yaml
fail_with 2 "broken.yaml:2:11: schemes: .*broken.py:2:.*SyntaxError" "$PELAB" train broken.yaml --set train.steps=1
printf 'import torch\nimport pelab\nclass Shape(pelab.Scheme):\n    name = "shape"\n    def score_bias(self, q, k, attention):\n        return torch.zeros(3)\n' > shape.py
printf 'threads: 1\nschemes: [shape.py]\nencoding: {name: shape}\ntrain: {steps: 5, checkpoint_every: 0}\neval: {lengths: [4]}\n' > shape.yaml
fail_with 1 "error: run 'shape' failed: python scheme 'shape': score_bias \(.*shape.py:5\) returned shape \(3,\) float32 on cpu, expected \(B\|1, H\|1, Tq, Tk\)" \
    "$PELAB" train shape.yaml --out shape_run
cat > oops.py <<'PY'
import pelab

class Oops(pelab.Scheme):
    name = "oops"
    calls = 0

    def embed(self, x, positions, layer):
        Oops.calls += 1
        return x if Oops.calls < 60 else x + {}[layer]  # fails after the checkpoint of step 10
PY
printf 'threads: 1\nschemes: [oops.py]\nencoding: {name: oops}\ntrain: {steps: 40, checkpoint_every: 10}\neval: {lengths: [4]}\n' > oops.yaml
fail_with 1 "error: run 'oops' failed: python scheme 'oops': embed \\(.*oops.py:7\\) raised KeyError: -?[0-9] at .*oops.py:9" "$PELAB" train oops.yaml --out oops_run
test -f oops_run/checkpoint.h5 && test ! -e oops_run/run.h5   # the checkpoint is kept
printf 'import pelab\nclass Rope(pelab.Scheme):\n    pass\n' > clash.py
printf 'threads: 1\nschemes: [clash.py]\nencoding: {name: rope}\n' > clash.yaml
fail_with 2 "clash.yaml:2:11: schemes: .*clash.py: class Rope is named 'rope', a built-in scheme's" "$PELAB" train clash.yaml
fail_with 2 "--set encoding.depth=99: encoding.depth: 99 is out of range" "$PELAB" train "$config" --set encoding.depth=99
echo "python schemes cli: ok"
