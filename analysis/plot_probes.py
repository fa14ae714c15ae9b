#!/usr/bin/python3
"""Probe plot of a sweep: position-probe accuracy by layer (0 = the embedding output), one line
per group of runs (the sweep's axis values but the seed; mean and min-max over seeds), with the
token-only baseline (what the tokens alone reveal of position) drawn as chance.

  /usr/bin/python3 analysis/plot_probes.py runs/sweeps/quickstart [--probe position_accuracy] [--length L]
      [--step S] [--sampler NAME [--sampler-max-length N]] [--out FILE.png]

Probes: position_accuracy, position_r2, order_accuracy, distance_r2. Probe rows are selected as
plot_lengths.py selects evaluation rows: each run's final step and its own sampler and max
length, unless --step or --sampler (any max length of it unless --sampler-max-length) say
otherwise (`pelab eval --probes L --step S` adds probes at other settings). Writes FILE.png
(default SWEEP_DIR/probes.png) and the plotted numbers as FILE.csv.
"""
import argparse
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plotting import plot_mean_and_spread, save_figure_and_csv  # noqa: E402
from runfile import group_label, probe_settings, select_probe_rows, sweep_runs  # noqa: E402


def selection(args):
    """The settings given on the command line, as `step 2, sampler randomized` (empty: the defaults)."""
    return ", ".join(f"{k} {v}" for k, v in [("step", args.step), ("sampler", args.sampler),
                                             ("max length", args.sampler_max_length)] if v is not None)


def no_rows_message(args, runs, length):
    """Why no probe rows were selected, naming the settings the runs have."""
    wanted = f" at length {length}" if length is not None else ""
    settings = sorted({s for r in runs for s in probe_settings(r["run"])})
    have = "; ".join(f"length {L} at step {step}, sampler {sampler} (max length {pml})"
                     for L, step, sampler, pml in settings)
    return (f"no probes{wanted} at the selected settings ({selection(args) or 'final step, own sampler'}); "
            f"the runs have: {have}")


def select(runs, args, length):
    """[(run, {layer: row})] of the runs whose selection at `length` gives rows."""
    chosen = [(r, select_probe_rows(r["run"], length, args.step, args.sampler, args.sampler_max_length))
              for r in runs]
    return [(r, rows) for r, rows in chosen if rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir")
    parser.add_argument("--probe", default="position_accuracy",
                        choices=["position_accuracy", "position_r2", "order_accuracy", "distance_r2"])
    parser.add_argument("--length", type=int, help="probed length (default: the first stored at the selected settings)")
    parser.add_argument("--step", type=int, help="the training step probed (default: each run's final step)")
    parser.add_argument("--sampler", choices=["contiguous", "random_offset", "randomized", "cape", "random_float"],
                        help="the position sampler the probes used (default: each run's own)")
    parser.add_argument("--sampler-max-length", type=int, help="that sampler's max length (default: any)")
    parser.add_argument("--out", help="PNG to write; the CSV goes beside it")
    args = parser.parse_args()
    runs = [r for r in sweep_runs(args.sweep_dir) if r["run"] is not None and r["run"]["probes"] is not None]
    if not runs:
        print(f"{args.sweep_dir}: no complete runs with probes", file=sys.stderr)
        return 1
    probed = sorted({int(L) for r in runs for L in r["run"]["probes"]["length"]})
    length = args.length
    if length is None:  # the first length stored at the selected settings
        stored = dict.fromkeys(int(L) for r in runs for L in r["run"]["probes"]["length"])
        length = next((L for L in stored if select(runs, args, L)), None)
        if length is None:
            print(f"{args.sweep_dir}: {no_rows_message(args, runs, None)}", file=sys.stderr)
            return 1
    if length not in probed:
        print(f"{args.sweep_dir}: no probes at length {length}; probed lengths: {probed}", file=sys.stderr)
        return 1
    selected = select(runs, args, length)
    if not selected:
        print(f"{args.sweep_dir}: {no_rows_message(args, runs, length)}", file=sys.stderr)
        return 1
    kept = {r["id"] for r, _ in selected}
    for r in runs:
        if r["id"] not in kept:
            print(f"note: {r['id']}: no probes at length {length} at the selected settings; left out", file=sys.stderr)
    groups, chance = {}, []
    for r, rows in selected:
        by_layer = groups.setdefault(group_label(r["overrides"]), {})
        for layer, row in rows.items():
            by_layer.setdefault(layer, []).append(float(row[args.probe]))
            chance.append(float(row["position_chance"]))
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
    ax.set_title(f"position probes at length {length}: {os.path.basename(os.path.normpath(args.sweep_dir))}"
                 + (f"\n{selection(args)}" if selection(args) else ""))
    ax.set_xticks(sorted({l for g in groups.values() for l in g}))
    ax.legend(fontsize=8)
    save_figure_and_csv(fig, out, ["group", "layer", args.probe, "min", "max", "seeds"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
