#!/usr/bin/python3
"""Attention heatmaps of one run: a grid of layers x heads for one stored example at one length.

  /usr/bin/python3 analysis/plot_attention.py RUN.h5 [--length L] [--example 0] [--out FILE.png]

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

from plotting import save_figure_and_csv  # noqa: E402
from runfile import attention_maps, load, table_rows  # noqa: E402

SETTINGS = ["length", "method", "step", "sampler", "positions_max_length", "samples"]  # of an evaluation row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_file")
    parser.add_argument("--length", type=int, help="a stored length (default: the largest)")
    parser.add_argument("--example", type=int, default=0, help="which stored example")
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
    image = None
    for l in range(layers):
        for h in range(heads):
            ax = axes[l][h]
            image = ax.imshow(probs[args.example, l, h], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if l == 0:
                ax.set_title(f"head {h}", fontsize=9)
            if h == 0:
                ax.set_ylabel(f"layer {l}", fontsize=9)
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention probability")
    train_max = run["train_max_length"]
    fig.suptitle(f"{run['run_name']}: length {length} ({T} tokens{', beyond training' if length > train_max else ''}),"
                 f" example {args.example}; rows: queries, columns: keys", fontsize=9)
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
