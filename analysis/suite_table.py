#!/usr/bin/python3
"""The table of a suite (configs/suites/): tasks x schemes, each cell the accuracy beyond the
training lengths (the mean over a run's test lengths longer than its longest training length,
then over seeds), beside each task's baseline on the same examples (the stronger of the input-independent and,
where the task's outputs rearrange its input, the position-free one); and a
heatmap of the same numbers.

  /usr/bin/python3 analysis/suite_table.py runs/suites/cpu [--metric token|sequence]
      [--learned F] [--out FILE.png]
  /usr/bin/python3 analysis/suite_table.py docs/tasks/suite_cpu_runs.csv --out docs/tasks/suite_cpu.png

Inputs: sweep directories or per-run files (pelab report's report_runs.csv). The scheme is a
run's `encoding.name` axis value, the task its task's name. A run has *learned* its task when
its accuracy (in --metric) at its longest training length is at least --learned (default 0.9):
a cell whose runs did not all learn is marked `*` (its beyond-training number then says little
about generalization). Prints the table as Markdown and writes FILE.png (default:
SWEEP_DIR/suite.png for one sweep, else suite.png here) and FILE.csv (task, scheme, seeds,
learned, beyond, baseline, at_train_max, beyond_lengths); stdout has the table alone, so that
`> FILE.md` keeps it (docs/suites/cpu.md).
"""
import argparse
import contextlib
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plotting import save_figure_and_csv  # noqa: E402
from runfile import POSITION_FREE_KEYS, per_run_file, select_rows, sweep_runs, task_name  # noqa: E402


def cells(runs, metric):
    """{(task, scheme): dict(beyond=[per seed], baseline=[per seed], at_train_max=[per seed],
    lengths=set)} from each run's selected rows (method none, rows without a condition)."""
    key = {"token": "per_token_accuracy", "sequence": "per_sequence_accuracy"}[metric]
    chance_key = {"token": "chance_token_accuracy", "sequence": "chance_sequence_accuracy"}[metric]
    out = {}
    for r in runs:
        run = r["run"]
        scheme = r["overrides"].get("encoding.name", "(base)")
        rows = select_rows(run, "none")
        train_max = run["train_max_length"]
        beyond = {L: row for L, row in rows.items() if L > train_max}
        if not beyond or train_max not in rows:
            print(f"note: {r['id']}: no row at its longest training length {train_max} and beyond it; left out",
                  file=sys.stderr)
            continue
        c = out.setdefault((task_name(run), scheme), dict(beyond=[], baseline=[], at_train_max=[], lengths=set()))
        c["beyond"].append(float(np.mean([row[key] for row in beyond.values()])))
        # the stronger of the input-independent and the position-free baseline (fmax: chance where
        # the task has no position-free one, NaN)
        c["baseline"].append(float(np.mean([np.fmax(row[chance_key], row.get(POSITION_FREE_KEYS[metric], np.nan))
                                            for row in beyond.values()])))
        c["at_train_max"].append(rows[train_max][key])
        c["lengths"].update(beyond)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="sweep directories or per-run files (report_runs.csv)")
    parser.add_argument("--metric", choices=["token", "sequence"], default="token",
                        help="per-token (default) or per-sequence accuracy")
    parser.add_argument("--learned", type=float, default=0.9,
                        help="the accuracy (a fraction) at the longest training length that counts as learned")
    parser.add_argument("--out", help="PNG to write; the CSV goes beside it")
    args = parser.parse_args()
    runs = []
    for path in args.paths:
        runs += per_run_file(path) if path.endswith(".csv") else [r for r in sweep_runs(path) if r["run"] is not None]
    table = cells(runs, args.metric)
    if not table:
        print(f"{args.paths[0]}: no complete runs with rows beyond their training lengths", file=sys.stderr)
        return 1
    schemes = list(dict.fromkeys(s for r in runs for s in [r["overrides"].get("encoding.name", "(base)")]))
    tasks = list(dict.fromkeys(t for t, _ in table))
    print(f"{args.metric} accuracy beyond training (%), mean over seeds; * = not every run reached "
          f"{100 * args.learned:.0f}% at its longest training length\n")
    print("| task | test lengths | baseline | " + " | ".join(schemes) + " |")
    print("|---|---|---|" + "---|" * len(schemes))
    grid = np.full((len(tasks), len(schemes)), np.nan)
    baselines = np.full(len(tasks), np.nan)
    marks = np.zeros(grid.shape, bool)
    rows = []
    for i, task in enumerate(tasks):
        present = [table[(task, s)] for s in schemes if (task, s) in table]
        lengths = sorted(set().union(*(c["lengths"] for c in present)))
        baseline = np.mean([b for c in present for b in c["baseline"]])
        baselines[i] = 100 * baseline
        line = [task, ", ".join(map(str, lengths)), f"{100 * baseline:.1f}"]
        for j, scheme in enumerate(schemes):
            c = table.get((task, scheme))
            if c is None:
                line.append("")
                continue
            learned = all(a >= args.learned for a in c["at_train_max"])
            grid[i, j] = 100 * np.mean(c["beyond"])
            marks[i, j] = not learned
            bold = grid[i, j] > 100 * baseline + 5  # above the baseline by more than 5 points
            text = f"{grid[i, j]:.1f}{'' if learned else '*'}"
            line.append(f"**{text}**" if bold and learned else text)
            rows.append([task, scheme, len(c["beyond"]), int(learned), np.mean(c["beyond"]), baseline,
                         np.mean(c["at_train_max"]), " ".join(map(str, sorted(c["lengths"])))])
        print("| " + " | ".join(line) + " |")
    print("\nbold: learned, and more than 5 points above the baseline")
    one_sweep = len(args.paths) == 1 and os.path.isdir(args.paths[0])
    out = args.out or (os.path.join(args.paths[0], "suite.png") if one_sweep else "suite.png")
    # the baseline as the first column, then the schemes
    shown = np.concatenate([baselines[:, None], grid], axis=1)
    shown_marks = np.concatenate([np.zeros((len(tasks), 1), bool), marks], axis=1)
    fig, ax = plt.subplots(figsize=(1.3 * len(schemes) + 4.8, 0.32 * len(tasks) + 1.6), constrained_layout=True)
    image = ax.imshow(shown, vmin=0, vmax=100, cmap="viridis", aspect="auto")
    for i in range(len(tasks)):
        for j in range(len(schemes) + 1):
            if not np.isnan(shown[i, j]):
                ax.text(j, i, f"{shown[i, j]:.0f}{'*' if shown_marks[i, j] else ''}", ha="center", va="center",
                        fontsize=8, color="black" if shown[i, j] > 60 else "white")
    ax.axvline(0.5, color="white", linewidth=3)
    ax.set_xticks(range(len(schemes) + 1), ["baseline"] + schemes)
    ax.set_yticks(range(len(tasks)), tasks, fontsize=8)
    ax.xaxis.tick_top()
    fig.colorbar(image, ax=ax, label=f"{args.metric} accuracy beyond training (%)")
    ax.set_title(f"* not learned (< {100 * args.learned:.0f}% at the longest training length)", fontsize=8, loc="left",
                 y=-0.06 - 0.6 / len(tasks))
    with contextlib.redirect_stdout(sys.stderr):  # stdout: the Markdown table alone
        save_figure_and_csv(fig, out, ["task", "scheme", "seeds", "learned", "beyond", "baseline", "at_train_max",
                                       "beyond_lengths"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
