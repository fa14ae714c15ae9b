#!/usr/bin/python3
"""The new-methods study (configs/studies/new_methods/): FoX, stick-breaking, PaTH and FoPE against
NoPE, RoPE and ALiBi on three tasks. For each task's sweep, pelab report's median over seeds with
its order-statistic interval (--aggregate median-ci), per-token and per-sequence, with runs that
did not learn their training range (per-token accuracy at the longest training length below the
sweep file's --learned threshold, its "# report:" line) flagged and their beyond-training values
left out (docs/analysis.md).

  /usr/bin/python3 analysis/studies/new_methods.py runs/studies/new_methods docs/studies/new_methods

Reads the per-run files OUT/<task>_runs.csv alone (scripts/studies.sh ships them). Writes
OUT/<task>_median_token.md and OUT/<task>_median_sequence.md. PELAB: the pelab binary (default
build/pelab).
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from runfile import learned_threshold  # noqa: E402

TASKS = ["reverse_string", "bucket_sort", "parity_check"]
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "studies", "new_methods")


def main():
    out = sys.argv[2]  # the first argument, the run folder, is not read: every table comes from OUT
    pelab = os.path.abspath(os.environ.get("PELAB", "build/pelab"))
    scratch = tempfile.mkdtemp()  # report.csv & co. of each table, not kept
    for task in TASKS:
        runs = os.path.join(out, f"{task}_runs.csv")
        if not os.path.exists(runs):
            print(f"new_methods: {runs} not there (the sweep has not run); left out", file=sys.stderr)
            continue
        for metric in ["token", "sequence"]:
            # from OUT, so that the table names its source as <task>_runs.csv, wherever OUT is
            learned = ["--learned", str(learned_threshold(os.path.join(CONFIGS, f"{task}.yaml")))]
            table = subprocess.run([pelab, "report", os.path.basename(runs), "--aggregate", "median-ci", *learned,
                                    "--metric", metric, "--format", "markdown", "--out", scratch],
                                   capture_output=True, text=True, cwd=out)
            if table.returncode != 0:
                sys.exit(f"new_methods: pelab report {runs}: {table.stderr.strip()}")
            path = os.path.join(out, f"{task}_median_{metric}.md")
            with open(path, "w") as f:
                f.write(table.stdout)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
