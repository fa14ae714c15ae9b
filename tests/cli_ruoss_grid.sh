#!/usr/bin/env bash
# The Ruoss paper-protocol grid (configs/studies/ruoss_paper/grid.yaml, scripts/ruoss-paper.sh)
# at a small size on the CPU: for every one of the paper's 15 tasks all 165 run configs are
# valid (pelab sweep --dry-run with --set task.name and --output), and one run of each encoding
# trains through the packed runner at a tiny size (pelab sweep --set) and gives the paper's
# measure and the median beside it.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
grid="$source_dir/configs/studies/ruoss_paper/grid.yaml"
tasks=$(sed -n 's/^tasks="\(.*\)"$/\1/p' "$source_dir/scripts/ruoss-paper.sh")
test "$(echo "$tasks" | tr ',' '\n' | wc -l)" = 15
for task in ${tasks//,/ }; do
  "$PELAB" sweep "$grid" --set "task.name=$task" --output "grid-$task" --dry-run > "dry-$task.txt"
  grep -q "sweep 'ruoss_paper': 165 runs (0 complete), base .*, in grid-$task" "dry-$task.txt"
done
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
grep -q "run(s) had not learned their training range (per-token accuracy below 90% at the training lengths)" paper.txt
"$PELAB" report small --aggregate median-ci > median.txt || true
grep -q "median \[95% bootstrap interval\] over seeds" median.txt
test "$(tail -n +2 small/report_runs.csv | wc -l)" = 22   # 11 runs x 2 lengths
echo "cli_ruoss_grid: ok"
