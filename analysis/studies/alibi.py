#!/usr/bin/python3
"""The Press et al. 2022 comparison from the ALiBi study's sweep (configs/studies/alibi.yaml):
per-byte perplexity (exp of the evaluation loss: the median over seeds with its order-statistic
interval) at every context length, and each length's median perplexity relative to the training
length's, beside the same ratios of the paper's Table 2 (WikiText-103, trained at L = 512,
evaluated at about 2, 3, 5 and 7 L). T5's default-bucket arm has two rows from the same weights:
as trained (eval.extrapolation none) and with its untrained buckets clamped (clamp).
Perplexities of a byte-level model on verse and of a word-level model on Wikipedia are not
comparable; their ratios to the training length's value are.

  /usr/bin/python3 analysis/studies/alibi.py runs/studies/alibi docs/studies/alibi

Reads the per-run file OUT/alibi_runs.csv alone (scripts/studies.sh ships it). Writes
OUT/perplexity.csv (perplexity per encoding and length: the median of exp(loss) over seeds, its
interval and coverage, and the ratio), OUT/perplexity.md (the tables; the sweep's own report is
OUT/alibi.md) and OUT/perplexity.png (the medians against the context length, their intervals
as bands: both T5 rows, which the sweep's plot of method none alone cannot show).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from runfile import median_interval, select_rows, study_sweep_runs  # noqa: E402
from plotting import write_and_print  # noqa: E402

# ((the sweep's encoding, the evaluation's extrapolation method), its label, the paper's row)
ENCODINGS = [(("{name: sinusoidal}", "none"), "sinusoidal", "sinusoidal"), (("{name: rope}", "none"), "rotary", "rope"),
             (("{name: t5_bias}", "none"), "T5 bias (buckets to 128)", "t5_bias"),
             (("{name: t5_bias}", "clamp"), "T5 bias (buckets to 128), clamped beyond 63", "t5_bias"),
             (("{name: t5_bias, max_distance: 32}", "none"), "T5 bias (buckets to 32)", "t5_bias"),
             (("{name: alibi}", "none"), "ALiBi", "alibi")]
PUBLISHED_LENGTHS = [512, 1012, 1512, 2512, 3512]  # Table 2, L = 512
PUBLISHED = {"sinusoidal": [20.05, 43.54, 76.23, 132.41, 178.97], "rope": [20.07, 21.37, 25.99, 31.58, 35.54],
             "t5_bias": [19.65, 18.79, 18.91, 20.41, 22.91], "alibi": [19.73, 18.73, 18.52, 18.41, 18.40]}


def collect(out):
    """({(the run's encoding override, extrapolation method): {length: [perplexity per seed]}},
    {length: the unigram's perplexity on the same windows}, the training length), from the
    per-run file OUT/alibi_runs.csv."""
    cells, chance, train_length = {}, {}, None
    for r in study_sweep_runs(out, "alibi") or []:
        train_length = r["run"]["train_max_length"]
        for method in ("none", "clamp"):
            for length, row in select_rows(r["run"], method=method).items():
                cell = cells.setdefault((r["overrides"]["encoding"], method), {})
                cell.setdefault(length, []).append(float(np.exp(row["loss"])))
                chance[length] = float(np.exp(row["chance_loss"]))  # the same windows in every run
    return cells, chance, train_length


def main():
    out = sys.argv[2]  # the first argument, the run folder, is not read: every table comes from OUT
    cells, chance, train_length = collect(out)
    if not cells:
        print(f"alibi: no per-run file alibi_runs.csv in {out}", file=sys.stderr)
        return 1
    lengths = sorted({L for c in cells.values() for L in c})
    encodings = [(e, label, paper) for e, label, paper in ENCODINGS if e in cells]
    interval = {(e, L): median_interval(cells[e][L]) for e, _, _ in encodings for L in lengths if L in cells[e]}
    middle = {key: value[0] for key, value in interval.items()}  # the medians, whose ratios the second table gives
    with open(os.path.join(out, "perplexity.csv"), "w") as f:
        f.write("encoding,length,seeds,perplexity_median,ci_low,ci_high,ci_coverage,ratio_to_training_length\n")
        for e, label, _ in encodings:
            for L in lengths:
                if (e, L) in middle:
                    median, low, high, coverage = interval[e, L]
                    ratio = middle[e, L] / middle[e, train_length] if (e, train_length) in middle else float("nan")
                    f.write(f"{label},{L},{len(cells[e][L])},{median:.4f},{low:.4f},{high:.4f},{coverage:.4f},{ratio:.4f}\n")
    seeds = sorted({len(v) for c in cells.values() for v in c.values()})
    coverages = sorted({f"{100 * c:.1f}%" for _, _, _, c in interval.values()})
    lines = [f"Per-byte perplexity on the held-out verse (trained at L = {train_length}): the median over "
             f"{', '.join(map(str, seeds))} seeds [the order-statistic interval, which holds the median of the "
             f"seeds' distribution with probability {', '.join(coverages)}]", "",
             "| encoding | " + " | ".join(f"L = {L}" for L in lengths) + " |", "|---|" + "---:|" * len(lengths)]

    def cell(e, L):
        median, low, high, _ = interval[e, L]
        return f"{median:.2f} [{low:.2f}, {high:.2f}]"
    for e, label, _ in encodings:
        lines.append(f"| {label} | " + " | ".join(cell(e, L) if (e, L) in middle else "" for L in lengths) + " |")
    lines.append("| unigram (chance) | " + " | ".join(f"{chance[L]:.2f}" if L in chance else "" for L in lengths) + " |")
    multiples = [L / train_length for L in lengths if L > train_length]
    lines += ["", "Median perplexity relative to the training length's: pelab at 2, 3, 5, 7 and 16 L; the paper "
              "(Table 2) at 2, 3, 5 and 7 L", "",
              "| encoding | " + " | ".join(f"pelab {m:g} L" for m in multiples) + " | "
              + " | ".join(f"paper {L / 512:.0f} L" for L in PUBLISHED_LENGTHS[1:]) + " |",
              "|---|" + "---:|" * (len(multiples) + len(PUBLISHED_LENGTHS) - 1)]
    for e, label, paper_row in encodings:
        ours = [f"{middle[e, L] / middle[e, train_length]:.2f}" if (e, L) in middle and (e, train_length) in middle else ""
                for L in lengths if L > train_length]
        paper = [f"{p / PUBLISHED[paper_row][0]:.2f}" for p in PUBLISHED[paper_row][1:]]
        lines.append(f"| {label} | " + " | ".join(ours) + " | " + " | ".join(paper) + " |")
    lines.append("")
    write_and_print(os.path.join(out, "perplexity.md"), lines)
    plot(out, encodings, lengths, interval, chance, train_length)
    return 0


def plot(out, encodings, lengths, interval, chance, train_length):
    """OUT/perplexity.png: per row the median perplexity against the context length (both axes
    logarithmic), its order-statistic interval as a band; the unigram's dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from plotting import group_style
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.axvspan(lengths[0] * 0.9, train_length, color="0.9", label=f"training length {train_length}")
    for i, (e, label, _) in enumerate(encodings):
        xs = [L for L in lengths if (e, L) in interval]
        line, = ax.plot(xs, [interval[e, L][0] for L in xs], label=label, **group_style(i))
        ax.fill_between(xs, [interval[e, L][1] for L in xs], [interval[e, L][2] for L in xs],
                        color=line.get_color(), alpha=0.2)
    ax.plot(lengths, [chance[L] for L in lengths], "k--", label="unigram (ignores the context)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths, [str(L) for L in lengths])
    ax.set_yticks([5, 10, 20, 50, 100], ["5", "10", "20", "50", "100"])
    ax.set_xlim(lengths[0] * 0.9, lengths[-1] * 1.1)
    ax.set_xlabel("context length (bytes)")
    ax.set_ylabel("perplexity per byte")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("median over seeds, band: its order-statistic interval", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "perplexity.png"), dpi=120)
    print(f"wrote {os.path.join(out, 'perplexity.png')}")


if __name__ == "__main__":
    sys.exit(main())
