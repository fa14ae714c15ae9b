#!/usr/bin/python3
"""Ruoss et al. 2023 at the paper's protocol (configs/studies/ruoss/grid.yaml, run by
scripts/ruoss-paper.sh), from the per-run files OUT/<task>_runs.csv alone. Per task:

- OUT/<task>_paper.md: the paper's measure, per encoding the best over seeds x learning rates of
  the per-token accuracy averaged over the test lengths beyond training (pelab report --pool
  train.learning_rate --aggregate max), over every run as the paper takes it;
- OUT/<task>_paper_learned.md: the same over the runs that learned their training range;
- OUT/<task>_median_token.md and OUT/<task>_median_sequence.md: per encoding and learning rate,
  the median over seeds with its order-statistic interval (pelab report --aggregate median-ci),
  per token and per sequence (exact match);

in all but the first a run that has not learned its training range (per-token accuracy below 90%
at its longest training length, as pelab report --learned judges it) is flagged and its values
beyond training are left out. Over the
tasks: OUT/ruoss.md and OUT/ruoss.csv, one row per task, encoding and positions (plain or
randomized): the training steps (one number per task: a per-run file that mixes protocols is
refused), the runs and how many learned, the paper's measure over every run and over the
learned ones, the median at the encoding's best learning rate (the highest median beyond
training, as the paper takes its best) with its interval and coverage, and the two baselines
beyond training: the input-independent one (the best constant prediction per position) and the
position-free one (the input's most frequent symbol at every output slot, docs/tasks.md; empty
where the task has none or the per-run file predates it); OUT/ruoss.png draws them.

  /usr/bin/python3 analysis/studies/ruoss.py runs/studies/ruoss docs/studies/ruoss

The first argument, the run folder, is not read. PELAB: the pelab binary (default build/pelab).
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
from runfile import judged_accuracy, learned_threshold, parse_overrides, per_run_file, scheme_name  # noqa: E402
from plotting import write_and_print  # noqa: E402

TASKS = ["even_pairs", "modular_arithmetic", "parity_check", "cycle_navigation", "stack_manipulation",
         "reverse_string", "modular_arithmetic_brackets", "solve_equation", "duplicate_string",
         "missing_duplicate_string", "odds_first", "binary_addition", "binary_multiplication", "compute_sqrt",
         "bucket_sort"]  # the paper's order (Table 1)
ENCODINGS = [("none", "none"), ("sinusoidal", "sin/cos"), ("learned", "learned"),
             ("transformer_xl", "relative"), ("rope", "RoPE"), ("alibi", "ALiBi")]
POSITIONS = {"contiguous": "plain", "randomized": "randomized"}  # sampler -> its name in the tables
SAMPLERS = {scheme: ["contiguous"] if scheme == "none" else list(POSITIONS) for scheme, _ in ENCODINGS}
# the study's threshold for a run that learned its training range: grid.yaml's "# report:" line
LEARNED = learned_threshold(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs",
                                         "studies", "ruoss", "grid.yaml"))


def report(pelab, runs_file, scratch, options, learned=True):
    """(markdown, rows of report.csv) of pelab report over a per-run file; `learned`: the runs
    that did not learn their training range are left out beyond it."""
    # from its folder, so that the table names its source as <task>_runs.csv, wherever it is
    done = subprocess.run([pelab, "report", os.path.basename(runs_file), "--format", "markdown", "--out", scratch]
                          + (["--learned", str(LEARNED)] if learned else []) + options, capture_output=True,
                          text=True, cwd=os.path.dirname(os.path.abspath(runs_file)))
    if done.returncode != 0:
        sys.exit(f"ruoss: pelab report {runs_file}: {done.stderr.strip()}")
    with open(os.path.join(scratch, "report.csv"), newline="") as f:
        return done.stdout, list(csv.DictReader(f))


def key_of(group):
    """(scheme, sampler, learning rate or None) of a report group's text."""
    overrides = parse_overrides(group)
    return scheme_name(overrides), overrides.get("sampler", "contiguous"), overrides.get("learning_rate")


def number(x, digits=1):
    return "" if x is None or np.isnan(x) else f"{x:.{digits}f}"


def interval(ci):
    """' [low, high]', or nothing where one seed leaves no interval."""
    return "" if np.isnan(ci[0]) or np.isnan(ci[1]) else f" [{number(ci[0])}, {number(ci[1])}]"


def task_summary(pelab, out, task, scratch):
    """{"steps": its runs' training steps, "cells": {(scheme, sampler): cell}} of one task, writing its
    three tables; None without a per-run file."""
    runs_file = os.path.join(out, f"{task}_runs.csv")
    if not os.path.exists(runs_file):
        return None
    cells = {}
    runs = per_run_file(runs_file)
    if not runs:
        print(f"ruoss: {runs_file} holds no runs; left out", file=sys.stderr)
        return None
    steps = sorted({r["run"]["train_steps"] for r in runs})
    if len(steps) > 1:  # one protocol per table (pelab sweep refuses to mix them; a hand merge might)
        sys.exit(f"ruoss: {runs_file} mixes runs of {' and '.join(map(str, steps))} steps; give each its own file")
    for r in runs:  # runs, learned runs and the baseline beyond training, per encoding
        c = cells.setdefault((scheme_name(r["overrides"]), r["overrides"].get("positions.sampler", "contiguous")),
                             dict(runs=0, learned=0, chances=[], frees=[]))
        c["runs"] += 1
        selected = r["run"]["selected"]["none"]
        c["learned"] += judged_accuracy(r["run"], selected) >= LEARNED  # at the longest training length
        beyond = [row for L, row in selected.items() if L > r["run"]["train_max_length"]]
        c["chances"].append(100 * np.mean([row["chance_token_accuracy"] for row in beyond]))
        c["frees"].append(100 * np.mean([row["position_free_token_accuracy"] for row in beyond]))  # NaN: none
    for c in cells.values():
        c["chance"] = float(np.mean(c.pop("chances")))
        c["position_free"] = float(np.mean(c.pop("frees")))
    for name, learned, suffix in [("paper", False, ""), ("paper_learned", True, "_learned")]:
        text, rows = report(pelab, runs_file, scratch, ["--pool", "train.learning_rate", "--aggregate", "max"], learned)
        with open(os.path.join(out, f"{task}_paper{suffix}.md"), "w") as f:
            f.write(text)
        for row in rows:
            if row["length"] == "beyond":
                cells[key_of(row["group"])[:2]][name] = float(row["value"])
    for metric in ["token", "sequence"]:
        text, rows = report(pelab, runs_file, scratch, ["--aggregate", "median-ci", "--metric", metric])
        with open(os.path.join(out, f"{task}_median_{metric}.md"), "w") as f:
            f.write(text)
        if metric != "token":
            continue
        for row in rows:  # the best learning rate's median and interval
            scheme, sampler, rate = key_of(row["group"])
            cell = cells[(scheme, sampler)]
            if row["length"] == "beyond" and float(row["median"]) > cell.get("median", -1):
                cell.update(median=float(row["median"]), ci=(float(row["ci_low"]), float(row["ci_high"])),
                            coverage=float(row["ci_coverage"] or "nan"), seeds=int(row["seeds"]), rate=rate)
    return {"steps": steps[0], "cells": cells}


def main():
    out = sys.argv[2]
    pelab = os.path.abspath(os.environ.get("PELAB", "build/pelab"))
    scratch = tempfile.mkdtemp()
    summaries = {t: s for t in TASKS if (s := task_summary(pelab, out, t, scratch)) is not None}
    if not summaries:  # the grid has not run yet: nothing to draw, not an error
        print(f"ruoss: no per-run files (<task>_runs.csv) in {out} yet; nothing to tabulate", file=sys.stderr)
        return 0
    header = ["task", "steps", "encoding", "sampler", "runs", "learned", "paper_measure_all", "paper_measure_learned",
              "median", "ci_low", "ci_high", "ci_coverage", "seeds", "best_learning_rate", "chance", "position_free"]
    lines = ["Per-token accuracy beyond training (%), each run's mean over the test lengths beyond 40. "
             "paper: the best of seeds x learning rates (Ruoss et al.'s measure), over every run as the paper "
             f"takes it, and over the runs that learned (>= {100 * LEARNED:.0f}% per token at the longest training "
             "length, 40); median [order-statistic interval] (seeds, the interval's coverage of the median) of the "
             "learned runs at the encoding's best learning rate: of the n values sorted, [x_(k), x_(n+1-k)] with the "
             "largest k that holds the median with at least 95%; below 6 seeds none does, and the range is given "
             "with what it holds; runs: learned / complete. chance: the best input-independent prediction; "
             "position-free: the input's most frequent symbol at every output slot (empty where the task has none "
             "or the per-run file predates it). A scheme generalizes only above the stronger of the two.", ""]
    with open(os.path.join(out, "ruoss.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for task, summary in summaries.items():
            cells = summary["cells"]
            lines += [f"**{task}** ({summary['steps']:,} steps)", "",
                      "| encoding | positions | runs | paper: every run | paper: learned runs | "
                      "median [interval] (seeds, coverage) at rate | chance | position-free |",
                      "|---|---|---:|---:|---:|---|---:|---:|"]
            for scheme, label in ENCODINGS:  # the grid's cells, and any other the file has
                for sampler in [s for s in POSITIONS if s in SAMPLERS[scheme] or (scheme, s) in cells]:
                    c = cells.get((scheme, sampler))
                    positions = POSITIONS[sampler]
                    if c is None:  # not run yet
                        lines.append(f"| {label} | {positions} |  |  |  |  |  |  |")
                        continue
                    ci = c.get("ci", (np.nan, np.nan))
                    coverage = "" if np.isnan(c.get("coverage", np.nan)) else f", {100 * c['coverage']:.1f}%"
                    median = (f"{number(c['median'])}{interval(ci)} ({c['seeds']}{coverage}) at {c['rate']}"
                              if "median" in c else "")
                    lines.append(f"| {label} | {positions} | {c['learned']}/{c['runs']} | {number(c.get('paper'))} | "
                                 f"{number(c.get('paper_learned'))} | {median} | {number(c.get('chance'))} | "
                                 f"{number(c.get('position_free'))} |")
                    writer.writerow([task, summary["steps"], scheme, sampler, c["runs"], c["learned"],
                                     number(c.get("paper"), 4), number(c.get("paper_learned"), 4),
                                     number(c.get("median"), 4), number(ci[0], 4), number(ci[1], 4),
                                     number(c.get("coverage"), 4), c.get("seeds", ""), c.get("rate", ""),
                                     number(c.get("chance"), 4), number(c.get("position_free"), 4)])
            lines.append("")
    write_and_print(os.path.join(out, "ruoss.md"), lines)
    plot(summaries, os.path.join(out, "ruoss.png"))
    return 0


def plot(summaries, path):
    """One panel per task: per encoding, the paper's measure over the learned runs as bars (plain,
    randomized) and over every run as crosses, the best rate's median with its interval as a dot
    and whisker; the input-independent baseline dashed, the position-free one dash-dot."""
    # a grid of two columns at a size the page shows readably (a strip of four panels was
    # 2747 x 386 pixels, its type too small once scaled to the page)
    columns = min(2, len(summaries))
    rows = (len(summaries) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(5.0 * columns, 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(summaries):]:
        ax.set_visible(False)
    for ax, (task, summary) in zip(axes.flat, summaries.items()):
        cells = summary["cells"]
        x = np.arange(len(ENCODINGS))
        for offset, sampler, color in [(-0.2, "contiguous", "tab:blue"), (0.2, "randomized", "tab:orange")]:
            got = [cells.get((scheme, sampler), {}) for scheme, _ in ENCODINGS]
            name = POSITIONS[sampler]
            every = np.array([c.get("paper", np.nan) for c in got])
            if (~np.isnan(every)).any():
                ax.plot(x + offset, every, "x", color=color, markersize=6,
                        label=f"{name}: paper's measure, every run (best run)")
            paper = np.array([c.get("paper_learned", np.nan) for c in got])
            medians = np.array([c.get("median", np.nan) for c in got])
            low = np.array([c.get("ci", (np.nan,) * 2)[0] for c in got])
            high = np.array([c.get("ci", (np.nan,) * 2)[1] for c in got])
            drawn = ~np.isnan(paper)  # an encoding none of whose runs learned has no bar
            if not drawn.any():
                continue
            ax.bar(x[drawn] + offset, paper[drawn], 0.4, color=color, alpha=0.5,
                   label=f"{name}: paper's measure, learned runs")
            whiskers = np.nan_to_num([(medians - low)[drawn], (high - medians)[drawn]])  # one seed: none
            ax.errorbar(x[drawn] + offset, medians[drawn], yerr=whiskers,
                        fmt="o", color=color, markersize=4, capsize=2, label="median [interval], best rate")
        chance = [c["chance"] for c in cells.values() if "chance" in c]
        if chance:
            ax.axhline(np.mean(chance), color="k", linestyle="--", linewidth=1, label="input-independent baseline")
        free = [c["position_free"] for c in cells.values() if np.isfinite(c.get("position_free", np.nan))]
        if free:
            ax.axhline(np.mean(free), color="k", linestyle="-.", linewidth=1, label="position-free baseline")
        ax.set_xticks(x, [label for _, label in ENCODINGS], fontsize=8)
        ax.set_ylim(0, 100)
        ax.set_title(f"{task} ({summary['steps']:,} steps)", fontsize=10)
        ax.set_ylabel("per-token accuracy beyond training (%)", fontsize=8)
    legend = {}  # every panel's entries, once each (a panel with nothing learned draws only the baseline)
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(legend.values(), legend.keys(), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
