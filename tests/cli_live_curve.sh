#!/usr/bin/env bash
# While a run trains, its curves are on disk (<output.dir>/curve.json, docs/run-files.md) and
# analysis/plot_training.py plots them from the run's folder; the finished run's file holds
# them and curve.json is gone.
set -euo pipefail
source_dir="$1"; out="$2"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py and matplotlib
rm -rf "$out"
mkdir -p "$out"
"$PELAB" train "$source_dir/configs/quickstart.yaml" --out "$out/run" --set threads=1 --set train.steps=100000 \
  --set train.log_every=10 --set eval.every=20 --set eval.every_lengths=[10,30] --set eval.every_samples=16 \
  > "$out/log.txt" 2>&1 &
pid=$!
trap 'kill -9 $pid 2> /dev/null || true' EXIT
points() {  # evaluation-curve steps in curve.json so far (0 before it exists)
  "$py" -c 'import json, sys
try:
    print(len(set(json.load(open(sys.argv[1]))["evaluation_curve"]["step"])))
except OSError:
    print(0)' "$out/run/curve.json"
}
for _ in $(seq 600); do
  (( $(points) >= 2 )) && break
  kill -0 $pid || { cat "$out/log.txt"; exit 1; }
  sleep 0.2
done
(( $(points) >= 2 ))
test ! -e "$out/run/run.h5"
"$py" "$source_dir/analysis/plot_training.py" "$out/run" --out "$out/live.png"
test -s "$out/live.png"
head -n 3 "$out/live.csv"
# one panel, the run's, labelled as training; lengths 10 (trained) and 30 (beyond), 2+ steps each
grep -q "^quickstart_[^,]* (training: step [0-9]* of 100000),10,0,20," "$out/live.csv"
grep -q "^quickstart_[^,]* (training: step [0-9]* of 100000),30,1,40," "$out/live.csv"
kill -TERM $pid
status=0
wait $pid || status=$?
test "$status" -eq 75  # stopped with a checkpoint; the curve stays beside it for --resume
test -f "$out/run/curve.json" -a -f "$out/run/checkpoint.h5"
trap - EXIT

# A run that finishes: its run file has the curves, and curve.json is removed with the checkpoint.
"$PELAB" train "$source_dir/configs/quickstart.yaml" --out "$out/done" --set threads=1 --set train.steps=20 \
  --set train.log_every=10 --set eval.every=10 --set eval.samples=16 --set eval.every_samples=16 > /dev/null
test -f "$out/done/run.h5" -a ! -e "$out/done/curve.json" -a ! -e "$out/done/checkpoint.h5"
"$py" "$source_dir/analysis/plot_training.py" "$out/done" --out "$out/done.png"
echo "live curve: ok"
