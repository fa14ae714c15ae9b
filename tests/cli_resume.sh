#!/usr/bin/env bash
# Kill and resume, through the command line with real signals: a run stopped by SIGTERM or
# SIGINT (exit 75, checkpoint written) and killed with kill -9 at random moments, then
# resumed until it finishes, equals an uninterrupted run bit for bit (training curve,
# evaluation, final parameters). Also: --resume of a complete run, of a checkpoint written by a
# different config, and with an operational option (train.checkpoint_every) that it takes.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py
config="$source_dir/tests/fixtures/learning.yaml"
# dropout (attention dropout: the fused kernel's keys from the generator), randomized positions
# and a log window that checkpoints cut in the middle
set_args=(--set train.steps=300 --set train.checkpoint_every=20 --set train.log_every=7 --set threads=1
          --set model.dropout=0.1 --set model.attention_dropout=0.1 --set positions.sampler=randomized
          --set positions.max_length=40
          --set eval.lengths=[4,8] --set eval.samples=64 --set analysis.probes=false)
train=("$PELAB" train "$config" "${set_args[@]}")  # an array, not a function: "&" must start pelab itself

wait_for() {  # file, tenths of a second
  for _ in $(seq 1 "$2"); do [[ -e "$1" ]] && return 0; sleep 0.1; done
  echo "timed out waiting for $1" >&2; return 1
}
wait_for_text() {  # file, text, tenths of a second
  for _ in $(seq 1 "$3"); do grep -q "$2" "$1" && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}

echo "== the uninterrupted run"
"${train[@]}" --out straight > straight.log
test -f straight/run.h5 && test ! -e straight/checkpoint.h5   # removed once the run file is whole

echo "== SIGTERM: a checkpoint, exit 75, nothing that looks finished"
"${train[@]}" --out stopped > term.log 2> term.err &
pid=$!
wait_for stopped/checkpoint.h5 300
sleep 0.$((RANDOM % 5))
kill -TERM "$pid"
status=0; wait "$pid" || status=$?
cat term.err
test "$status" = 75
grep -q "interrupted: run 'learning[^']*' stopped by SIGTERM after step [0-9]*; checkpoint stopped/checkpoint.h5" term.err
grep -q "resume with: pelab train .*learning.yaml --resume --out stopped" term.err
test -f stopped/checkpoint.h5 && test ! -e stopped/run.h5 && test -z "$(ls stopped/*.tmp 2>/dev/null)"

echo "== resumed with an option that disagrees with the stored config: refused, naming only it"
status=0; "${train[@]}" --out stopped --resume --set train.learning_rate=0.003 > /dev/null 2> mismatch.err || status=$?
cat mismatch.err
test "$status" = 2
grep -q "stopped/checkpoint.h5 was trained with another config: --set train.learning_rate=0.003 (stored train.learning_rate: 0.002)\. Leave these options out" mismatch.err
test "$(grep -o -- '--set ' mismatch.err | wc -l)" = 1   # none of the options that agree

echo "== resumed with an operational option (train.checkpoint_every): taken, not refused"
"${train[@]}" --out stopped --resume --set train.checkpoint_every=10 > every.log 2>&1 &
pid=$!
wait_for_text every.log "resuming from step" 600
kill -TERM "$pid" 2>/dev/null || true
status=0; wait "$pid" || status=$?
test "$status" = 75 -o "$status" = 0 || { cat every.log; exit 1; }
stored=stopped/checkpoint.h5; [[ -e "$stored" ]] || stored=stopped/run.h5  # it may have finished
$py - "$stored" <<'PY'
import re, sys, h5py
config = h5py.File(sys.argv[1], "r")["config"][()]
config = config.decode() if isinstance(config, bytes) else config
assert re.search(r"^ *checkpoint_every: 10$", config, re.M), config
PY

echo "== kill -9 at random moments while resuming, and one SIGINT"
for attempt in 1 2 3; do
  "${train[@]}" --out stopped --resume >> resumed.log 2>&1 &
  pid=$!
  sleep "$((RANDOM % 2)).$((RANDOM % 10))"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" || true
  test ! -e stopped/run.h5 || break   # it may have finished before the kill
done
if [[ ! -e stopped/run.h5 ]]; then
  "${train[@]}" --out stopped --resume > int.log 2> int.err &
  pid=$!
  sleep 1.$((RANDOM % 10))
  kill -INT "$pid" 2>/dev/null || true
  status=0; wait "$pid" || status=$?
  test "$status" = 75 -o "$status" = 0
fi
# the last resume with no --set at all: the checkpoint's stored config (the equality below
# shows it was used)
"$PELAB" train "$config" --out stopped --resume > last.log
cat int.log 2> /dev/null >> resumed.log || true
grep -q "resuming from step" last.log resumed.log
test -f stopped/run.h5 && test ! -e stopped/checkpoint.h5

echo "== the resumed run equals the uninterrupted one, bit for bit"
$py - <<'PY'
import h5py, numpy as np
a, b = h5py.File("straight/run.h5", "r"), h5py.File("stopped/run.h5", "r")
keys = ["training/step", "training/loss", "training/accuracy", "training/learning_rate",
        "evaluation/loss", "evaluation/per_token_accuracy", "evaluation/per_sequence_accuracy"]
keys += ["checkpoint/" + name for name in a["checkpoint"]]
assert len(a["training/loss"]) == 43, len(a["training/loss"])  # every 7 steps and step 300
for key in keys:
    assert np.array_equal(a[key][()], b[key][()]), key
print("equal:", len(keys), "datasets")
PY

echo "== --resume of a complete run leaves it as it is"
before=$(md5sum < stopped/run.h5)
"${train[@]}" --out stopped --resume > again.log
grep -q "already complete: stopped/run.h5" again.log
test "$before" = "$(md5sum < stopped/run.h5)"
echo "cli_resume: ok"
