#!/usr/bin/python3
"""The Kazemnejad et al. 2023 summary from the NoPE study's sweeps (configs/studies/nope/, one
per task): exact-match (per-sequence) accuracy averaged over the test lengths beyond training,
per encoding and task, and the mean reciprocal rank of each encoding, the paper's Figure 1
measure: at every task and test length beyond training the five encodings are ranked by their
exact match (mean over seeds; ties broken by per-token accuracy), and each encoding's
reciprocal ranks are averaged.

  /usr/bin/python3 analysis/studies/nope.py runs/studies/nope docs/studies/nope

Writes OUT/nope.csv (one row per encoding and task), OUT/nope.md (the tables, the published
ranks beside pelab's) and OUT/nope.png (the reciprocal ranks, pelab's beside the paper's).
"""
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from runfile import complete_runs_of_sweeps, scheme_name, select_rows  # noqa: E402
from plotting import write_and_print  # noqa: E402

TASKS = ["copy", "reverse", "addition"]
ENCODINGS = [("none", "NoPE"), ("t5_bias", "T5 bias"), ("alibi", "ALiBi"), ("rope", "Rotary"),
             ("sinusoidal", "APE (sinusoidal)")]
PUBLISHED_MRR = {"none": 0.69, "t5_bias": 0.55, "alibi": 0.50, "rope": 0.33, "sinusoidal": 0.22}  # Figure 1


def collect(root):
    """{(encoding, task): {length: [(exact match, token accuracy) per seed]}} of the lengths beyond
    training, from the complete runs."""
    cells = {}
    for task, r in complete_runs_of_sweeps(root, TASKS):
        cell = cells.setdefault((scheme_name(r["overrides"]), task), {})
        for length, row in select_rows(r["run"]).items():
            if length > r["run"]["train_max_length"]:
                cell.setdefault(length, []).append((row["per_sequence_accuracy"], row["per_token_accuracy"]))
    return cells


def reciprocal_ranks(cells, tasks):
    """{encoding: [1 / rank at every task and length beyond training that every encoding has]}."""
    ranks = {e: [] for e, _ in ENCODINGS}
    for task in tasks:
        per_encoding = {e: cells.get((e, task), {}) for e, _ in ENCODINGS}
        lengths = set.intersection(*(set(c) for c in per_encoding.values()))
        for length in sorted(lengths):
            score = {e: tuple(np.mean(per_encoding[e][length], axis=0)) for e, _ in ENCODINGS}
            order = sorted(score, key=lambda e: score[e], reverse=True)
            for rank, e in enumerate(order, start=1):
                ranks[e].append(1.0 / rank)
    return ranks


def main():
    root, out = sys.argv[1], sys.argv[2]
    cells = collect(root)
    tasks = [t for t in TASKS if any(k[1] == t for k in cells)]
    if not tasks:
        print(f"nope: no complete runs under {root}", file=sys.stderr)
        return 1
    os.makedirs(out, exist_ok=True)

    def beyond(encoding, task):
        """Per seed: exact match in % averaged over the lengths beyond training."""
        cell = cells.get((encoding, task), {})
        if not cell:
            return None
        by_length = np.array([[seed[0] for seed in cell[L]] for L in sorted(cell)])  # (lengths, seeds)
        return 100 * by_length.mean(axis=0)

    with open(os.path.join(out, "nope.csv"), "w") as f:
        f.write("encoding,task,seeds,exact_match_beyond_mean,exact_match_beyond_std\n")
        for encoding, _ in ENCODINGS:
            for task in tasks:
                v = beyond(encoding, task)
                if v is not None:
                    f.write(f"{encoding},{task},{len(v)},{v.mean():.2f},{v.std(ddof=1) if len(v) > 1 else 0:.2f}\n")
    ranks = reciprocal_ranks(cells, tasks)
    mrr = {e: float(np.mean(r)) if r else float("nan") for e, r in ranks.items()}
    lines = ["Exact match (%) averaged over the test lengths beyond training, mean ± std over seeds", "",
             "| encoding | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    for encoding, label in ENCODINGS:
        texts = []
        for task in tasks:
            v = beyond(encoding, task)
            texts.append("" if v is None else f"{v.mean():.1f} ± {v.std(ddof=1) if len(v) > 1 else 0:.1f}")
        lines.append(f"| {label} | " + " | ".join(texts) + " |")
    count = len(next(iter(ranks.values())))
    lines += ["", f"Mean reciprocal rank over {count} task x length cells beyond training "
              "(the paper: Figure 1, over all its tasks)", "",
              "| encoding | pelab | Kazemnejad et al. |", "|---|---:|---:|"]
    for encoding, label in sorted(ENCODINGS, key=lambda e: -mrr[e[0]]):
        lines.append(f"| {label} | {mrr[encoding]:.2f} | {PUBLISHED_MRR[encoding]:.2f} |")
    lines.append("")
    write_and_print(os.path.join(out, "nope.md"), lines)

    fig, ax = plt.subplots(figsize=(6, 3.4))
    x = np.arange(len(ENCODINGS))
    ax.bar(x - 0.2, [mrr[e] for e, _ in ENCODINGS], 0.4, label=f"pelab ({', '.join(tasks)})")
    ax.bar(x + 0.2, [PUBLISHED_MRR[e] for e, _ in ENCODINGS], 0.4, label="Kazemnejad et al., Figure 1")
    ax.set_xticks(x, [label for _, label in ENCODINGS], fontsize=8)
    ax.set_ylabel("mean reciprocal rank")
    ax.set_ylim(0, 1)
    ax.set_title("length generalization rank beyond training (higher is better)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "nope.png"), dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
