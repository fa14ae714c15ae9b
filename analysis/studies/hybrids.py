#!/usr/bin/python3
"""The hybrids study (configs/studies/hybrids/): RoPE, NoPE, RNoPE-SWA, NAPE and Hard-ALiBi on
passkey and flip_flop. From each task's per-run file, per arm: how many seeds learned the task at
the longest training length (per-token accuracy >= the sweep's --learned threshold there), and the
median per-token accuracy over those seeds at every test length with the interval from the
smallest to the largest seed (for n seeds it holds the median with probability 1 - 2^(1 - n):
96.9% for 6), beside the input-independent baseline (pelab report's chance, on the same
sequences). Two arms are ranked at a length only where their intervals do not overlap.

  /usr/bin/python3 analysis/studies/hybrids.py runs/studies/hybrids docs/studies/hybrids

Reads OUT/<task>_runs.csv alone; writes OUT/<task>_arms.md and OUT/hybrids.png.
"""
import csv
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from runfile import learned_threshold  # noqa: E402

TASKS = ["passkey", "flip_flop"]
ARMS = ["RoPE", "NoPE", "RNoPE-SWA", "NAPE", "Hard-ALiBi"]
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "studies", "hybrids")


def arm_of(overrides):
    """The arm a run's sweep overrides name (configs/studies/hybrids/*.yaml's zip)."""
    if "name: hard_alibi" in overrides:
        return "Hard-ALiBi"
    if "name: alibi" in overrides:
        return "NAPE"
    if "model.window=8" in overrides:
        return "RNoPE-SWA"
    return "RoPE" if "encoding={name: rope}" in overrides else "NoPE"


def coverage(n):
    """The probability that [min, max] of n seeds holds their distribution's median."""
    return 1 - 2 * 0.5 ** n


def arms_table(rows, threshold):
    """rows: the per-run file's rows (method none) -> (lengths, longest training length, per arm:
    seeds, learned seeds, per length the learned seeds' accuracies, chance per length)."""
    lengths = sorted({int(r["length"]) for r in rows})
    longest = max(int(r["train_max_length"]) for r in rows)
    accuracy = defaultdict(dict)  # (arm, run) -> length -> per-token accuracy
    chance = defaultdict(list)
    for r in rows:
        accuracy[(arm_of(r["overrides"]), r["run"])][int(r["length"])] = float(r["per_token_accuracy"])
        chance[int(r["length"])].append(float(r["chance_token_accuracy"]))
    arms = {}
    for arm in ARMS:
        runs = [by_length for (a, _), by_length in sorted(accuracy.items()) if a == arm]
        learned = [by_length for by_length in runs if by_length.get(longest, 0.0) >= threshold]
        arms[arm] = (len(runs), learned)
    return lengths, longest, arms, {n: statistics.mean(v) for n, v in chance.items()}


def cell(values):
    if not values:
        return "-"
    return f"{100 * statistics.median(values):.1f} [{100 * min(values):.1f}, {100 * max(values):.1f}]"


def write_table(task, rows, threshold, out):
    lengths, longest, arms, chance = arms_table(rows, threshold)
    path = os.path.join(out, f"{task}_arms.md")
    with open(path, "w") as f:
        f.write(f"{task}: per-token accuracy (%), the median over the seeds that learned the task at length {longest} "
                f"(>= {100 * threshold:.0f}% there) [smallest, largest seed]; {task}_runs.csv\n\n")
        f.write("| arm | learned | " + " | ".join(f"{n}{'' if n <= longest else ' (beyond)'}" for n in lengths) + " |\n")
        f.write("|---|---|" + "---|" * len(lengths) + "\n")
        for arm in ARMS:
            seeds, learned = arms[arm]
            f.write(f"| {arm} | {len(learned)}/{seeds} | " +
                    " | ".join(cell([by_length[n] for by_length in learned if n in by_length]) for n in lengths) + " |\n")
        f.write("| chance (input-independent) | | " + " | ".join(f"{100 * chance[n]:.1f}" for n in lengths) + " |\n\n")
        n = max(len(learned) for _, learned in arms.values())
        f.write(f"Interval: [smallest, largest] of the learned seeds; with {n} seeds it holds the median with "
                f"probability {100 * coverage(n):.1f}% (1 - 2^(1 - n)).\n")
    print(f"wrote {path}")
    return lengths, longest, arms, chance


def plot(results, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 3.8), squeeze=False)
    for ax, (task, (lengths, longest, arms, chance)) in zip(axes[0], results.items()):
        for arm in ARMS:
            _, learned = arms[arm]
            xs = [n for n in lengths if any(n in b for b in learned)]
            if not xs:
                continue
            values = [[b[n] for b in learned if n in b] for n in xs]
            median = [100 * statistics.median(v) for v in values]
            line, = ax.plot(xs, median, marker="o", label=f"{arm} ({len(learned)} seeds)")
            ax.fill_between(xs, [100 * min(v) for v in values], [100 * max(v) for v in values], alpha=0.15,
                            color=line.get_color())
        ax.plot(lengths, [100 * chance[n] for n in lengths], "k--", label="chance")
        ax.axvline(longest, color="grey", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths)
        ax.set_xticklabels([str(n) for n in lengths])
        ax.set_title(task)
        ax.set_xlabel("test length (trained to the grey line)")
        ax.set_ylabel("per-token accuracy (%)")
        ax.set_ylim(0, 102)
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    path = os.path.join(out, "hybrids.png")
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main():
    out = sys.argv[2]  # the first argument, the run folder, is not read: every table comes from OUT
    results = {}
    for task in TASKS:
        runs = os.path.join(out, f"{task}_runs.csv")
        if not os.path.exists(runs):
            print(f"hybrids: {runs} not there (the sweep has not run); left out", file=sys.stderr)
            continue
        with open(runs) as f:
            rows = [r for r in csv.DictReader(f) if r["method"] == "none"]
        threshold = learned_threshold(os.path.join(CONFIGS, f"{task}.yaml"))
        results[task] = write_table(task, rows, threshold, out)
    if results:
        plot(results, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
