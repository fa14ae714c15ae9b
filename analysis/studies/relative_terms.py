#!/usr/bin/python3
"""The relative-terms study (configs/studies/relative_terms.yaml): analysis/plot_terms.py's
term shares and correlations of each scheme at the training length and at the longest test
length.

  /usr/bin/python3 analysis/studies/relative_terms.py runs/studies/relative_terms docs/studies/relative_terms

Writes OUT/terms_<length>.{png,csv}.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    sweep, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for length in (20, 40):  # the training maximum and the longest test length (attention maps stored)
        subprocess.run([sys.executable, os.path.join(HERE, "..", "plot_terms.py"), sweep, "--length", str(length),
                        "--out", os.path.join(out, f"terms_{length}.png")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
