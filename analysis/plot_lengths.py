#!/usr/bin/python3
"""Length-generalization plot of a sweep: accuracy (or loss) against test length, one line per group
of runs (the sweep's axis values but the seed) with its mean and min-max spread over seeds (or,
--aggregate median-ci, its median and the order-statistic interval of pelab report's
--aggregate median-ci),
each group's training max length (dotted), chance level (dashed) and, for tasks whose outputs
rearrange the input, the position-free baseline (dash-dot: the input's most frequent symbol at
every output slot) drawn, and the points whose evaluation used position-table rows training
never updated circled in red.

  /usr/bin/python3 analysis/plot_lengths.py runs/sweeps/quickstart [--metric token|sequence|loss] [--method none]
      [--step S] [--sampler NAME [--sampler-max-length N]] [--samples N]
      [--learned F [--learned-metric token|sequence]] [--facet KEY] [--filter KEY=V[,V...]] [--log-x]
      [--condition V] [--aggregate mean|median-ci]
      [--out FILE.png]
  /usr/bin/python3 analysis/plot_lengths.py runs/a/run.h5 runs/b/run.h5 [SWEEP_DIR ...] --out FILE.png
  /usr/bin/python3 analysis/plot_lengths.py docs/studies/nope/copy_runs.csv --metric sequence --out copy.png

--facet KEY draws one panel per value of a config key (task.name, model.causal, a scheme's
option: any key of the runs' configs); --filter KEY=V1,V2 keeps the runs whose KEY is one of
the values (repeatable); a group keeps its colour and marker in every panel. --log-x puts the
test lengths on a logarithmic axis. --condition V plots the rows at one value of the task's
evaluation condition (passkey: depth; flip_flop: p_ignore); analysis/plot_conditions.py draws
every value at once (the length x depth heatmap).

Any mix of sweep directories, run files and per-run files: a run file is a group of its own,
named by its run name (`pelab train` names a run after its --set options); a per-run file
(pelab report's report_runs.csv, a study's <sweep>_runs.csv) holds the rows its report
selected, so --step, --sampler and --sampler-max-length do not apply to it.

Rows are selected as `pelab report` selects them: each run's final step, its own sampler and
the most samples at each length, unless --step, --sampler (any max length of it unless
--sampler-max-length) or --samples say otherwise; --learned F leaves out the points beyond
training of a run whose accuracy at its longest training length (per token, or per sequence
with --learned-metric sequence) is below F. Writes FILE.png (default:
SWEEP_DIR/lengths.png for one sweep, else lengths.png here) and the plotted numbers as FILE.csv. Reads only the documented
schema: sweep.h5 and the run files it indexes. --metric loss plots the evaluation loss in nats per
scored token (as `pelab report --metric loss`), for text runs in bits per byte (loss / ln 2,
as the CLI prints them).
"""
import argparse
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter  # noqa: E402

from plotting import center_and_band, group_style, plot_mean_and_spread, sample_std, save_figure_and_csv  # noqa: E402
from runfile import (POSITION_FREE_KEYS, condition_values, evaluation_settings, group_label, judged_accuracy,  # noqa: E402
                     load, median_interval, per_run_file, select_rows, sweep_runs, task_name)


def collect(runs, args, key, chance_key, scale, facet=None):
    """({group label: dict(values, chance: {length: [per seed]}, untrained: lengths, train_min,
    train_max, not_learned: runs below --learned)} of the rows each run's selection gives, [ids of
    the runs it gives none])."""
    groups, left_out = {}, []
    for r in runs:
        run = r["run"]
        selected = select_rows(run, args.method, args.step, args.sampler, args.sampler_max_length, args.samples,
                               args.condition)
        if not selected:
            left_out.append(r["id"])
            continue
        overrides = {k: v for k, v in r["overrides"].items() if k != facet}
        g = groups.setdefault(group_label(overrides), dict(values={}, chance={}, free={}, untrained=set(),
                                                                train_min=np.inf, train_max=0, not_learned=0))
        g["train_min"] = min(g["train_min"], run["train_min_length"])
        g["train_max"] = max(g["train_max"], run["train_max_length"])
        learned = args.learned is None or judged_accuracy(run, selected, args.learned_metric) >= args.learned
        g["not_learned"] += not learned
        for length, row in selected.items():
            if not learned and length > run["train_max_length"]:
                continue  # generalization of what was not learned (pelab report --learned)
            g["values"].setdefault(length, []).append(scale * row[key])
            g["chance"].setdefault(length, []).append(scale * row[chance_key])
            free = row.get(POSITION_FREE_KEYS.get(args.metric), float("nan"))  # the position-free baseline
            if np.isfinite(free):
                g["free"].setdefault(length, []).append(scale * free)
            if row["untrained"]:
                g["untrained"].add(length)
    return groups, left_out


def flatten(tree, prefix=""):
    """{"model": {"causal": True}} -> {"model.causal": "true"}, values as YAML text."""
    out = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, path + "."))
        else:
            out[path] = "true" if value is True else "false" if value is False else str(value)
    return out


def config_value(r, key):
    """The value of config key `key` (a dotted path) of a run, as text: from its sweep overrides,
    else from its stored config (run files), else None."""
    if key in r["overrides"]:
        return r["overrides"][key]
    if key == "task.name" and task_name(r["run"]):
        return task_name(r["run"])
    if "config" in r["run"]:
        if "_config_values" not in r:
            import yaml  # python3-yaml
            r["_config_values"] = flatten(yaml.safe_load(r["run"]["config"]) or {})
        return r["_config_values"].get(key)
    return None


def no_rows_message(args, runs):
    """Why nothing was selected, naming what the runs have."""
    methods = sorted({m for r in runs for m in ([row["method"] for rows in r["run"]["selected"].values()
                                                  for row in rows.values()] if "selected" in r["run"]
                                                 else r["run"]["evaluation"]["method"])})
    if args.method not in methods:
        return f"no evaluation rows with method {args.method!r}; the runs have: {', '.join(methods)}"
    conditions = {(name, tuple(values)) for r in runs for name, values in [condition_values(r["run"])] if name}
    if conditions and args.condition is None:
        return ("the runs were evaluated under a condition: " +
                "; ".join(f"{name} at {', '.join(f'{v:g}' for v in values)}" for name, values in sorted(conditions)) +
                ": choose one with --condition V, or plot them all with analysis/plot_conditions.py")
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
                        "longest training length has not learned its task: its points beyond training are left out (pelab "
                        "report --learned)")
    parser.add_argument("--learned-metric", choices=["token", "sequence"], default="token",
                        help="what --learned judges: per-token or per-sequence accuracy (default token)")
    parser.add_argument("--samples", type=int, help="evaluation samples (default: the most at each length)")
    parser.add_argument("--condition", type=float, metavar="V",
                        help="the rows at this value of the task's evaluation condition (passkey: a depth of "
                             "eval.depths; flip_flop: a p_ignore); default: rows without one")
    parser.add_argument("--facet", metavar="KEY", help="one panel per value of this config key (e.g. task.name)")
    parser.add_argument("--filter", metavar="KEY=V[,V...]", action="append", default=[],
                        help="keep the runs whose config KEY is one of the values (repeatable)")
    parser.add_argument("--log-x", action="store_true", help="test lengths on a logarithmic axis")
    parser.add_argument("--label", action="append", default=[], metavar="GROUP => WORDS",
                        help="name the group labelled GROUP (from its axis values) WORDS in the legend and the CSV "
                             "(repeatable)")
    parser.add_argument("--aggregate", choices=["mean", "median-ci"], default="mean",
                        help="each point over seeds: the mean with the range as its band (default), or the median with "
                             "its order-statistic interval (pelab report --aggregate median-ci)")
    parser.add_argument("--out", help="PNG to write (default SWEEP_DIR/lengths.png for one sweep, else "
                                      "lengths.png here); the CSV goes beside it")
    args = parser.parse_args()
    args.words = {}  # --label: group label -> words
    for text in args.label:
        if " => " not in text:
            parser.error(f"--label {text!r}: expected 'GROUP => WORDS'")
        group, words = text.split(" => ", 1)
        args.words[group.strip()] = words.strip()
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
    # text runs: bits per byte (loss / ln 2), as the CLI prints them
    bits = loss and runs and all(task_name(r["run"]) == "text" for r in runs)
    if bits:
        scale = 1 / np.log(2)
    if not runs:
        print(f"{where}: no complete runs", file=sys.stderr)
        return 1
    for condition in args.filter:
        if "=" not in condition:
            parser.error(f"--filter {condition}: expected KEY=VALUE[,VALUE...]")
        name, values = condition.split("=", 1)
        wanted = set(values.split(","))
        runs = [r for r in runs if config_value(r, name) in wanted]
        if not runs:
            print(f"{where}: no run has {name} in {sorted(wanted)}", file=sys.stderr)
            return 1
    facets = {}  # facet value -> its runs, in the runs' order
    for r in runs:
        value = config_value(r, args.facet) if args.facet else None
        if args.facet and value is None:
            print(f"{where}: {r['id']} has no config key {args.facet!r}", file=sys.stderr)
            return 1
        facets.setdefault(value, []).append(r)
    panels, left_out = [], []
    for value, facet_runs in facets.items():
        groups, missing = collect(facet_runs, args, key, chance_key, scale, args.facet)
        left_out += missing
        if groups:
            panels.append((value, facet_runs, groups))
    if not panels:
        print(f"{where}: {no_rows_message(args, runs)}", file=sys.stderr)
        return 1
    for run_id in left_out:
        print(f"note: {run_id}: no evaluation rows at the selected settings; left out", file=sys.stderr)
    one_sweep = len(args.paths) == 1 and os.path.isdir(args.paths[0])
    out = args.out or (os.path.join(args.paths[0], "lengths.png") if one_sweep else "lengths.png")
    styles = group_styles([groups for _, _, groups in panels])
    columns = min(3, len(panels))
    grid_rows = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(grid_rows, columns, figsize=(5.2 * columns + 3.5, 4.2 * grid_rows), squeeze=False,
                             sharey=True)
    rows, legend = [], {}
    for ax, (value, facet_runs, groups) in zip(axes.flat, panels):
        panel_rows = plot_panel(ax, groups, styles, args, "bits" if bits else loss, legend)
        rows += [[value] + row for row in panel_rows] if args.facet else panel_rows
        if args.facet:
            ax.set_title(f"{args.facet} = {value}", fontsize=10)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    selection = [f"{k} {v}" for k, v in [("step", args.step), ("sampler", args.sampler),
                                          ("max length", args.sampler_max_length), ("samples", args.samples)]
                 if v is not None] + [f"{c}" for c in args.filter]
    tasks = ", ".join(sorted({task_name(r["run"]) for r in runs} - {None}))
    one_file = len(args.paths) == 1 and args.paths[0].endswith(".csv")
    title = (os.path.basename(os.path.normpath(args.paths[0])) if one_sweep
             else os.path.basename(args.paths[0]).replace("_runs.csv", "").replace(".csv", "") if one_file
             else f"{len(runs)} run" + ("s" if len(runs) != 1 else ""))
    spread = ("median over seeds, band: its order-statistic interval" if args.aggregate == "median-ci"
              else "mean over seeds, band: their range")
    heading = (f"length generalization: {title}"
               + (f" ({tasks})" if tasks and tasks != title and not args.facet == "task.name" else "")
               + f"\n{spread}" + (f"; {', '.join(selection)}" if selection else ""))
    if len(panels) == 1 and not args.facet:
        axes[0, 0].set_title(heading, fontsize=10)
        axes[0, 0].legend(handles=list(legend.values()), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                          borderaxespad=0)
    else:
        fig.suptitle(heading, fontsize=11)
        fig.tight_layout(rect=(0, 0, 0.8, 0.95))
        fig.legend(handles=list(legend.values()), fontsize=8, loc="upper left", bbox_to_anchor=(0.805, 0.93))
    header = ["group", "length", "beyond_training", "mean", "std", "min", "max", "seeds", "chance", "untrained",
              "position_free", "median", "interval_low", "interval_high", "interval_coverage"]
    save_figure_and_csv(fig, out, ([args.facet] if args.facet else []) + header, rows,
                        layout=len(panels) == 1 and not args.facet)
    return 0


def group_styles(panels):
    """{group label: matplotlib style} over the panels' groups (each a dict by label), in order of
    first appearance: a group keeps its colour, marker and line style in every panel."""
    styles = {}
    for groups in panels:
        for name in groups:
            styles.setdefault(name, dict(group_style(len(styles)), color=f"C{len(styles) % 10}"))
    return styles


def plot_panel(ax, groups, styles, args, loss, legend):
    """One panel: each group's mean and spread over seeds, its training max length and chance.
    Adds the legend entries to `legend` (label -> handle); returns the CSV rows."""
    ranges = {(g["train_min"], g["train_max"]) for g in groups.values()}
    shared_range = len(ranges) == 1
    if shared_range:
        low, high = ranges.pop()
        span = ax.axvspan(low, high, color="0.9", label=f"training lengths {low}-{high}")
        legend.setdefault(span.get_label(), span)
    chances = {}  # length -> each group's chance there
    for g in groups.values():
        for length, c in g["chance"].items():
            chances.setdefault(length, []).append(np.mean(c))
    shared_chance = all(max(c) - min(c) <= 1e-9 for c in chances.values())
    frees = {}  # length -> each group's position-free baseline there (the groups that have one)
    for g in groups.values():
        for length, c in g["free"].items():
            frees.setdefault(length, []).append(np.mean(c))
    shared_free = all(len(c) == len(groups) and max(c) - min(c) <= 1e-9 for c in frees.values())
    rows, untrained_points = [], []
    for name, g in groups.items():
        lengths = sorted(g["values"])
        values = [g["values"][L] for L in lengths]
        chance = [np.mean(g["chance"][L]) for L in lengths]
        seeds = max(len(v) for v in values)
        learned = f", {seeds - g['not_learned']} learned" if g["not_learned"] else ""
        line = plot_mean_and_spread(ax, lengths, values, f"{args.words.get(name, name)} (n={seeds}{learned})",
                                    aggregate=args.aggregate, **styles[name])
        legend.setdefault(name, line)  # labelled with the first panel's seed count
        ax.axvline(g["train_max"], color=line.get_color(), linestyle=":")
        if not shared_chance:
            ax.plot(lengths, chance, linestyle="--", color=line.get_color())
        untrained_points += [(L, center_and_band(g["values"][L], args.aggregate)[0]) for L in sorted(g["untrained"])]
        rows += [[args.words.get(name, name), L, int(L > g["train_max"]), np.mean(v), sample_std(v), min(v), max(v), len(v), c,
                  int(L in g["untrained"]), np.mean(g["free"][L]) if L in g["free"] else ""]
                 + list(median_interval(v)) for L, v, c in zip(lengths, values, chance)]
        if g["free"] and not shared_free:
            free_lengths = sorted(g["free"])
            ax.plot(free_lengths, [np.mean(g["free"][L]) for L in free_lengths], linestyle="-.", color=line.get_color())
    if shared_chance:
        lengths = sorted(chances)
        chance_line, = ax.plot(lengths, [chances[L][0] for L in lengths], "k--", label="chance")
        legend.setdefault("chance", chance_line)
    else:
        legend.setdefault("chance (each group's colour)",
                          Line2D([], [], color="0.4", linestyle="--", label="chance (in each group's colour)"))
    if frees and shared_free:
        lengths = sorted(frees)
        free_line, = ax.plot(lengths, [frees[L][0] for L in lengths], "k-.",
                             label="position-free (the input's most frequent symbol)")
        legend.setdefault("position-free", free_line)
    elif frees:
        legend.setdefault("position-free (each group's colour)",
                          Line2D([], [], color="0.4", linestyle="-.",
                                 label="position-free, the input's most frequent symbol (in each group's colour)"))
    if not shared_range:
        legend.setdefault("training max", Line2D([], [], color="0.4", linestyle=":",
                                                 label="training max length (in each group's colour)"))
    if untrained_points:
        marks, = ax.plot(*zip(*untrained_points), linestyle="none", marker="o", markersize=11, markerfacecolor="none",
                         markeredgecolor="red", markeredgewidth=1.5, label="used untrained position rows")
        legend.setdefault("untrained", marks)
    ax.set_xlabel("test length")
    if args.log_x:  # ticks at the test lengths, as plain numbers
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(sorted({L for g in groups.values() for L in g["values"]}
                                                       | {g["train_max"] for g in groups.values()})))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    if loss == "bits":
        ax.set_ylabel("bits per byte (loss / ln 2)")
        ax.set_ylim(bottom=0)
    elif loss:
        ax.set_ylabel("loss (nats per scored token)")
        ax.set_ylim(bottom=0)
    else:
        ax.set_ylabel(f"per-{args.metric} accuracy (%)")
        ax.set_ylim(0, 100)
    return rows

if __name__ == "__main__":
    sys.exit(main())
