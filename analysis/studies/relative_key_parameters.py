#!/usr/bin/python3
"""The parameters study (configs/studies/relative_key_parameters.yaml): per scheme, the model's
parameters, those of the position encoding, and for each position table the share of its rows
that training updated (the run file's /trained_rows), beside the accuracy at the training
length and beyond (the median over seeds with its order-statistic interval). Also HF
BERT-base's counts for position_embedding_type absolute and relative_key, from the shapes its
modeling code creates.

  /usr/bin/python3 analysis/studies/relative_key_parameters.py runs/studies/relative_key_parameters OUT
  /usr/bin/python3 analysis/studies/relative_key_parameters.py OUT OUT

From a sweep folder (with its run files), writes OUT/parameters_runs.csv, the per-run file:
each run's parameter counts and trained position rows. From it and OUT/
relative_key_parameters_runs.csv (the sweep's per-run file) alone, writes OUT/parameters.csv
and OUT/parameters.md.
"""
import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from plotting import run_study  # noqa: E402
from runfile import (median_interval, median_interval_coverage, parse_overrides, scheme_name,  # noqa: E402
                     select_rows, study_sweep_runs, sweep_runs)

# HF BertModel (transformers' modeling_bert.py): BertEmbeddings always creates position_embeddings
# (max_position_embeddings x hidden) and adds it only for "absolute"; relative_key(_query) adds
# distance_embedding (2 max_position_embeddings - 1, head size) to every layer's self-attention.
BERT_BASE = dict(layers=12, hidden=768, heads=12, max_positions=512)


def hf_bert_rows():
    b = BERT_BASE
    absolute = b["max_positions"] * b["hidden"]
    distance = (2 * b["max_positions"] - 1) * (b["hidden"] // b["heads"]) * b["layers"]
    return [("HF BERT-base, absolute", absolute, absolute, 0),
            ("HF BERT-base, relative_key(_query)", absolute + distance, distance, absolute)]


def extract(sweep, out):
    """OUT/parameters_runs.csv: per complete run, its parameters, those of the position encoding,
    and the rows of its position tables that training updated (the run file's /trained_rows)."""
    with open(os.path.join(out, "parameters_runs.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run", "overrides", "parameters", "position_parameters", "trained_rows", "rows"])
        for r in sweep_runs(sweep):
            run = r["run"]
            if run is None:
                continue
            counts = run["parameter_counts"]
            position = sum(v for k, v in counts.items() if k.startswith("position_encoding"))
            trained = run["trained_rows"] or {}
            writer.writerow([r["id"], r["overrides_text"], counts["total"], position,
                             sum(int(np.sum(v)) for v in trained.values()),
                             sum(int(np.size(v)) for v in trained.values())])


LENGTHS = (64, 128, 256)


def cell(stats, seeds):
    """A median_interval result of `seeds` values as text: the median [its interval]; '' for none."""
    if not seeds:
        return ""
    middle, low, high, _ = stats
    return f"{middle:.1f} [{low:.1f}, {high:.1f}]" if seeds > 1 else f"{middle:.1f}"


def tables(out):
    """OUT/parameters.{csv,md} from OUT/parameters_runs.csv and the sweep's per-run file: per
    scheme, its parameters and trained rows (the same in every seed: they follow from the shapes
    and the training length; a scheme whose seeds differ is an error), and the accuracy at each
    test length and its drop from 64 to 256 bytes, the median over seeds with its
    order-statistic interval (runfile.median_interval)."""
    accuracy = {r["id"]: {L: row["per_token_accuracy"] * 100 for L, row in select_rows(r["run"]).items()}
                for r in study_sweep_runs(out, "relative_key_parameters") or []}
    with open(os.path.join(out, "parameters_runs.csv"), newline="") as f:
        runs = list(csv.DictReader(f))
    schemes = {}
    for r in runs:
        schemes.setdefault(scheme_name(parse_overrides(r["overrides"])), []).append(r)
    seeds = max(len(rs) for rs in schemes.values())
    coverage = median_interval_coverage(seeds)
    lines = ["| scheme | parameters | position parameters | share | position rows trained | "
             "accuracy at 64 | at 128 | at 256 | drop 64 to 256 |", "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    csv_rows = ["scheme,seeds,parameters,position_parameters,trained_rows,rows,"
                + ",".join(f"accuracy_{L},accuracy_{L}_low,accuracy_{L}_high" for L in LENGTHS)
                + ",drop_64_256,drop_64_256_low,drop_64_256_high"]
    for scheme, rs in schemes.items():
        counts = {(int(r["parameters"]), int(r["position_parameters"]), int(r["trained_rows"]), int(r["rows"]))
                  for r in rs}
        if len(counts) > 1:
            sys.exit(f"relative_key_parameters: {scheme}'s seeds differ in parameters or trained rows: {sorted(counts)}")
        total, position, rows_trained, rows_total = counts.pop()
        tables_text = (f"{rows_trained} of {rows_total} ({100 * rows_trained / rows_total:.0f}%)"
                       if rows_total else "no tables")
        per_seed = [accuracy.get(r["run"], {}) for r in rs]
        # the accuracy at each test length, then each seed's drop from 64 to 256 bytes
        columns = [[a[L] for a in per_seed if L in a] for L in LENGTHS]
        columns.append([a[64] - a[256] for a in per_seed if 64 in a and 256 in a])
        stats = [median_interval(v) if v else (None,) * 4 for v in columns]
        label = "none (position-free)" if scheme == "none" else scheme
        lines.append(f"| {label} | {total:,} | {position:,} | {100 * position / total:.1f}% | {tables_text} | "
                     + " | ".join(cell(st, len(v)) for st, v in zip(stats, columns)) + " |")
        csv_rows.append(f"{scheme},{len(rs)},{total},{position},{rows_trained},{rows_total},"
                        + ",".join(",".join("" if x is None else f"{x:.2f}" for x in st[:3]) for st in stats))
    spread = (f"the median over {seeds} seeds [its order-statistic interval, {100 * coverage:.1f}% coverage]"
              if seeds > 1 else "one seed")
    lines += ["", f"Accuracy: per masked byte (%), {spread}; drop: each seed's accuracy at 64 bytes less its accuracy at "
              "256, the same way. none: the position-free baseline, a model without positions (a bag of bytes).",
              "", "HF BERT-base (12 layers, hidden 768, 512 positions), from the shapes modeling_bert.py creates:", "",
              "| model | position parameters | used | unused |", "|---|---:|---:|---:|"]
    for name, total, used, unused in hf_bert_rows():
        lines.append(f"| {name} | {total:,} | {used:,} | {unused:,} |")
    with open(os.path.join(out, "parameters.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "parameters.csv"), "w") as f:
        f.write("\n".join(csv_rows) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(run_study(extract, tables))
