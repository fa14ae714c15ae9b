#!/usr/bin/python3
"""Attention heatmaps of one run: a grid of layers x heads for one stored example at one length.

  /usr/bin/python3 analysis/plot_attention.py RUN.h5 [--length L] [--example 0] [--scale log|linear] [--out FILE.png]

Each heatmap's axes are token indices (queries down, keys across); a dashed line marks where
the input ends and the output begins (the first placeholder of the encoder format, the
separator of causal_lm). The colour scale is logarithmic from 1e-3 by default (a linear 0-1
scale leaves most of a head's keys black); --scale linear gives 0-1.

Maps are stored at the end of a run (analysis.attention_lengths) or added later with
`pelab export-attention RUN.h5 --lengths ...`. Writes FILE.png (default: beside the run file,
attention_L.png) and, as FILE.csv, the attention statistics of that length per evaluation row
(its settings), layer and head (mean attended distance, entropy, share on the diagonal, first
and last tokens; header only, with a note, when the run has none at that length).
"""
import argparse
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm, Normalize  # noqa: E402

from plotting import save_figure_and_csv  # noqa: E402
from runfile import attention_maps, load, table_rows  # noqa: E402

SETTINGS = ["length", "method", "step", "sampler", "positions_max_length", "samples"]  # of an evaluation row


def output_start(tokens, task_format):
    """The index of the first output slot (encoder: the first placeholder; causal_lm: the
    separator, both token 1), or None (masked_lm, or none found)."""
    if task_format not in ("encoder", "causal_lm"):
        return None
    found = np.flatnonzero(np.asarray(tokens) == 1)
    return int(found[0]) if len(found) else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_file")
    parser.add_argument("--length", type=int, help="a stored length (default: the largest)")
    parser.add_argument("--example", type=int, default=0, help="which stored example")
    parser.add_argument("--scale", choices=["log", "linear"], default="log",
                        help="colour scale of the probabilities: log from 1e-3 (default) or linear 0-1")
    parser.add_argument("--out", help="PNG to write; the CSV goes beside it")
    args = parser.parse_args()
    run = load(args.run_file)
    if not run["attention_lengths"]:
        print(f"{args.run_file}: no attention maps; add some with pelab export-attention", file=sys.stderr)
        return 1
    length = args.length or run["attention_lengths"][-1]
    if length not in run["attention_lengths"]:
        print(f"{args.run_file}: no maps at length {length}; stored: {run['attention_lengths']}", file=sys.stderr)
        return 1
    probs, tokens, positions = attention_maps(args.run_file, length)
    examples, layers, heads, T, _ = probs.shape
    if not 0 <= args.example < examples:
        print(f"{args.run_file}: --example {args.example}: {examples} examples are stored at length {length} "
              f"(0-{examples - 1})", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(layers, heads, figsize=(2.2 * heads + 0.8, 2.2 * layers), squeeze=False,
                             constrained_layout=True)
    floor = 1e-3
    norm = LogNorm(vmin=floor, vmax=1) if args.scale == "log" else Normalize(vmin=0, vmax=1)
    boundary = output_start(tokens[args.example], run["task_format"])
    step = max(1, int(round(T / 5.0)))
    ticks = list(range(0, T, step))
    image = None
    for l in range(layers):
        for h in range(heads):
            ax = axes[l][h]
            values = probs[args.example, l, h]
            if args.scale == "log":
                values = np.clip(values, floor, 1)
            image = ax.imshow(values, cmap="viridis", norm=norm, interpolation="nearest")
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
            ax.tick_params(labelsize=6, length=2)
            if boundary is not None:
                ax.axvline(boundary - 0.5, color="white", linestyle="--", linewidth=0.7)
                ax.axhline(boundary - 0.5, color="white", linestyle="--", linewidth=0.7)
            if l == 0:
                ax.set_title(f"head {h}", fontsize=9)
            if h == 0:
                ax.set_ylabel(f"layer {l}\nquery", fontsize=8)
            if l == layers - 1:
                ax.set_xlabel("key", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.8,
                 label="attention probability" + (f" (log; below {floor:g} shown as {floor:g})" if args.scale == "log" else ""))
    train_max = run["train_max_length"]
    fig.suptitle(f"{run['run_name']}: length {length} ({T} tokens{', beyond training' if length > train_max else ''}),"
                 f" example {args.example}; rows: queries, columns: keys"
                 + ("; dashed: where the output begins" if boundary is not None else ""), fontsize=9)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.run_file)), f"attention_{length}.png")
    statistics = ["mean_distance", "entropy", "diagonal", "first", "last"]
    stats, ev, rows = run["attention_statistics"], run["evaluation"], []
    if stats is not None:
        for row in table_rows(ev):
            if row["length"] == length:
                rows += [[row[k] for k in SETTINGS] + [l, h] + [float(stats[k][row["row"], l, h]) for k in statistics]
                         for l in range(stats["entropy"].shape[1]) for h in range(stats["entropy"].shape[2])]
    if stats is None:
        print(f"note: {args.run_file} has no attention statistics (analysis.attention_statistics was off): "
              "the CSV has its header only", file=sys.stderr)
    elif not rows:
        print(f"note: length {length} is not an evaluation length of this run, which has statistics at "
              f"{sorted({int(L) for L in ev['length']})}: the CSV has its header only", file=sys.stderr)
    save_figure_and_csv(fig, out, SETTINGS + ["layer", "head"] + statistics, rows, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
