#!/usr/bin/python3
"""The Ruoss et al. 2023 table from the study's sweeps (configs/studies/ruoss/, one per task):
per-token accuracy averaged over the test lengths beyond training (41 and up), per encoding,
plain and randomized, per task; mean +- std and the best seed over the seeds, and the gain of
randomized over plain. Ruoss et al. report the best of their runs.

  /usr/bin/python3 analysis/studies/ruoss.py runs/studies/ruoss docs/studies/ruoss

Writes OUT/ruoss.csv (one row per encoding, sampler and task), OUT/ruoss.md (the tables) and
OUT/ruoss.png (beyond-training accuracy, plain against randomized).
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

TASKS = ["reverse_string", "duplicate_string", "missing_duplicate_string", "even_pairs", "bucket_sort"]
ENCODINGS = [("sinusoidal", "sin/cos"), ("rope", "RoPE"), ("alibi", "ALiBi")]
SAMPLERS = ["contiguous", "randomized"]


def beyond_training(run):
    """Mean per-token accuracy over the evaluated lengths beyond the training maximum."""
    rows = select_rows(run)
    values = [r["per_token_accuracy"] for L, r in rows.items() if L > run["train_max_length"]]
    return float(np.mean(values)) if values else float("nan")


def collect(root):
    """{(encoding, sampler, task): [beyond-training accuracy per seed]} of the complete runs."""
    cells = {}
    for task, r in complete_runs_of_sweeps(root, TASKS):
        encoding = scheme_name(r["overrides"])
        sampler = r["overrides"]["positions.sampler"]
        cells.setdefault((encoding, sampler, task), []).append(beyond_training(r["run"]))
    return cells


def main():
    root, out = sys.argv[1], sys.argv[2]
    cells = collect(root)
    tasks = [t for t in TASKS if any(k[2] == t for k in cells)]
    if not tasks:
        print(f"ruoss: no complete runs under {root}", file=sys.stderr)
        return 1
    os.makedirs(out, exist_ok=True)
    # per cell, in %: mean, std over seeds, best seed
    stats = {key: (100 * np.mean(v), 100 * np.std(v, ddof=1) if len(v) > 1 else 0.0, 100 * np.max(v))
             for key, v in cells.items()}
    with open(os.path.join(out, "ruoss.csv"), "w") as f:
        f.write("encoding,sampler,task,seeds,mean,std,best\n")
        for (encoding, sampler, task), (mean, std, top) in sorted(stats.items()):
            f.write(f"{encoding},{sampler},{task},{len(cells[encoding, sampler, task])},{mean:.2f},{std:.2f},{top:.2f}\n")

    def cell(encoding, sampler, task, best):
        """(the value, its table text) of a cell: the best seed or the mean +- std; (None, "") when missing."""
        if (encoding, sampler, task) not in stats:
            return None, ""
        mean, std, top = stats[encoding, sampler, task]
        return (top, f"{top:.1f}") if best else (mean, f"{mean:.1f} ± {std:.1f}")

    lines = []
    for best in (False, True):
        lines.append("Best seed" if best else "Mean ± std over seeds")
        lines.append("")
        lines.append("| encoding | " + " | ".join(tasks) + " | average |")
        lines.append("|---|" + "---:|" * (len(tasks) + 1))
        for encoding, label in ENCODINGS:
            for sampler in SAMPLERS:
                values, texts = zip(*(cell(encoding, sampler, t, best) for t in tasks))
                known = [v for v in values if v is not None]
                average = f"{np.mean(known):.1f}" if len(known) == len(tasks) else ""
                name = label if sampler == "contiguous" else f"randomized {label}"
                lines.append(f"| {name} | " + " | ".join(texts) + f" | {average} |")
        pairs = [(cell(e, "randomized", t, best)[0], cell(e, "contiguous", t, best)[0]) for e, _ in ENCODINGS for t in tasks]
        gains = [randomized - plain for randomized, plain in pairs if randomized is not None and plain is not None]
        if gains:
            lines.append("")
            lines.append(f"Randomized minus plain, averaged over {len(gains)} encoding x task pairs: "
                         f"{np.mean(gains):+.1f} points ({sum(g > 0 for g in gains)} of {len(gains)} pairs gain).")
        lines.append("")
    write_and_print(os.path.join(out, "ruoss.md"), lines)

    fig, axes = plt.subplots(1, len(tasks), figsize=(3.2 * len(tasks), 3.2), sharey=True, squeeze=False)
    for ax, task in zip(axes[0], tasks):
        x = np.arange(len(ENCODINGS))
        for offset, sampler in ((-0.2, "contiguous"), (0.2, "randomized")):
            means = [cell(e, sampler, task, False)[0] or 0 for e, _ in ENCODINGS]
            values = [np.array(cells.get((e, sampler, task), [np.nan])) * 100 for e, _ in ENCODINGS]
            ax.bar(x + offset, means, 0.4, label="plain" if sampler == "contiguous" else "randomized")
            for xi, v in zip(x + offset, values):
                ax.plot([xi] * len(v), v, "k.", markersize=4)
        ax.set_xticks(x, [label for _, label in ENCODINGS])
        ax.set_title(task, fontsize=9)
        ax.set_ylim(0, 100)
    axes[0][0].set_ylabel("accuracy beyond training (%)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ruoss.png"), dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
