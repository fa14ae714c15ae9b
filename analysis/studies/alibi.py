#!/usr/bin/python3
"""The Press et al. 2022 comparison from the ALiBi study's sweep (configs/studies/alibi.yaml):
per-byte perplexity (exp of the evaluation loss, averaged over seeds) at every context length,
and each length's perplexity relative to the training length's, beside the same ratios of the
paper's Table 2 (WikiText-103, trained at L = 512, evaluated at about 2, 3, 5 and 7 L).
Perplexities of a byte-level model on verse and of a word-level model on Wikipedia are not
comparable; their ratios to the training length's value are.

  /usr/bin/python3 analysis/studies/alibi.py runs/studies/alibi docs/studies/alibi

Reads the per-run file OUT/alibi_runs.csv alone (scripts/studies.sh ships it). Writes OUT/perplexity.csv (perplexity per encoding and length: mean of exp(loss) over seeds, its
std, and the ratio) and OUT/perplexity.md (the tables; the sweep's own report is OUT/alibi.md).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from runfile import select_rows, study_sweep_runs  # noqa: E402
from plotting import write_and_print  # noqa: E402

# (the sweep's encoding, its label, the paper's row)
ENCODINGS = [("{name: sinusoidal}", "sinusoidal", "sinusoidal"), ("{name: rope}", "rotary", "rope"),
             ("{name: t5_bias}", "T5 bias (buckets to 128)", "t5_bias"),
             ("{name: t5_bias, max_distance: 32}", "T5 bias (buckets to 32)", "t5_bias"),
             ("{name: alibi}", "ALiBi", "alibi")]
PUBLISHED_LENGTHS = [512, 1012, 1512, 2512, 3512]  # Table 2, L = 512
PUBLISHED = {"sinusoidal": [20.05, 43.54, 76.23, 132.41, 178.97], "rope": [20.07, 21.37, 25.99, 31.58, 35.54],
             "t5_bias": [19.65, 18.79, 18.91, 20.41, 22.91], "alibi": [19.73, 18.73, 18.52, 18.41, 18.40]}


def collect(out):
    """({the run's encoding override: {length: [perplexity per seed]}}, the training length), from
    the per-run file OUT/alibi_runs.csv."""
    cells, train_length = {}, None
    for r in study_sweep_runs(out, "alibi") or []:
        train_length = r["run"]["train_max_length"]
        cell = cells.setdefault(r["overrides"]["encoding"], {})
        for length, row in select_rows(r["run"]).items():
            cell.setdefault(length, []).append(float(np.exp(row["loss"])))
    return cells, train_length


def main():
    out = sys.argv[2]  # the first argument, the run folder, is not read: every table comes from OUT
    cells, train_length = collect(out)
    if not cells:
        print(f"alibi: no per-run file alibi_runs.csv in {out}", file=sys.stderr)
        return 1
    lengths = sorted({L for c in cells.values() for L in c})
    encodings = [(e, label, paper) for e, label, paper in ENCODINGS if e in cells]
    mean = {(e, L): np.mean(cells[e][L]) for e, _, _ in encodings for L in lengths if L in cells[e]}
    with open(os.path.join(out, "perplexity.csv"), "w") as f:
        f.write("encoding,length,seeds,perplexity_mean,perplexity_std,ratio_to_training_length\n")
        for e, label, _ in encodings:
            for L in lengths:
                if (e, L) in mean:
                    v = cells[e][L]
                    ratio = mean[e, L] / mean[e, train_length] if (e, train_length) in mean else float("nan")
                    f.write(f"{label},{L},{len(v)},{mean[e, L]:.4f},{np.std(v, ddof=1) if len(v) > 1 else 0:.4f},{ratio:.4f}\n")
    seeds = max(len(v) for c in cells.values() for v in c.values())
    lines = [f"Per-byte perplexity on the held-out verse, mean of {seeds} seeds (trained at L = {train_length})", "",
             "| encoding | " + " | ".join(f"L = {L}" for L in lengths) + " |", "|---|" + "---:|" * len(lengths)]
    for e, label, _ in encodings:
        lines.append(f"| {label} | " + " | ".join(f"{mean[e, L]:.2f}" if (e, L) in mean else "" for L in lengths) + " |")
    multiples = [L / train_length for L in lengths if L > train_length]
    lines += ["", "Perplexity relative to the training length's: pelab at 2, 3, 5, 7 and 16 L; the paper "
              "(Table 2) at 2, 3, 5 and 7 L", "",
              "| encoding | " + " | ".join(f"pelab {m:g} L" for m in multiples) + " | "
              + " | ".join(f"paper {L / 512:.0f} L" for L in PUBLISHED_LENGTHS[1:]) + " |",
              "|---|" + "---:|" * (len(multiples) + len(PUBLISHED_LENGTHS) - 1)]
    for e, label, paper_row in encodings:
        ours = [f"{mean[e, L] / mean[e, train_length]:.2f}" if (e, L) in mean and (e, train_length) in mean else ""
                for L in lengths if L > train_length]
        paper = [f"{p / PUBLISHED[paper_row][0]:.2f}" for p in PUBLISHED[paper_row][1:]]
        lines.append(f"| {label} | " + " | ".join(ours) + " | " + " | ".join(paper) + " |")
    lines.append("")
    write_and_print(os.path.join(out, "perplexity.md"), lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
