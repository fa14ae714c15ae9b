#!/usr/bin/env bash
# Regenerates the studies (docs/studies/README.md): scripts/dev studies [NAME...], every study
# when none is named. A study is a folder configs/studies/NAME/ of sweep files (or one file
# configs/studies/NAME.yaml). For each of its sweeps: the sweep (resumed: complete runs are
# kept, so a stopped study goes on where it stopped), its report (mean +- std over seeds) and
# its lengths plot, copied to docs/studies/NAME/<sweep>.{csv,md,png}; then
# analysis/studies/NAME.py, when there is one, writes the study's own tables and plots there.
# docs/studies/NAME/runtime.md records the runs made, the time taken and the machine.
# Environment: PELAB (default build/pelab), JOBS (runs at once, default 2).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pelab="${PELAB:-build/pelab}"
jobs="${JOBS:-2}"
py=/usr/bin/python3  # Debian's, with h5py and matplotlib

if [ $# -eq 0 ]; then
  set -- $(ls configs/studies | grep -v '^base$' | sed 's/\.yaml$//' | sort -u)
fi
for study in "$@"; do
  if [ -d "configs/studies/$study" ]; then files=(configs/studies/"$study"/*.yaml)
  elif [ -f "configs/studies/$study.yaml" ]; then files=("configs/studies/$study.yaml")
  else echo "studies: no study '$study' in configs/studies ($(ls configs/studies | grep -v '^base$' | sed 's/\.yaml$//' | tr '\n' ' '))" >&2; exit 2
  fi
  out="docs/studies/$study"
  mkdir -p "$out"
  start=$SECONDS ran=0 total=0
  for file in "${files[@]}"; do
    sweep=$(basename "$file" .yaml)
    listing=$("$pelab" sweep "$file" --dry-run)
    dir=$(head -n 1 <<<"$listing" | sed 's/.* in //')
    total=$((total + $(grep -c '^ *[0-9]' <<<"$listing")))
    ran=$((ran + $(grep -c -E '^ *[0-9]+ +(pending|resumable|failed)' <<<"$listing" || true)))
    echo "== study $study: sweep $file -> $dir"
    "$pelab" sweep "$file" --jobs "$jobs"
    "$pelab" report "$dir" --format markdown
    cp "$dir/report.csv" "$out/$sweep.csv"
    cp "$dir/report.md" "$out/$sweep.md"
    "$py" analysis/plot_lengths.py "$dir" --out "$out/$sweep.png" > /dev/null
  done
  if [ -f "analysis/studies/$study.py" ]; then
    "$py" "analysis/studies/$study.py" "runs/studies/$study" "$out"
  fi
  if [ "$ran" -gt 0 ]; then  # a study whose runs were all complete keeps its record
    minutes=$(( (SECONDS - start + 30) / 60 ))
    cpu=$(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //')
    printf '%s runs (%s run now) in %s minutes on %s cores (%s), %s runs at once, %s\n' \
      "$total" "$ran" "$minutes" "$(nproc)" "$cpu" "$jobs" "$(date -u +%Y-%m-%d)" > "$out/runtime.md"
  fi
  echo "== study $study: docs in $out"
done
