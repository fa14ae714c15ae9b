#!/usr/bin/env bash
# Placing a sweep's runs: --gpus G,... --runs-per-gpu N gives each run the
# CUDA_VISIBLE_DEVICES of one GPU (checked on the CPU: the variable each run saw), resume
# after kill -9 with placement, and a Slurm array of --runs-per-task N runs per task (the
# script, and one of its tasks run here).
set -euo pipefail
source_dir="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
fixtures="$source_dir/tests/fixtures/sweeps"

echo "== --gpus 0,1 --runs-per-gpu 2: four at a time, each run on one GPU"
"$PELAB" sweep "$fixtures/tiny.yaml" --gpus 0,1 --runs-per-gpu 2 | tee placed.txt
threads=$(( $(getconf _NPROCESSORS_ONLN) / 4 > 1 ? $(getconf _NPROCESSORS_ONLN) / 4 : 1 ))  # cores / runs at once
grep -q "4 at a time x $threads threads on GPUs 0, 1 (2 per GPU)" placed.txt
grep -q "8 of 8 runs complete" placed.txt
for gpu in 0 1; do grep -q "complete .* on GPU $gpu)" placed.txt; done
for id in $(cut -f2 sweep-out/runs.tsv | tail -n +2); do
  # the GPU the sweep names is the one the run saw
  gpu=$(grep -o "complete  $id ([0-9]*s on GPU [0-9]*)" placed.txt | grep -o "GPU [0-9]*" | cut -d' ' -f2)
  grep -q "(CUDA_VISIBLE_DEVICES=$gpu) with $threads threads" "sweep-out/runs/$id/log.txt"
done
if "$PELAB" sweep "$fixtures/tiny.yaml" --gpus 0 --jobs 2 2> both.txt; then exit 1; fi
grep -q "error: --jobs and --gpus" both.txt

echo "== kill -9 with placement, then the same command resumes"
setsid "$PELAB" sweep "$fixtures/slow.yaml" --gpus 0,1 > slow1.txt 2>&1 &
leader=$!
for _ in $(seq 1 600); do
  if ls slow-out/runs/seed-*/checkpoint.h5 > /dev/null 2>&1; then break; fi
  sleep 0.1
done
kill -9 -- -"$leader"
wait "$leader" || true
"$PELAB" sweep "$fixtures/slow.yaml" --gpus 0,1 | tee slow2.txt
grep -q "4 of 4 runs complete" slow2.txt
grep -q "resuming from step" slow-out/runs/seed-*/log.txt

echo "== a Slurm array of 3 runs per task"
rm -rf sweep-out
"$PELAB" sweep "$fixtures/tiny.yaml" --slurm --no-submit --runs-per-task 3 --cpus 2 --mem 2G | tee slurm.txt
grep -q "3 array tasks: 8 runs not complete of 8, 3 per task" slurm.txt
script=sweep-out/slurm/sweep.sbatch
grep -q "^#SBATCH --array=0-2$" "$script"
grep -q "^#SBATCH --cpus-per-task=6$" "$script"   # 3 runs x 2 CPUs
grep -q "^#SBATCH --mem=6G$" "$script"
grep -q '^runs=(0,1,2 3,4,5 6,7)' "$script"
grep -q -- '--run-index "${runs\[$SLURM_ARRAY_TASK_ID\]}" --jobs 3 --threads 2 &' "$script"
SLURM_ARRAY_TASK_ID=1 bash "$script" > task1.txt   # the second task, here: runs 3, 4 and 5
grep -q "3 to run; 3 at a time x 2 threads" task1.txt
for index in 3 4 5; do
  id=$(awk -F'\t' -v i="$index" '$1 == i {print $2}' sweep-out/runs.tsv)
  test -f "sweep-out/runs/$id/run.h5"
done
"$PELAB" sweep "$fixtures/tiny.yaml" --dry-run | grep "8 runs (3 complete)" > /dev/null
if "$PELAB" sweep "$fixtures/tiny.yaml" --slurm --no-submit --runs-per-task 2 --mem lots 2> mem.txt; then exit 1; fi
grep -q "slurm mem 'lots' must start with a number" mem.txt
echo "cli_placement ok"
