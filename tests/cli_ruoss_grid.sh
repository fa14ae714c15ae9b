#!/usr/bin/env bash
# The Ruoss paper-protocol grid (configs/studies/ruoss/grid.yaml, scripts/ruoss-paper.sh) at a
# small size on the CPU: for every one of the paper's 15 tasks all 165 run configs are valid
# (pelab sweep --dry-run with --set task.name and --output); `--only` picks a part of the grid;
# one run of each encoding trains through the packed runner at a tiny size (pelab sweep --set)
# and gives the paper's measure and the median beside it; scripts/ruoss-paper.sh trains a part,
# ships its per-run file and makes the study's tables from it; a changed protocol (steps) is
# not mixed with runs trained before it.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
grid="$source_dir/configs/studies/ruoss/grid.yaml"
tasks=$(sed -n 's/^tasks="\(.*\)"$/\1/p' "$source_dir/scripts/ruoss-paper.sh")
test "$(echo "$tasks" | tr ',' '\n' | wc -l)" = 15
for task in ${tasks//,/ }; do
  "$PELAB" sweep "$grid" --set "task.name=$task" --output "grid-$task" --dry-run > "dry-$task.txt"
  grep -q "sweep 'ruoss': 165 runs (0 complete), base .*, in grid-$task" "dry-$task.txt"
done
# --only: the CPU part (3 of 5 seeds) is 99 runs, all with those seeds; a key given again ORs,
# keys AND; a value or key the grid has not is refused, naming what it has
"$PELAB" sweep "$grid" --set task.name=reverse_string --output cpu --only seed=0 --only seed=1 --only seed=2 \
  --dry-run > cpu.txt
grep -q "sweep 'ruoss': 99 of 165 runs (0 complete)" cpu.txt
test "$(grep -c '^ *[0-9]' cpu.txt)" = 99
test "$(grep -c -E ' seed=(0|1|2) ' cpu.txt)" = 99
"$PELAB" sweep "$grid" --set task.name=reverse_string --output cpu --only seed=0 --only train.learning_rate=5.0e-4 \
  --dry-run | grep "11 of 165 runs" > /dev/null
status=0; "$PELAB" sweep "$grid" --only seed=7 --dry-run 2> only.err || status=$?
test "$status" = 2; grep -qF -- "--only seed=7: no run has it; seed takes: 0, 1, 2, 3, 4" only.err
status=0; "$PELAB" sweep "$grid" --only task.name=parity_check --dry-run 2> only.err || status=$?
test "$status" = 2; grep -qF -- "--only task.name: not an axis of the sweep; its axes: encoding, positions.sampler, seed, train.learning_rate" only.err
# the first seed at the first learning rate of each of the 11 encodings
indices=$(grep -F "[train.learning_rate=1.0e-4 seed=0 " dry-parity_check.txt | awk '{print $1}' | paste -sd, -)
test "$(echo "$indices" | tr ',' '\n' | wc -l)" = 11
tiny=(--set train.steps=4 --set train.batch_size=4 --set model.d_model=16 --set model.num_heads=2
      --set model.d_ff=32 --set model.num_layers=1 --set 'eval.lengths=[20,41]' --set eval.samples=8)
# the manifest first (what a Slurm submission writes), then the runs in one process, as a
# packed process of the sweep trains them
"$PELAB" sweep "$grid" --set task.name=parity_check --output small "${tiny[@]}" --slurm --no-submit > /dev/null
"$PELAB" sweep "$grid" --set task.name=parity_check --output small "${tiny[@]}" --run-index "$indices" \
  --in-process --threads 1 | tee small.txt
test "$(grep -c '^complete ' small.txt)" = 11
status=0
"$PELAB" report small --pool train.learning_rate --aggregate max --learned 0.9 > paper.txt || status=$?
cat paper.txt
test "$status" = 1   # 154 runs not trained: listed, exit 1
grep -qF "best of the seeds x train.learning_rate [worst]" paper.txt
grep -q "run(s) had not learned their training range (per-token accuracy below 90% at the longest training length evaluated)" paper.txt
"$PELAB" report small --aggregate median-ci > median.txt || true
grep -q "median \[order-statistic interval\] over seeds" median.txt
test "$(tail -n +2 small/report_aggregate-median-ci_runs.csv | wc -l)" = 22   # 11 runs x 2 lengths
# the script: a part (--only) trained in one process, its per-run file shipped to RUOSS_DOCS, the
# tables made from it; the per-run file gives pelab report's table to the digit
RUOSS_RUNS="$work/study-runs" RUOSS_DOCS="$work/study-docs" "$source_dir/scripts/ruoss-paper.sh" \
  --tasks parity_check --only seed=0 --only train.learning_rate=1.0e-4 --runs-per-process 11 --threads 1 \
  "${tiny[@]}" > script.txt
test "$(tail -n +2 study-docs/parity_check_runs.csv | wc -l)" = 22
# the part's line in runtime.md: its task, the runs it trained, the machine and the options
grep -qE "^- parity_check: 11 runs in [0-9]+ minutes on [0-9]+ cores \(.+\), pelab sweep options: --only seed=0 .*--runs-per-process 11 .*, 20[0-9-]+$" study-docs/runtime.md
/usr/bin/python3 - study-docs/parity_check_runs.csv <<'PY'  # the study's threshold flags every tiny run
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert {r["learned"] for r in rows} == {"0"} and all(float(r["in_distribution_token_accuracy"]) < 0.9 for r in rows)
assert {r["seed"] for r in rows} == {"0"}
PY
for f in ruoss.md ruoss.csv ruoss.png parity_check_paper.md parity_check_paper_learned.md parity_check_median_token.md \
         parity_check_median_sequence.md; do
  test -s "study-docs/$f"
done
# a tiny run learns nothing: flagged; the paper's measure over every run has a value, over the
# learned runs and their median none; parity has no position-free baseline (the last column)
grep -qE "^\| RoPE \| plain \| 0/1 \| [0-9]+\.[0-9] \|  \|  \| [0-9]+\.[0-9] \|  \|$" study-docs/ruoss.md
"$PELAB" report study-runs/parity_check --format csv > from-runs.csv || test $? = 1  # 1: 154 runs not trained
"$PELAB" report study-docs/parity_check_runs.csv --format csv > from-file.csv
cmp from-runs.csv from-file.csv
# another machine (an empty run folder) with the shipped file: the first part is not trained
# again (--skip-runs-in), the second merges in beside it, in the grid's order
RUOSS_RUNS="$work/other-runs" RUOSS_DOCS="$work/study-docs" "$source_dir/scripts/ruoss-paper.sh" \
  --tasks parity_check --only seed=0 --only seed=1 --only train.learning_rate=1.0e-4 --runs-per-process 11 \
  --threads 1 "${tiny[@]}" > script2.txt
grep -q "sweep 'ruoss': 11 of 165 runs, 0 complete, 11 to run" script2.txt
test "$(grep -c "^- parity_check: 11 runs in" study-docs/runtime.md)" = 2   # a line per part
test "$(tail -n +2 study-docs/parity_check_runs.csv | wc -l)" = 44
ids=$(cut -d, -f1 study-docs/parity_check_runs.csv | uniq)
test "$(sed -n 2p <<<"$ids")" = learning_rate-1.0e-4_seed-0_encoding-namenone_sampler-contiguous
test "$(sed -n 13p <<<"$ids")" = learning_rate-1.0e-4_seed-1_encoding-namenone_sampler-contiguous
grep -q "^| RoPE | plain | 0/2 |" study-docs/ruoss.md
# a protocol changed after runs completed (here the steps) is not mixed in: the sweep lists the
# runs trained otherwise and stops before training any; a shipped per-run file of 4 steps, or of
# another task (the same run ids), does not stand for this sweep's runs
status=0; "$PELAB" sweep "$grid" --set task.name=parity_check --output small "${tiny[@]}" --set train.steps=5 \
  --dry-run > changed.txt 2> changed-dry.err || status=$?
test "$status" = 1
test "$(grep -c '^ *[0-9]* *changed .* trained with train.steps: 4 -> 5$' changed.txt)" = 11
grep -q "^error: 11 complete run(s) in small were trained with another config" changed-dry.err
status=0; "$PELAB" sweep "$grid" --set task.name=parity_check --output small "${tiny[@]}" --set train.steps=5 \
  --only seed=0 --threads 1 > changed.out 2> changed.err || status=$?
test "$status" = 2
grep -q "error: 11 complete run(s) in small were trained with another config than this sweep gives them, e.g. learning_rate-1.0e-4_seed-0_encoding-namenone_sampler-contiguous (train.steps: 4 -> 5)" changed.err
test ! -s changed.out
status=0; "$PELAB" sweep "$grid" --set task.name=parity_check --output fresh "${tiny[@]}" --set train.steps=5 \
  --skip-runs-in study-docs/parity_check_runs.csv --dry-run 2> skip.err || status=$?
test "$status" = 2
grep -qF "parity_check_runs.csv: its run learning_rate-1.0e-4_seed-0_encoding-namenone_sampler-contiguous trained with 4 steps, not 5 as this sweep would train it" skip.err
status=0; "$PELAB" sweep "$grid" --set task.name=even_pairs --output fresh "${tiny[@]}" \
  --skip-runs-in study-docs/parity_check_runs.csv --dry-run 2> skip.err || status=$?
test "$status" = 2 && grep -qF "trained with the task parity_check, not even_pairs" skip.err
test ! -e fresh
# ... nor do the study's tables mix them (a per-run file merged by hand)
mkdir mixed
/usr/bin/python3 - study-docs/parity_check_runs.csv mixed/parity_check_runs.csv <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
rows[0]["train_steps"] = "5"  # one row of another protocol
with open(sys.argv[2], "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
PY
status=0; /usr/bin/python3 "$source_dir/analysis/studies/ruoss.py" - mixed 2> mixed.err || status=$?
test "$status" = 1 && grep -q "parity_check_runs.csv mixes runs of 4 and 5 steps; give each its own file" mixed.err
grep -q '^\*\*parity_check\*\* (4 steps)$' study-docs/ruoss.md
status=0; "$PELAB" sweep "$grid" --skip-runs-in from-file.csv --dry-run 2> skip.err || status=$?
test "$status" = 2 && grep -q "not a per-run file" skip.err
echo "cli_ruoss_grid: ok"
