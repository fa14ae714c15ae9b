#!/usr/bin/env bash
# A short run of the quickstart config through the pelab command, then its run file read
# with h5py by analysis/summarize_run.py, which checks the documented schema.
set -euo pipefail
source_dir="$1"; out="$2"
rm -rf "$out"
"$PELAB" train "$source_dir/configs/quickstart.yaml" --out "$out" \
  --set train.steps=30 --set train.log_every=10 --set eval.samples=16 --set threads=1
test -f "$out/run.h5"
test ! -e "$out/run.h5.tmp"
/usr/bin/python3 "$source_dir/analysis/summarize_run.py" --check "$out/run.h5"
