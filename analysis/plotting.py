"""Shared by the plot and study scripts: a line over seeds with its band (the mean and the range,
or the median and its order-statistic interval), a style
per group that keeps equal lines apart, the sample standard deviation the tables use, saving a
figure together with the plotted numbers as CSV beside it, and writing a markdown text that is
also printed."""
import csv
import os

import numpy as np

from runfile import median_interval


def center_and_band(values, aggregate="mean"):
    """(centre, low, high) of one point's seed values: aggregate "mean": their mean and range;
    "median-ci": their median and its order-statistic interval (runfile.median_interval, pelab
    report's --aggregate median-ci; from 6 values it holds the median with at least 95%)."""
    if aggregate == "median-ci":
        return median_interval(values)[:3]
    return float(np.mean(values)), min(values), max(values)


def plot_mean_and_spread(ax, xs, values, label, aggregate="mean", **style):
    """values[i]: the seeds' values at xs[i]; a line through their centres (matplotlib `style`
    over a default marker "o"), a band in its colour (center_and_band: the mean and the range,
    or the median and its order-statistic interval). Returns the line."""
    points = [center_and_band(v, aggregate) for v in values]
    line, = ax.plot(xs, [c for c, _, _ in points], **{"marker": "o", **style}, label=label)
    ax.fill_between(xs, [low for _, low, _ in points], [high for _, _, high in points], color=line.get_color(),
                    alpha=0.2)
    return line


# a marker and a line style of their own per group, so that lines with equal values stay visible
GROUP_STYLES = [dict(marker=m, linestyle=ls, markerfacecolor=face) for m, ls, face in
                [("o", "-", None), ("s", "--", "none"), ("^", "-.", None), ("D", ":", "none"), ("v", "-", "none"),
                 ("P", "--", None), ("X", "-.", "none"), ("*", ":", None)]]


def group_style(i):
    """The matplotlib style of the i-th group of a plot (GROUP_STYLES, cycling)."""
    return {k: v for k, v in GROUP_STYLES[i % len(GROUP_STYLES)].items() if v is not None}


def sample_std(values):
    """The sample standard deviation (n - 1, as pelab report and the study pages); 0 for one value."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def save_figure_and_csv(fig, png_path, header, rows, dpi=120, layout=True):
    """Writes png_path and its numbers as the same name with .csv (creating the folder if
    needed); prints both paths. `layout`: tight_layout first (False: the caller laid it out)."""
    os.makedirs(os.path.dirname(os.path.abspath(png_path)), exist_ok=True)
    if layout and not fig.get_constrained_layout():  # a figure with a colour bar lays itself out
        fig.tight_layout()
    fig.savefig(png_path, dpi=dpi)
    csv_path = os.path.splitext(png_path)[0] + ".csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    print(f"wrote {png_path} and {csv_path}")


def write_and_print(path, lines):
    """Writes the lines (joined by newlines, as given) to path and prints them."""
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def run_study(extract, tables):
    """The main of a study script that reads its run files (analysis/studies/NAME.py SOURCE OUT):
    from a sweep folder SOURCE, extract(SOURCE, OUT) writes the per-run files its tables need;
    then tables(OUT) makes the tables and plots from OUT's files alone (scripts/studies.sh
    --from-data gives OUT as SOURCE too). Returns the exit status."""
    import sys
    source, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(source, "sweep.h5")):
        extract(source, out)
    return tables(out) or 0
