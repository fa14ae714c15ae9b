#!/usr/bin/env bash
# Ruoss et al. 2023 at the paper's protocol (configs/studies/ruoss/grid.yaml): one sweep folder
# per task under runs/studies/ruoss/, each resumable and mergeable by folder (parts run on other
# machines: copy their runs/<id>/ folders in), then each task's per-run file
# docs/studies/ruoss/<task>_runs.csv (this folder's runs merged with those the file already
# holds, which the sweep leaves out: --skip-runs-in) and the study's tables and plots from those files
# (analysis/studies/ruoss.py; again without training: scripts/dev studies --from-data ruoss).
#   scripts/ruoss-paper.sh [--tasks a,b,...] [pelab sweep options]
#   scripts/ruoss-paper.sh --tasks reverse_string --jobs 2 --only seed=0 --only seed=1 --only seed=2
#                                                  # the CPU part: 3 of the 5 seeds
#   scripts/ruoss-paper.sh --gpus 0 --runs-per-gpu auto      # every task on one GPU
# PELAB: the pelab binary (default build/pelab; a GPU machine: build-cuda/pelab). RUOSS_RUNS and
# RUOSS_DOCS: the run and per-run-file folders (default runs/studies/ruoss, docs/studies/ruoss).
# RUOSS_TABLES=0: the per-run files only, not the tables (a machine without matplotlib).
# Each part that trains runs appends a line to RUOSS_DOCS/runtime.md: the task, the runs, the
# minutes, the machine and the sweep options.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pelab="${PELAB:-$root/build/pelab}"
runs="${RUOSS_RUNS:-$root/runs/studies/ruoss}"
docs="${RUOSS_DOCS:-$root/docs/studies/ruoss}"
tasks="even_pairs,modular_arithmetic,parity_check,cycle_navigation,stack_manipulation,reverse_string,modular_arithmetic_brackets,solve_equation,duplicate_string,missing_duplicate_string,odds_first,binary_addition,binary_multiplication,compute_sqrt,bucket_sort"
if [[ "${1:-}" == --tasks ]]; then tasks="$2"; shift 2; fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# A task's per-run file: the runs of this machine's folder (new or trained again) and the
# shipped file's other runs (parts trained elsewhere, kept), in the grid's order.
#   merge_per_run_file NEW SHIPPED LISTING (pelab sweep --dry-run: "index state id ...")
merge_per_run_file() {
  /usr/bin/python3 - "$@" <<'PY'
import re, sys
new, shipped, listing = sys.argv[1:4]
order = {m.group(2): int(m.group(1)) for m in re.finditer(r"^ *(\d+) +\S+ +(\S+)", open(listing).read(), re.M)}
header, *lines = open(new).read().splitlines()
ids = {line.split(",", 1)[0] for line in lines}
try:
    old_header, *old_lines = open(shipped).read().splitlines()
    if old_header != header:
        sys.exit(f"{shipped}: not this pelab's columns; move it away to write it anew")
    lines += [line for line in old_lines if line.split(",", 1)[0] not in ids]
except FileNotFoundError:
    pass
lines.sort(key=lambda line: order.get(line.split(",", 1)[0], len(order)))  # stable: lengths keep their order
with open(shipped, "w") as f:
    f.write("\n".join([header] + lines) + "\n")
PY
}
# the complete runs of a sweep folder (a run file is written when its run completes)
complete_runs() { { find "$1/runs" -name run.h5 2>/dev/null || true; } | wc -l; }
# the machine: its cores and CPU, and the GPU when one is used
machine() {
  local cpu gpu
  cpu=$(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //' || true)
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
  echo "$(nproc) cores (${cpu:-$(uname -m)})${gpu:+ and a GPU ($gpu)}"
}
# the grid's report options (its "# report:" line: --learned, the study's threshold)
read -r -a report_options <<<"$(sed -n 's/^# report: //p' "$root/configs/studies/ruoss/grid.yaml")"
mkdir -p "$docs"
status=0
for task in ${tasks//,/ }; do
  out="$runs/$task" shipped="$docs/${task}_runs.csv"
  echo "== $task -> $out"
  grid=("$root/configs/studies/ruoss/grid.yaml" --set "task.name=$task" --output "$out")
  skip=()  # runs the shipped per-run file holds were trained (here or elsewhere): not again
  [[ -f "$shipped" ]] && skip=(--skip-runs-in "$shipped")
  complete_before=$(complete_runs "$out") start=$SECONDS
  "$pelab" sweep "${grid[@]}" "${skip[@]}" "$@" || status=$?
  trained=$(( $(complete_runs "$out") - complete_before ))
  if [[ $trained -gt 0 ]]; then  # the part's line in runtime.md: what ran where, in how long
    echo "- $task: $trained runs in $(( (SECONDS - start + 30) / 60 )) minutes on $(machine), pelab sweep options: $*, $(date -u +%Y-%m-%d)" \
      >> "$docs/runtime.md"
  fi
  # every complete run of the folder, merged into the shipped per-run file, also when a signal
  # stopped the sweep (its complete runs are kept); report's exit 1: some runs not complete.
  # With the grid's report options: the file's learned column flags the runs below the study's
  # threshold (docs/studies/ruoss.md)
  if [[ -d "$out/runs" ]]; then
    "$pelab" report "$out" "${report_options[@]}" --out "$scratch/$task" > /dev/null || [[ $? == 1 ]]
    # the whole grid, in order; exit 1: the runs trained with this command's --set, not given here
    "$pelab" sweep "${grid[@]}" --dry-run > "$scratch/$task/listing.txt" 2> /dev/null || [[ $? == 1 ]]
    merge_per_run_file "$scratch/$task/report_runs.csv" "$shipped" "$scratch/$task/listing.txt"
  fi
  [[ $status == 75 ]] && break   # stopped by a signal: the same command resumes
done
if [[ "${RUOSS_TABLES:-1}" != 0 ]]; then
  PELAB="$pelab" /usr/bin/python3 "$root/analysis/studies/ruoss.py" "$runs" "$docs"
fi
exit "$status"   # 75: stopped by a signal, the same command resumes
