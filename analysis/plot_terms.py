#!/usr/bin/python3
"""Attention-term plot: how much each term of the attention scores weighs, per layer
(docs/analysis.md, "Attention terms"). For additive absolute schemes (learned, sinusoidal) the
terms are content-content, content-position, position-content and position-position; other
schemes have q.k (content-content, or rotated q.k) and the parts of their score bias
(DeBERTa's c2p and p2c, T5's position bias, ...).

  /usr/bin/python3 analysis/plot_terms.py RUN.h5|SWEEP_DIR [more ...] [--length L] [--out FILE.png]

Top row: each term's share of the scores' size, mean |term| / sum over the layer's terms of
mean |term|; bottom row: the term's correlation with the full scores. One panel per layer,
one row per group, one column per term; cells are means over heads (and over the seeds of
a sweep group), empty where a group has no such term. The CSV adds the min and max.
Runs of a sweep are grouped by their axis values but the seed; a run file is its own group.
--length picks the attention-map length (default: the one most runs stored; runs without it
are left out, with a note). Writes
FILE.png (default: terms.png in the first input's folder: a sweep's own, or the run file's) and
the plotted numbers as FILE.csv.
"""
import argparse
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from plotting import save_figure_and_csv  # noqa: E402
from runfile import SchemaError, group_label, load, score_terms, sweep_runs  # noqa: E402


def inputs(paths):
    """[(group label, run file path, stored attention lengths)] of the run files and sweep folders."""
    runs = []
    for path in paths:
        if os.path.isdir(path):
            for r in sweep_runs(path):
                if r["run"] is not None:
                    runs.append((group_label(r["overrides"]), r["path"], r["run"]["attention_lengths"]))
        else:
            run = load(path)
            runs.append((run["run_name"], path, run["attention_lengths"]))
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", help="run files (run.h5) or sweep folders")
    parser.add_argument("--length", type=int, help="attention-map length (default: the one most runs stored)")
    parser.add_argument("--out", help="PNG to write; the CSV goes beside it")
    args = parser.parse_args()
    try:
        runs = inputs(args.inputs)
    except (OSError, SchemaError) as e:
        print(f"plot_terms: {e}", file=sys.stderr)
        return 1
    if not runs:
        print(f"plot_terms: no complete runs in {' '.join(args.inputs)}", file=sys.stderr)
        return 1
    stored = sorted({L for _, _, lengths in runs for L in lengths})
    # default: the length most runs stored (the smallest of equals)
    length = args.length if args.length is not None else (
        max(stored, key=lambda L: (sum(L in lengths for _, _, lengths in runs), -L)) if stored else None)
    if length not in stored:
        wanted = f"length {length}" if length is not None else "any length"
        print(f"plot_terms: no attention maps at {wanted}; stored lengths: {stored}", file=sys.stderr)
        return 1
    for _, path, lengths in runs:
        if length not in lengths:
            print(f"note: {path}: no attention maps at length {length}; left out", file=sys.stderr)
    runs = [r for r in runs if length in r[2]]

    groups = {}  # label -> list of term dicts (one per run)
    for label, path, _ in runs:
        terms = score_terms(path, length)
        if terms is None:
            print(f"note: {path}: no attention terms at length {length} (a file from before them); left out",
                  file=sys.stderr)
            continue
        groups.setdefault(label, []).append(terms)
    if not groups:
        print(f"plot_terms: no run has attention terms at length {length}; "
              "`pelab eval RUN.h5 --attention-lengths L` adds them", file=sys.stderr)
        return 1
    layers = max(t["mean_abs"].shape[0] for g in groups.values() for t in g)
    names = list(dict.fromkeys(n for g in groups.values() for t in g for n in t["names"]))

    def values(group, layer, name, what):
        """The group's values of one term at one layer over heads and runs (NaN left out)."""
        out = []
        for t in group:
            if name not in t["names"] or layer >= t["mean_abs"].shape[0]:
                continue
            i = t["names"].index(name)
            size = t["mean_abs"][layer]  # (heads, terms)
            v = size[:, i] / np.nansum(size, axis=1) if what == "share" else t["correlation"][layer][:, i]
            out += [x for x in v if np.isfinite(x)]
        return out

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
    first = args.inputs[0]  # a sweep: into its folder; a run file: beside it
    out = args.out or os.path.join(first if os.path.isdir(first) else os.path.dirname(os.path.abspath(first)),
                                   "terms.png")
    save_figure_and_csv(fig, out, ["group", "layer", "term", "share", "share_min", "share_max", "correlation", "runs"],
                        rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
