#!/usr/bin/python3
"""Length-generalization plot of a sweep: accuracy (or loss) against test length, one line per group
of runs (the sweep's axis values but the seed) with its mean and min-max spread over seeds,
each group's training max length (dotted) and chance level (dashed) drawn, and the points
whose evaluation used position-table rows training never updated circled in red.

  /usr/bin/python3 analysis/plot_lengths.py runs/sweeps/quickstart [--metric token|sequence|loss] [--method none]
      [--step S] [--sampler NAME [--sampler-max-length N]] [--samples N]
      [--learned F [--learned-metric token|sequence]] [--out FILE.png]
  /usr/bin/python3 analysis/plot_lengths.py runs/a/run.h5 runs/b/run.h5 [SWEEP_DIR ...] --out FILE.png
  /usr/bin/python3 analysis/plot_lengths.py docs/studies/nope/copy_runs.csv --metric sequence --out copy.png

Any mix of sweep directories, run files and per-run files: a run file is a group of its own,
named by its run name (`pelab train` names a run after its --set options); a per-run file
(pelab report's report_runs.csv, a study's <sweep>_runs.csv) holds the rows its report
selected, so --step, --sampler and --sampler-max-length do not apply to it.

Rows are selected as `pelab report` selects them: each run's final step, its own sampler and
the most samples at each length, unless --step, --sampler (any max length of it unless
--sampler-max-length) or --samples say otherwise; --learned F leaves out the points beyond
training of a run whose mean accuracy at its training lengths (per token, or per sequence with
--learned-metric sequence) is below F. Writes FILE.png (default:
SWEEP_DIR/lengths.png for one sweep, else lengths.png here) and the plotted numbers as FILE.csv. Reads only the documented
schema: sweep.h5 and the run files it indexes. --metric loss plots the evaluation loss in nats per
scored token (as `pelab report --metric loss`; for text, exp(loss) is the per-byte perplexity).
"""
import argparse
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from plotting import group_style, plot_mean_and_spread, sample_std, save_figure_and_csv  # noqa: E402
from runfile import (evaluation_settings, group_label, load, per_run_file, select_rows, sweep_runs,  # noqa: E402
                     task_name)


def collect(runs, args, key, chance_key, scale):
    """({group label: dict(values, chance: {length: [per seed]}, untrained: lengths, train_min,
    train_max, not_learned: runs below --learned)} of the rows each run's selection gives, [ids of
    the runs it gives none])."""
    groups, left_out = {}, []
    for r in runs:
        run = r["run"]
        selected = select_rows(run, args.method, args.step, args.sampler, args.sampler_max_length, args.samples)
        if not selected:
            left_out.append(r["id"])
            continue
        g = groups.setdefault(group_label(r["overrides"]), dict(values={}, chance={}, untrained=set(),
                                                                train_min=np.inf, train_max=0, not_learned=0))
        g["train_min"] = min(g["train_min"], run["train_min_length"])
        g["train_max"] = max(g["train_max"], run["train_max_length"])
        learned = args.learned is None or in_distribution_accuracy(run, selected, args.learned_metric) >= args.learned
        g["not_learned"] += not learned
        for length, row in selected.items():
            if not learned and length > run["train_max_length"]:
                continue  # generalization of what was not learned (pelab report --learned)
            g["values"].setdefault(length, []).append(scale * row[key])
            g["chance"].setdefault(length, []).append(scale * row[chance_key])
            if row["untrained"]:
                g["untrained"].add(length)
    return groups, left_out


def in_distribution_accuracy(run, selected, metric):
    """The mean accuracy (metric: "token" or "sequence") over the selected lengths within the
    run's training lengths, as pelab report judges --learned; inf (learned) when no length there
    was evaluated."""
    key = "per_sequence_accuracy" if metric == "sequence" else "per_token_accuracy"
    within = [row[key] for length, row in selected.items()
              if run["train_min_length"] <= length <= run["train_max_length"]]
    return float(np.mean(within)) if within else np.inf


def no_rows_message(args, runs):
    """Why nothing was selected, naming what the runs have."""
    methods = sorted({m for r in runs for m in (r["run"]["selected"] if "selected" in r["run"]
                                                 else r["run"]["evaluation"]["method"])})
    if args.method not in methods:
        return f"no evaluation rows with method {args.method!r}; the runs have: {', '.join(methods)}"
    if any("selected" in r["run"] for r in runs):
        return f"no evaluation rows with method {args.method!r} and {args.samples} samples"
    settings = sorted({s for r in runs for s in evaluation_settings(r["run"]) if s[0] == args.method})
    have = "; ".join(f"step {step}, sampler {sampler} (max length {pml}), {samples} samples"
                     for _, step, sampler, pml, samples in settings)
    return f"no evaluation rows with method {args.method!r} at the selected settings; the runs have: {have}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="sweep directories (pelab sweep's output), run files (run.h5) and "
                                                 "per-run files (report_runs.csv, a study's <sweep>_runs.csv)")
    parser.add_argument("--metric", choices=["token", "sequence", "loss"], default="token",
                        help="per-token or per-sequence accuracy, or the loss (nats per scored token)")
    parser.add_argument("--method", default="none", help="evaluation extrapolation method to plot (default none)")
    parser.add_argument("--step", type=int, help="the training step evaluated (default: each run's final step)")
    parser.add_argument("--sampler", choices=["contiguous", "random_offset", "randomized", "cape", "random_float"],
                        help="the position sampler evaluation used (default: each run's own)")
    parser.add_argument("--sampler-max-length", type=int, help="that sampler's max length (default: any)")
    parser.add_argument("--learned", type=float, help="a run below this accuracy (a fraction, in --learned-metric) at its "
                        "training lengths has not learned its task: its points beyond training are left out (pelab "
                        "report --learned)")
    parser.add_argument("--learned-metric", choices=["token", "sequence"], default="token",
                        help="what --learned judges: per-token or per-sequence accuracy (default token)")
    parser.add_argument("--samples", type=int, help="evaluation samples (default: the most at each length)")
    parser.add_argument("--out", help="PNG to write (default SWEEP_DIR/lengths.png for one sweep, else "
                                      "lengths.png here); the CSV goes beside it")
    args = parser.parse_args()
    key = {"token": "per_token_accuracy", "sequence": "per_sequence_accuracy", "loss": "loss"}[args.metric]
    chance_key = {"token": "chance_token_accuracy", "sequence": "chance_sequence_accuracy",
                  "loss": "chance_loss"}[args.metric]
    loss = args.metric == "loss"
    scale = 1 if loss else 100  # accuracies in percent
    runs = []
    for path in args.paths:
        if os.path.isdir(path):
            runs += [r for r in sweep_runs(path) if r["run"] is not None]
        elif path.endswith(".csv"):
            if (args.step, args.sampler, args.sampler_max_length) != (None, None, None):
                parser.error(f"{path}: a per-run file holds the rows its report selected; --step, --sampler and "
                             "--sampler-max-length select from run files")
            runs += per_run_file(path)
        else:  # a run file: its own group, named by its run
            run = load(path)
            runs.append(dict(id=run["run_name"], path=path, overrides={"run": run["run_name"]}, run=run))
    where = args.paths[0] if len(args.paths) == 1 else f"{len(args.paths)} inputs"
    if not runs:
        print(f"{where}: no complete runs", file=sys.stderr)
        return 1
    groups, left_out = collect(runs, args, key, chance_key, scale)
    if not groups:
        print(f"{where}: {no_rows_message(args, runs)}", file=sys.stderr)
        return 1
    for run_id in left_out:
        print(f"note: {run_id}: no evaluation rows at the selected settings; left out", file=sys.stderr)
    one_sweep = len(args.paths) == 1 and os.path.isdir(args.paths[0])
    out = args.out or (os.path.join(args.paths[0], "lengths.png") if one_sweep else "lengths.png")
    fig, ax = plt.subplots(figsize=(9.5, 4.5))  # room for the legend beside the axes
    ranges = {(g["train_min"], g["train_max"]) for g in groups.values()}
    shared_range = len(ranges) == 1
    if shared_range:
        low, high = ranges.pop()
        ax.axvspan(low, high, color="0.9", label=f"training lengths {low}-{high}")
    chances = {}  # length -> each group's chance there
    for g in groups.values():
        for length, c in g["chance"].items():
            chances.setdefault(length, []).append(np.mean(c))
    shared_chance = all(max(c) - min(c) <= 1e-9 for c in chances.values())
    rows, untrained_points = [], []
    for i, (name, g) in enumerate(groups.items()):
        lengths = sorted(g["values"])
        values = [g["values"][L] for L in lengths]
        chance = [np.mean(g["chance"][L]) for L in lengths]
        seeds = max(len(v) for v in values)
        learned = f", {seeds - g['not_learned']} learned" if g["not_learned"] else ""
        line = plot_mean_and_spread(ax, lengths, values, f"{name} (n={seeds}{learned})", **group_style(i))
        ax.axvline(g["train_max"], color=line.get_color(), linestyle=":")
        if not shared_chance:
            ax.plot(lengths, chance, linestyle="--", color=line.get_color())
        untrained_points += [(L, np.mean(g["values"][L])) for L in sorted(g["untrained"])]
        rows += [[name, L, int(L > g["train_max"]), np.mean(v), sample_std(v), min(v), max(v), len(v), c,
                  int(L in g["untrained"])] for L, v, c in zip(lengths, values, chance)]
    proxies = []  # legend entries of lines drawn in each group's colour
    if shared_chance:
        lengths = sorted(chances)
        ax.plot(lengths, [chances[L][0] for L in lengths], "k--", label="chance")
    else:
        proxies.append(Line2D([], [], color="0.4", linestyle="--", label="chance (in each group's colour)"))
    if not shared_range:
        proxies.append(Line2D([], [], color="0.4", linestyle=":", label="training max length (in each group's colour)"))
    if untrained_points:
        ax.plot(*zip(*untrained_points), linestyle="none", marker="o", markersize=11, markerfacecolor="none",
                markeredgecolor="red", markeredgewidth=1.5, label="used untrained position rows")
    selection = [f"{k} {v}" for k, v in [("step", args.step), ("sampler", args.sampler),
                                          ("max length", args.sampler_max_length), ("samples", args.samples)]
                 if v is not None]
    tasks = ", ".join(sorted({task_name(r["run"]) for r in runs} - {None}))
    ax.set_xlabel("test length")
    if loss:
        ax.set_ylabel("loss (nats per scored token)")
        ax.set_ylim(bottom=0)
    else:
        ax.set_ylabel(f"per-{args.metric} accuracy (%)")
        ax.set_ylim(0, 100)
    one_file = len(args.paths) == 1 and args.paths[0].endswith(".csv")
    title = (os.path.basename(os.path.normpath(args.paths[0])) if one_sweep
             else os.path.basename(args.paths[0]).replace("_runs.csv", "").replace(".csv", "") if one_file
             else f"{len(runs)} runs")
    ax.set_title(f"length generalization: {title}" + (f" ({tasks})" if tasks else "")
                 + (f"\n{', '.join(selection)}" if selection else ""), fontsize=10)
    ax.legend(handles=ax.get_legend_handles_labels()[0] + proxies, fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    save_figure_and_csv(fig, out, ["group", "length", "beyond_training", "mean", "std", "min", "max", "seeds",
                                   "chance", "untrained"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
