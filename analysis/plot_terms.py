#!/usr/bin/python3
"""Attention-term plot: how much each term of the attention scores weighs, per layer
(docs/analysis.md, "Attention terms"). For additive absolute schemes (learned, sinusoidal) the
terms are content-content, content-position, position-content and position-position; other
schemes have q.k (content-content, or rotated q.k) and the parts of their score bias
(DeBERTa's c2p and p2c, T5's position bias, ...).

  /usr/bin/python3 analysis/plot_terms.py RUN.h5|SWEEP_DIR|FILE.csv [more ...] [--length L]
      [--out FILE.png | --export FILE.csv]

Top row: each term's share of the scores' size, mean |term| / sum over the layer's terms of
mean |term|; bottom row: the term's correlation with the full scores. One panel per layer,
one row per group, one column per term; cells are means over heads (and over the seeds of
a sweep group), empty where a group has no such term. The CSV adds the min and max.
Runs of a sweep are grouped by their axis values but the seed; a run file is its own group.
--length picks the attention-map length (default: the one most runs stored; runs without it
are left out, with a note). Writes
FILE.png (default: terms.png in the first input's folder: a sweep's own, or the run file's) and
the plotted numbers as FILE.csv.

--export FILE.csv writes, instead of a plot, the terms the plot is drawn from: per run, layer,
head and term at the one length plotted, mean_abs, correlation and the layer and head's
scores_mean_abs, with the run's id, its sweep folder's name and overrides (a run file given
itself: its run name, no sweep, no overrides). A study ships it so that its plot is drawn
again without the run files: given in place of the sweeps and run files (a .csv input, mixed
with others or not), it plots as they do, the same groups and numbers.
"""
import argparse
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plotting import save_figure_and_csv  # noqa: E402
from runfile import SchemaError, group_label, load, parse_overrides, score_terms, sweep_runs  # noqa: E402

# the columns of an exported file (--export): one row per run, length, layer, head and term
EXPORT_COLUMNS = ["run", "sweep", "overrides", "length", "layer", "head", "term", "mean_abs", "correlation",
                  "scores_mean_abs"]


def is_export(path):
    """Whether an input is a file --export wrote (a .csv) rather than a run file or sweep folder."""
    return path.endswith(".csv")


def terms_from_rows(rows):
    """score_terms' dict (names, mean_abs and correlation (layers, heads, terms), scores_mean_abs
    (layers, heads), float64) of one run's exported rows at one length; names in the file's order."""
    names = list(dict.fromkeys(r["term"] for r in rows))
    layers, heads = 1 + max(r["layer"] for r in rows), 1 + max(r["head"] for r in rows)
    terms = dict(names=names, mean_abs=np.full((layers, heads, len(names)), np.nan),
                 correlation=np.full((layers, heads, len(names)), np.nan),
                 scores_mean_abs=np.full((layers, heads), np.nan))
    for r in rows:
        at = (r["layer"], r["head"], names.index(r["term"]))
        terms["mean_abs"][at], terms["correlation"][at] = r["mean_abs"], r["correlation"]
        terms["scores_mean_abs"][at[:2]] = r["scores_mean_abs"]
    return terms


def read_export(path):
    """The runs of a file --export wrote, as inputs() gives them, with their terms read from the
    file ({length: terms}); in the file's order. A sweep's run is grouped by its overrides, as
    from its sweep; a run file's (no sweep) is its own group, named by its run."""
    rows = {}  # (sweep, run, overrides) -> {length: [row]}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in EXPORT_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise SchemaError(f"{path}: not a file of plot_terms.py --export: no column {', '.join(missing)}")
        for line in reader:
            row = dict(line, **{k: int(line[k]) for k in ["length", "layer", "head"]},
                       **{k: float(line[k]) for k in ["mean_abs", "correlation", "scores_mean_abs"]})
            lengths = rows.setdefault((line["sweep"], line["run"], line["overrides"]), {})
            lengths.setdefault(row["length"], []).append(row)
    return [dict(id=run, sweep=sweep, overrides_text=overrides, name=f"{path}: {run}", path=path,
                 label=group_label(parse_overrides(overrides)) if sweep else run, lengths=sorted(by_length),
                 terms={L: terms_from_rows(r) for L, r in by_length.items()})
            for (sweep, run, overrides), by_length in rows.items()]


def inputs(paths):
    """The runs of the run files, sweep folders and exported files, in order: dicts of id, sweep (its
    folder's name; empty for a run file given itself), overrides_text, label (the group), name
    (for notes), path, lengths (the stored attention lengths) and terms ({length: terms} of an
    exported file; None: score_terms reads the run file)."""
    runs = []
    for path in paths:
        if is_export(path):
            runs += read_export(path)
        elif os.path.isdir(path):
            sweep = os.path.basename(os.path.normpath(path))
            for r in sweep_runs(path):
                if r["run"] is not None:
                    runs.append(dict(id=r["id"], sweep=sweep, overrides_text=r["overrides_text"],
                                     label=group_label(r["overrides"]), name=r["path"], path=r["path"],
                                     lengths=r["run"]["attention_lengths"], terms=None))
        else:
            run = load(path)
            runs.append(dict(id=run["run_name"], sweep="", overrides_text="", label=run["run_name"], name=path,
                             path=path, lengths=run["attention_lengths"], terms=None))
    return runs


def terms_at(run, length):
    """A run's attention terms at `length` (score_terms' dict), None when it has none there."""
    return run["terms"].get(length) if run["terms"] is not None else score_terms(run["path"], length)


def choose_length(args, runs):
    """The attention-map length to plot: --length, else the one most runs stored (the smallest of
    equals); None (after saying why on stderr) when no run stored it."""
    stored = sorted({L for r in runs for L in r["lengths"]})
    length = args.length if args.length is not None else (
        max(stored, key=lambda L: (sum(L in r["lengths"] for r in runs), -L)) if stored else None)
    if length not in stored:
        wanted = f"length {length}" if length is not None else "any length"
        print(f"plot_terms: no attention maps at {wanted}; stored lengths: {stored}", file=sys.stderr)
        return None
    return length


def with_terms(runs, length):
    """[(run, terms)] of the runs with attention terms at `length`; the others named on stderr."""
    found = []
    for r in runs:
        if length not in r["lengths"]:
            print(f"note: {r['name']}: no attention maps at length {length}; left out", file=sys.stderr)
            continue
        terms = terms_at(r, length)
        if terms is None:
            print(f"note: {r['name']}: no attention terms at length {length} (a file from before them); left out",
                  file=sys.stderr)
            continue
        found.append((r, terms))
    return found


def write_export(path, found, length):
    """Writes the terms of the runs ([(run, terms)] at `length`) as EXPORT_COLUMNS, numbers as repr
    (the shortest text that reads back as the same float, nan as nan), so that a plot of the
    file is the plot of the run files."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(EXPORT_COLUMNS)
        for r, t in found:
            layers, heads, _ = t["mean_abs"].shape
            for layer in range(layers):
                for head in range(heads):
                    for i, name in enumerate(t["names"]):
                        writer.writerow([r["id"], r["sweep"], r["overrides_text"], length, layer, head, name,
                                         repr(float(t["mean_abs"][layer, head, i])),
                                         repr(float(t["correlation"][layer, head, i])),
                                         repr(float(t["scores_mean_abs"][layer, head]))])
    print(f"wrote {path}")


def values(group, layer, name, what):
    """A group's values (its runs' term dicts) of one term at one layer over heads and runs (NaN
    left out): the term's share of the layer's mean |term| summed over terms, or its correlation."""
    out = []
    for t in group:
        if name not in t["names"] or layer >= t["mean_abs"].shape[0]:
            continue
        i = t["names"].index(name)
        size = t["mean_abs"][layer]  # (heads, terms)
        v = size[:, i] / np.nansum(size, axis=1) if what == "share" else t["correlation"][layer][:, i]
        out += [x for x in v if np.isfinite(x)]
    return out


def plot(groups, length, out):
    """Draws the shares (top) and correlations (bottom) per layer of the groups ({label: [terms]})
    into `out` and their numbers into the CSV beside it."""
    layers = max(t["mean_abs"].shape[0] for g in groups.values() for t in g)
    names = list(dict.fromkeys(n for g in groups.values() for t in g for n in t["names"]))
    labels = list(groups)
    fig, axes = plt.subplots(2, layers, squeeze=False,
                             figsize=(1.5 + 0.25 * max(len(l) for l in labels) / 6 + layers * (0.7 * len(names) + 0.8),
                                      2 * (0.32 * len(labels) + 2.0)))
    rows = []
    for layer in range(layers):
        for row, (what, cmap, limits) in enumerate([("share", "viridis", (0, 1)), ("correlation", "RdBu_r", (-1, 1))]):
            ax = axes[row][layer]
            grid = np.full((len(labels), len(names)), np.nan)
            for g, label in enumerate(labels):
                for n, name in enumerate(names):
                    v = values(groups[label], layer, name, what)
                    if not v:
                        continue
                    grid[g, n] = np.mean(v)
                    ax.text(n, g, f"{np.mean(v):.2f}", ha="center", va="center", fontsize=7,
                            color="w" if (what == "share" and np.mean(v) < 0.5) else "k")
                    if row == 0:
                        corr = values(groups[label], layer, name, "correlation")
                        rows.append([label, layer, name, np.mean(v), min(v), max(v),
                                     np.mean(corr) if corr else float("nan"), len(groups[label])])
            ax.imshow(grid, cmap=cmap, vmin=limits[0], vmax=limits[1], aspect="auto")
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names, rotation=45, ha="right", fontsize=7)
            ax.set_yticks(range(len(labels)))
            ax.set_yticklabels(labels if layer == 0 else [], fontsize=7)
            ax.set_title(f"layer {layer}: {'share of mean |score|' if what == 'share' else 'correlation with the scores'}",
                         fontsize=9)
    for row in axes:
        fig.colorbar(row[-1].images[0], ax=row[-1], fraction=0.05)
    fig.suptitle(f"attention terms at length {length} (means over heads and seeds)", fontsize=10)
    save_figure_and_csv(fig, out, ["group", "layer", "term", "share", "share_min", "share_max", "correlation", "runs"],
                        rows)


def overwrites_input(paths, written):
    """Whether writing `written` would replace one of the input files."""
    return os.path.exists(written) and any(os.path.isfile(p) and os.path.samefile(p, written) for p in paths)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="run files (run.h5), sweep folders or files written by --export")
    parser.add_argument("--length", type=int, help="attention-map length (default: the one most runs stored)")
    written = parser.add_mutually_exclusive_group()
    written.add_argument("--out", help="PNG to write; the CSV goes beside it")
    written.add_argument("--export", metavar="FILE.csv",
                         help="write the terms per run, layer, head and term instead of a plot")
    args = parser.parse_args()
    try:
        runs = inputs(args.inputs)
    except (OSError, SchemaError) as e:
        print(f"plot_terms: {e}", file=sys.stderr)
        return 1
    if not runs:
        print(f"plot_terms: no complete runs in {' '.join(args.inputs)}", file=sys.stderr)
        return 1
    length = choose_length(args, runs)
    if length is None:
        return 1
    found = with_terms(runs, length)
    if not found:
        print(f"plot_terms: no run has attention terms at length {length}; "
              "`pelab eval RUN.h5 --attention-lengths L` adds them", file=sys.stderr)
        return 1
    first = args.inputs[0]  # a sweep: into its folder; a run file or an exported file: beside it
    out = args.out or os.path.join(first if os.path.isdir(first) else os.path.dirname(os.path.abspath(first)),
                                   "terms.png")
    target = args.export or os.path.splitext(out)[0] + ".csv"
    if overwrites_input(args.inputs, target):
        print(f"plot_terms: {target} is an input; name another with {'--export' if args.export else '--out'}",
              file=sys.stderr)
        return 1
    if args.export:
        write_export(args.export, found, length)
        return 0
    groups = {}  # label -> list of term dicts (one per run)
    for r, terms in found:
        groups.setdefault(r["label"], []).append(terms)
    plot(groups, length, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
