#!/usr/bin/python3
"""The new-methods study (configs/studies/new_methods/): FoX, stick-breaking, PaTH and FoPE against
NoPE, RoPE and ALiBi on three tasks. For each task's sweep, pelab report's median over seeds with a
bootstrap 95% interval, per-token and per-sequence, with runs that did not learn their training
range (accuracy below 0.9 at the training lengths) flagged and their beyond-training values left
out (docs/analysis.md).

  /usr/bin/python3 analysis/studies/new_methods.py runs/studies/new_methods docs/studies/new_methods

Writes OUT/<task>_median_token.md and OUT/<task>_median_sequence.md. PELAB: the pelab binary
(default build/pelab).
"""
import os
import subprocess
import sys

TASKS = ["reverse_string", "bucket_sort", "parity_check"]
LEARNED = "0.9"


def main():
    root, out = sys.argv[1], sys.argv[2]
    pelab = os.environ.get("PELAB", "build/pelab")
    os.makedirs(out, exist_ok=True)
    for task in TASKS:
        sweep = os.path.join(root, task)
        if not os.path.exists(os.path.join(sweep, "sweep.h5")):
            print(f"new_methods: {sweep} not run yet; left out", file=sys.stderr)
            continue
        for metric in ["token", "sequence"]:
            scratch = os.path.join(sweep, f"median_{metric}")  # report.csv & co. there, not over the sweep's
            table = subprocess.run([pelab, "report", sweep, "--aggregate", "median-ci", "--learned", LEARNED,
                                    "--metric", metric, "--format", "markdown", "--out", scratch],
                                   capture_output=True, text=True)
            if table.returncode not in (0, 1):  # 1: some runs failed; the table has the rest
                sys.exit(f"new_methods: pelab report {sweep}: {table.stderr.strip()}")
            path = os.path.join(out, f"{task}_median_{metric}.md")
            with open(path, "w") as f:
                f.write(table.stdout)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
