#!/usr/bin/python3
"""The new-methods study (configs/studies/new_methods/): FoX, stick-breaking, PaTH and FoPE against
NoPE, RoPE and ALiBi on three tasks. For each task's sweep, pelab report's median over seeds with
its order-statistic interval (--aggregate median-ci), per-token and per-sequence, with runs that
did not learn their training range (per-token accuracy at the longest training length below the
sweep file's --learned threshold, its "# report:" line) flagged and their beyond-training values
left out (docs/analysis.md). Over the tasks, a summary: per scheme and task the median beyond
training with its interval and coverage, how many seeds learned, the two baselines (the
input-independent and the position-free one, docs/tasks.md) and the rules of the page: a cell is
above the stronger baseline only where its interval lies wholly above it, and the schemes tied at
the top are those whose interval overlaps the one of the highest median.

  /usr/bin/python3 analysis/studies/new_methods.py runs/studies/new_methods docs/studies/new_methods

Reads the per-run files OUT/<task>_runs.csv alone (scripts/studies.sh ships them). Writes
OUT/<task>_median_token.md, OUT/<task>_median_sequence.md, and the summary OUT/new_methods.md
and OUT/new_methods.csv. PELAB: the pelab binary (default build/pelab).
"""
import csv
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from runfile import judged_accuracy, learned_threshold, per_run_file, scheme_name  # noqa: E402
from plotting import write_and_print  # noqa: E402

TASKS = ["reverse_string", "bucket_sort", "parity_check"]
SCHEMES = [("none", "NoPE"), ("rope", "RoPE"), ("alibi", "ALiBi"), ("fox", "FoX"),
           ("stick_breaking", "stick-breaking"), ("path", "PaTH"), ("fope", "FoPE")]
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "studies", "new_methods")


def report(pelab, out, task, metric, threshold, scratch):
    """(markdown, rows of report.csv) of pelab report --aggregate median-ci over OUT/<task>_runs.csv."""
    # from OUT, so that the table names its source as <task>_runs.csv, wherever OUT is
    done = subprocess.run([pelab, "report", f"{task}_runs.csv", "--aggregate", "median-ci",
                           "--learned", str(threshold), "--metric", metric, "--format", "markdown",
                           "--out", scratch], capture_output=True, text=True, cwd=out)
    if done.returncode != 0:
        sys.exit(f"new_methods: pelab report {task}_runs.csv: {done.stderr.strip()}")
    with open(os.path.join(scratch, "report.csv"), newline="") as f:
        return done.stdout, list(csv.DictReader(f))


def task_cells(runs, rows, threshold):
    """{scheme: cell} of one task: seeds, learned, the accuracies at the longest training length
    (judged), the baselines beyond training (chance, position_free: NaN where the task has none),
    and from report.csv's `beyond` rows the median, interval and coverage of the learned seeds."""
    cells = {}
    for r in runs:
        c = cells.setdefault(scheme_name(r["overrides"]), dict(seeds=0, learned=0, judged=[], train_max=0,
                                                               chances=[], frees=[]))
        selected = r["run"]["selected"]["none"]
        judged = judged_accuracy(r["run"], selected)
        c["seeds"] += 1
        c["learned"] += judged >= threshold
        c["judged"].append(100 * judged)
        c["train_max"] = r["run"]["train_max_length"]
        beyond = [row for length, row in selected.items() if length > r["run"]["train_max_length"]]
        c["chances"].append(100 * sum(row["chance_token_accuracy"] for row in beyond) / len(beyond))
        c["frees"].append(100 * sum(row["position_free_token_accuracy"] for row in beyond) / len(beyond))  # NaN: none
    for c in cells.values():  # the baselines: each seed's mean beyond training, then the mean over seeds
        c["chance"] = sum(c.pop("chances")) / c["seeds"]
        c["position_free"] = sum(c.pop("frees")) / c["seeds"]
    for row in rows:
        if row["length"] != "beyond":
            continue
        c = cells[scheme_name({"encoding": row["group"].split("=", 1)[1]})]
        number = (lambda k: float(row[k]) if row[k] != "" else math.nan)
        if row["seeds"] not in ("", "0") and row["median"] != "":
            c.update(median=number("median"), low=number("ci_low"), high=number("ci_high"),
                     coverage=number("ci_coverage"))
    return cells


def summary(out, tasks):
    """Writes OUT/new_methods.md and .csv from {task: (cells, lengths beyond training)}."""
    threshold = {t: learned_threshold(os.path.join(CONFIGS, f"{t}.yaml")) for t in tasks}
    lines = ["Per-token accuracy beyond training (%): each seed's mean over the test lengths beyond its training "
             "range, then the median over the seeds that learned their task (per-token accuracy at least "
             f"{100 * max(threshold.values()):g}% at the longest training length, 20) with its order-statistic "
             "interval: of the n values sorted, [x_(k), x_(n+1-k)] with the largest k that holds the median with at "
             "least 95% (below 6 seeds none does, and the range is given); in parentheses the seeds that learned of "
             "those run and the interval's coverage. Not learned: no seed did (the range of their accuracy at 20). "
             "A scheme is above the stronger of the two baselines (`+`) only where its interval lies wholly above "
             "it; **bold**: the schemes tied at the top, whose intervals overlap the one of the highest median. "
             "Baselines on the same test sequences, mean over the seeds: input-independent (the most frequent "
             "symbol per output position) and position-free (the input's most frequent symbol at every output "
             "slot; none where the output is not a rearrangement of the input, or the per-run file predates the column).", "",
             "| scheme | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    top = {}
    for task, cells in tasks.items():
        learned = [c for c in cells.values() if "median" in c]
        if learned:
            best = max(learned, key=lambda c: c["median"])
            top[task] = [c for c in learned if not (c["high"] < best["low"] or c["low"] > best["high"])]
    rows = []
    for scheme, label in SCHEMES:
        line = [label]
        for task, cells in tasks.items():
            c = cells.get(scheme)
            if c is None:
                line.append("")
                continue
            baseline = max(v for v in (c["chance"], c["position_free"]) if not math.isnan(v))
            above = "median" in c and c["low"] > baseline
            if "median" in c:
                text = f"{c['median']:.1f} [{c['low']:.1f}, {c['high']:.1f}]{' +' if above else ''}"
                if c in top.get(task, []):
                    text = f"**{text}**"
                text += f" ({c['learned']}/{c['seeds']}, {100 * c['coverage']:.1f}%)"
            else:
                text = f"not learned (0/{c['seeds']}; {min(c['judged']):.1f}-{max(c['judged']):.1f}% at {c['train_max']})"
            line.append(text)
            rows.append([task, scheme, c["seeds"], c["learned"], *(f"{c[k]:.4f}" if k in c else ""
                                                                   for k in ("median", "low", "high", "coverage")),
                         f"{c['chance']:.4f}", "" if math.isnan(c["position_free"]) else f"{c['position_free']:.4f}",
                         int(above), int(c in top.get(task, []))])
        lines.append("| " + " | ".join(line) + " |")
    for name, key in [("input-independent", "chance"), ("position-free", "position_free")]:
        values = []
        for cells in tasks.values():
            got = [c[key] for c in cells.values() if not math.isnan(c.get(key, math.nan))]
            values.append(f"{sum(got) / len(got):.1f}" if got else "none")
        lines.append(f"| *{name}* | " + " | ".join(values) + " |")
    lines.append("")
    write_and_print(os.path.join(out, "new_methods.md"), lines)
    with open(os.path.join(out, "new_methods.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["task", "scheme", "seeds", "learned", "median", "interval_low", "interval_high",
                         "interval_coverage", "chance", "position_free", "above_baseline", "tied_at_top"])
        writer.writerows(rows)


def main():
    out = sys.argv[2]  # the first argument, the run folder, is not read: every table comes from OUT
    pelab = os.path.abspath(os.environ.get("PELAB", "build/pelab"))
    scratch = tempfile.mkdtemp()  # report.csv & co. of each table, not kept
    tasks = {}
    for task in TASKS:
        runs_file = os.path.join(out, f"{task}_runs.csv")
        if not os.path.exists(runs_file):
            print(f"new_methods: {runs_file} not there (the sweep has not run); left out", file=sys.stderr)
            continue
        threshold = learned_threshold(os.path.join(CONFIGS, f"{task}.yaml"))
        for metric in ["token", "sequence"]:
            table, rows = report(pelab, out, task, metric, threshold, scratch)
            path = os.path.join(out, f"{task}_median_{metric}.md")
            with open(path, "w") as f:
                f.write(table)
            print(f"wrote {path}")
            if metric == "token":
                tasks[task] = task_cells(per_run_file(runs_file), rows, threshold)
    if tasks:
        summary(out, tasks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
