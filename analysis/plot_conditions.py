#!/usr/bin/python3
"""Accuracy over test length x evaluation condition, one heatmap per group of runs (the sweep's
axis values but the seed), the mean over seeds in each cell: the needle-in-a-haystack picture of
a passkey sweep (condition depth, eval.depths) or flip_flop's sparse and dense tests (p_ignore,
eval.p_ignore).

  /usr/bin/python3 analysis/plot_conditions.py runs/sweeps/passkey [--metric sequence|token]
      [--method none] [--samples N] [--out FILE.png]
  /usr/bin/python3 analysis/plot_conditions.py runs/a/run.h5 docs/studies/x/passkey_runs.csv --out FILE.png

Any mix of sweep directories, run files and per-run files (pelab report's report_runs.csv).
Rows are selected as `pelab report` selects them (each run's final step, its own sampler, the
most samples at each length), at every condition value the runs were evaluated at. The
training lengths' upper end is drawn as a white line; a cell's text is its mean over seeds
(percent). Writes FILE.png (default: SWEEP_DIR/conditions.png for one sweep, else
conditions.png here) and its numbers as FILE.csv (group, condition, value, length, seeds, mean,
min, max).
"""
import argparse
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plotting import save_figure_and_csv  # noqa: E402
from runfile import condition_values, group_label, load, per_run_file, select_rows, sweep_runs  # noqa: E402


def read_runs(paths):
    runs = []
    for path in paths:
        if os.path.isdir(path):
            runs += [r for r in sweep_runs(path) if r["run"] is not None]
        elif path.endswith(".csv"):
            runs += per_run_file(path)
        else:  # a run file: its own group, named by its run
            run = load(path)
            runs.append(dict(id=run["run_name"], path=path, overrides={"run": run["run_name"]}, run=run))
    return runs


def collect(runs, method, samples, key):
    """(condition name, {group: dict(cells={(value, length): [per seed]}, train_max)}); the
    runs without condition rows are named on stderr and left out."""
    name, groups = "", {}
    for r in runs:
        condition, values = condition_values(r["run"])
        if not condition:
            print(f"note: {r['id']}: no rows with an evaluation condition; left out", file=sys.stderr)
            continue
        if name and condition != name:
            raise SystemExit(f"error: the runs mix evaluation conditions ({name}, {condition}); plot them apart")
        name = condition
        overrides = {k: v for k, v in r["overrides"].items() if k != "seed"}
        g = groups.setdefault(group_label(overrides) or r["id"], dict(cells={}, train_max=0))
        g["train_max"] = max(g["train_max"], r["run"]["train_max_length"])
        for value in values:
            for length, row in select_rows(r["run"], method, samples=samples, condition_value=value).items():
                g["cells"].setdefault((value, length), []).append(100 * row[key])
    return name, groups


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="sweep directories, run files (run.h5) and per-run files")
    parser.add_argument("--metric", choices=["sequence", "token"], default="sequence",
                        help="per-sequence (default: the whole passkey right) or per-token accuracy")
    parser.add_argument("--method", default="none", help="evaluation extrapolation method (default none)")
    parser.add_argument("--samples", type=int, help="evaluation samples (default: the most at each length)")
    parser.add_argument("--out", help="PNG to write (default SWEEP_DIR/conditions.png for one sweep, else "
                                      "conditions.png here); the CSV goes beside it")
    args = parser.parse_args()
    key = {"token": "per_token_accuracy", "sequence": "per_sequence_accuracy"}[args.metric]
    runs = read_runs(args.paths)
    name, groups = collect(runs, args.method, args.samples, key)
    where = args.paths[0] if len(args.paths) == 1 else f"{len(args.paths)} inputs"
    if not groups:
        print(f"{where}: no run has evaluation rows under a condition (eval.depths, eval.p_ignore)", file=sys.stderr)
        return 1
    one_sweep = len(args.paths) == 1 and os.path.isdir(args.paths[0])
    out = args.out or (os.path.join(args.paths[0], "conditions.png") if one_sweep else "conditions.png")
    columns = min(3, len(groups))
    grid_rows = (len(groups) + columns - 1) // columns
    fig, axes = plt.subplots(grid_rows, columns, figsize=(4.8 * columns + 1.2, 3.6 * grid_rows), squeeze=False,
                             constrained_layout=True)
    rows, image = [], None
    for ax, (label, g) in zip(axes.flat, groups.items()):
        values = sorted({v for v, _ in g["cells"]})
        lengths = sorted({L for _, L in g["cells"]})
        grid = np.full((len(values), len(lengths)), np.nan)
        for (v, L), seeds in g["cells"].items():
            grid[values.index(v), lengths.index(L)] = np.mean(seeds)
            rows.append([label, name, v, L, len(seeds), np.mean(seeds), min(seeds), max(seeds)])
        image = ax.imshow(grid, vmin=0, vmax=100, cmap="viridis", aspect="auto", origin="lower")
        for i in range(len(values)):
            for j in range(len(lengths)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=8,
                            color="black" if grid[i, j] > 60 else "white")
        ax.set_xticks(range(len(lengths)), [str(L) for L in lengths])
        ax.set_yticks(range(len(values)), [f"{v:g}" for v in values])
        beyond = [j for j, L in enumerate(lengths) if L > g["train_max"]]
        if beyond and beyond[0] > 0:  # the edge of the training lengths
            ax.axvline(beyond[0] - 0.5, color="white", linewidth=2)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("test length")
        ax.set_ylabel(name)
    for ax in list(axes.flat)[len(groups):]:
        ax.axis("off")
    fig.colorbar(image, ax=axes, label=f"{args.metric} accuracy (%), mean over seeds", shrink=0.8)
    save_figure_and_csv(fig, out, ["group", "condition", "value", "length", "seeds", "mean", "min", "max"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
