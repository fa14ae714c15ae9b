#!/usr/bin/python3
"""Length-generalization plot of a sweep: accuracy against test length, one line per group
of runs (the sweep's axis values but the seed) with its mean and min-max spread over seeds,
the training range shaded and the chance level drawn.

  /usr/bin/python3 analysis/plot_lengths.py runs/sweeps/quickstart [--metric token|sequence] [--out FILE.png]

Writes FILE.png (default: SWEEP_DIR/lengths.png) and the plotted numbers as FILE.csv.
Reads only the documented schema: sweep.h5 and the run files it indexes.
"""
import argparse
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plotting import plot_mean_and_spread, save_figure_and_csv  # noqa: E402
from runfile import group_label, sweep_runs  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", help="a sweep directory (pelab sweep's output)")
    parser.add_argument("--metric", choices=["token", "sequence"], default="token", help="per-token or per-sequence accuracy")
    parser.add_argument("--method", default="none", help="evaluation extrapolation method to plot (default none)")
    parser.add_argument("--out", help="PNG to write (default SWEEP_DIR/lengths.png); the CSV goes beside it")
    args = parser.parse_args()
    key = {"token": "per_token_accuracy", "sequence": "per_sequence_accuracy"}[args.metric]
    chance_key = {"token": "chance_token_accuracy", "sequence": "chance_sequence_accuracy"}[args.metric]
    runs = [r for r in sweep_runs(args.sweep_dir) if r["run"] is not None]
    if not runs:
        print(f"{args.sweep_dir}: no complete runs", file=sys.stderr)
        return 1
    groups, chance, train_range = {}, {}, [np.inf, 0]
    for r in runs:
        ev = r["run"]["evaluation"]
        train_range = [min(train_range[0], r["run"]["train_min_length"]), max(train_range[1], r["run"]["train_max_length"])]
        per_length = groups.setdefault(group_label(r["overrides"]), {})
        for method, length, value, c in zip(ev["method"], ev["length"], ev[key], ev[chance_key]):
            if method != args.method:
                continue
            per_length.setdefault(int(length), []).append(100 * value)
            chance.setdefault(int(length), []).append(100 * c)
    if not chance:
        methods = sorted({str(m) for r in runs for m in r["run"]["evaluation"]["method"]})
        print(f"{args.sweep_dir}: no evaluation rows with method {args.method!r}; the runs have: {', '.join(methods)}",
              file=sys.stderr)
        return 1
    out = args.out or os.path.join(args.sweep_dir, "lengths.png")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.axvspan(train_range[0], train_range[1], color="0.9", label=f"training lengths {train_range[0]}-{train_range[1]}")
    rows = []
    for name, per_length in groups.items():
        lengths = sorted(per_length)
        values = [per_length[L] for L in lengths]
        plot_mean_and_spread(ax, lengths, values, f"{name} (n={len(values[0])})")
        rows += [[name, L, np.mean(v), np.std(v), min(v), max(v), len(v)] for L, v in zip(lengths, values)]
    lengths = sorted(chance)
    ax.plot(lengths, [np.mean(chance[L]) for L in lengths], "k--", label="chance")
    ax.set_xlabel("test length")
    ax.set_ylabel(f"per-{args.metric} accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"length generalization: {os.path.basename(os.path.normpath(args.sweep_dir))}")
    ax.legend(fontsize=8)
    rows += [["chance", L, np.mean(chance[L]), np.std(chance[L]), min(chance[L]), max(chance[L]), len(chance[L])]
             for L in lengths]
    save_figure_and_csv(fig, out, ["group", "length", "mean", "std", "min", "max", "seeds"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
