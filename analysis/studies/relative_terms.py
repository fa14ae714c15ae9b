#!/usr/bin/python3
"""The relative-terms study (configs/studies/relative_terms.yaml): analysis/plot_terms.py's
term shares and correlations of each scheme at the training length and at the longest test
length.

  /usr/bin/python3 analysis/studies/relative_terms.py runs/studies/relative_terms docs/studies/relative_terms
  /usr/bin/python3 analysis/studies/relative_terms.py docs/studies/relative_terms docs/studies/relative_terms

From a sweep folder (with its run files), writes OUT/terms_runs.csv, the per-run file of the
score terms at both lengths (plot_terms.py --export: every run, layer, head and term). From it
alone, writes OUT/terms_<length>.{png,csv}.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from plotting import run_study  # noqa: E402

LENGTHS = (20, 40)  # the training maximum and the longest test length (attention maps stored)


PLOT_TERMS = os.path.join(HERE, "..", "plot_terms.py")


def extract(source, out):
    """The sweep's run files -> OUT/terms_runs.csv: plot_terms.py's export at each length, one header."""
    with tempfile.TemporaryDirectory() as scratch, open(os.path.join(out, "terms_runs.csv"), "w") as merged:
        for i, length in enumerate(LENGTHS):
            part = os.path.join(scratch, f"{length}.csv")
            subprocess.run([sys.executable, PLOT_TERMS, source, "--length", str(length), "--export", part],
                           check=True, stdout=subprocess.DEVNULL)
            with open(part) as f:
                merged.writelines(f.readlines()[(1 if i else 0):])


def tables(out):
    for length in LENGTHS:
        subprocess.run([sys.executable, PLOT_TERMS, os.path.join(out, "terms_runs.csv"), "--length", str(length),
                        "--out", os.path.join(out, f"terms_{length}.png")], check=True)


if __name__ == "__main__":
    sys.exit(run_study(extract, tables))
