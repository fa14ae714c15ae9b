#!/usr/bin/python3
"""The parameters study (configs/studies/relative_key_parameters.yaml): per scheme, the model's
parameters, those of the position encoding, and for each position table the share of its rows
that training updated (the run file's /trained_rows), beside the accuracy at the training
length and beyond. Also HF BERT-base's counts for position_embedding_type absolute and
relative_key, from the shapes its modeling code creates.

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
from runfile import parse_overrides, scheme_name, select_rows, study_sweep_runs, sweep_runs  # noqa: E402

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


def tables(out):
    """OUT/parameters.{csv,md} from OUT/parameters_runs.csv and the sweep's per-run file."""
    accuracy = {r["id"]: {L: row["per_token_accuracy"] * 100 for L, row in select_rows(r["run"]).items()}
                for r in study_sweep_runs(out, "relative_key_parameters") or []}
    lines = ["| scheme | parameters | position parameters | share | position rows trained | "
             "accuracy at 64 | at 128 | at 256 |", "|---|---:|---:|---:|---|---:|---:|---:|"]
    csv_rows = ["scheme,parameters,position_parameters,trained_rows,rows,accuracy_64,accuracy_128,accuracy_256"]
    with open(os.path.join(out, "parameters_runs.csv"), newline="") as f:
        runs = list(csv.DictReader(f))
    for r in runs:
        scheme = scheme_name(parse_overrides(r["overrides"]))
        total, position = int(r["parameters"]), int(r["position_parameters"])
        rows_trained, rows_total = int(r["trained_rows"]), int(r["rows"])
        tables_text = (f"{rows_trained} of {rows_total} ({100 * rows_trained / rows_total:.0f}%)"
                       if rows_total else "no tables")
        acc = [accuracy.get(r["run"], {}).get(L) for L in (64, 128, 256)]
        lines.append(f"| {scheme} | {total:,} | {position:,} | {100 * position / total:.1f}% | "
                     f"{tables_text} | " + " | ".join(f"{a:.1f}" if a is not None else "" for a in acc) + " |")
        csv_rows.append(f"{scheme},{total},{position},{rows_trained},{rows_total},"
                        + ",".join(f"{a:.2f}" if a is not None else "" for a in acc))
    lines += ["", "HF BERT-base (12 layers, hidden 768, 512 positions), from the shapes modeling_bert.py creates:", "",
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
