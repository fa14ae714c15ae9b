#!/usr/bin/python3
"""The padding study (configs/studies/padding.yaml): runs `pelab padding` on every complete run
of the sweep and tabulates, per scheme and direction, how far the logits at real tokens move
when the padding row is zero, random or huge, with the attention mask and without it.

  /usr/bin/python3 analysis/studies/padding.py runs/studies/padding docs/studies/padding
  /usr/bin/python3 analysis/studies/padding.py docs/studies/padding docs/studies/padding

From a sweep folder (with its run files), writes OUT/padding_row.csv, the per-run file: every
run and setting (a run that `pelab padding` cannot measure is named and left out). From
OUT/padding_row.csv alone, writes OUT/padding_row.md (max |logit change| and changed
predictions: the largest change over the runs of a scheme and direction, and the seeds' median
share of changed predictions with its order-statistic interval, runfile.median_interval). PELAB
names the pelab binary (default build/pelab).
"""
import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from runfile import median_interval, median_interval_coverage, sweep_runs  # noqa: E402
from plotting import run_study, write_and_print  # noqa: E402


def extract(sweep, out):
    """OUT/padding_row.csv from `pelab padding` on every complete run of the sweep."""
    pelab = os.environ.get("PELAB", "build/pelab")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        csv_path = os.path.join(scratch, "run.csv")
        for r in sweep_runs(sweep):
            if r["run"] is None:
                continue
            done = subprocess.run([pelab, "padding", r["path"], "--csv", csv_path], stdout=subprocess.DEVNULL)
            if done.returncode != 0:
                print(f"padding: {r['path']} left out (pelab padding exited {done.returncode})", file=sys.stderr)
                continue
            with open(csv_path) as f:
                rows += list(csv.DictReader(f))
    if not rows:
        sys.exit(f"padding: no complete runs in {sweep}")
    with open(os.path.join(out, "padding_row.csv"), "w") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        for row in rows:
            row["run"] = os.path.relpath(row["run"], sweep)
            writer.writerow(row)


def tables(out):
    """OUT/padding_row.md from OUT/padding_row.csv."""
    with open(os.path.join(out, "padding_row.csv")) as f:
        rows = list(csv.DictReader(f))
    settings = [(row, masked) for masked in ("true", "false") for row in ("zero", "random", "huge")]
    schemes = list(dict.fromkeys((row["encoding"], row["causal"]) for row in rows))
    seeds = len({row["run"] for row in rows}) // max(1, len(schemes))
    coverage = median_interval_coverage(seeds) if seeds else 0.0
    lines = ["largest |logit change| at real tokens over the runs (changed predictions: the median over seeds"
             + (f" [its order-statistic interval, {100 * coverage:.1f}% coverage; {seeds} seeds]" if seeds > 1 else "")
             + ")", "",
             "| scheme | attention | " + " | ".join(f"{r} row, mask {'on' if m == 'true' else 'off'}"
                                                   for r, m in settings) + " |",
             "|---|---|" + "---:|" * len(settings)]
    for encoding, causal in schemes:
        cells = []
        for name, masked in settings:
            mine = [row for row in rows if (row["encoding"], row["causal"]) == (encoding, causal)
                    and row["row"] == name and row["masked"] == masked]
            change = max(float(row["max_logit_change"]) for row in mine)
            # the seeds' median share of changed predictions, and its order-statistic interval
            middle, low, high, _ = median_interval([100 * float(row["changed_predictions"]) for row in mine])
            share = f"{middle:.0f}%" + (f" [{low:.0f}-{high:.0f}]" if high > low else "")
            # float rounding (pelab padding's within_rounding, kPaddingRounding): not an effect
            rounding = all(row.get("within_rounding") == "true" for row in mine)
            cells.append(f"0* ({share})" if rounding else f"{change:.2g} ({share})")
        direction = "causal" if causal == "true" else "bidirectional"
        lines.append(f"| {encoding} | {direction} | " + " | ".join(cells) + " |")
    lines += ["", "0*: every change under 1e-5 of the largest logit, float rounding (with the mask, padding "
              "changes the products' shapes, not what they sum; pelab padding's within_rounding)."]
    write_and_print(os.path.join(out, "padding_row.md"), lines + [""])


if __name__ == "__main__":
    sys.exit(run_study(extract, tables))
