#!/usr/bin/python3
"""The depth study (configs/studies/depth.yaml): how much position each layer's output holds,
by linear probes, for position added at the input, before every block, or from a table per
block. Draws analysis/plot_probes.py's plot for two probes and tabulates them per layer.

  /usr/bin/python3 analysis/studies/depth.py runs/studies/depth docs/studies/depth
  /usr/bin/python3 analysis/studies/depth.py docs/studies/depth docs/studies/depth

From a sweep folder (with its run files), writes OUT/depth_probes.csv, the per-run file of the
probes (plot_probes.py --export: every run, layer and probe). From it alone, writes
OUT/probes_<probe>.{png,csv} (plot_probes.py) and OUT/probes.md: per group, the probe at each
layer (0: the embedding output), mean over seeds.
"""
import csv
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from plotting import run_study, write_and_print  # noqa: E402

PROBES = ["position_accuracy", "order_accuracy"]


PLOT_PROBES = os.path.join(HERE, "..", "plot_probes.py")


def extract(source, out):
    """The sweep's run files -> OUT/depth_probes.csv."""
    subprocess.run([sys.executable, PLOT_PROBES, source, "--export", os.path.join(out, "depth_probes.csv")],
                   check=True, stdout=subprocess.DEVNULL)


def tables(out):
    probes = os.path.join(out, "depth_probes.csv")
    lines = []
    for probe in PROBES:
        png = os.path.join(out, f"probes_{probe}.png")
        subprocess.run([sys.executable, PLOT_PROBES, probes, "--probe", probe, "--out", png], check=True,
                       stdout=subprocess.DEVNULL)
        with open(png[:-4] + ".csv") as f:
            rows = list(csv.DictReader(f))
        groups = list(dict.fromkeys(r["group"] for r in rows))
        layers = sorted({int(r["layer"]) for r in rows})
        lines += [f"{probe} by layer (0: embedding output; mean over seeds)", "",
                  "| group | " + " | ".join(f"layer {L}" for L in layers) + " |",
                  "|---|" + "---:|" * len(layers)]
        for g in groups:
            by_layer = {int(r["layer"]): float(r[probe]) for r in rows if r["group"] == g}
            lines.append(f"| {g} | " + " | ".join(f"{by_layer[L]:.2f}" if L in by_layer else "" for L in layers) + " |")
        lines.append("")
    write_and_print(os.path.join(out, "probes.md"), lines)


if __name__ == "__main__":
    sys.exit(run_study(extract, tables))
