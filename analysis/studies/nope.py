#!/usr/bin/python3
"""The Kazemnejad et al. 2023 summary from the NoPE study's sweeps (configs/studies/nope/, one
per task): exact-match (per-sequence) accuracy averaged over the test lengths beyond training,
per encoding and task, and the mean reciprocal rank of each encoding, the paper's Figure 1
measure: at every task and test length beyond training the five encodings are ranked by their
exact match (mean over seeds), and each encoding's reciprocal ranks are averaged. Equal exact
match shares a rank: competition ranking (1, 1, 3), so a cell where every encoding is at 0%
gives each the same reciprocal rank; the table also gives the average rank of ties (1.5, 1.5,
3), the ranks with the all-tied cells left out, and ranks that respect the seeds' spread (an
encoding ranks below another only where the other's order-statistic interval lies wholly above
its own; overlapping intervals tie). A seed that
has not learned its training range (the per-run file's learned column: the sweeps' --learned
threshold) is left out beyond training; one more column ranks over every seed, as the paper
does not filter.

  /usr/bin/python3 analysis/studies/nope.py runs/studies/nope docs/studies/nope

Reads the per-run files OUT/{copy,reverse,addition}_runs.csv alone (scripts/studies.sh ships
them), and pelab report's median over seeds of the same (PELAB: the pelab binary). Writes
OUT/nope.csv (one row per encoding and task), OUT/nope.md (the tables, the
published ranks beside pelab's) and OUT/nope.png (the reciprocal ranks, pelab's and the
paper's in two panels: they rank over different tasks).
"""
import csv
import os
import subprocess
import sys
import tempfile

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from runfile import (complete_runs_of_sweeps, learned_threshold, median_interval, parse_overrides,  # noqa: E402
                     report_options, scheme_name, select_rows)
from plotting import write_and_print  # noqa: E402

TASKS = ["copy", "reverse", "addition"]
ENCODINGS = [("none", "NoPE"), ("t5_bias", "T5 bias"), ("alibi", "ALiBi"), ("rope", "Rotary"),
             ("sinusoidal", "APE (sinusoidal)")]
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "studies", "nope")
PUBLISHED_MRR = {"none": 0.69, "t5_bias": 0.55, "alibi": 0.50, "rope": 0.33, "sinusoidal": 0.22}  # Figure 1


def collect(out, learned_only=True):
    """{(encoding, task): {length: [(exact match, token accuracy) per seed]}} of the lengths beyond
    training, from the per-run files in `out`; learned_only: without the runs the file flags as
    not having learned their training range (learned 0: the sweep's --learned threshold)."""
    cells = {}
    for task, r in complete_runs_of_sweeps(out, TASKS):
        cell = cells.setdefault((scheme_name(r["overrides"]), task), {})
        if learned_only and r["run"]["learned"] is False:
            continue
        for length, row in select_rows(r["run"]).items():
            if length > r["run"]["train_max_length"]:
                cell.setdefault(length, []).append((row["per_sequence_accuracy"], row["per_token_accuracy"]))
    return cells


def learned_rule(tasks):
    """The rule that says which seeds count beyond training, in words, from the task sweeps'
    report lines (--learned T --learned-metric M): one threshold and metric for every task."""
    rules = set()
    for task in tasks:
        options = report_options(os.path.join(CONFIGS, f"{task}.yaml"))
        metric = options[options.index("--learned-metric") + 1] if "--learned-metric" in options else "token"
        rules.add((learned_threshold(os.path.join(CONFIGS, f"{task}.yaml")), metric))
    if len(rules) != 1 or None in next(iter(rules)):
        sys.exit(f"nope: the task sweeps must share one --learned threshold and metric, not {sorted(rules, key=str)}")
    threshold, metric = rules.pop()
    what = "exact match" if metric == "sequence" else "per-token accuracy"
    return (f"the seeds that learned their training range ({what} at least {100 * threshold:g}% at the longest "
            f"training length)")


def reciprocal_ranks(cells, tasks, ties="competition"):
    """{encoding: [1 / rank at every task and length beyond training that every encoding has]},
    ranked by mean exact match; ties: competition (1, 1, 3), average (1.5, 1.5, 3) or
    exclude (a cell where every encoding ties is left out); or intervals: an encoding is ranked
    below another only where the other's order-statistic interval of the seeds' exact match lies
    wholly above its own (1 + the number of such encodings; overlapping intervals tie)."""
    ranks = {e: [] for e, _ in ENCODINGS}
    for task in tasks:
        per_encoding = {e: cells.get((e, task), {}) for e, _ in ENCODINGS}
        lengths = set.intersection(*(set(c) for c in per_encoding.values()))
        for length in sorted(lengths):
            score = {e: float(np.mean([seed[0] for seed in per_encoding[e][length]])) for e, _ in ENCODINGS}
            if ties == "exclude" and len(set(score.values())) == 1:
                continue
            if ties == "intervals":
                interval = {e: median_interval([seed[0] for seed in per_encoding[e][length]])[1:3] for e in score}
                for e in score:
                    ranks[e].append(1.0 / (1 + sum(interval[f][0] > interval[e][1] for f in score)))
                continue
            for e in score:
                better = sum(v > score[e] for v in score.values())
                equal = sum(v == score[e] for v in score.values())
                ranks[e].append(1.0 / (better + 1 if ties != "average" else better + (equal + 1) / 2))
    return ranks


def write_ranks(out, cells, every_run_cells, tasks, lines):
    """Appends the rank table to `lines`, writes nope.md and nope.png; every_run_cells: collect()'s
    cells with the runs that did not learn their training range, for the paper's column."""
    by_rule = {rule: reciprocal_ranks(cells, tasks, rule) for rule in ("competition", "average", "exclude", "intervals")}
    by_rule["every run"] = reciprocal_ranks(every_run_cells, tasks)
    mrr = {rule: {e: float(np.mean(r)) if r else float("nan") for e, r in ranks.items()}
           for rule, ranks in by_rule.items()}
    count = len(next(iter(by_rule["competition"].values())))
    excluded = count - len(next(iter(by_rule["exclude"].values())))
    lines += ["", f"Mean reciprocal rank over {count} task x length cells beyond training, ranked by mean exact "
              f"match of {learned_rule(tasks)}; ties share the best rank (1, 1, 3), or "
              f"their average rank, or the {excluded} cells where all five tie are left out; every run: shared "
              "ranks over every seed, learned or not, as the paper counts (Figure 1, over all its tasks); intervals: "
              "an encoding ranks below another only where the other's order-statistic interval of the seeds' exact "
              "match lies wholly above its own, and overlapping intervals share a rank", "",
              "| encoding | pelab | ties averaged | all-tied cells out | every run | intervals | Kazemnejad et al. |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for encoding, label in sorted(ENCODINGS, key=lambda e: -mrr["competition"][e[0]]):
        lines.append(f"| {label} | {mrr['competition'][encoding]:.2f} | {mrr['average'][encoding]:.2f} | "
                     f"{mrr['exclude'][encoding]:.2f} | {mrr['every run'][encoding]:.2f} | {mrr['intervals'][encoding]:.2f} | "
                     f"{PUBLISHED_MRR[encoding]:.2f} |")
    lines.append("")
    write_and_print(os.path.join(out, "nope.md"), lines)

    # two panels, not one axis: the two MRRs rank over different sets (pelab's tasks here, the
    # paper's ten), so their bars are not comparable side by side, only the orders within each
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4), sharey=True)
    x = np.arange(len(ENCODINGS))
    labels = [label for _, label in ENCODINGS]
    panels = [(axes[0], [mrr["competition"][e] for e, _ in ENCODINGS], "C0",
               f"pelab: {count} task x length cells\n({', '.join(tasks)})"),
              (axes[1], [PUBLISHED_MRR[e] for e, _ in ENCODINGS], "C1", "Kazemnejad et al. 2023, Fig. 1\n(their 10 tasks)")]
    for ax, values, color, title in panels:
        ax.bar(x, values, 0.6, color=color)
        ax.set_xticks(x, labels, fontsize=8, rotation=20)
        ax.set_ylim(0, 1)
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("mean reciprocal rank beyond training\n(higher is better)", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "nope.png"), dpi=110)


def beyond_table(tasks, value_of, aggregate="mean ± std"):
    """A table's lines; value_of(encoding, task) -> its cell text."""
    lines = [f"Exact match (%) averaged over the test lengths beyond training, {aggregate} over "
             f"{learned_rule(tasks)} (n: seeds, when not all of them)", "",
             "| encoding | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    for encoding, label in ENCODINGS:
        lines.append(f"| {label} | " + " | ".join(value_of(encoding, task) for task in tasks) + " |")
    return lines


def medians(out, tasks):
    """{(encoding, task): (median, ci_low, ci_high, seeds, coverage)} of the exact match beyond
    training, from pelab report --aggregate median-ci over each task's per-run file with its
    sweep's report options (the learned threshold): the median over the learned seeds with its
    order-statistic interval and the probability that it holds the median (from 6 seeds at least
    95%; below, the range with less). PELAB: the pelab binary (default build/pelab)."""
    pelab = os.path.abspath(os.environ.get("PELAB", "build/pelab"))
    got = {}
    for task in tasks:
        scratch = tempfile.mkdtemp()
        done = subprocess.run([pelab, "report", f"{task}_runs.csv", *report_options(os.path.join(CONFIGS, f"{task}.yaml")),
                               "--aggregate", "median-ci", "--out", scratch], capture_output=True, text=True, cwd=out)
        if done.returncode != 0:
            sys.exit(f"nope: pelab report {task}_runs.csv: {done.stderr.strip()}")
        for row in csv.DictReader(open(os.path.join(scratch, "report.csv"), newline="")):
            if row["length"] == "beyond":
                encoding = scheme_name(parse_overrides(row["group"]))
                got[(encoding, task)] = tuple(float(row[k]) for k in ("median", "ci_low", "ci_high")) + (
                    int(row["seeds"]), float(row["ci_coverage"] or "nan"))
    return got


def main():
    out = sys.argv[2]  # the first argument, the run folder, is not read: every table comes from OUT
    cells, every_run_cells = collect(out), collect(out, learned_only=False)
    seeds = {key: len(next(iter(cell.values()))) if cell else 0 for key, cell in every_run_cells.items()}
    tasks = [t for t in TASKS if any(k[1] == t for k in cells)]
    if not tasks:
        print(f"nope: no per-run files (<task>_runs.csv) in {out}", file=sys.stderr)
        return 1

    def beyond(encoding, task):
        """Per seed: exact match in % averaged over the lengths beyond training."""
        cell = cells.get((encoding, task), {})
        if not cell:  # no seed learned its training range
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

    def value_of(encoding, task):
        v = beyond(encoding, task)
        if v is None:
            return "not learned" if seeds.get((encoding, task)) else ""
        n = f" (n={len(v)})" if len(v) < seeds[(encoding, task)] else ""
        return f"{v.mean():.1f} ± {v.std(ddof=1) if len(v) > 1 else 0:.1f}{n}"
    median = medians(out, tasks)

    def median_of(encoding, task):
        if (encoding, task) not in median:
            return "not learned" if seeds.get((encoding, task)) else ""
        m, low, high, n, _ = median[(encoding, task)]
        interval = f" [{low:.1f}, {high:.1f}]" if n > 1 else ""
        return f"{m:.1f}{interval}" + (f" (n={n})" if n < seeds[(encoding, task)] else "")
    coverages = sorted({f"{100 * v[4]:.1f}%" for v in median.values() if v[4] == v[4]})
    lines = beyond_table(tasks, value_of) + [""] + beyond_table(
        tasks, median_of, "median [the order-statistic interval, which holds the median of the seeds' distribution "
        f"with probability {', '.join(coverages) or 'n/a'}]")
    write_ranks(out, cells, every_run_cells, tasks, lines)
    return 0

if __name__ == "__main__":
    sys.exit(main())
