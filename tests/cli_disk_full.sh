#!/usr/bin/env bash
# A full disk, simulated with an LD_PRELOAD shim (disk_full_preload.c): writes under the
# run's directory fail with ENOSPC once a byte budget is spent. Each case gives one error
# line naming the cause and exit 1, and leaves no partial file: no run.h5, no *.tmp, and
# whatever checkpoint.h5 is there is whole, so --resume goes on once there is space again.
set -euo pipefail
source_dir="$1"; work="$2"; shim="$3"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
work="$(pwd -P)"
config="$source_dir/configs/quickstart.yaml"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py
set_args=(--set train.steps=60 --set train.checkpoint_every=10 --set threads=1 --set eval.samples=16
          --set model.d_model=16 --set model.d_ff=32)
full() {  # budget in bytes, then the command
  local budget="$1"; shift
  LD_PRELOAD="$shim" PELAB_FULL_DIR="$work" PELAB_FULL_BYTES="$budget" "$@"
}
no_partial_files() {
  test ! -e "$1/run.h5"
  test -z "$(find "$1" -name '*.tmp')"
}

echo "== the reference: the same run with room to spare"
"$PELAB" train "$config" "${set_args[@]}" --out reference > reference.log
run_bytes=$(stat -c %s reference/run.h5)
echo "run file: $run_bytes bytes"

echo "== no room at all: refused before training"
status=0; full 0 "$PELAB" train "$config" "${set_args[@]}" --out empty > empty.log 2> empty.err || status=$?
cat empty.err
test "$status" = 1 && test "$(wc -l < empty.err)" = 1
grep -q "error: run 'quickstart[^']*' failed: output.dir 'empty' is not writable: No space left on device" empty.err
! grep -q "^step" empty.log

echo "== room for checkpoints, but the disk fills up during training"
status=0
# a budget of one run file: a few of the 6 checkpoints fit (each is a third of it here), not all
full "$run_bytes" "$PELAB" train "$config" "${set_args[@]}" --out filling > filling.log 2> filling.err \
  || status=$?
cat filling.err
test "$status" = 1 && test "$(wc -l < filling.err)" = 1
grep -q "error: run 'quickstart[^']*' failed: cannot write checkpoint filling/checkpoint.h5: .*No space left on device" filling.err
no_partial_files filling
checkpoint_bytes=$(stat -c %s filling/checkpoint.h5)
"$py" -c "import h5py; h5py.File('filling/checkpoint.h5', 'r')['model']"   # the last good one is whole

echo "== space again: --resume finishes the run, equal to the reference"
"$PELAB" train "$config" "${set_args[@]}" --out filling --resume > resumed.log
grep -q "resuming from step [1-9]" resumed.log
"$py" - <<'PY'
import h5py, numpy as np
a, b = h5py.File("reference/run.h5", "r"), h5py.File("filling/run.h5", "r")
for key in ["training/loss", "evaluation/per_token_accuracy"] + ["checkpoint/" + n for n in a["checkpoint"]]:
    assert np.array_equal(a[key][()], b[key][()]), key
print("the resumed run equals the reference")
PY

echo "== the run file itself does not fit (room for the checkpoint at the end of training only)"
status=0
full $((checkpoint_bytes * 3 / 2)) "$PELAB" train "$config" "${set_args[@]}" --set train.checkpoint_every=0 \
  --out last > last.log 2> last.err || status=$?
cat last.err
test "$status" = 1 && test "$(wc -l < last.err)" = 1
grep -q "error: run 'quickstart[^']*' failed: cannot write HDF5 run file last/run.h5: .*No space left on device" last.err
no_partial_files last
test -f last/checkpoint.h5   # training is not lost: --resume evaluates and writes the run file
echo "== a sweep's own files: its run list, then its report"
sweep="$source_dir/tests/fixtures/sweeps/tiny.yaml"
status=0; full 0 "$PELAB" sweep "$sweep" --jobs 2 > sweep.log 2> sweep.err || status=$?
cat sweep.err
test "$status" = 1 && test "$(wc -l < sweep.err)" = 1
grep -q "error: cannot write the sweep's run list sweep-out/runs.tsv: No space left on device" sweep.err
test ! -e sweep-out/runs.tsv && test -z "$(find sweep-out -name '*.tmp')"
! grep -q "complete" sweep.log   # nothing ran
"$PELAB" sweep "$sweep" --jobs 2 > sweep.log   # with room: the runs
status=0; full 0 "$PELAB" report sweep-out > report.log 2> report.err || status=$?
cat report.err
test "$status" = 1
grep -q "error: cannot write the report sweep-out/report.csv: No space left on device" report.err
test ! -e sweep-out/report.csv && test ! -e sweep-out/report.md
echo "cli_disk_full: ok"
