#!/usr/bin/python3
"""Probe plot of a sweep: position-probe accuracy by layer (0 = the embedding output), one line
per group of runs (the sweep's axis values but the seed; mean and min-max over seeds), with the
token-only baseline (what the tokens alone reveal of position) drawn as chance.

  /usr/bin/python3 analysis/plot_probes.py runs/sweeps/quickstart [--probe position_accuracy] [--length L]
      [--step S] [--sampler NAME [--sampler-max-length N]] [--out FILE.png | --export FILE.csv]
  /usr/bin/python3 analysis/plot_probes.py docs/studies/depth/depth_probes.csv [--probe P] [--length L] [--out FILE.png]

Probes: position_accuracy, position_r2, order_accuracy, distance_r2. Probe rows are selected as
plot_lengths.py selects evaluation rows: each run's final step and its own sampler and max
length, unless --step or --sampler (any max length of it unless --sampler-max-length) say
otherwise (`pelab eval --probes L --step S` adds probes at other settings). Writes FILE.png
(default SWEEP_DIR/probes.png) and the plotted numbers as FILE.csv.

--export FILE.csv writes, instead of a plot, the selected rows (every probe, one row per run and
layer, at the one length plotted) with each run's id and overrides: a per-run file a study ships
so that its plot is drawn again without the run files. Given such a file in place of the sweep,
the plot and its CSV are the sweep's (the title names the file less `.csv` and a trailing
`_probes`: SWEEP_probes.csv is titled as SWEEP); the file holds rows already selected, so of
the selection options only --length (one of the lengths it has) applies.
"""
import argparse
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plotting import group_style, plot_mean_and_spread, save_figure_and_csv  # noqa: E402
from runfile import (SchemaError, group_label, parse_overrides, probe_settings, select_probe_rows,  # noqa: E402
                     sweep_runs)

PROBES = ["position_accuracy", "position_r2", "order_accuracy", "distance_r2"]
# the columns of an exported file (--export): a run's probe rows at one length, one per layer
EXPORT_COLUMNS = ["run", "overrides", "length", "layer", "position_accuracy", "position_chance", "position_r2",
                  "order_accuracy", "distance_r2"]
SELECTION_OPTIONS = [("step", "--step"), ("sampler", "--sampler"), ("sampler_max_length", "--sampler-max-length")]


def selection(args):
    """The settings given on the command line, as `step 2, sampler randomized` (empty: the defaults)."""
    return ", ".join(f"{k} {v}" for k, v in [("step", args.step), ("sampler", args.sampler),
                                             ("max length", args.sampler_max_length)] if v is not None)


def is_export(path):
    """Whether an input is a file --export wrote (a .csv) rather than a sweep folder."""
    return path.endswith(".csv")


def read_export(path):
    """The runs of a file --export wrote, shaped like sweep_runs' rows (id, overrides, overrides_text,
    path) with `selected` in place of the run: {length: {layer: row}}, the rows the export selected,
    in the file's order of runs and lengths. Numbers read back as they were (written as repr)."""
    runs = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in EXPORT_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise SchemaError(f"{path}: not a file of plot_probes.py --export: no column {', '.join(missing)}")
        for line in reader:
            row = dict(line, length=int(line["length"]), layer=int(line["layer"]),
                       **{k: float(line[k]) for k in EXPORT_COLUMNS[4:]})
            r = runs.setdefault(line["run"], dict(id=line["run"], overrides_text=line["overrides"], path=path,
                                                  overrides=parse_overrides(line["overrides"]), selected={}))
            r["selected"].setdefault(row["length"], {})[row["layer"]] = row
    for r in runs.values():  # by layer, as select_probe_rows gives them
        r["selected"] = {L: dict(sorted(rows.items())) for L, rows in r["selected"].items()}
    return list(runs.values())


def write_export(path, selected, length):
    """Writes the selected rows ([(run, {layer: row})] at `length`) as EXPORT_COLUMNS, numbers as
    repr (the shortest text that reads back as the same float), so that a plot of the file is
    the plot of the sweep."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(EXPORT_COLUMNS)
        for r, rows in selected:
            for layer, row in rows.items():
                writer.writerow([r["id"], r["overrides_text"], length, int(layer)]
                                + [repr(float(row[k])) for k in EXPORT_COLUMNS[4:]])
    print(f"wrote {path}")


def stored_lengths(r):
    """The probed lengths of a run (a sweep's or an exported file's), in the order they are stored."""
    if "selected" in r:
        return list(r["selected"])
    return [int(L) for L in r["run"]["probes"]["length"]]


def no_rows_message(args, runs, length):
    """Why no probe rows were selected, naming the settings the runs have."""
    wanted = f" at length {length}" if length is not None else ""
    settings = sorted({s for r in runs if "run" in r for s in probe_settings(r["run"])})
    have = "; ".join(f"length {L} at step {step}, sampler {sampler} (max length {pml})"
                     for L, step, sampler, pml in settings)
    return (f"no probes{wanted} at the selected settings ({selection(args) or 'final step, own sampler'}); "
            f"the runs have: {have}")


def select(runs, args, length):
    """[(run, {layer: row})] of the runs whose selection at `length` gives rows (of an exported
    file: its rows at `length`)."""
    chosen = [(r, r["selected"].get(length, {}) if "selected" in r else
               select_probe_rows(r["run"], length, args.step, args.sampler, args.sampler_max_length))
              for r in runs]
    return [(r, rows) for r, rows in chosen if rows]


def read_runs(parser, args):
    """The runs to plot: a sweep's complete runs with probes, or an exported file's runs (on which
    the selection options other than --length are an error: the file holds rows already selected)."""
    if not is_export(args.source):
        return [r for r in sweep_runs(args.source) if r["run"] is not None and r["run"]["probes"] is not None]
    given = [flag for key, flag in SELECTION_OPTIONS if getattr(args, key) is not None]
    if given:
        parser.error(f"{args.source}: a file of --export holds rows already selected; of the selection "
                     f"options it takes only --length (given: {', '.join(given)})")
    return read_export(args.source)


def title_name(source):
    """The plot title's name for the input: a sweep folder's name; an exported file's name less
    `.csv` and a trailing `_probes` (SWEEP_probes.csv is titled as SWEEP)."""
    name = os.path.basename(os.path.normpath(source))
    if is_export(source):
        name = name[:-len(".csv")]
        name = name[:-len("_probes")] if name.endswith("_probes") and name != "_probes" else name
    return name


def choose_length(args, runs):
    """The probed length to plot: --length, else the first stored at the selected settings; None
    (after saying why on stderr) when there is none."""
    probed = sorted({L for r in runs for L in stored_lengths(r)})
    length = args.length
    if length is None:  # the first length stored at the selected settings
        stored = dict.fromkeys(L for r in runs for L in stored_lengths(r))
        length = next((L for L in stored if select(runs, args, L)), None)
        if length is None:
            print(f"{args.source}: {no_rows_message(args, runs, None)}", file=sys.stderr)
            return None
    if length not in probed:
        print(f"{args.source}: no probes at length {length}; probed lengths: {probed}", file=sys.stderr)
        return None
    return length


def plot(args, selected, length, out):
    """Draws the probe by layer per group (the chance line for position_accuracy) into `out`
    and its numbers into the CSV beside it."""
    groups, chance = {}, []
    for r, rows in selected:
        by_layer = groups.setdefault(group_label(r["overrides"]), {})
        for layer, row in rows.items():
            by_layer.setdefault(layer, []).append(float(row[args.probe]))
            chance.append(float(row["position_chance"]))
    fig, ax = plt.subplots(figsize=(8.5, 4))  # room for the legend beside the axes
    rows = []
    for i, (name, by_layer) in enumerate(groups.items()):
        layers = sorted(by_layer)
        values = [by_layer[l] for l in layers]
        plot_mean_and_spread(ax, layers, values, name, **group_style(i))
        rows += [[name, l, np.mean(v), min(v), max(v), len(v)] for l, v in zip(layers, values)]
    if args.probe == "position_accuracy":
        ax.axhline(np.mean(chance), color="k", linestyle="--", label="chance (tokens alone)")
    ax.set_xlabel("layer (0 = embedding output)")
    ax.set_ylabel(args.probe.replace("_", " "))
    ax.set_title(f"position probes at length {length}: {title_name(args.source)}"
                 + (f"\n{selection(args)}" if selection(args) else ""))
    ax.set_xticks(sorted({l for g in groups.values() for l in g}))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    save_figure_and_csv(fig, out, ["group", "layer", args.probe, "min", "max", "seeds"], rows)


def overwrites_input(source, written):
    """Whether writing `written` would replace the input file `source`."""
    return os.path.exists(written) and os.path.isfile(source) and os.path.samefile(source, written)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", metavar="SWEEP_DIR|FILE.csv",
                        help="a sweep folder, or a file written by --export")
    parser.add_argument("--probe", default="position_accuracy", choices=PROBES)
    parser.add_argument("--length", type=int, help="probed length (default: the first stored at the selected settings)")
    parser.add_argument("--step", type=int, help="the training step probed (default: each run's final step)")
    parser.add_argument("--sampler", choices=["contiguous", "random_offset", "randomized", "cape", "random_float"],
                        help="the position sampler the probes used (default: each run's own)")
    parser.add_argument("--sampler-max-length", type=int, help="that sampler's max length (default: any)")
    written = parser.add_mutually_exclusive_group()
    written.add_argument("--out", help="PNG to write; the CSV goes beside it")
    written.add_argument("--export", metavar="FILE.csv",
                         help="write the selected rows of every probe (per run and layer) instead of a plot")
    args = parser.parse_args()
    try:
        runs = read_runs(parser, args)
    except (OSError, SchemaError) as e:
        print(f"plot_probes: {e}", file=sys.stderr)
        return 1
    if not runs:
        print(f"{args.source}: no complete runs with probes", file=sys.stderr)
        return 1
    length = choose_length(args, runs)
    if length is None:
        return 1
    selected = select(runs, args, length)
    if not selected:
        print(f"{args.source}: {no_rows_message(args, runs, length)}", file=sys.stderr)
        return 1
    kept = {r["id"] for r, _ in selected}
    for r in runs:
        if r["id"] not in kept:
            print(f"note: {r['id']}: no probes at length {length} at the selected settings; left out", file=sys.stderr)
    out = args.out or os.path.join(args.source if not is_export(args.source) else os.path.dirname(args.source),
                                   "probes.png")
    target = args.export or os.path.splitext(out)[0] + ".csv"
    if overwrites_input(args.source, target):
        print(f"plot_probes: {target} is the input; name another with {'--export' if args.export else '--out'}",
              file=sys.stderr)
        return 1
    if args.export:
        write_export(args.export, selected, length)
    else:
        plot(args, selected, length, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
