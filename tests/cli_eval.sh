#!/usr/bin/env bash
# The researcher's loop end to end on a tiny sweep with two tasks and zipped training
# ranges: pelab eval adds rows (resumably, each with its settings) to every run, the report
# groups by training range and task and aggregates seeds as an independent numpy
# recomputation does, untrained position rows are flagged, the curves and plots are drawn.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py
analysis="$source_dir/analysis"
source "$source_dir/tests/cli_support.sh"  # fails_with

"$PELAB" sweep "$source_dir/tests/fixtures/sweeps/eval.yaml" --jobs 2 > sweep.txt
grep -q "12 of 12 runs complete" sweep.txt

echo "== pelab eval over the sweep adds rows to every run; again, it finds them there"
"$PELAB" eval eval-out --lengths 12 --jobs 2 | tee eval.txt
grep -q "12 of 12 runs evaluated" eval.txt
"$PELAB" eval eval-out --lengths 12 --jobs 2 > again.txt
grep -q "12 of 12 runs evaluated" again.txt
grep -q "added 0 evaluation rows.*1 already there" eval-out/runs/task-parity_check_seed-2_min_length-2_max_length-6/eval-log.txt
run=eval-out/runs/task-reverse_string_seed-0_min_length-1_max_length-3/run.h5
"$PELAB" eval "$run" --lengths 6 --sampler randomized --sampler-max-length 64 --samples 8 --threads 1 | tee one.txt
grep -q "step 4, positions randomized (max_length 64)" one.txt
"$PELAB" eval "$run" --step 2 --lengths 3 --threads 1 > step.txt
size=$(stat -c %s "$run")
"$PELAB" eval "$run" --step 2 --lengths 3 --force --threads 1 > force.txt   # recomputed, replaced in place
test "$(stat -c %s "$run")" -le "$size"                                     # the file does not grow
"$PELAB" eval "$run" --step 2 --attention-lengths 6 --examples 2 --threads 1 > maps.txt
fails_with 1 "has no snapshot of step 3; it keeps steps 2, and the final parameters (step 4)" \
  "$PELAB" eval "$run" --step 3 --lengths 3
fails_with 2 "nothing.h5 does not exist: give a run file (run.h5) or a sweep directory" "$PELAB" eval nothing.h5
fails_with 2 "runs.tsv does not exist: not a sweep directory" "$PELAB" eval .
# a run's folder stands for its run file (as pelab.load takes it); an unfinished one says how to finish it
"$PELAB" eval "$(dirname "$run")" --step 4 --lengths 3 --threads 1 | grep "1 already there" > /dev/null
mkdir -p unfinished && cp "$run" unfinished/checkpoint.h5
fails_with 2 "unfinished holds an unfinished run (checkpoint.h5, no run.h5 yet): pelab train CONFIG --resume --out unfinished" \
  "$PELAB" eval unfinished
# pelab report: a run file under another name, a run's folder, and a truncated file named as unreadable
cp "$run" renamed.h5
"$PELAB" report renamed.h5 --out renamed > renamed.txt
grep -q "run=task-reverse_string" renamed.txt || { cat renamed.txt; exit 1; }
"$PELAB" report "$(dirname "$run")" --out folder > folder.txt
grep -q "run=task-reverse_string" folder.txt || { cat folder.txt; exit 1; }
head -c 3000 "$run" > truncated.h5
status=0; "$PELAB" report truncated.h5 renamed.h5 --out truncated > truncated.txt 2>&1 || status=$?
grep -q "truncated.h5 cannot be read" truncated.txt || { cat truncated.txt; exit 1; }
fails_with 2 "evaluates with contiguous positions; give --sampler too" "$PELAB" eval "$run" --sampler-max-length 64
"$PELAB" eval "$run" --step 4 --lengths 3 --threads 1 | grep "1 already there" > /dev/null  # the final step: /checkpoint
$py - "$run" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1]) as f:
    e = f["evaluation"]
    rows = list(zip(e["method"].asstr()[()], e["length"][()], e["samples"][()], e["step"][()],
                    e["sampler"].asstr()[()], e["positions_max_length"][()]))
    # training's 3 rows, eval's length 12 (once), the randomized row and the step-2 row
    assert rows == [("none", 3, 8, 4, "contiguous", 0), ("none", 6, 8, 4, "contiguous", 0),
                    ("none", 9, 8, 4, "contiguous", 0), ("none", 12, 8, 4, "contiguous", 0),
                    ("none", 6, 8, 4, "randomized", 64), ("none", 3, 8, 2, "contiguous", 0)], rows
    untrained = e["untrained"].asstr()[()]
    # trained on lengths 1-3 (positions 0-5): lengths 6 (12 tokens) and up use untrained rows
    assert untrained[0] == "" and untrained[1] == "learned: positions 6..11 never trained", untrained
    assert untrained[4].startswith("learned: positions "), untrained  # randomized positions up to 63
    assert list(f["trained_rows/position_encoding.table"][:8]) == [1] * 6 + [0] * 2
    curve = f["evaluation_curve"]
    assert list(curve["step"][()]) == [2, 2, 2, 4, 4, 4] and set(curve["samples"][()]) == {4}
    assert sorted(f["snapshots"]) == ["step_2"]
    maps = f["attention/length_6"]
    assert maps.attrs["step"] == 2 and maps.attrs["sampler"] in (b"contiguous", "contiguous"), dict(maps.attrs)
    assert maps["probs"].shape[0] == 2
print("rows carry their settings")
PY

echo "== the report: groups by task and training range, aggregates as numpy does"
"$PELAB" report eval-out | tee report.txt
grep -q "12 of 12 runs complete" report.txt
test "$(grep -c '^  chance' report.txt)" -eq 4   # two tasks: each group its own chance line
grep -q "^task=reverse_string min_length=1 max_length=3 .*\*" report.txt
grep -q "^task=reverse_string min_length=1 max_length=3 .*[0-9]\* !" report.txt
grep -q "mean +- std over seeds (n = 3 in every cell)" report.txt   # not a (3) in every cell
grep -q "!: some seed used position-table rows (learned) that no training step updated" report.txt
cp eval-out/report.md report-default.md
"$PELAB" report eval-out --aggregate median --success 0.9 --sort summary --format csv > median.csv
# a variant writes files of its own, named by its options, and leaves the default report alone
cmp eval-out/report.md report-default.md
variant=eval-out/report_aggregate-median_success-0.9_sort-summary
test -s $variant.csv && test -s $variant.md && test -s ${variant}_runs.csv
cmp $variant.csv median.csv
# two groups with the same value in every seed and length are named (here one group's runs
# again under another axis value)
$py - <<'PY'
import csv
rows = list(csv.DictReader(open("eval-out/report_runs.csv")))
group = rows[0]["group"]
twins = [dict(r, run=r["run"] + "_twin", group=r["group"] + " twin=1", overrides=r["overrides"] + " twin=1")
         for r in rows if r["group"] == group]
with open("twins.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows + twins)
PY
"$PELAB" report twins.csv > twins.txt
grep -Eq "the same value in every seed and length: task=reverse_string min_length=1 max_length=3 and task=reverse_string min_length=1 max_length=3 twin=1[;(]" twins.txt || { cat twins.txt; exit 1; }
"$PELAB" report eval-out --success 0.9 > success.txt
grep -q "wrote eval-out/report_success-0.9.csv" success.txt
# k/n says n: no (n) beside it
grep -Eq "^task=reverse_string min_length=1 max_length=3 +1-3 +[0-9.]+ \+- [0-9.]+ [0-3]/3 " success.txt || { cat success.txt; exit 1; }
# --sort summary ranks within each task: a task's lines stay together
"$PELAB" report eval-out --sort summary > sorted.txt
grep -Eo '^task=[a-z_]+' sorted.txt | uniq | sort | uniq -d > interleaved.txt
test ! -s interleaved.txt || { echo "--sort summary interleaves tasks"; cat sorted.txt; exit 1; }
# beyond names the lengths it averages (each group's own here: two training ranges)
grep -q "beyond: each seed's mean over those lengths (the ones every seed has, which differ between groups" report.txt
"$PELAB" report eval-out/runs/task-reverse_string_seed-0_min_length-1_max_length-3/run.h5 --out only3 > only3.txt
grep -q "(the ones every seed has: 6, 9" only3.txt || { cat only3.txt; exit 1; }
"$PELAB" report eval-out --aggregate max --format csv > max.csv
"$PELAB" report eval-out --format latex | tee report.tex
grep -q '\\toprule' report.tex && grep -q '\$\\pm\$' report.tex
"$PELAB" report eval-out --format markdown | grep "^| run | trained | 3 | 6 | 9 | 12 | beyond |" > /dev/null
"$PELAB" report eval-out --sampler randomized --format csv > randomized.csv
"$PELAB" report eval-out --step 2 --format csv > step2.csv
cp eval-out/report.csv report-before.csv
fails_with 1 "no run has evaluation rows under these settings; the runs have: method none step 2 sampler contiguous" \
  "$PELAB" report eval-out --step 999
cmp eval-out/report.csv report-before.csv  # an empty selection writes no report
fails_with 2 "at most 1 (0.9 for 90%)" "$PELAB" report eval-out --success 90
$py - <<'PY'
import csv, re
import h5py
import numpy as np

def runs():
    with h5py.File("eval-out/sweep.h5") as index:
        t = index["table"]
        for run_id, overrides in zip(t["id"].asstr()[()], t["overrides"].asstr()[()]):
            items = dict(p.split("=", 1) for p in re.split(r" (?=[a-z_.]+=)", overrides))
            group = " ".join(f"{k.split('.')[-2] if k.endswith('.name') else k.split('.')[-1]}={v}"
                             for k, v in items.items() if k != "seed")
            yield group, f"eval-out/runs/{run_id}/run.h5"

def selected(path, step=None, sampler=None):
    """length -> (value %, chance %, untrained) under the report's default selection."""
    with h5py.File(path) as f:
        e = f["evaluation"]
        a = e.attrs
        step = int(a["train_steps"]) if step is None else step
        want_sampler = sampler or a["run_sampler"]
        out = {}
        for i, length in enumerate(e["length"][()]):
            if e["step"][i] != step or e["sampler"].asstr()[i] != want_sampler:
                continue
            if sampler is None and e["positions_max_length"][i] != a["run_positions_max_length"]:
                continue
            out[int(length)] = (100 * e["per_token_accuracy"][i], 100 * e["chance_token_accuracy"][i],
                                e["untrained"].asstr()[i] != "")
        return out, int(a["train_max_length"])

def table(**selection):
    groups = {}
    for group, path in runs():
        rows, train_max = selected(path, **selection)
        if not rows:
            continue
        g = groups.setdefault(group, {"train_max": train_max, "cells": {}, "summary": []})
        for length, row in rows.items():
            g["cells"].setdefault(length, []).append(row)
        beyond = [v for L, (v, c, u) in rows.items() if L > train_max]
        if beyond:
            g["summary"].append(np.mean(beyond))
    return groups

def read(path):
    return {(r["group"], r["length"]): r for r in csv.DictReader(open(path))}

groups = table()
median, maximum = read("median.csv"), read("max.csv")
assert len(groups) == 4 and len(median) == 4 * 4 + 4, (sorted(groups), len(median))
close = lambda a, b: abs(float(a) - float(b)) < 1e-4
for group, g in groups.items():
    for length, rows in g["cells"].items():
        values = np.array([v for v, c, u in rows])
        r, m = median[(group, str(length))], maximum[(group, str(length))]
        assert int(r["seeds"]) == 3 == len(values)
        assert r["beyond_training"] == str(int(length > g["train_max"])), (group, length)
        assert close(r["value"], np.median(values)) and close(r["q1"], np.percentile(values, 25))
        assert close(r["q3"], np.percentile(values, 75)), (group, length)
        assert close(r["success_share"], np.mean(values >= 90)), (r["success_share"], values)
        assert close(r["chance"], np.mean([c for v, c, u in rows])), group
        assert r["untrained"] == str(int(any(u for v, c, u in rows)))
        assert close(m["value"], values.max()) and close(m["min"], values.min())
        assert close(m["mean"], values.mean()) and close(m["std"], values.std(ddof=1))
    s = median[(group, "beyond")]
    assert close(s["value"], np.median(g["summary"])) and int(s["seeds"]) == 3, (group, s)
    assert close(maximum[(group, "beyond")]["value"], max(g["summary"]))
# each group starred against its own training range: length 6 is beyond max_length 3 only
assert median[("task=reverse_string min_length=1 max_length=3", "6")]["beyond_training"] == "1"
assert median[("task=reverse_string min_length=2 max_length=6", "6")]["beyond_training"] == "0"
# the chance levels of the two tasks differ (so one chance line would be wrong)
assert not close(median[("task=parity_check min_length=2 max_length=6", "9")]["chance"],
                 median[("task=reverse_string min_length=2 max_length=6", "9")]["chance"])
# --sort summary: best first within each task, the tasks in their first order
order = [r["group"] for r in csv.DictReader(open("median.csv")) if r["length"] == "beyond"]
tasks = [g.split()[0] for g in order]
assert tasks == sorted(tasks, key=tasks.index), order  # each task's lines together
for task in set(tasks):
    summaries = [np.median(groups[g]["summary"]) for g in order if g.startswith(task + " ")]
    assert summaries == sorted(summaries, reverse=True), (task, summaries)
# rows under other settings: the randomized row of one run, the step-2 rows of one run
randomized = {k: r for k, r in read("randomized.csv").items() if k[1] != "beyond"}
assert list(randomized) == [("task=reverse_string min_length=1 max_length=3", "6")], list(randomized)
assert close(randomized[("task=reverse_string min_length=1 max_length=3", "6")]["value"],
             list(table(sampler="randomized").values())[0]["cells"][6][0][0])
assert list(read("step2.csv")) == [("task=reverse_string min_length=1 max_length=3", "3")]  # no length beyond
print("report matches numpy:", sum(len(g["cells"]) for g in groups.values()), "cells")
PY

echo "== the report's per-run file, the median's order-statistic interval, pooled keys, runs not learned"
"$PELAB" report eval-out --aggregate median-ci --format csv > ci.csv
"$PELAB" report eval-out --aggregate median-ci > ci.txt
grep -F "the interval: of the n values (seeds) sorted, [x_(k), x_(n+1-k)] with the largest k that holds the median of their distribution with probability at least 95%" ci.txt > /dev/null
"$PELAB" report eval-out --pool task.name --aggregate max --format csv > pooled.csv
"$PELAB" report eval-out --learned 0.99 | tee learned.txt
grep -q "12 run(s) had not learned their training range (per-token accuracy below 99% at the longest training length evaluated)" learned.txt
fails_with 2 "--learned is a share of accuracy, at most 1" "$PELAB" report eval-out --learned 2
"$PELAB" report eval-out --learned 0.99 --format csv > learned99.csv
"$PELAB" report eval-out --learned 0 --format csv > learned0.csv
$py - <<'PY'
import csv
import h5py
import numpy as np
runs = list(csv.DictReader(open("eval-out/report_runs.csv")))
# one row per run and evaluated row of the report's selection (3 training lengths + 12): 12 runs x 4
assert len(runs) == 12 * 4, len(runs)
for r in runs:
    with h5py.File(f"eval-out/runs/{r['run']}/run.h5") as f:
        e = f["evaluation"]
        i = [k for k in range(len(e["length"])) if e["length"][k] == int(r["length"]) and e["step"][k] == 4
             and e["sampler"].asstr()[k] == "contiguous"][0]
        for key in ("per_token_accuracy", "per_sequence_accuracy", "loss", "chance_token_accuracy"):
            assert abs(float(r[key]) - e[key][i]) < 1e-6, (r["run"], key)
        free = e["position_free_token_accuracy"][i]  # reverse_string has one, parity_check none
        if r["task"] == "reverse_string":
            assert abs(float(r["position_free_token_accuracy"]) - free) < 1e-6 and free > 0.4, (r["run"], free)
        else:
            assert r["position_free_token_accuracy"] == "" and np.isnan(free), (r["run"], free)
        train_max = int(e.attrs["train_max_length"])
    assert r["beyond_training"] == str(int(int(r["length"]) > train_max))
    same = [float(x["per_token_accuracy"]) for x in runs if x["run"] == r["run"]
            and int(x["length"]) <= train_max and int(x["length"]) >= int(x["train_min_length"])]
    assert abs(float(r["in_distribution_token_accuracy"]) - np.mean(same)) < 1e-6
ci = {(r["group"], r["length"]): r for r in csv.DictReader(open("ci.csv"))}
from math import comb
def coverage(n, k):  # P(the median of the distribution lies in [x_(k), x_(n+1-k)])
    return 1 - 2 * sum(comb(n, i) for i in range(k)) / 2 ** n
checked = 0
for r in ci.values():  # the interval: the k-th smallest and largest of the cell's values
    assert float(r["ci_low"]) <= float(r["median"]) <= float(r["ci_high"]), r
    if r["length"] == "beyond":
        continue
    values = sorted(100 * float(x["per_token_accuracy"]) for x in runs
                    if x["group"] == r["group"] and x["length"] == r["length"])
    n = len(values)
    assert n == int(r["seeds"]), (r, n)
    k = max([1] + [k for k in range(1, n // 2 + 1) if coverage(n, k) >= 0.95])
    assert abs(float(r["ci_low"]) - values[k - 1]) < 1e-4 and abs(float(r["ci_high"]) - values[n - k]) < 1e-4, (r, k)
    assert abs(float(r["ci_coverage"]) - coverage(n, k)) < 1e-5, r
    checked += 1
assert checked > 0
assert abs(coverage(6, 1) - 0.96875) < 1e-12 and coverage(6, 2) < 0.95 and coverage(9, 2) >= 0.95  # by hand
# the two tasks pooled: two groups (the training ranges) of 6 runs each
pooled = [r for r in csv.DictReader(open("pooled.csv")) if r["length"] == "3"]
assert sorted(r["group"] for r in pooled) == ["min_length=1 max_length=3", "min_length=2 max_length=6"], pooled
assert all(r["seeds"] == "6" for r in pooled)
# --learned 0: every run learned, the table as without it; 0.99: none did (4 steps of
# training), so no value beyond training is used
cells = lambda path, beyond: [(r["group"], r["length"], r["mean"]) for r in csv.DictReader(open(path))
                              if r["beyond_training"] == beyond]
assert cells("learned0.csv", "1") == cells("ci.csv", "1") and len(cells("ci.csv", "1")) == 14
assert cells("learned99.csv", "1") == []
assert cells("learned99.csv", "0") == cells("ci.csv", "0") and len(cells("ci.csv", "0")) == 6
print("per-run file, intervals, pooling and --learned check out")
PY
# --learned judges each run at its longest evaluated training length; --learned-metric sequence
# the exact match there: a threshold between a run's per-sequence and per-token accuracy at that
# length tells the two judgments apart
threshold=$($py - <<'PY'
import csv
rows = list(csv.DictReader(open("eval-out/report_runs.csv")))
longest = {}  # run -> (length, per-sequence, per-token) at its longest length within training
for r in rows:
    length = int(r["length"])
    if int(r["train_min_length"]) <= length <= int(r["train_max_length"]) and length > longest.get(r["run"], (0,))[0]:
        longest[r["run"]] = (length, float(r["per_sequence_accuracy"]), float(r["per_token_accuracy"]))
_, seq, token = max(longest.values(), key=lambda m: m[2] - m[1])
assert token - seq > 0.01, longest
print((seq + token) / 2)
PY
)
"$PELAB" report eval-out --learned "$threshold" --learned-metric sequence --out seq-learned > seq-learned.txt
grep -q "run(s) had not learned their training range (per-sequence accuracy below" seq-learned.txt
"$PELAB" report eval-out --metric sequence --learned "$threshold" --out token-learned > /dev/null
fails_with 2 "learned-metric" "$PELAB" report eval-out --learned 0.5 --learned-metric loss
THRESHOLD=$threshold $py - <<'PY'
import csv
import os
import numpy as np
threshold = float(os.environ["THRESHOLD"])
def judged(folder):
    runs = {}
    for r in csv.DictReader(open(f"{folder}/report_runs.csv")):
        runs.setdefault(r["run"], dict(learned=r["learned"], within={}))
        if int(r["train_min_length"]) <= int(r["length"]) <= int(r["train_max_length"]):
            runs[r["run"]]["within"][int(r["length"])] = (float(r["per_sequence_accuracy"]),
                                                          float(r["per_token_accuracy"]))
    return runs
by_sequence, by_token = judged("seq-learned"), judged("token-learned")
mean_differs = False  # some run the old rule (the mean over the training lengths) judged otherwise
for run, r in by_sequence.items():
    seq, token = r["within"][max(r["within"])]  # at the longest training length
    assert r["learned"] == str(int(seq >= threshold)), run
    assert by_token[run]["learned"] == str(int(token >= threshold)), run
    mean_differs |= (np.mean([t for _, t in r["within"].values()]) >= threshold) != (token >= threshold)
assert any(r["learned"] != by_token[run]["learned"] for run, r in by_sequence.items())
print("the longest training length decides; the mean would have judged a run otherwise:", mean_differs)
print("--learned-metric picks what --learned judges, whatever the table's metric")
PY

echo "== --learned by hand: the longest training length decides, not the mean over the training lengths"
# run a: 100% at 10, 80% at 20 (the mean, 90%, would pass 0.85); run b: 70% at 10, 95% at 20
# (the position-free baseline: a's 0.6 / 0.55 / 0.56 at 10 / 20 / 40, b's 0.62 / 0.57 / 0.58)
header="run,group,overrides,task,seed,method,length,beyond_training,per_token_accuracy,per_sequence_accuracy,loss,chance_token_accuracy,chance_sequence_accuracy,chance_loss,samples,train_min_length,train_max_length,train_steps,in_distribution_token_accuracy,learned,untrained,condition,condition_value,position_free_token_accuracy,position_free_sequence_accuracy"
{
  echo "$header"
  for row in "a,0,10,0,1.0,0.6" "a,0,20,0,0.8,0.55" "a,0,40,1,0.6,0.56" "b,1,10,0,0.7,0.62" "b,1,20,0,0.95,0.57" "b,1,40,1,0.5,0.58"; do
    IFS=, read -r id seed length beyond acc free <<< "$row"
    echo "$id,g,encoding.name=none seed=$seed,reverse_string,$seed,none,$length,$beyond,$acc,0.5,0.1,0.5,0.001,0.69,100,10,20,100,,,,,,$free,0"
  done
} > hand_runs.csv
"$PELAB" report hand_runs.csv --learned 0.85 --format csv --out hand > hand.csv
"$PELAB" report hand_runs.csv --learned 0.85 > hand.txt
grep -qF "1 run(s) had not learned their training range (per-token accuracy below 85% at the longest training length evaluated): their values beyond it are left out (a [none] 80.0% at 20)" hand.txt
grep -q "^| position-free |  | 61.0 | 56.0 | 58.0 |  |$" <("$PELAB" report hand_runs.csv --learned 0.85 --format markdown)
grep -qF "position-free: what a model without positions gets on the same examples" hand.txt
$py - <<'PY'
import csv
import glob
learned = {r["run"]: r["learned"] for r in csv.DictReader(open(glob.glob("hand/report*_runs.csv")[0]))}
assert learned == {"a": "0", "b": "1"}, learned
cells = {r["length"]: r for r in csv.DictReader(open("hand.csv"))}
assert cells["40"]["seeds"] == "1" and abs(float(cells["40"]["mean"]) - 50.0) < 1e-9, cells["40"]  # b's only
assert cells["20"]["seeds"] == "2" and abs(float(cells["20"]["mean"]) - 87.5) < 1e-9, cells["20"]  # both, within training
# the position-free baseline over the same runs as the cell: at 20 both (56%), at 40 b's alone
assert abs(float(cells["20"]["position_free"]) - 56.0) < 1e-9 and abs(float(cells["40"]["position_free"]) - 58.0) < 1e-9
assert abs(float(cells["beyond"]["position_free"]) - 58.0) < 1e-9, cells["beyond"]
print("--learned and the position-free baseline by hand check out")
PY

echo "== plots: lengths per group, the evaluation curve"
$py "$analysis/plot_lengths.py" eval-out --out lengths.png
# --learned: beyond training, the plot keeps the points of the runs the report judged learned
$py "$analysis/plot_lengths.py" eval-out --learned "$threshold" --learned-metric sequence --out learned_lengths.png
$py - <<'PY'
import csv
runs = list(csv.DictReader(open("seq-learned/report_runs.csv")))
def seeds(path, beyond):
    return sum(int(r["seeds"]) for r in csv.DictReader(open(path)) if r["beyond_training"] == beyond)
assert seeds("learned_lengths.csv", "1") == sum(r["beyond_training"] == "1" and r["learned"] == "1" for r in runs) > 0
assert seeds("lengths.csv", "1") == sum(r["beyond_training"] == "1" for r in runs) > seeds("learned_lengths.csv", "1")
assert seeds("learned_lengths.csv", "0") == seeds("lengths.csv", "0") == sum(r["beyond_training"] == "0" for r in runs)
print("plot_lengths --learned leaves out what the report leaves out")
PY
# --label: a group in words, in the legend and the CSV
$py "$analysis/plot_lengths.py" eval-out --label "task=reverse_string min_length=1 max_length=3 => reverse, trained on 1-3" \
  --out labelled.png
grep -q "^\"reverse, trained on 1-3\",3," labelled.csv
! grep -q "^task=reverse_string min_length=1 max_length=3," labelled.csv
fails_with 2 "expected 'GROUP => WORDS'" $py "$analysis/plot_lengths.py" eval-out --label "no arrow" --out bad.png
$py "$analysis/plot_training.py" eval-out --out training.png
$py "$analysis/plot_training.py" "$run" --out run_training.png
for f in lengths training run_training; do
  test "$(head -c 4 "$f.png" | tail -c 3)" = "PNG"
  test "$(wc -l < "$f.csv")" -gt 1
done
echo "cli_eval ok"
