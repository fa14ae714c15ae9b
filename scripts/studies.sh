#!/usr/bin/env bash
# The studies (docs/studies/README.md), in two stages:
#   scripts/dev studies [NAME[/SWEEP]...]              train, then make the pages' tables and plots
#   scripts/dev studies --from-data [NAME[/SWEEP]...]  only the tables and plots, from the shipped
#                                                      per-run files: nothing is trained or read
#                                                      from runs/
# Every study when none is named. A study is a folder configs/studies/NAME/ of sweep files (or
# one file configs/studies/NAME.yaml); NAME/SWEEP names one sweep file of it. A folder holding a
# grid.yaml is a grid run in parts by its own script (ruoss: scripts/ruoss-paper.sh, one sweep
# folder per task): the first stage leaves it to that script.
#
# First stage, per sweep: the sweep (resumed: complete runs are kept, so a stopped study goes on
# where it stopped), then its per-run file docs/studies/NAME/<sweep>_runs.csv (pelab report's
# report_runs.csv: every run and test length) and the per-run files the study's analysis
# extracts from the run files (probes, score terms, parameter counts, padding effects).
# docs/studies/NAME/runtime.md has a line per sweep: the runs it made, the minutes they took
# and the machine.
# Second stage, from docs/studies/NAME/ alone: per sweep, pelab report of <sweep>_runs.csv
# (<sweep>.md, <sweep>.csv: mean +- std over seeds) and plot_lengths.py's plot (<sweep>.png);
# then analysis/studies/NAME.py, the study's own tables and plots.
# A sweep file may carry a line "# report: OPTIONS" (e.g. --metric loss --learned 0.9): options
# of both pelab report and plot_lengths.py (--metric, --method, --samples, --learned) for its
# per-run file, table and plot; --learned is the study's threshold for a run that has learned its
# training range (the per-run file's learned column; beyond training, the others are left out).
# A line "# table: OPTIONS" gives options of the table's pelab report alone (--aggregate
# median-ci: the median with its order-statistic interval; the plot then draws the same).
# Lines "# label: GROUP => WORDS" name a group in the plot's legend in words (GROUP as
# plot_lengths.py labels it from the axis values, e.g. "learned max_positions=256 phases=32").
# Environment: PELAB (default build/pelab), STUDY_JOBS (runs at once, default 2), STUDIES_DOCS
# (the pages' folder, default docs/studies; tests/studies_from_data.sh makes a copy's tables).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pelab="$(realpath "${PELAB:-build/pelab}")"
docs="${STUDIES_DOCS:-docs/studies}"
jobs="${STUDY_JOBS:-2}"
py=/usr/bin/python3  # Debian's, with h5py and matplotlib
train=1
if [ "${1:-}" = --from-data ]; then train=0; shift; fi

# base/: their base configs
available=$(ls configs/studies | grep -v -x -e base | sed 's/\.yaml$//' | sort -u)
if [ $# -eq 0 ]; then set -- $available; fi
cpu=$(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //' || true)
cpu=${cpu:-$(uname -m)}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# report_options (the caller's local array): the sweep file's "# report:" line, split;
# table_options: its "# table:" line (options of the table's pelab report alone, e.g.
# --aggregate median-ci); label_options: its "# label: GROUP => WORDS" lines, as plot_lengths.py
# --label arguments (the legend in words instead of the group's axis values)
read_report_options() {
  read -r -a report_options <<<"$(sed -n 's/^# report: //p' "$1")"
  read -r -a table_options <<<"$(sed -n 's/^# table: //p' "$1")"
  label_options=()
  local label
  while IFS= read -r label; do label_options+=(--label "$label"); done < <(sed -n 's/^# label: //p' "$1")
}

# first stage for one sweep file: train, then its per-run file
run_sweep() {
  local file=$1 out=$2 sweep listing dir total to_run start line report_options
  sweep=$(basename "$file" .yaml)
  listing=$("$pelab" sweep "$file" --dry-run)
  dir=$(head -n 1 <<<"$listing" | sed 's/.* in //')
  total=$(grep -c '^ *[0-9]' <<<"$listing" || true)
  to_run=$(grep -c -E '^ *[0-9]+ +(pending|resumable|failed)' <<<"$listing" || true)
  echo "== study $study: sweep $file -> $dir"
  start=$SECONDS
  "$pelab" sweep "$file" --jobs "$jobs"
  if [ "$to_run" -gt 0 ]; then  # a sweep whose runs were all complete keeps its line
    line=$(printf -- '- %s: %s runs (%s run now) in %s minutes on %s cores (%s), %s runs at once, %s' "$sweep" \
      "$total" "$to_run" "$(( (SECONDS - start + 30) / 60 ))" "$(nproc)" "$cpu" "$jobs" "$(date -u +%Y-%m-%d)")
    { grep -v -- "^- $sweep: " "$out/runtime.md" 2>/dev/null || true; echo "$line"; } | sort > "$out/runtime.new"
    mv "$out/runtime.new" "$out/runtime.md"
  fi
  # 1: some runs failed; the per-run file has the rest. With the sweep's report options, so that
  # its learned column holds the study's threshold (--learned)
  read_report_options "$file"
  "$pelab" report "$dir" "${report_options[@]}" --out "$scratch/$sweep" > /dev/null || [ $? -eq 1 ]
  cp "$scratch/$sweep/report_runs.csv" "$out/${sweep}_runs.csv"
}

# second stage for one sweep file: its table and plot from its per-run file
tables_of_sweep() {
  local file=$1 out=$2 sweep report_options table_options label_options
  sweep=$(basename "$file" .yaml)
  read_report_options "$file"
  if [ ! -f "$out/${sweep}_runs.csv" ]; then
    echo "studies: $out/${sweep}_runs.csv is missing: run the study first (scripts/dev studies $study)" >&2
    exit 1
  fi
  # the plot aggregates the seeds as the table does (--aggregate median-ci: the median and its
  # order-statistic interval; otherwise the mean and the range)
  local plot_options=() i
  for ((i = 0; i < ${#table_options[@]}; i++)); do
    if [ "${table_options[i]}" = --aggregate ]; then plot_options=(--aggregate "${table_options[i + 1]}"); fi
  done
  # the plot first: it writes its numbers as <sweep>.csv, which the table's CSV then replaces.
  # From the folder, so that the table names its source as <sweep>_runs.csv, wherever it is.
  "$py" analysis/plot_lengths.py "$out/${sweep}_runs.csv" "${report_options[@]}" "${plot_options[@]}" \
    "${label_options[@]}" --out "$out/$sweep.png" > /dev/null
  (cd "$out" && "$pelab" report "${sweep}_runs.csv" --format markdown "${report_options[@]}" "${table_options[@]}" \
    --out "$scratch/$sweep" > /dev/null)
  cp "$scratch/$sweep/report.md" "$out/$sweep.md"
  cp "$scratch/$sweep/report.csv" "$out/$sweep.csv"
}

for name in "$@"; do
  study=${name%%/*}
  if [ -f "configs/studies/$name.yaml" ]; then files=("configs/studies/$name.yaml")  # NAME.yaml or NAME/SWEEP.yaml
  elif [ -d "configs/studies/$name" ]; then files=(configs/studies/"$name"/*.yaml)
  else echo "studies: no study '$name' in configs/studies ($(tr '\n' ' ' <<<"$available"))" >&2; exit 2
  fi
  out="$docs/$study"
  mkdir -p "$out"
  if [ -f "configs/studies/$study/grid.yaml" ]; then
    [ $train = 1 ] && echo "== study $study: a grid run in parts by scripts/$study-paper.sh; its tables from $out"
    files=()
  fi
  # a study of a pretrained model: its import.sh imports and evaluates it into runs/studies/NAME
  if [ -f "configs/studies/$study/import.sh" ]; then
    if [ $train = 1 ]; then
      mkdir -p "runs/studies/$study"
      start=$SECONDS
      PELAB="$pelab" bash "configs/studies/$study/import.sh" "runs/studies/$study"
      line="- import and evaluation: $(( (SECONDS - start + 30) / 60 )) minutes on $(nproc) cores ($cpu), $(date -u +%F)"
      { grep -v -- "^- import and evaluation: " "$out/runtime.md" 2>/dev/null || true; echo "$line"; } > "$out/runtime.new"
      mv "$out/runtime.new" "$out/runtime.md"
    fi
    files=()
  fi
  for file in "${files[@]}"; do
    if [ $train = 1 ]; then run_sweep "$file" "$out"; fi
    tables_of_sweep "$file" "$out"
  done
  if [ -f "analysis/studies/$study.py" ]; then
    # from the run folder (first stage: the run files' per-run extracts, then the tables), or
    # from the shipped files alone
    source_dir=$([ $train = 1 ] && echo "runs/studies/$study" || echo "$out")
    PELAB="$pelab" "$py" "analysis/studies/$study.py" "$source_dir" "$out"
  fi
  echo "== study $study: docs in $out"
done
