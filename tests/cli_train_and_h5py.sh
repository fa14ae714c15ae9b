#!/usr/bin/env bash
# A short run of the quickstart config through the pelab command, then its run file read
# with h5py by analysis/summarize_run.py, which checks the documented schema.
set -euo pipefail
source_dir="$1"; out="$2"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py
rm -rf "$out"
"$PELAB" train "$source_dir/configs/quickstart.yaml" --out "$out" \
  --set train.steps=30 --set train.log_every=10 --set eval.samples=16 --set threads=1
test -f "$out/run.h5"
test ! -e "$out/run.h5.tmp"
"$py" "$source_dir/analysis/summarize_run.py" --check "$out/run.h5"
table=$("$py" "$source_dir/analysis/summarize_run.py" "$out/run.h5" --csv "$out/table.csv")
echo "$table"
grep -q "evaluation (encoder)" <<<"$table"
grep -q "^extrapolation,length,.*chance_token_accuracy" "$out/table.csv"

# The text task in both formats, briefly, through the same reader.
for format in causal_lm masked_lm; do
  "$PELAB" train "$source_dir/configs/text/$format.yaml" --out "$out/$format" --set threads=1 \
    --set train.steps=5 --set train.log_every=5 --set eval.lengths=[64,128] --set eval.samples=4 \
    --set model.d_model=32 --set model.num_layers=1 --set model.d_ff=64
  summary=$("$py" "$source_dir/analysis/summarize_run.py" "$out/$format/run.h5")
  grep -q "evaluation ($format): $format on held-out bytes" <<<"$summary"
done

# A finished run is not trained over by a run of other settings; the same settings train again.
status=0
"$PELAB" train "$source_dir/configs/quickstart.yaml" --out "$out" \
  --set train.steps=30 --set train.log_every=10 --set eval.samples=16 --set threads=1 \
  --set encoding.name=alibi 2> over.err || status=$?
test "$status" = 2
grep -q "^error: $out/run.h5 holds a finished run of other settings (.*encoding.name: sinusoidal -> alibi.*): give another folder with --out DIR, or remove it" over.err
"$py" "$source_dir/analysis/summarize_run.py" --check "$out/run.h5"   # untouched

# Without --out, --set options name the run and its folder (runs/<name>); the text config's
# name has its scheme in braces ({encoding.name}), so another scheme names itself there once.
mkdir -p "$out/named" && cd "$out/named"
"$PELAB" train "$source_dir/configs/text/causal_lm.yaml" --set threads=1 --set train.steps=2 \
  --set eval.lengths=[64] --set eval.samples=2 --set model.d_model=32 --set model.num_layers=1 \
  --set model.d_ff=64 --set encoding.name=rope > named.txt
grep -q "^pelab run 'text-causal_lm-rope_steps-2_lengths-64_samples-2_d_model-32_num_layers-1_d_ff-64'" named.txt
test -f "runs/text-causal_lm-rope_steps-2_lengths-64_samples-2_d_model-32_num_layers-1_d_ff-64/run.h5"
