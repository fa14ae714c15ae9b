#!/usr/bin/python3
"""The pretrained_bert study (docs/studies/pretrained_bert.md): all-MiniLM-L6-v2 imported by
`pelab import-hf` (configs/studies/pretrained_bert/import.sh makes RUN_DIR).

  /usr/bin/python3 analysis/studies/pretrained_bert.py runs/studies/pretrained_bert docs/studies/pretrained_bert
  /usr/bin/python3 analysis/studies/pretrained_bert.py docs/studies/pretrained_bert docs/studies/pretrained_bert

From RUN_DIR (run.h5, padding.csv, relative_key_parameters.csv) writes the per-run files to OUT
(each NAME_runs.csv): evaluation and probes (the run file's rows), pad_row (norms of the token
table's rows by kind), position_table, similarity_by_offset, similarity_first_128 and
similarity_blocks (cosine similarity of the position table's rows, beside sinusoidal's of the
same size: by offset, the first 128 positions, and 4 x 4 block means of all 512), and
padding and relative_key_parameters (copied). From OUT's files alone: the tables (.md) and the
plots (similarity.png, probes_by_layer.png), each plot with its numbers as .csv.
"""
import csv
import math
import os
import shutil
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from plotting import save_figure_and_csv, write_and_print  # noqa: E402

BLOCK = 4  # similarity_blocks.csv: means over 4 x 4 blocks of positions


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def sinusoidal(rows, width, base=10000.0):
    """Vaswani et al.'s table, interleaved sin/cos pairs (pelab's sinusoidal, layout interleaved)."""
    position = np.arange(rows)[:, None]
    frequency = base ** (-np.arange(0, width, 2) / width)
    table = np.zeros((rows, width))
    table[:, 0::2] = np.sin(position * frequency)
    table[:, 1::2] = np.cos(position * frequency)
    return table


def cosine_matrix(table):
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    return unit @ unit.T


def extract(source, out):
    with h5py.File(os.path.join(source, "run.h5"), "r") as f:
        e = f["evaluation"]
        decode = lambda values: [v.decode() if isinstance(v, bytes) else v for v in values]
        rows = [(int(L), int(T), int(n), f"{a:.6f}", f"{c:.6f}", f"{loss:.6f}")
                for L, T, n, a, c, loss, method in zip(e["length"][:], e["sequence_length"][:], e["samples"][:],
                                                      e["per_token_accuracy"][:], e["chance_token_accuracy"][:],
                                                      e["loss"][:], decode(e["method"][:]))
                if method == "none"]
        write_csv(os.path.join(out, "evaluation_runs.csv"),
                  ["length", "tokens", "samples", "token_accuracy", "chance_token_accuracy", "loss"], sorted(rows))
        p = f["probes"]
        keys = ["length", "layer", "position_accuracy", "position_chance", "position_r2", "order_accuracy", "distance_r2"]
        write_csv(os.path.join(out, "probes_runs.csv"), keys,
                  [[int(p["length"][i]), int(p["layer"][i])] + [f"{p[k][i]:.6f}" for k in keys[2:]]
                   for i in range(len(p["layer"]))])
        checkpoint = f["checkpoint"]
        table = checkpoint["position_encoding.table"][:].astype(np.float64)  # (positions, D)
        tokens = checkpoint["token_embedding.weight"][:].astype(np.float64)  # (V, D)
    # the token table's rows: [PAD] (id 0), [unusedN] (ids 1-98, 104-998 in BERT's uncased
    # vocabulary: never in pretraining text), the special tokens, the ordinary ids from 999
    norms = np.linalg.norm(tokens, axis=1)
    kinds = [("[PAD] (id 0)", [0]), ("[unused0-98] and [unused99-993] (ids 1-99, 104-998)",
                                     list(range(1, 100)) + list(range(104, 999))),
             ("[UNK] [CLS] [SEP] [MASK] (ids 100-103)", [100, 101, 102, 103]),
             ("ordinary tokens (ids 999-30521)", list(range(999, tokens.shape[0])))]
    mean_ordinary = tokens[999:].mean(axis=0)
    pad_rows = []
    for name, ids in kinds:
        cos = tokens[ids] @ mean_ordinary / (norms[ids] * np.linalg.norm(mean_ordinary))
        pad_rows.append([name, len(ids), f"{norms[ids].mean():.4f}", f"{norms[ids].min():.4f}",
                         f"{norms[ids].max():.4f}", f"{cos.mean():.4f}"])
    write_csv(os.path.join(out, "pad_row_runs.csv"),
              ["rows", "count", "mean_norm", "min_norm", "max_norm", "mean_cosine_to_mean_ordinary_row"], pad_rows)
    # the position table beside sinusoidal's of the same size
    learned, fixed = cosine_matrix(table), cosine_matrix(sinusoidal(*table.shape))
    n = table.shape[0]
    by_offset = [[d, f"{np.diagonal(learned, d).mean():.6f}", f"{np.diagonal(fixed, d).mean():.6f}",
                  f"{np.diagonal(learned, d)[:128 - d].mean():.6f}" if d < 128 else ""] for d in range(n)]
    write_csv(os.path.join(out, "similarity_by_offset_runs.csv"),
              ["offset", "learned_mean_cosine", "sinusoidal_mean_cosine", "learned_mean_cosine_first_128"], by_offset)
    # the first 128 positions (the fine-tuning length) one by one; all of them in 4 x 4 block
    # means (a subsample would alias the table's periodic components)
    first = 128
    write_csv(os.path.join(out, "similarity_first_128_runs.csv"), ["i", "j", "learned", "sinusoidal"],
              [[i, j, f"{learned[i, j]:.3f}", f"{fixed[i, j]:.3f}"] for i in range(first) for j in range(first)])
    blocks = lambda m: m.reshape(n // BLOCK, BLOCK, n // BLOCK, BLOCK).mean(axis=(1, 3))
    learned_blocks, fixed_blocks = blocks(learned), blocks(fixed)
    write_csv(os.path.join(out, "similarity_blocks_runs.csv"), ["block_i", "block_j", "learned", "sinusoidal"],
              [[i, j, f"{learned_blocks[i, j]:.3f}", f"{fixed_blocks[i, j]:.3f}"]
               for i in range(n // BLOCK) for j in range(n // BLOCK)])
    write_csv(os.path.join(out, "position_table_runs.csv"), ["rows", "width", "mean_row_norm", "rows_with_norm_below_half_mean"],
              [[n, table.shape[1], f"{np.linalg.norm(table, axis=1).mean():.4f}",
                int((np.linalg.norm(table, axis=1) < 0.5 * np.linalg.norm(table, axis=1).mean()).sum())]])
    for name in ("padding", "relative_key_parameters"):
        shutil.copy(os.path.join(source, name + ".csv"), os.path.join(out, name + "_runs.csv"))


def pct(value):
    return f"{100 * float(value):.1f}"


def tables(out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = ["Token accuracy of the tied head (each position's output nearest its own token's embedding), "
             "uniform ordinary ids between [CLS] and [SEP]; fine-tuned at 128 tokens", "",
             "| tokens | samples | token accuracy % | chance % |", "|---:|---:|---:|---:|"]
    for r in read_csv(os.path.join(out, "evaluation_runs.csv")):
        beyond = " (beyond 128)" if int(r["tokens"]) > 128 else ""
        lines.append(f"| {r['tokens']}{beyond} | {r['samples']} | {pct(r['token_accuracy'])} | "
                     f"{pct(r['chance_token_accuracy'])} |")
    write_and_print(os.path.join(out, "evaluation.md"), lines + [""])

    probes = read_csv(os.path.join(out, "probes_runs.csv"))
    lines = [f"Position probes at {int(probes[0]['length']) + 2} tokens (layer 0: the embedding output)", "",
             "| layer | position accuracy % | tokens alone % | position R^2 | order accuracy % | distance R^2 |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in probes:
        lines.append(f"| {r['layer']} | {pct(r['position_accuracy'])} | {pct(r['position_chance'])} | "
                     f"{float(r['position_r2']):.3f} | {pct(r['order_accuracy'])} | {float(r['distance_r2']):.3f} |")
    write_and_print(os.path.join(out, "probes.md"), lines + [""])
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    layers = [int(r["layer"]) for r in probes]
    for key, label in (("position_accuracy", "position (exact, of 128)"), ("order_accuracy", "order of two tokens"),
                       ("position_chance", "position from the tokens alone")):
        ax.plot(layers, [100 * float(r[key]) for r in probes], marker="o", label=label)
    ax.axhline(50, color="C1", ls=":", lw=1, label="order: chance")
    ax.set_xlabel("layer (0: embedding output)")
    ax.set_ylabel("probe accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("all-MiniLM-L6-v2: position probes at 128 tokens")
    ax.legend(fontsize=8)
    save_figure_and_csv(fig, os.path.join(out, "probes_by_layer.png"), ["layer", "position_accuracy", "order_accuracy",
                                                               "position_chance"],
                        [[r["layer"], r["position_accuracy"], r["order_accuracy"], r["position_chance"]] for r in probes])
    plt.close(fig)

    lines = ["Norms of the token table's rows", "", "| rows | count | mean norm | min | max | "
             "mean cosine to the mean ordinary row |", "|---|---:|---:|---:|---:|---:|"]
    for r in read_csv(os.path.join(out, "pad_row_runs.csv")):
        lines.append(f"| {r['rows']} | {r['count']} | {r['mean_norm']} | {r['min_norm']} | {r['max_norm']} | "
                     f"{r['mean_cosine_to_mean_ordinary_row']} |")
    for r in read_csv(os.path.join(out, "position_table_runs.csv")):
        lines += ["", f"The position table: {r['rows']} rows of {r['width']}, mean row norm {r['mean_row_norm']}; "
                  f"rows under half the mean norm (a row left near its initialization): {r['rows_with_norm_below_half_mean']}"]
    write_and_print(os.path.join(out, "pad_row.md"), lines + [""])

    padding = read_csv(os.path.join(out, "padding_runs.csv"))
    lines = ["pelab padding: as many [PAD] tokens appended as the sequence has (128 tokens + 128)", "",
             "| [PAD] row | attention mask | max logit change | mean logit change | changed predictions % |",
             "|---|---|---:|---:|---:|"]
    for r in padding:
        lines.append(f"| {r['row']} | {'on' if r['masked'] == 'true' else 'off'} | "
                     f"{float(r['max_logit_change']):.3g} | {float(r['mean_logit_change']):.3g} | "
                     f"{pct(r['changed_predictions'])} |")
    write_and_print(os.path.join(out, "padding.md"), lines + [""])

    counts = read_csv(os.path.join(out, "relative_key_parameters_runs.csv"))
    lines = ["HF BertModel at all-MiniLM-L6-v2's size, one forward and backward at 128 tokens "
             "(transformers 4.57.6): each position table's rows, and those with a nonzero gradient", "",
             "| position_embedding_type | parameter | parameters | rows | rows with a gradient |",
             "|---|---|---:|---:|---:|"]
    for r in counts:
        lines.append(f"| {r['position_embedding_type']} | {r['parameter']} | {int(r['count']):,} | {r['rows']} | "
                     f"{r['rows_with_gradient']} |")
    write_and_print(os.path.join(out, "relative_key_parameters.md"), lines + [""])

    def grid(name, key_i, key_j, columns):
        rows = read_csv(os.path.join(out, name))
        size = max(int(r[key_i]) for r in rows) + 1
        grids = {c: np.zeros((size, size)) for c in columns}
        for r in rows:
            for c in columns:
                grids[c][int(r[key_i]), int(r[key_j])] = float(r[c])
        return grids

    first = grid("similarity_first_128_runs.csv", "i", "j", ("learned", "sinusoidal"))
    blocks = grid("similarity_blocks_runs.csv", "block_i", "block_j", ("learned", "sinusoidal"))
    offsets = read_csv(os.path.join(out, "similarity_by_offset_runs.csv"))
    fig, axes = plt.subplots(2, 2, figsize=(10, 8.6), constrained_layout=True)
    panels = [(axes[0, 0], first["learned"], 128, "learned (all-MiniLM-L6-v2), positions 0-127"),
              (axes[0, 1], first["sinusoidal"], 128, "sinusoidal (384 wide), positions 0-127"),
              (axes[1, 0], blocks["learned"], 512, f"learned, all 512 positions ({BLOCK} x {BLOCK} block means)")]
    for ax, values, size, title in panels:
        image = ax.imshow(values, vmin=-1, vmax=1, cmap="RdBu_r", extent=(0, size, size, 0))
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("key position j")
        ax.set_ylabel("position i")
    fig.colorbar(image, ax=axes[:, 0], shrink=0.6, label="cosine similarity of the two positions' vectors")
    d = [int(r["offset"]) for r in offsets]
    ax = axes[1, 1]
    ax.plot([x + 1 for x in d], [float(r["learned_mean_cosine"]) for r in offsets], label="learned (MiniLM)")
    ax.plot([x + 1 for x in d], [float(r["sinusoidal_mean_cosine"]) for r in offsets], label="sinusoidal")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("offset |i - j| + 1")
    ax.set_ylabel("mean cosine similarity")
    ax.set_title("mean over all pairs at each offset", fontsize=11)
    ax.legend(fontsize=9)
    save_figure_and_csv(fig, os.path.join(out, "similarity.png"), ["offset", "learned", "sinusoidal"],
                        [[r["offset"], r["learned_mean_cosine"], r["sinusoidal_mean_cosine"]] for r in offsets],
                        layout=False)
    plt.close(fig)


if __name__ == "__main__":
    source, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(source, "run.h5")):
        extract(source, out)
    tables(out)
