#!/usr/bin/env bash
# Ruoss et al. 2023 at the paper's protocol (configs/studies/ruoss_paper/grid.yaml): one sweep
# folder per task under runs/studies/ruoss_paper/, each resumable and mergeable by folder, then
# the paper's measure beside the median for each.
#   scripts/ruoss-paper.sh [--tasks a,b,...] [pelab sweep options, e.g. --gpus 0 --runs-per-gpu auto]
# PELAB: the pelab binary (default build/pelab; a GPU machine: build-cuda/pelab).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pelab="${PELAB:-$root/build/pelab}"
tasks="even_pairs,modular_arithmetic,parity_check,cycle_navigation,stack_manipulation,reverse_string,modular_arithmetic_brackets,solve_equation,duplicate_string,missing_duplicate_string,odds_first,binary_addition,binary_multiplication,compute_sqrt,bucket_sort"
if [[ "${1:-}" == --tasks ]]; then tasks="$2"; shift 2; fi
status=0
for task in ${tasks//,/ }; do
  out="runs/studies/ruoss_paper/$task"
  echo "== $task -> $out"
  "$pelab" sweep "$root/configs/studies/ruoss_paper/grid.yaml" --set "task.name=$task" --output "$out" "$@" || status=$?
  [[ $status == 75 ]] && exit 75   # stopped by a signal: the same command resumes
  "$pelab" report "$out" --pool train.learning_rate --aggregate max --learned 0.9 --format markdown > "$out/paper_measure.md" || true
  "$pelab" report "$out" --aggregate median-ci --learned 0.9 --format markdown > "$out/median.md" || true
done
exit "$status"
