#!/usr/bin/python3
"""Evaluation during training: accuracy (or loss) against training step, one line per test
length (coloured in order of length; solid within the run's training lengths, dashed beyond),
from the evaluation curve a run records with eval.every > 0. The curve is without
extrapolation methods (method none): training evaluates without them. On a sweep
directory, one panel per group of runs (the sweep's axis values but the seed): the mean
over seeds with its min-max band.

  /usr/bin/python3 analysis/plot_training.py RUN.h5|RUN_DIR|SWEEP_DIR [--metric token|sequence|loss] [--out FILE.png]

A run still training is read from its curve.json (the curves so far, rewritten at every row).

Writes FILE.png (default: training_curve.png beside the run file, or SWEEP_DIR/training.png)
and the plotted numbers as FILE.csv.
"""
import argparse
import math
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plotting import plot_mean_and_spread, save_figure_and_csv  # noqa: E402
from runfile import LIVE_CURVE, curve_rows, group_label, live_run, load, sweep_runs, task_name  # noqa: E402

METRICS = {"token": ("per_token_accuracy", 100, "per-token accuracy (%)"),
           "sequence": ("per_sequence_accuracy", 100, "per-sequence accuracy (%)"),
           "loss": ("loss", 1, "loss (nats per scored token)")}


def panels(path):
    """[(label, [(run file, loaded run)])]: one panel per group of a sweep, or the one run (a run
    still training: its curve.json)."""
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "sweep.h5")):
        path = os.path.join(path, "run.h5")  # a run's folder
    if not os.path.isdir(path):
        folder = os.path.dirname(path) or "."
        if not os.path.exists(path) and os.path.exists(os.path.join(folder, LIVE_CURVE)):
            run = live_run(folder)
            run["run_name"] += f" (training: step {run['training']['step'][-1] if len(run['training']['step']) else 0}" \
                               f" of {run['train_steps']})"
            return [(run["run_name"], [(os.path.join(folder, LIVE_CURVE), run)])]
        run = load(path)
        return [(run["run_name"], [(path, run)])]
    groups = {}
    for r in sweep_runs(path):
        if r["run"] is not None:
            groups.setdefault(group_label(r["overrides"]), []).append((r["path"], r["run"]))
    return list(groups.items())


def curve_error(runs):
    """Why a panel's runs give no curve to plot, or None."""
    for path, run in runs:
        curve = curve_rows(run)
        if curve is None:
            return f"{path}: no evaluation curve (/evaluation_curve); set eval.every > 0 to record one"
        if not curve:
            return f"{path}: the evaluation curve has no rows with the run's own sampler"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="a run file (run.h5), a run's folder or a sweep directory")
    parser.add_argument("--metric", choices=sorted(METRICS), default="token",
                        help="per-token or per-sequence accuracy, or the loss")
    parser.add_argument("--out", help="PNG to write; the CSV goes beside it")
    args = parser.parse_args()
    key, scale, ylabel = METRICS[args.metric]
    try:
        groups = panels(args.path)
    except FileNotFoundError as error:  # no run file yet: what is there instead
        print(error, file=sys.stderr)
        return 1
    if not groups:
        print(f"{args.path}: no complete runs", file=sys.stderr)
        return 1
    if args.metric == "loss" and all(task_name(run) == "text" for _, runs in groups for _, run in runs):
        scale, ylabel = 1 / math.log(2), "bits per byte (loss / ln 2)"  # text: as the CLI prints it
    for _, runs in groups:
        error = curve_error(runs)
        if error:
            print(error, file=sys.stderr)
            return 1
    sweep = os.path.exists(os.path.join(args.path, "sweep.h5"))
    run_folder = args.path if os.path.isdir(args.path) else os.path.dirname(os.path.abspath(args.path))
    out = args.out or (os.path.join(args.path, "training.png") if sweep else
                       os.path.join(run_folder, "training_curve.png"))
    columns = min(len(groups), 2)
    fig, axes = plt.subplots(math.ceil(len(groups) / columns), columns, figsize=(6.5 * columns, 4.2 * math.ceil(
        len(groups) / columns)), squeeze=False, sharey=args.metric != "loss")
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    rows = []
    for ax, (label, runs) in zip(axes.flat, groups):
        train_min = min(run["train_min_length"] for _, run in runs)
        train_max = max(run["train_max_length"] for _, run in runs)
        values = {}  # length -> step -> [per run]
        for _, run in runs:
            for length, by_step in curve_rows(run).items():
                for step, row in by_step.items():
                    values.setdefault(length, {}).setdefault(step, []).append(scale * row[key])
        colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, len(values)))
        for colour, length in zip(colours, sorted(values)):
            steps = sorted(values[length])
            trained = train_min <= length <= train_max
            where = "trained" if trained else ("beyond training" if length > train_max else "below training")
            plot_mean_and_spread(ax, steps, [values[length][s] for s in steps], f"length {length} ({where})",
                                 color=colour, linestyle="-" if trained else "--", markersize=3)
            rows += [[label, length, int(length > train_max), s, np.mean(values[length][s]),
                      min(values[length][s]), max(values[length][s]), len(values[length][s])] for s in steps]
        ax.set_title(f"{label} (n={len(runs)}, trained on {train_min}-{train_max})" if sweep else
                     f"trained on lengths {train_min}-{train_max}", fontsize=9)
        # train.phases: a dotted line where a phase starts (the first curve row of each later phase)
        training = runs[0][1]["training"]
        for i in range(1, len(training["phase"])):
            if training["phase"][i] != training["phase"][i - 1]:
                ax.axvline(training["step"][i - 1], color="grey", linestyle=":", linewidth=1)
                ax.text(training["step"][i - 1], 1.0, f" phase {int(training['phase'][i]) + 1}", fontsize=7,
                        color="grey", va="top", transform=ax.get_xaxis_transform())
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        if args.metric != "loss":
            ax.set_ylim(0, 100)
        ax.legend(fontsize=7)
    tasks = ", ".join(sorted({task_name(run) for _, runs in groups for _, run in runs}))
    name = os.path.basename(os.path.normpath(args.path)) if sweep else groups[0][0]
    fig.suptitle(f"evaluation during training: {name} ({tasks})", fontsize=10)
    save_figure_and_csv(fig, out, ["run_or_group", "length", "beyond_training", "step", "mean", "min", "max", "seeds"],
                        rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
