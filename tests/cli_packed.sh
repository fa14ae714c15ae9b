#!/usr/bin/env bash
# The packed runner (pelab sweep --runs-per-process N): runs trained on threads of one
# process give the run files they give alone, bit for bit (dropout and attention dropout on,
# so each run's own random stream is tested); a failing run leaves the others complete; kill
# -9 of the process, then the same command, resumes every run.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py

# write_sweep NAME STEPS GRID_LINE [SET_LINE...]: a sweep of tiny quickstart runs into NAME-out
write_sweep() {
  local name=$1 steps=$2 grid=$3
  shift 3
  {
    echo "name: $name"
    echo "base: $source_dir/configs/quickstart.yaml"
    echo "set:"
    echo "  train.steps: $steps"
    echo "  train.log_every: 5"
    echo "  train.checkpoint_every: 20"
    echo "  eval.samples: 16"
    echo "  model.d_model: 16"
    echo "  model.d_ff: 32"
    echo "  model.dropout: 0.1"
    echo "  model.attention_dropout: 0.1"
    for line in "$@"; do echo "  $line"; done
    echo "grid:"
    echo "  $grid"
    echo "output: $name-out"
  } > "$name.yaml"
}

# equal_runs DIR_A DIR_B ID...: the runs' training curves, evaluations and final parameters
# are the same bit for bit
equal_runs() {
  "$py" - "$@" << 'PY'
import sys, h5py, numpy as np
a_dir, b_dir, ids = sys.argv[1], sys.argv[2], sys.argv[3:]
for run in ids:
    a, b = (h5py.File(f"{d}/runs/{run}/run.h5", "r") for d in (a_dir, b_dir))
    keys = ["training/step", "training/loss", "training/accuracy", "training/learning_rate",
            "evaluation/loss", "evaluation/per_token_accuracy", "evaluation/per_sequence_accuracy"]
    keys += ["checkpoint/" + name for name in a["checkpoint"]]
    for key in keys:
        assert np.array_equal(a[key][()], b[key][()]), (run, key)
    print(run, "equal:", len(keys), "datasets")
PY
}

echo "== three runs in one process equal the three alone"
grid="encoding.name: [rope, alibi, relative_key]"
write_sweep alone 30 "$grid" "eval.lengths: [4, 8]"
write_sweep packed 30 "$grid" "eval.lengths: [4, 8]"
"$PELAB" sweep alone.yaml --jobs 1 --threads 1 > alone.txt
"$PELAB" sweep packed.yaml --runs-per-process 3 --threads 1 | tee packed.txt
grep -q "3 at a time x 1 threads, up to 3 runs per process" packed.txt
grep -q "3 of 3 runs complete" packed.txt
test -f packed-out/processes/encoding-rope.log   # the process's own output
for id in encoding-rope encoding-alibi encoding-relative_key; do
  grep -q "pelab run '$id'" "packed-out/runs/$id/log.txt"   # each run's log is its own
done
equal_runs alone-out packed-out encoding-rope encoding-alibi encoding-relative_key

echo "== one run failing leaves the others complete"
write_sweep failing 10 "encoding.name: [none, learned, alibi]" "eval.lengths: [3, 600]"
status=0
"$PELAB" sweep failing.yaml --runs-per-process 3 --threads 1 > failing.txt 2>&1 || status=$?
cat failing.txt
test "$status" = 1
grep -q "FAILED    encoding-learned .*cannot be encoded" failing.txt
grep -q "complete  encoding-none" failing.txt
grep -q "complete  encoding-alibi" failing.txt
grep -q "cannot be encoded" failing-out/runs/encoding-learned/failed.txt
test -f failing-out/runs/encoding-none/run.h5 && test -f failing-out/runs/encoding-alibi/run.h5
test ! -e failing-out/runs/encoding-learned/run.h5

echo "== kill -9 of the process, then the same command resumes every run"
grid="seed: [0, 1, 2]"
write_sweep straight 400 "$grid" "eval.lengths: [5, 10]"
write_sweep killed 400 "$grid" "eval.lengths: [5, 10]"
"$PELAB" sweep straight.yaml --runs-per-process 3 --threads 1 > straight.txt
setsid "$PELAB" sweep killed.yaml --runs-per-process 3 --threads 1 > killed1.txt 2>&1 &
leader=$!
for _ in $(seq 1 600); do
  n=$(ls killed-out/runs/seed-*/checkpoint.h5 2> /dev/null | wc -l || true)
  [[ $n == 3 ]] && break
  sleep 0.1
done
kill -9 -- -"$leader"
wait "$leader" || true
test ! -e killed-out/runs/seed-0/run.h5 || { echo "the run finished before the kill: make it longer"; exit 1; }
"$PELAB" sweep killed.yaml --runs-per-process 3 --threads 1 | tee killed2.txt
grep -q "3 resumed from checkpoints" killed2.txt
grep -q "3 of 3 runs complete" killed2.txt
for id in seed-0 seed-1 seed-2; do grep -q "resuming from step" "killed-out/runs/$id/log.txt"; done
equal_runs straight-out killed-out seed-0 seed-1 seed-2
echo "cli_packed: ok"
