#!/usr/bin/env bash
# pelab sweep and pelab report, end to end: a grid with zipped axes, the report's numbers
# against the runs' own, a failing run that does not stop the sweep, a sweep stopped with
# SIGTERM (exit 75, runs checkpointed) and killed with kill -9 at random moments, then
# restarted: the finished runs are kept, the others resumed, and the results equal an
# uninterrupted sweep's bit for bit.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
fixtures="$source_dir/tests/fixtures/sweeps"
py="${PELAB_PYTHON:-/usr/bin/python3}"  # a Python with h5py

echo "== dry run"
"$PELAB" sweep "$fixtures/tiny.yaml" --dry-run | tee dry.txt
grep -q "8 runs (0 complete)" dry.txt
grep -q "pending   encoding-alibi_seed-1_max_length-8_lengths-4-8" dry.txt
test ! -e sweep-out  # a dry run writes nothing

echo "== a grid x zip sweep, 2 at a time"
"$PELAB" sweep "$fixtures/tiny.yaml" --jobs 2 | tee sweep.txt
grep -q "8 of 8 runs complete" sweep.txt
# each run gets cores / jobs threads (a GPU machine's 16 cores: 8)
grep -q "2 at a time x $(( $(getconf _NPROCESSORS_ONLN) / 2 > 1 ? $(getconf _NPROCESSORS_ONLN) / 2 : 1 )) threads" sweep.txt
# progress: a line as each run starts, and with each end what runs, what is left and the time left
test "$(grep -c '^\[-/8\] started   ' sweep.txt)" = 8
grep -q -E "^\[1/8\] complete  .*\); 1 running, 6 to start, about [0-9]+(m[0-9]+)?s left$" sweep.txt
grep -q -E "^\[8/8\] complete  .*\); 0 running, 0 to start$" sweep.txt
for id in $(cut -f2 sweep-out/runs.tsv | tail -n +2); do test -f "sweep-out/runs/$id/run.h5"; done
"$PELAB" report sweep-out | tee report.txt
grep -q "8 of 8 runs complete" report.txt
grep -q "^chance" report.txt
test -s sweep-out/report.md && test -s sweep-out/report.csv
# the report's means and stds are those of the runs' own numbers (h5py, through the sweep index)
$py - <<'PY'
import csv, re, statistics, h5py
rows = {(r["group"], int(r["length"])): r for r in csv.DictReader(open("sweep-out/report.csv")) if r["length"] != "beyond"}
with h5py.File("sweep-out/sweep.h5") as index:
    table = index["table"]
    ids = [x.decode() for x in table["id"][()]]
    overrides = [x.decode() for x in table["overrides"][()]]
    assert all(x.decode() == "complete" for x in table["status"][()])
    groups = {}
    for run_id, o in zip(ids, overrides):
        labels = {"encoding.name": "encoding", "train.max_length": "max_length", "eval.lengths": "lengths"}
        group = " ".join(labels[k] + "=" + v for k, v in
                         (p.split("=", 1) for p in re.split(r" (?=[a-z_.]+=)", o)) if k != "seed")
        run = index["runs"][run_id]  # an external link to the run file's root
        for length, acc in zip(run["evaluation/length"][()], run["evaluation/per_token_accuracy"][()]):
            groups.setdefault((group, int(length)), []).append(100 * acc)
assert set(groups) == set(rows), (sorted(groups), sorted(rows))
for key, values in groups.items():
    assert len(values) == 2 and int(rows[key]["seeds"]) == 2
    assert abs(statistics.mean(values) - float(rows[key]["mean"])) < 1e-4, key
    assert abs(statistics.stdev(values) - float(rows[key]["std"])) < 1e-4, key
print("report matches the runs:", len(groups), "cells")
PY
# nothing to redo on a second call
"$PELAB" sweep "$fixtures/tiny.yaml" --jobs 2 > again.txt
grep -q "8 complete, 0 to run" again.txt

echo "== a report over run files (each its own group, named by its run) and a sweep together"
a=encoding-none_seed-0_max_length-6_lengths-3-6 b=encoding-alibi_seed-1_max_length-8_lengths-4-8
"$PELAB" report "sweep-out/runs/$a/run.h5" "sweep-out/runs/$b/run.h5" --out two | tee two.txt
grep -q "2 of 2 runs complete" two.txt
grep -q "^run=$a " two.txt && grep -q "^run=$b " two.txt
test "$(tail -n +2 two/report_runs.csv | wc -l)" = 4   # 2 runs x 2 lengths
"$PELAB" report sweep-out "sweep-out/runs/$a/run.h5" > mixed.txt
grep -q "9 of 9 runs complete" mixed.txt
grep -q "several inputs: --out DIR writes" mixed.txt
status=0; "$PELAB" report sweep-out/nothing.h5 2> missing.err || status=$?
test "$status" = 2 && grep -q "nothing.h5 does not exist: give sweep directories, run files (run.h5) or per-run files" missing.err

echo "== a report of a per-run file (report_runs.csv) is the report of its runs, without them"
"$PELAB" report sweep-out --aggregate median-ci --learned 0.5 --format csv > from-runs.csv
"$PELAB" report sweep-out/report_runs.csv --aggregate median-ci --learned 0.5 --format csv > from-file.csv
cmp from-runs.csv from-file.csv
PELAB_ANALYSIS="$source_dir/analysis" $py - <<'PY'
import csv, os, sys
sys.path.insert(0, os.environ["PELAB_ANALYSIS"])
from runfile import per_run_file, select_rows, sweep_runs
swept = {r["id"]: select_rows(r["run"]) for r in sweep_runs("sweep-out") if r["run"] is not None}
shipped = {r["id"]: select_rows(r["run"]) for r in per_run_file("sweep-out/report_runs.csv")}
assert swept.keys() == shipped.keys(), (swept.keys(), shipped.keys())
for run_id, rows in swept.items():
    assert rows.keys() == shipped[run_id].keys()
    for length, row in rows.items():
        for key in ["per_token_accuracy", "per_sequence_accuracy", "loss", "chance_token_accuracy", "samples"]:
            assert row[key] == shipped[run_id][length][key], (run_id, length, key)
print("per-run file rows equal the run files':", len(swept), "runs")
for r in per_run_file("sweep-out/report_runs.csv"):  # the seed column: the run's config's seed
    assert r["run"]["seed"] == int(r["overrides"]["seed"]), (r["id"], r["run"]["seed"])
# a per-run file written before the seed column was added
rows = list(csv.reader(open("sweep-out/report_runs.csv")))
at = rows[0].index("seed")
csv.writer(open("without-seed.csv", "w", newline="")).writerows([row[:at] + row[at + 1:] for row in rows])
assert all(r["run"]["seed"] is None for r in per_run_file("without-seed.csv"))
PY
"$PELAB" report without-seed.csv --aggregate median-ci --learned 0.5 --format csv > from-old-file.csv
cmp from-file.csv from-old-file.csv
"$PELAB" report two/report_runs.csv --metric sequence > two-file.txt
grep -q "^run=$a " two-file.txt && grep -q "two/report_runs.csv: per-sequence accuracy" two-file.txt
status=0; "$PELAB" report two/report_runs.csv --step 3 2> step.err || status=$?
test "$status" = 2 && grep -q "a per-run file holds the rows its report selected; --step, --sampler" step.err
status=0; "$PELAB" report two/report.csv 2> notruns.err || status=$?
test "$status" = 2 && grep -q "two/report.csv: not a per-run file (pelab report's report_runs.csv): no column 'run'" notruns.err

echo "== a failing run is recorded and the sweep goes on"
set +e
"$PELAB" sweep "$fixtures/failing.yaml" > failing.txt 2>&1
status=$?
set -e
cat failing.txt
test "$status" = 1
grep -q "FAILED    encoding-learned" failing.txt
grep -q "complete  encoding-none" failing.txt
grep -q "cannot be encoded" failing-out/runs/encoding-learned/failed.txt
test ! -e failing-out/runs/encoding-learned/run.h5
"$PELAB" report failing-out > failing-report.txt || true
grep -q "1 of 2 runs complete" failing-report.txt
grep -q "encoding-learned failed: error: run 'encoding-learned' failed: length 600" failing-report.txt
$py -c "
import h5py
with h5py.File('failing-out/sweep.h5') as f:
    status = [x.decode() for x in f['table/status'][()]]
    assert status == ['failed', 'complete'], status
    assert 'cannot be encoded' in f['table/error'][0].decode()
    assert 'encoding-learned' not in f['runs'] and 'encoding-none' in f['runs']
"

echo "== the slow sweep uninterrupted (the reference)"
mkdir -p reference
(cd reference && "$PELAB" sweep "$fixtures/slow.yaml" --jobs 2 --threads 1 > sweep.txt)
grep -q "4 of 4 runs complete" reference/sweep.txt

echo "== kill -9 midway: the finished run is kept, the killed one is not finished"
setsid "$PELAB" sweep "$fixtures/slow.yaml" --jobs 1 --threads 1 > slow1.txt 2>&1 &
leader=$!
for _ in $(seq 1 600); do
  if [[ -f slow-out/runs/seed-0/run.h5 && -f slow-out/runs/seed-1/log.txt ]]; then break; fi
  sleep 0.1
done
test -f slow-out/runs/seed-0/run.h5
kill -9 -- -"$leader"  # the sweep and the run it was running
wait "$leader" || true
test ! -e slow-out/runs/seed-1/run.h5        # the killed run left nothing that looks finished
before=$(stat -c %Y.%s slow-out/runs/seed-0/run.h5; md5sum < slow-out/runs/seed-0/run.h5)

echo "== SIGTERM to the sweep: its runs checkpoint, it exits 75"
"$PELAB" sweep "$fixtures/slow.yaml" --jobs 2 --threads 1 > term.txt 2>&1 &
sweep_pid=$!
for _ in $(seq 1 600); do
  if ls slow-out/runs/seed-[123]/checkpoint.h5 > /dev/null 2>&1; then break; fi
  sleep 0.1
done
kill -TERM "$sweep_pid"
status=0; wait "$sweep_pid" || status=$?
cat term.txt
test "$status" = 75
grep -q "SIGTERM: stopping 2 run(s)" term.txt
grep -q "stopped   seed-" term.txt
grep -q "the same command resumes the sweep" term.txt
"$PELAB" sweep "$fixtures/slow.yaml" --dry-run > dry-slow.txt
grep -q "resumable" dry-slow.txt

echo "== kill -9 of the whole sweep at random moments, three times"
for attempt in 1 2 3; do
  setsid "$PELAB" sweep "$fixtures/slow.yaml" --jobs 2 --threads 1 >> slow-killed.txt 2>&1 &
  leader=$!
  sleep "$((RANDOM % 3)).$((RANDOM % 10))"
  kill -9 -- -"$leader" 2>/dev/null || true
  wait "$leader" || true
done
"$PELAB" sweep "$fixtures/slow.yaml" --jobs 2 --threads 1 | tee slow2.txt
grep -q "4 of 4 runs complete" slow2.txt
grep -q "resuming from step" slow-out/runs/seed-*/log.txt
after=$(stat -c %Y.%s slow-out/runs/seed-0/run.h5; md5sum < slow-out/runs/seed-0/run.h5)
test "$before" = "$after"                    # the finished run was not redone
test -z "$(ls slow-out/runs/*/checkpoint.h5 slow-out/runs/*/*.tmp 2>/dev/null)"

echo "== the interrupted sweep's results equal the uninterrupted one's, bit for bit"
$py - <<'PY'
import h5py, numpy as np
for seed in range(4):
    a = h5py.File(f"reference/slow-out/runs/seed-{seed}/run.h5", "r")
    b = h5py.File(f"slow-out/runs/seed-{seed}/run.h5", "r")
    keys = ["training/loss", "training/accuracy", "evaluation/loss", "evaluation/per_token_accuracy"]
    keys += ["checkpoint/" + name for name in a["checkpoint"]]
    for key in keys:
        assert np.array_equal(a[key][()], b[key][()]), (seed, key)
print("4 runs equal to the uninterrupted sweep")
PY
"$PELAB" report slow-out > slow-report.txt
grep -q "(base)" slow-report.txt
echo "cli_sweep: ok"
