#!/usr/bin/python3
"""Probe plot of a sweep: position-probe accuracy by layer (0 = the embedding output), one line
per group of runs (the sweep's axis values but the seed; mean and min-max over seeds), with the
token-only baseline (what the tokens alone reveal of position) drawn as chance. Each run's
probes at its final step with its own sampler are plotted.

  /usr/bin/python3 analysis/plot_probes.py runs/sweeps/quickstart [--probe position_accuracy] [--out FILE.png]

Probes: position_accuracy, position_r2, order_accuracy, distance_r2. Writes FILE.png (default
SWEEP_DIR/probes.png) and the plotted numbers as FILE.csv.
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
    parser.add_argument("sweep_dir")
    parser.add_argument("--probe", default="position_accuracy",
                        choices=["position_accuracy", "position_r2", "order_accuracy", "distance_r2"])
    parser.add_argument("--length", type=int, help="probed length (default: the first stored)")
    parser.add_argument("--out", help="PNG to write; the CSV goes beside it")
    args = parser.parse_args()
    runs = [r for r in sweep_runs(args.sweep_dir) if r["run"] is not None and r["run"]["probes"] is not None]
    if not runs:
        print(f"{args.sweep_dir}: no complete runs with probes", file=sys.stderr)
        return 1
    length = args.length or int(runs[0]["run"]["probes"]["length"][0])
    probed = sorted({int(L) for r in runs for L in r["run"]["probes"]["length"]})
    if length not in probed:
        print(f"{args.sweep_dir}: no probes at length {length}; probed lengths: {probed}", file=sys.stderr)
        return 1
    groups, chance = {}, []
    for r in runs:
        run = r["run"]
        p = run["probes"]
        keep = ((p["length"] == length) & (p["step"] == run["train_steps"]) & (np.array(p["sampler"]) == run["run_sampler"])
                & (p["positions_max_length"] == run["run_positions_max_length"]))
        by_layer = groups.setdefault(group_label(r["overrides"]), {})
        for layer, value in zip(p["layer"][keep], p[args.probe][keep]):
            by_layer.setdefault(int(layer), []).append(float(value))
        chance += list(p["position_chance"][keep])
    out = args.out or os.path.join(args.sweep_dir, "probes.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    rows = []
    for name, by_layer in groups.items():
        layers = sorted(by_layer)
        values = [by_layer[l] for l in layers]
        plot_mean_and_spread(ax, layers, values, name)
        rows += [[name, l, np.mean(v), min(v), max(v), len(v)] for l, v in zip(layers, values)]
    if args.probe == "position_accuracy":
        ax.axhline(np.mean(chance), color="k", linestyle="--", label="chance (tokens alone)")
    ax.set_xlabel("layer (0 = embedding output)")
    ax.set_ylabel(args.probe.replace("_", " "))
    ax.set_title(f"position probes at length {length}: {os.path.basename(os.path.normpath(args.sweep_dir))}")
    ax.set_xticks(sorted({l for g in groups.values() for l in g}))
    ax.legend(fontsize=8)
    save_figure_and_csv(fig, out, ["group", "layer", args.probe, "min", "max", "seeds"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
