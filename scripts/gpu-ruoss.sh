#!/usr/bin/env bash
# One GPU command of the Ruoss grid (configs/studies/ruoss/grid.yaml, docs/studies/ruoss.md):
# builds build-cuda (pelab only) against Python torch's LibTorch, then trains the grid's tasks
# in turn with the packed runner (scripts/ruoss-paper.sh --gpus 0) until DEADLINE seconds after
# its start, when it stops the sweep with SIGTERM (the complete runs are kept; the same command
# on a machine that kept runs/ resumes the rest). The runs the shipped per-run files
# (docs/studies/ruoss/<task>_runs.csv) hold are not trained again. Writes under OUT:
#   ruoss.tar               ruoss/<task>_runs.csv: the shipped file merged with this command's
#                           complete runs, and ruoss/runtime.md with this command's lines;
#                           untar, copy to docs/studies/ruoss/ and run
#                           scripts/dev studies --from-data ruoss (one file: the device tool
#                           brings back a few files only)
#   graphs.txt              the runs' lines on steps that ran without a CUDA graph, counted
#   sweep.log, build.log, nvidia-smi.txt, summary.txt (runs complete per task, seconds used)
# --check first runs the packed part of tests/cuda_paths.sh (packed runs with dropout and a
# failing capture) and stops if it fails. Carry .gpu-deps/ (scripts/gpu-deps.sh) along.
#   scripts/gpu-ruoss.sh OUT [--deadline-s S] [--check] [--tasks a,b] [pelab sweep options]
# Default: 540 s, every task, --runs-per-gpu 16.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="$1"; shift
deadline=540 tasks=() check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --deadline-s) deadline="$2"; shift 2 ;;
    --check) check=1; shift ;;
    --tasks) tasks=(--tasks "$2"); shift 2 ;;
    *) break ;;
  esac
done
[[ " $* " == *" --runs-per-gpu "* ]] || set -- "$@" --runs-per-gpu 16
mkdir -p "$out/ruoss"
out="$(cd "$out" && pwd)"
source scripts/gpu-session.sh
gpu_session_begin gpu-ruoss
gpu_build --target pelab
if [ "$check" = 1 ]; then
  if ! PELAB="$root/build-cuda/pelab" CUDA_PATHS_PARTS=packed PELAB_PYTHON=python3 \
       bash tests/cuda_paths.sh "$root" "$root/build-cuda/cuda_paths_check" >"$out/check.log" 2>&1; then
    tail -n 40 "$out/check.log"
    note "check (tests/cuda_paths.sh, packed) failed after $((SECONDS - start)) s"
    exit 1
  fi
  note "check (tests/cuda_paths.sh, packed) passed after $((SECONDS - start)) s"
fi
cp docs/studies/ruoss/*_runs.csv docs/studies/ruoss/runtime.md "$out/ruoss/" 2>/dev/null
# the deadline: SIGTERM to the running sweep and its packed workers (they checkpoint and stop)
( sleep $((deadline - (SECONDS - start))); pkill -TERM -f "build-cuda/pelab sweep" ) &
watchdog=$!
PELAB=build-cuda/pelab RUOSS_DOCS="$out/ruoss" RUOSS_TABLES=0 \
  bash scripts/ruoss-paper.sh "${tasks[@]}" --gpus 0 --set device=cuda "$@" >"$out/sweep.log" 2>&1
status=$?
kill "$watchdog" 2>/dev/null
note "ruoss-paper.sh exit $status after $((SECONDS - start)) s (75: stopped at the deadline)"
for f in "$out"/ruoss/*_runs.csv; do
  [ -f "$f" ] && note "  $(basename "$f" _runs.csv): $(tail -n +2 "$f" | cut -d, -f1 | sort -u | wc -l) runs"
done
grep -E "^\[[0-9]+/[0-9]+\]" "$out/sweep.log" | tail -3 | tee -a "$out/summary.txt"
grep -h "without a CUDA graph" runs/studies/ruoss/*/runs/*/log.txt 2>/dev/null | sort | uniq -c | sort -rn >"$out/graphs.txt"
tar -C "$out" -cf "$out/ruoss.tar" ruoss && rm -rf "$out/ruoss"
exit "$status"
