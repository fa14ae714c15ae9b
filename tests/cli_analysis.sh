#!/usr/bin/env bash
# The analysis scripts on a tiny generated sweep: each writes a non-empty PNG and its CSV;
# export-attention adds maps to a finished run, which h5py reads as the schema says.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py
analysis="$source_dir/analysis"
"$PELAB" sweep "$source_dir/tests/fixtures/sweeps/tiny.yaml" --jobs 2 > sweep.txt

$py "$analysis/plot_lengths.py" sweep-out --out lengths.png
$py - <<'PY'  # the sample std, as pelab report's: for two seeds |a - b| / sqrt(2)
import csv, math
rows = list(csv.DictReader(open("lengths.csv")))
assert rows and all(r["seeds"] == "2" for r in rows), rows
for r in rows:
    assert math.isclose(float(r["std"]), (float(r["max"]) - float(r["min"])) / math.sqrt(2), abs_tol=1e-9), r
    # two seeds: the median is their mean, its interval their range, holding the median with 1 - 2^(1-2)
    assert math.isclose(float(r["median"]), float(r["mean"]), abs_tol=1e-9), r
    assert (r["interval_low"], r["interval_high"], r["interval_coverage"]) == (r["min"], r["max"], "0.5"), r
PY
# --aggregate median-ci draws the median and its interval (the CSV's numbers are the same either way)
$py "$analysis/plot_lengths.py" sweep-out --aggregate median-ci --out median.png > /dev/null
test -s median.png && cmp median.csv lengths.csv
# facets by any config key (a sweep axis, or a key of the stored config), filters, a log axis
$py "$analysis/plot_lengths.py" sweep-out --facet train.max_length --log-x --out facets.png > /dev/null
$py "$analysis/plot_lengths.py" sweep-out --facet train.max_length --filter encoding.name=alibi --filter model.d_model=16 \
    --filter model.causal=false --out alibi.png > /dev/null
status=0; $py "$analysis/plot_lengths.py" sweep-out --filter model.d_model=99 --out none.png 2> nothing.err || status=$?
test "$status" = 1 && grep -q "no run has model.d_model in \['99'\]" nothing.err
$py - "$analysis" <<'PY'
import csv, sys
sys.path.insert(0, sys.argv[1])
rows = list(csv.DictReader(open("facets.csv")))
assert {r["train.max_length"] for r in rows} == {"6", "8"}, rows
assert {r["group"].split()[0] for r in rows} == {"none", "alibi"}, {r["group"] for r in rows}
assert all("max_length" not in r["group"] for r in rows), rows  # the facet key is the panel's, not the label's
assert {r["group"].split()[0] for r in csv.DictReader(open("alibi.csv"))} == {"alibi"}
assert len(list(csv.DictReader(open("alibi.csv")))) == len(rows) / 2  # the keys of the stored config filter too
from plot_lengths import group_styles
styles = group_styles([{"rope": 1, "alibi": 2}, {"alibi": 3, "none": 4, "rope": 5}])
assert styles["alibi"] == group_styles([{"rope": 0, "alibi": 0}])["alibi"], styles  # one style in every panel
assert len({s["color"] for s in styles.values()}) == 3 and len({s["marker"] for s in styles.values()}) == 3
print("plot_lengths: facets, filters, styles ok")
PY
# a run that has not written its first log row, or is stopped: one line saying so, no traceback
mkdir -p starting stopped_run && cp "$(ls sweep-out/runs/*/run.h5 | head -1)" stopped_run/checkpoint.h5
status=0; $py "$analysis/summarize_run.py" starting > /dev/null 2> starting.err || status=$?
test "$status" = 1 && grep -q "starting/run.h5 does not exist (a run starting there writes curve.json" starting.err
! grep -q Traceback starting.err
status=0; $py "$analysis/plot_training.py" stopped_run > /dev/null 2> stopped.err || status=$?
test "$status" = 1 && grep -q "is still training or was stopped" stopped.err && ! grep -q Traceback stopped.err
$py "$analysis/plot_probes.py" sweep-out --out probes.png
$py "$analysis/plot_probes.py" sweep-out --out new/folder/probes.png  # the folder is created
test -s new/folder/probes.png && test -s new/folder/probes.csv
run=sweep-out/runs/encoding-alibi_seed-0_max_length-8_lengths-4-8/run.h5
$py "$analysis/summarize_run.py" --check "$run"
$py "$analysis/plot_attention.py" "$run" --out attention.png
$py "$analysis/plot_terms.py" sweep-out --out terms.png
$py "$analysis/plot_terms.py" sweep-out > /dev/null   # without --out: into the sweep's folder
test -f sweep-out/terms.png && test -f sweep-out/terms.csv
# per-run files (--export, what a study ships): plotted in place of the run files, the same plot
$py "$analysis/plot_probes.py" sweep-out --export shipped/sweep-out_probes.csv
$py "$analysis/plot_probes.py" shipped/sweep-out_probes.csv --out shipped/probes.png
cmp probes.csv shipped/probes.csv
cmp probes.png shipped/probes.png  # titled by the file less _probes.csv: as the sweep
$py "$analysis/plot_probes.py" sweep-out --length 8 --probe order_accuracy --out order8.png
$py "$analysis/plot_probes.py" sweep-out --length 8 --export shipped/probes_8.csv
cat shipped/probes_8.csv <(tail -n +2 shipped/sweep-out_probes.csv) > shipped/both.csv  # two lengths: --length picks
$py "$analysis/plot_probes.py" shipped/both.csv --length 8 --probe order_accuracy --out shipped/order8.png
cmp order8.csv shipped/order8.csv
$py "$analysis/plot_terms.py" sweep-out --export shipped/sweep-out_terms.csv
$py "$analysis/plot_terms.py" shipped/sweep-out_terms.csv --out shipped/terms.png
cmp terms.csv shipped/terms.csv && cmp terms.png shipped/terms.png
# a run file (its own group, named by its run) beside a sweep
$py "$analysis/plot_terms.py" "$run" sweep-out --length 8 --out terms8.png 2> /dev/null
$py "$analysis/plot_terms.py" "$run" sweep-out --length 8 --export shipped/sweep-out_terms8.csv 2> /dev/null
$py "$analysis/plot_terms.py" shipped/sweep-out_terms8.csv --out shipped/terms8.png
cmp terms8.csv shipped/terms8.csv
grep -q '^encoding-alibi_seed-0_max_length-8_lengths-4-8,1,position bias,' terms8.csv
# plot_lengths over run files: each its own group, named by its run
runs=(sweep-out/runs/*/run.h5)
$py "$analysis/plot_lengths.py" "${runs[0]}" "${runs[1]}" --out two.png > /dev/null
test "$(cut -d, -f1 two.csv | tail -n +2 | sort -u | grep -c '^run=')" = 2
# legend labels: an encoding mapping by its scheme and options, a list of phases by its lengths
$py - "$analysis" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from runfile import group_label
label = group_label({"encoding": "{name: learned, max_positions: 256}", "seed": "1",
                     "train.phases": "[{share: 0.9, max_length: 32}, {max_length: 128}]"})
assert label == "learned max_positions=256 phases=32(share=0.9)->128", label
assert group_label({"train.phases": "[{max_length: 32}]"}) == "phases=32"
# phases that differ in more than their lengths keep apart (the label groups runs)
assert group_label({"train.phases": "[{share: 0.5, max_length: 32}, {max_length: 128}]"}) != label.split()[-1]
assert group_label({"eval.lengths": "[10, 20]"}) == "lengths=[10, 20]"
# median_interval, by hand: n = 5 the range with 1 - 2/32; n = 6 the range with 1 - 2/64; n = 9
# the second smallest and largest with 1 - 2 (1 + 9)/512; n = 12 the third, 1 - 2 (1 + 12 + 66)/4096
from runfile import median_interval
assert median_interval([5, 1, 4, 2, 3]) == (3, 1, 5, 0.9375)
assert median_interval([6, 5, 4, 3, 2, 1]) == (3.5, 1, 6, 0.96875)
assert median_interval(range(9)) == (4, 1, 7, 1 - 20 / 512)
assert median_interval(range(12)) == (5.5, 2, 9, 1 - 158 / 4096)
# the coverage alone, as a table of n seeds states it; one value holds nothing
from runfile import median_interval_coverage
assert [median_interval_coverage(n) for n in (1, 5, 6, 9)] == [0.0, 0.9375, 0.96875, 1 - 20 / 512]
# --learned judges a run at its longest evaluated training length, not at the mean over them
from runfile import judged_accuracy
run = dict(train_min_length=1, train_max_length=20)
rows = {L: dict(per_token_accuracy=a, per_sequence_accuracy=a / 2) for L, a in [(10, 1.0), (20, 0.85), (30, 0.5)]}
assert judged_accuracy(run, rows) == 0.85  # the mean over 10 and 20 (0.925) would pass 0.9
assert judged_accuracy(run, rows, "sequence") == 0.425
assert judged_accuracy(run, {30: rows[30]}) == float("inf")  # nothing evaluated within training: learned
EOF
# a complete run whose file cannot be read is named and left out, not dropped silently
cp -r sweep-out broken-out
broken=$(ls broken-out/runs | head -1)
truncate -s 1000 "broken-out/runs/$broken/run.h5"
$py "$analysis/plot_lengths.py" broken-out --out broken.png > /dev/null 2> broken.err
grep -q "warning: broken-out/runs/$broken/run.h5: cannot be read (.*); left out" broken.err
grep -q '^"alibi [^"]*",1,position bias,' terms.csv
for f in lengths probes attention terms; do
  test -s "$f.png"
  test "$(head -c 4 "$f.png" | tail -c 3)" = "PNG"
  test "$(wc -l < "$f.csv")" -gt 1
done

# pelab padding: with the mask, no padding row moves a real token's logits; the study's table
"$PELAB" padding "$run" --examples 8 --csv padding.csv | tee padding.txt
grep -q "alibi (bidirectional), length 8 (16 tokens) + 16 padding, 8 examples" padding.txt
# with the mask: float rounding at most (1e-5 of the largest logit; 0 on some CPUs, 1.8e-7 on others)
grep -q -E "^ +huge +on +[0-9.e+-]+ +[0-9.e+-]+ +0.00% +yes$" padding.txt
grep -q -E "^ +huge +off +.* no$" padding.txt
test "$(wc -l < padding.csv)" = 7
PELAB="$PELAB" $py "$analysis/studies/padding.py" sweep-out studies-padding > /dev/null
grep -q "^| alibi | bidirectional | 0\* (0%) | 0\* (0%) | 0\* (0%) |" studies-padding/padding_row.md

# the new-methods summary's rules by hand, on a made-up per-run file of six seeds: a run learned
# at 20 or not; above the stronger baseline (here the position-free 57%, not chance's 50%) only
# where the whole interval is; bold where the interval overlaps the top median's
mkdir -p studies-new-methods
$py - studies-new-methods/reverse_string_runs.csv <<'PY'
import sys
header = ("run,group,overrides,task,seed,method,length,beyond_training,per_token_accuracy,per_sequence_accuracy,loss,"
          "chance_token_accuracy,chance_sequence_accuracy,chance_loss,samples,train_min_length,train_max_length,"
          "train_steps,in_distribution_token_accuracy,learned,untrained,condition,condition_value,"
          "position_free_token_accuracy,position_free_sequence_accuracy")
at_20 = {"none": [1.0] * 6, "rope": [1.0] * 6, "alibi": [1.0] * 5 + [0.85], "fox": [0.80, 0.81, 0.82, 0.83, 0.84, 0.85]}
at_30 = {"none": [0.56, 0.58, 0.60, 0.60, 0.62, 0.63], "rope": [0.78, 0.79, 0.80, 0.81, 0.82, 0.84],
         "alibi": [0.70, 0.72, 0.74, 0.76, 0.79, 0.30], "fox": [0.5] * 6}
with open(sys.argv[1], "w") as f:
    print(header, file=f)
    for scheme in at_20:
        for seed in range(6):
            for length, accuracy in [(20, at_20[scheme][seed]), (30, at_30[scheme][seed])]:
                print(f'seed-{seed}_{scheme},"encoding={{name: {scheme}}}","seed={seed} encoding={{name: {scheme}}}",'
                      f"reverse_string,{seed},none,{length},{int(length > 20)},{accuracy},0,0.5,0.5,0,0.69,256,1,20,"
                      f"3000,{at_20[scheme][seed]},,,,,0.57,0", file=f)
PY
PELAB="$PELAB" $py "$analysis/studies/new_methods.py" - studies-new-methods > new_methods.txt 2> new_methods.err
grep -qF "| NoPE | 60.0 [56.0, 63.0] (6/6, 96.9%) |" studies-new-methods/new_methods.md
grep -qF "| RoPE | **80.5 [78.0, 84.0] +** (6/6, 96.9%) |" studies-new-methods/new_methods.md
grep -qF "| ALiBi | **74.0 [70.0, 79.0] +** (5/6, 93.8%) |" studies-new-methods/new_methods.md
grep -qF "| FoX | not learned (0/6; 80.0-85.0% at 20) |" studies-new-methods/new_methods.md
grep -qF "| *input-independent* | 50.0 |" studies-new-methods/new_methods.md
grep -qF "| *position-free* | 57.0 |" studies-new-methods/new_methods.md
grep -q "bucket_sort_runs.csv not there" new_methods.err

"$PELAB" export-attention "$run" --lengths 5,12 --examples 2 --threads 1 | tee export.txt
grep -q "/attention/length_12: 2 examples x 2 layers x 4 heads x 24 x 24 (float16, extrapolation none)" export.txt
$py "$analysis/summarize_run.py" --check "$run"
$py - "$run" <<'PY'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1]) as f:
    assert sorted(f["attention"]) == ["length_12", "length_5", "length_8"], sorted(f["attention"])
    g = f["attention/length_12"]
    probs = g["probs"]
    assert probs.dtype == np.float16, probs.dtype
    assert probs.shape == (2, 2, 4, 24, 24) and probs.chunks == (1, 1, 1, 24, 24) and probs.compression == "gzip"
    p = probs[()].astype(np.float64)
    assert np.allclose(p.sum(-1), 1.0, atol=2e-3), "rows must sum to 1"
    assert int(g.attrs["length"]) == 12 and int(g.attrs["examples"]) == 2
    assert g["tokens"].shape == (2, 24) and g["positions"].shape == (2, 24)
    stats = f["evaluation/attention"]
    assert stats["entropy"].shape == (f["evaluation/length"].shape[0], 2, 4)
    assert f["probes/layer"][()].tolist() == [0, 1, 2]
    terms = g["terms"]  # alibi: q.k and its bias, per layer and head
    assert [n.decode() for n in terms["names"][()]] == ["content-content", "position bias"], terms["names"][()]
    assert terms["mean_abs"].shape == (2, 4, 2) and terms["correlation"].shape == (2, 4, 2)
    assert terms["scores_mean_abs"].shape == (2, 4) and (terms["mean_abs"][()] > 0).all()
print("exported maps ok")
PY
# arguments that select nothing: an error naming what there is, not a traceback or an empty plot
fails_with() {  # fails_with PATTERN COMMAND...: exit 1 and PATTERN on stderr
  local pattern="$1"; shift
  if "$@" 2> err.txt; then echo "accepted: $*"; exit 1; fi
  cat err.txt
  grep -q "$pattern" err.txt && ! grep -q Traceback err.txt
}
fails_with "no evaluation rows with method 'ntk'; the runs have: none" \
  $py "$analysis/plot_lengths.py" sweep-out --method ntk --out none.png
fails_with "no probes at length 7; probed lengths: \[6, 8\]" $py "$analysis/plot_probes.py" sweep-out --length 7 --out none.png
fails_with "\-\-example 2: 2 examples are stored at length 12 (0-1)" \
  $py "$analysis/plot_attention.py" "$run" --length 12 --example 2 --out none.png
fails_with "no attention maps at length 7; stored lengths: \[5, 8, 12\]" $py "$analysis/plot_terms.py" "$run" --length 7 --out none.png
fails_with "holds rows already selected; of the selection options it takes only --length (given: --step)" \
  $py "$analysis/plot_probes.py" shipped/sweep-out_probes.csv --step 4 --out none.png
fails_with "shipped/probes.csv: not a file of plot_probes.py --export: no column run" \
  $py "$analysis/plot_probes.py" shipped/probes.csv --out none.png
fails_with "shipped/sweep-out_terms.csv is an input; name another with --out" \
  $py "$analysis/plot_terms.py" shipped/sweep-out_terms.csv --out shipped/sweep-out_terms.png
$py "$analysis/plot_attention.py" "$run" --length 12 --out attention12.png 2> note.txt
grep -q "length 12 is not an evaluation length of this run" note.txt
# a run file without its parameters: export-attention says so
cp "$run" nock.h5
$py -c "import h5py; f = h5py.File('nock.h5', 'a'); del f['checkpoint']; f.close()"
if "$PELAB" export-attention nock.h5 --lengths 5 2> nock.err; then echo "export without /checkpoint worked"; exit 1; fi
grep -q "nock.h5 has no /checkpoint group (the trained parameters)" nock.err
echo "cli_analysis: ok"
