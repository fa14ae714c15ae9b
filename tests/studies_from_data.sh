#!/usr/bin/env bash
# Every study page's tables and plots are made again from its shipped per-run files alone
# (scripts/studies.sh --from-data; issue 50): on a copy of docs/studies with everything but
# those files removed, every table (.md) and CSV comes back equal to the shipped one, byte for
# byte, and every plot comes back. Nothing is trained and nothing is read from runs/.
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"
cp -r "$source_dir/docs/studies" "$work/docs"
cd "$work/docs"
# the inputs: per-run files (<sweep>_runs.csv and the extracts: depth_probes.csv,
# terms_runs.csv, parameters_runs.csv, padding_row.csv) and the runtime notes
is_input() { [[ "$1" == *_runs.csv || "$1" == */depth_probes.csv || "$1" == */padding_row.csv || "$1" == */runtime.md ]]; }
made=()
for f in */*; do
  if ! is_input "$f"; then made+=("$f"); rm "$f"; fi
done
test "${#made[@]}" -gt 50
STUDIES_DOCS="$work/docs" "$source_dir/scripts/studies.sh" --from-data > "$work/log.txt" 2>&1 || {
  cat "$work/log.txt"; exit 1; }
for f in "${made[@]}"; do
  test -f "$f" || { echo "not made again: $f"; exit 1; }
  case "$f" in
    *.md|*.csv) cmp "$f" "$source_dir/docs/studies/$f" ;;
  esac
done
echo "studies_from_data: ${#made[@]} files made again from the per-run files"
