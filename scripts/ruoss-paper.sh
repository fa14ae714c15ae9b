#!/usr/bin/env bash
# Ruoss et al. 2023 at the paper's protocol (configs/studies/ruoss/grid.yaml): one sweep folder
# per task under runs/studies/ruoss/, each resumable and mergeable by folder (parts run on other
# machines: copy their runs/<id>/ folders in), then each task's per-run file
# docs/studies/ruoss/<task>_runs.csv and the study's tables and plots from those files
# (analysis/studies/ruoss.py; again without training: scripts/dev studies --from-data ruoss).
#   scripts/ruoss-paper.sh [--tasks a,b,...] [pelab sweep options]
#   scripts/ruoss-paper.sh --tasks reverse_string --jobs 2 --only seed=0 --only seed=1 --only seed=2
#                                                  # the CPU part: 3 of the 5 seeds
#   scripts/ruoss-paper.sh --gpus 0 --runs-per-gpu auto      # every task on one GPU
# PELAB: the pelab binary (default build/pelab; a GPU machine: build-cuda/pelab). RUOSS_RUNS and
# RUOSS_DOCS: the run and per-run-file folders (default runs/studies/ruoss, docs/studies/ruoss).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pelab="${PELAB:-$root/build/pelab}"
runs="${RUOSS_RUNS:-$root/runs/studies/ruoss}"
docs="${RUOSS_DOCS:-$root/docs/studies/ruoss}"
tasks="even_pairs,modular_arithmetic,parity_check,cycle_navigation,stack_manipulation,reverse_string,modular_arithmetic_brackets,solve_equation,duplicate_string,missing_duplicate_string,odds_first,binary_addition,binary_multiplication,compute_sqrt,bucket_sort"
if [[ "${1:-}" == --tasks ]]; then tasks="$2"; shift 2; fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$docs"
status=0
for task in ${tasks//,/ }; do
  out="$runs/$task"
  echo "== $task -> $out"
  "$pelab" sweep "$root/configs/studies/ruoss/grid.yaml" --set "task.name=$task" --output "$out" "$@" || status=$?
  [[ $status == 75 ]] && exit 75   # stopped by a signal: the same command resumes
  # every complete run of the folder (parts from elsewhere too); exit 1: some not complete
  if [[ -d "$out/runs" ]]; then
    "$pelab" report "$out" --out "$scratch/$task" > /dev/null || [[ $? == 1 ]]
    cp "$scratch/$task/report_runs.csv" "$docs/${task}_runs.csv"
  fi
done
PELAB="$pelab" /usr/bin/python3 "$root/analysis/studies/ruoss.py" "$runs" "$docs"
exit "$status"
