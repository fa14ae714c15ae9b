#!/usr/bin/env bash
# Regenerates the studies (docs/studies/README.md): scripts/dev studies [NAME[/SWEEP]...], every
# study when none is named. A study is a folder configs/studies/NAME/ of sweep files (or one
# file configs/studies/NAME.yaml); NAME/SWEEP runs only configs/studies/NAME/SWEEP.yaml. For
# each sweep: the sweep (resumed: complete runs are kept, so a stopped study goes on where it
# stopped), its report (mean +- std over seeds), its per-run values and its lengths plot, copied
# to docs/studies/NAME/<sweep>.{csv,md,png} and <sweep>_runs.csv; then analysis/studies/NAME.py, when there is one,
# writes the study's own tables and plots there. docs/studies/NAME/runtime.md has a line per
# sweep: the runs it made, the minutes they took and the machine. A sweep file may carry a line
# "# report: OPTIONS" (e.g. --metric loss): options of both pelab report and plot_lengths.py
# (--metric, --method, --step, --sampler, --samples) for its table and plot.
# Environment: PELAB (default build/pelab), STUDY_JOBS (runs at once, default 2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pelab="${PELAB:-build/pelab}"
jobs="${STUDY_JOBS:-2}"
py=/usr/bin/python3  # Debian's, with h5py and matplotlib

# base/: their base configs; ruoss_paper/: the paper-protocol grid, a GPU job of its own
# (scripts/ruoss-paper.sh)
available=$(ls configs/studies | grep -v -x -e base -e ruoss_paper | sed 's/\.yaml$//' | sort -u)
if [ $# -eq 0 ]; then set -- $available; fi
cpu=$(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //' || true)
cpu=${cpu:-$(uname -m)}
for name in "$@"; do
  study=${name%%/*}
  if [ -f "configs/studies/$name.yaml" ]; then files=("configs/studies/$name.yaml")  # NAME.yaml or NAME/SWEEP.yaml
  elif [ -d "configs/studies/$name" ]; then files=(configs/studies/"$name"/*.yaml)
  else echo "studies: no study '$name' in configs/studies ($(tr '\n' ' ' <<<"$available"))" >&2; exit 2
  fi
  out="docs/studies/$study"
  mkdir -p "$out"
  for file in "${files[@]}"; do
    sweep=$(basename "$file" .yaml)
    read -r -a report_options <<<"$(sed -n 's/^# report: //p' "$file")"
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
    "$pelab" report "$dir" --format markdown "${report_options[@]}" || [ $? -eq 1 ]  # 1: some runs failed; the table has the rest
    cp "$dir/report.csv" "$out/$sweep.csv"
    cp "$dir/report.md" "$out/$sweep.md"
    cp "$dir/report_runs.csv" "$out/${sweep}_runs.csv"  # every run's values: the table's source
    "$py" analysis/plot_lengths.py "$dir" "${report_options[@]}" --out "$out/$sweep.png" > /dev/null
  done
  if [ -f "analysis/studies/$study.py" ]; then
    "$py" "analysis/studies/$study.py" "runs/studies/$study" "$out"
  fi
  echo "== study $study: docs in $out"
done
