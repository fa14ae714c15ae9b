#!/usr/bin/env bash
# Evaluation conditions (passkey's eval.depths) through a sweep, pelab report, its per-run file,
# pelab.results, plot_conditions.py and plot_lengths.py --condition; and a suite's table
# (analysis/suite_table.py) from a sweep and from its per-run file alike.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py
analysis="$source_dir/analysis"
"$PELAB" sweep "$source_dir/tests/fixtures/sweeps/conditions.yaml" --jobs 2 > sweep.txt

# the report: a line per scheme and depth; the per-run file has the condition columns
"$PELAB" report conditions-out > report.txt
grep -q "encoding=none \[none depth=0.5\]" report.txt
grep -q "encoding=alibi \[none depth=1\]" report.txt
$py - <<'PY'
import csv
rows = list(csv.DictReader(open("conditions-out/report_runs.csv")))
assert len(rows) == 4 * 2 * 3, len(rows)  # runs x lengths x depths
assert {r["condition"] for r in rows} == {"depth"}, rows[0]
assert sorted({float(r["condition_value"]) for r in rows}) == [0, 0.5, 1]
assert {r["method"] for r in rows} == {"none"}
PY
# the same table from the per-run file alone
"$PELAB" report conditions-out/report_runs.csv --out again > again.txt
diff <(tail -n +2 report.txt | grep -v "^wrote") <(tail -n +2 again.txt | grep -v "^wrote")
cmp conditions-out/report_runs.csv again/report_runs.csv

# the heatmap from the sweep and from the per-run file: the same numbers
$py "$analysis/plot_conditions.py" conditions-out --out heat.png > /dev/null
$py "$analysis/plot_conditions.py" conditions-out/report_runs.csv --out heat_csv.png > /dev/null
test -s heat.png
cmp heat.csv heat_csv.csv
$py - <<'PY'
import csv
rows = list(csv.DictReader(open("heat.csv")))
assert len(rows) == 2 * 2 * 3, rows  # groups x lengths x depths
assert all(r["condition"] == "depth" and r["seeds"] == "2" for r in rows), rows
assert float(rows[0]["min"]) <= float(rows[0]["mean"]) <= float(rows[0]["max"])
PY
# plot_lengths: one depth with --condition; without it, a message naming the depths
$py "$analysis/plot_lengths.py" conditions-out --condition 0.5 --out depth.png > /dev/null
test -s depth.csv
status=0; $py "$analysis/plot_lengths.py" conditions-out --out none.png 2> none.err || status=$?
test "$status" = 1
grep -q "depth at 0, 0.5, 1: choose one with --condition V" none.err

# pelab eval at new depths adds rows for them only
run=conditions-out/runs/encoding-alibi_seed-1/run.h5
"$PELAB" eval "$run" --lengths 16 --depths 0.25,0.75 > eval.txt
grep -q "added 2 evaluation rows" eval.txt
PYTHONPATH="$source_dir/python" $py - "$run" <<'PY'
import sys
from pelab import runfile
run = runfile.load(sys.argv[1])
assert runfile.condition_values(run) == ("depth", [0.0, 0.25, 0.5, 0.75, 1.0]), runfile.condition_values(run)
rows = runfile.select_rows(run, condition_value=0.25)
assert list(rows) == [16], rows
assert runfile.select_rows(run) == {}  # no rows without a condition
PY

# pelab.results: a depth column
PYTHONPATH="$source_dir/python" PELAB_BUILD_DIR="$(dirname "$PELAB")" $py - <<'PY'
import pelab
df = pelab.results("conditions-out")
assert len(df) == 4 * 2 * 3 + 2, len(df)  # and the two pelab eval added
assert sorted(df["depth"].unique()) == [0, 0.25, 0.5, 0.75, 1], df["depth"].unique()
assert (df["condition"] == "depth").all()
PY

# a suite: the table and its plot, the same from the per-run file
"$PELAB" sweep "$source_dir/tests/fixtures/sweeps/suite.yaml" --jobs 2 > suite.txt
$py "$analysis/suite_table.py" suite-out --out suite.png > table.md
grep -q "| task | test lengths | baseline | none | rope |" table.md
grep -q "| flip_flop | 16 |" table.md
grep -q "| ngram_lookup | 14, 20 |" table.md
"$PELAB" report suite-out > /dev/null
$py "$analysis/suite_table.py" suite-out/report_runs.csv --out suite_csv.png > table_csv.md
cmp table.md table_csv.md
cmp suite.csv suite_csv.csv
$py - <<'PY'
import csv
rows = list(csv.DictReader(open("suite.csv")))
assert len(rows) == 2 * 2 and all(r["seeds"] == "2" for r in rows), rows
PY
# the shipped CPU suite's table and CSV come back from its per-run file alone
$py "$analysis/suite_table.py" "$source_dir/docs/suites/cpu_runs.csv" --out shipped_suite.png > shipped.md 2> /dev/null
diff shipped.md <(tail -n +5 "$source_dir/docs/suites/cpu.md")
cmp shipped_suite.csv "$source_dir/docs/suites/cpu.csv"

# a task without depths refuses them
status=0; "$PELAB" eval "$(ls suite-out/runs/*/run.h5 | head -1)" --depths 0.5 2> depths.err || status=$?
test "$status" != 0
grep -q "eval.depths is set, but task" depths.err
echo "conditions and suite: ok"
