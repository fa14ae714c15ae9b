"""Reads pelab run files (HDF5) through the documented schema (docs/run-files.md).

Every name used here is part of the schema; core/io/schema.h is its C++ twin.
"""
import os
import re
import sys

def _missing(error):  # a python3 earlier on PATH without Debian's python3-h5py / -numpy
    return ImportError(f"{error.name} is missing from {sys.executable}: use /usr/bin/python3 (Debian's, with "
                       "python3-h5py, python3-numpy and python3-matplotlib: scripts/setup-deps.sh)")


try:
    import numpy as np
except ImportError as error:
    raise _missing(error) from error


def _h5py():
    """h5py, imported when a file is first read: a pelab process that embeds Python for its
    schemes imports this package and reads no run file through it, and must not load a
    second HDF5 library (a pip h5py's) beside the one pelab links."""
    try:
        import h5py
    except ImportError as error:
        raise _missing(error) from error
    return h5py

SCHEMA_VERSION = 6

ROOT_ATTRS = ["schema_version", "run_name", "status"]
ENVIRONMENT_ATTRS = ["pelab_version", "git_commit", "torch_version", "device", "threads",
                     "hostname", "created_utc", "training_seconds"]
TRAINING_DATASETS = ["step", "loss", "accuracy", "learning_rate", "tokens_per_second"]
# evaluation and evaluation_curve; a row's settings are (method, length, samples, sampler,
# positions_max_length, step)
EVALUATION_DATASETS = ["method", "length", "sequence_length", "samples", "loss", "per_token_accuracy",
                       "per_sequence_accuracy", "chance_token_accuracy", "chance_sequence_accuracy", "chance_loss",
                       "step", "sampler", "positions_max_length", "untrained"]
# the task's evaluation condition (passkey: depth; flip_flop: p_ignore) and its value; files
# written before 2026-12-02 lack them and read as "" and 0 (no condition); the position-free
# baseline (NaN where the task has none), absent before 2026-12-03 and read as NaN
# the position-free baseline's dataset (and per-run column) for each accuracy metric
POSITION_FREE_KEYS = {"token": "position_free_token_accuracy", "sequence": "position_free_sequence_accuracy"}
OPTIONAL_EVALUATION_DATASETS = {"condition": "", "condition_value": 0.0, "position_free_token_accuracy": float("nan"),
                                "position_free_sequence_accuracy": float("nan")}
EVALUATION_ATTRS = ["train_min_length", "train_max_length", "task_format", "protocol", "train_steps", "run_sampler",
                    "run_positions_max_length"]
ATTENTION_STATISTICS = ["mean_distance", "entropy", "diagonal", "first", "last"]  # evaluation/attention/*
PROBE_DATASETS = ["length", "layer", "position_accuracy", "position_chance", "position_r2", "order_accuracy",
                  "distance_r2", "step", "sampler", "positions_max_length"]
STRING_DATASETS = {"method", "sampler", "untrained", "condition"}  # of evaluation, evaluation_curve and probes
TERM_DATASETS = ["mean_abs", "correlation", "scores_mean_abs"]  # attention/length_<L>/terms/*, with names
ROW_KINDS = ["position", "offset", "bucket"]  # trained_rows/<parameter> attribute row_kind


class SchemaError(Exception):
    pass


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _table(group, names, optional=None):
    """The datasets `names` of `group` as a dict: numpy arrays, strings as lists of str; each of
    `optional` ({name: default}) too, filled with its default where the file lacks it."""
    def read(k):
        return [_text(v) for v in group[k][()]] if k in STRING_DATASETS else group[k][()]

    table = {k: read(k) for k in names}
    rows = len(table[names[0]])
    for k, default in (optional or {}).items():
        table[k] = read(k) if k in group else [default] * rows if k in STRING_DATASETS else np.full(rows, default)
    return table


def row_key(row):
    """The key of a row's table line, as pelab report writes it: the method, with the evaluation
    condition and its value when the row has one ("none depth=0.25")."""
    condition = row.get("condition", "")
    return row["method"] if not condition else f"{row['method']} {condition}={float(row['condition_value']):g}"


def _condition_matches(row, condition_value):
    """Whether `row` was evaluated at `condition_value` (None: without a condition)."""
    if condition_value is None:
        return not row.get("condition", "")
    return bool(row.get("condition", "")) and float(row["condition_value"]) == float(condition_value)


def _check_equal_shapes(f, group, names):
    """Raises SchemaError unless the datasets `names` of `group` are there, 1-D and of one length."""
    lengths = set()
    for name in names:
        if name not in f[group]:
            raise SchemaError(f"dataset '{group}/{name}' is missing")
        lengths.add(f[group][name].shape)
    if len(lengths) != 1:
        raise SchemaError(f"datasets of '{group}' differ in shape: {sorted(lengths)}")
    if len(lengths.pop()) != 1:
        raise SchemaError(f"datasets of '{group}' are not 1-D")


def check(f):
    """Raises SchemaError naming the first thing the file lacks."""
    for name in ROOT_ATTRS:
        if name not in f.attrs:
            raise SchemaError(f"root attribute '{name}' is missing")
    version = int(f.attrs["schema_version"])
    if version != SCHEMA_VERSION:
        raise SchemaError(f"schema_version {version}, this reader knows {SCHEMA_VERSION}")
    if _text(f.attrs["status"]) != "complete":
        raise SchemaError(f"status is {_text(f.attrs['status'])!r}, not 'complete'")
    for group in ["config", "environment", "parameter_counts", "training", "evaluation", "checkpoint"]:
        if group not in f:
            raise SchemaError(f"'{group}' is missing")
    for name in ENVIRONMENT_ATTRS:
        if name not in f["environment"].attrs:
            raise SchemaError(f"environment attribute '{name}' is missing")
    if "total" not in f["parameter_counts"].attrs:
        raise SchemaError("parameter_counts has no 'total'")
    _check_equal_shapes(f, "training", TRAINING_DATASETS)
    _check_equal_shapes(f, "evaluation", EVALUATION_DATASETS)
    if "evaluation_curve" in f:
        _check_equal_shapes(f, "evaluation_curve", EVALUATION_DATASETS)
    if "skipped_steps" not in f["training"].attrs:
        raise SchemaError("training attribute 'skipped_steps' is missing")
    for name in EVALUATION_ATTRS:
        if name not in f["evaluation"].attrs:
            raise SchemaError(f"evaluation attribute '{name}' is missing")
    rows = f["evaluation"]["length"].shape[0]
    if "attention" in f["evaluation"]:
        for name in ATTENTION_STATISTICS:
            shape = f["evaluation/attention"][name].shape
            if len(shape) != 3 or shape[0] != rows:
                raise SchemaError(f"evaluation/attention/{name} has shape {shape}, expected ({rows}, layers, heads)")
    for name, group in f.get("attention", {}).items():
        for member in ["probs", "tokens", "positions"]:
            if member not in group:
                raise SchemaError(f"attention/{name}/{member} is missing")
        n, layers, heads, t, t2 = group["probs"].shape
        if t != t2 or group["tokens"].shape != (n, t) or group["positions"].shape != (n, t):
            raise SchemaError(f"attention/{name}: probs {group['probs'].shape} and tokens {group['tokens'].shape} "
                              "do not match")
        for attr in ["length", "examples"]:
            if attr not in group.attrs:
                raise SchemaError(f"attention/{name} attribute '{attr}' is missing")
        if "terms" in group:
            terms = group["terms"]
            names = terms["names"].shape[0] if "names" in terms else None
            for member in TERM_DATASETS:
                expected = (layers, heads) if member == "scores_mean_abs" else (layers, heads, names)
                if member not in terms or terms[member].shape != expected:
                    raise SchemaError(f"attention/{name}/terms/{member} is missing or not of shape {expected}")
    if "probes" in f:
        _check_equal_shapes(f, "probes", PROBE_DATASETS)
    checkpoint = f["checkpoint"]
    for name, group in f.get("snapshots", {}).items():
        if "step" not in group.attrs or name != f"step_{int(group.attrs['step'])}":
            raise SchemaError(f"snapshots/{name} is not a step_<S> group with attribute step S")
        for parameter, data in group.items():
            if parameter not in checkpoint or data.shape != checkpoint[parameter].shape:
                raise SchemaError(f"snapshots/{name}/{parameter} {data.shape} matches no checkpoint parameter")
    for name, data in f.get("trained_rows", {}).items():
        if data.dtype != np.uint8 or len(data.shape) != 1:
            raise SchemaError(f"trained_rows/{name} is {data.dtype} {data.shape}, not 1-D uint8")
        if name not in checkpoint or checkpoint[name].shape[:1] != data.shape:
            raise SchemaError(f"trained_rows/{name} {data.shape} matches no checkpoint parameter's rows")
        if _text(data.attrs.get("row_kind", "")) not in ROW_KINDS or "first_row_value" not in data.attrs:
            raise SchemaError(f"trained_rows/{name} needs attributes row_kind ({' | '.join(ROW_KINDS)}) "
                              "and first_row_value")
    counted = sum(int(v) for k, v in f["parameter_counts"].attrs.items() if k != "total")
    stored = sum(int(np.prod(d.shape)) for d in f["checkpoint"].values())
    if counted != int(f["parameter_counts"].attrs["total"]):
        raise SchemaError("parameter_counts do not add up to total")
    if stored < counted:
        raise SchemaError(f"checkpoint holds {stored} numbers, fewer than the {counted} parameters")


def load(path):
    """A plain dict of one run: config text, environment, training curve, evaluation table (and,
    when the run stored them, evaluation curve, snapshot steps, trained position-table rows).
    A missing file raises FileNotFoundError saying whether a run is unfinished there."""
    if not os.path.exists(path):
        folder = os.path.dirname(path) or "."
        if os.path.exists(os.path.join(folder, "checkpoint.h5")) or os.path.exists(os.path.join(folder, LIVE_CURVE)):
            raise FileNotFoundError(f"{path} does not exist yet: the run in {folder} is still training or was stopped "
                                    f"(its checkpoint or {LIVE_CURVE} is there); pelab train CONFIG --resume --out "
                                    f"{folder} finishes a stopped one")
        raise FileNotFoundError(f"{path} does not exist (a run starting there writes {LIVE_CURVE} at its first log "
                                "row, and run.h5 when it ends)")
    with _h5py().File(path, "r") as f:
        check(f)
        return {
            "run_name": _text(f.attrs["run_name"]),
            "config": _text(f["config"][()]),
            "environment": {k: (_text(v) if isinstance(v, (bytes, str)) else v.item())
                            for k, v in f["environment"].attrs.items()},
            "parameter_counts": {k: int(v) for k, v in f["parameter_counts"].attrs.items()},
            "training": dict({k: f["training"][k][()] for k in TRAINING_DATASETS},
                             phase=(f["training"]["phase"][()] if "phase" in f["training"]
                                    else np.zeros(f["training"]["step"].shape, np.int64))),
            "evaluation": _table(f["evaluation"], EVALUATION_DATASETS, OPTIONAL_EVALUATION_DATASETS),
            "evaluation_curve": (_table(f["evaluation_curve"], EVALUATION_DATASETS, OPTIONAL_EVALUATION_DATASETS)
                                 if "evaluation_curve" in f else None),
            "train_min_length": int(f["evaluation"].attrs["train_min_length"]),
            "train_max_length": int(f["evaluation"].attrs["train_max_length"]),
            "train_steps": int(f["evaluation"].attrs["train_steps"]),
            "run_sampler": _text(f["evaluation"].attrs["run_sampler"]),
            "run_positions_max_length": int(f["evaluation"].attrs["run_positions_max_length"]),
            "task_format": _text(f["evaluation"].attrs["task_format"]),
            "protocol": _text(f["evaluation"].attrs["protocol"]),
            "attention_statistics": ({k: f["evaluation/attention"][k][()] for k in ATTENTION_STATISTICS}
                                     if "attention" in f["evaluation"] else None),
            "probes": _table(f["probes"], PROBE_DATASETS) if "probes" in f else None,
            "attention_lengths": sorted(int(g.attrs["length"]) for g in f.get("attention", {}).values()),
            "trained_rows": ({k: d[()] for k, d in f["trained_rows"].items()} if "trained_rows" in f else None),
            "snapshot_steps": sorted(int(g.attrs["step"]) for g in f.get("snapshots", {}).values()),
        }


LIVE_CURVE = "curve.json"  # <output.dir>/curve.json while a run trains (core/io/live_curve.h)


def live_run(folder):
    """The curves of a run still training (<folder>/curve.json, rewritten at every curve row) in
    load()'s form: run_name, config, training, evaluation_curve (None without eval.every), the
    training range and sampler, status "training"; what only a finished run has is absent."""
    import json
    with open(os.path.join(folder, LIVE_CURVE), encoding="utf-8") as f:
        live = json.load(f)
    curve = {k: (v if k in STRING_DATASETS else np.asarray(v)) for k, v in live["evaluation_curve"].items()}
    return dict({k: live[k] for k in ["run_name", "config", "train_min_length", "train_max_length", "train_steps",
                                      "run_sampler", "run_positions_max_length"]},
                training={k: np.asarray(v) for k, v in live["training"].items()},
                evaluation_curve=curve if len(curve["step"]) else None, status="training")


def table_rows(table):
    """The rows of an evaluation table (load()'s evaluation or evaluation_curve) as dicts of
    Python values, each with its index as "row"."""
    return [dict({k: (v[i] if k in STRING_DATASETS else v[i].item()) for k, v in table.items()}, row=i)
            for i in range(len(table["length"]))]


def _matches(row, wanted):
    """Whether `row` has each setting of `wanted` ({column: value}) that is not None."""
    return all(value is None or row[k] == value for k, value in wanted.items())


def _selection(run, step, sampler, sampler_max_length):
    """The settings a selection of one run's rows wants ({column: value or None for any}): the
    run's final step (train_steps) unless `step`; the run's sampler and its max length
    (run_sampler, run_positions_max_length) unless `sampler` (then any max length of it) or
    `sampler_max_length`. Shared by the evaluation rows and the probe rows."""
    if sampler is None and sampler_max_length is None:
        sampler_max_length = run["run_positions_max_length"]
    return {"step": run["train_steps"] if step is None else step, "sampler": sampler or run["run_sampler"],
            "positions_max_length": sampler_max_length}


def _pick(table, wanted, condition_value=None):
    """{(step, length): row} of the rows matching `wanted` (see _matches) at `condition_value`
    (None: rows without a condition); where several match one step and length, the one with
    the most samples (on a tie, the last written)."""
    chosen = {}
    for row in table_rows(table):
        if not _matches(row, wanted) or not _condition_matches(row, condition_value):
            continue
        key = (row["step"], row["length"])
        if key not in chosen or row["samples"] >= chosen[key]["samples"]:
            chosen[key] = row
    return chosen


def select_rows(run, method="none", step=None, sampler=None, sampler_max_length=None, samples=None,
                condition_value=None):
    """{length: row} of one loaded run's evaluation, by the selection pelab report and the plots
    share: the run's final step (train_steps) unless `step`; the run's sampler and its max
    length (run_sampler, run_positions_max_length) unless `sampler` (then any max length of it)
    or `sampler_max_length`; of the rows left at one length, the most samples unless `samples`;
    rows without an evaluation condition unless `condition_value` (passkey: a depth of
    eval.depths; condition_values lists a run's)."""
    if "selected" in run:  # from a per-run file: the rows its report selected
        if (step, sampler, sampler_max_length) != (None, None, None):
            raise ValueError("a per-run file holds the rows its report selected; step, sampler and "
                             "sampler_max_length select from run files")
        rows = {L: row for by_length in run["selected"].values() for L, row in by_length.items()
                if row["method"] == method and _condition_matches(row, condition_value)}
        return {L: rows[L] for L in sorted(rows) if samples is None or rows[L]["samples"] == samples}
    wanted = dict(_selection(run, step, sampler, sampler_max_length), method=method, samples=samples)
    chosen = _pick(run["evaluation"], wanted, condition_value)
    return {length: chosen[(s, length)] for s, length in sorted(chosen)}


def select_probe_rows(run, length, step=None, sampler=None, sampler_max_length=None):
    """{layer: row} of one loaded run's probes at `length`, selected as select_rows selects
    evaluation rows: the run's final step unless `step`, the run's sampler and its max length
    unless `sampler` (then any max length of it) or `sampler_max_length`. Where several rows
    match one layer, the last written. Empty when the run has no probes."""
    if run["probes"] is None:
        return {}
    wanted = dict(_selection(run, step, sampler, sampler_max_length), length=length)
    chosen = {row["layer"]: row for row in table_rows(run["probes"]) if _matches(row, wanted)}
    return {layer: chosen[layer] for layer in sorted(chosen)}


def curve_rows(run):
    """{length: {step: row}} of a run's evaluation curve (None when it has none), with the run's
    sampler and, where several rows share a step and length, the most samples. The curve is
    evaluated without extrapolation methods (method none), so its rows are not filtered by method."""
    if run["evaluation_curve"] is None:
        return None
    chosen = _pick(run["evaluation_curve"], {"sampler": run["run_sampler"],
                                             "positions_max_length": run["run_positions_max_length"]})
    curve = {}
    for step, length in sorted(chosen):
        curve.setdefault(length, {})[step] = chosen[(step, length)]
    return curve


def condition_values(run):
    """(condition name, sorted values) of a loaded run's (or a per-run file run's) evaluation
    condition rows (passkey: ("depth", [0.0, 0.25, ...])); ("", []) when it has none."""
    rows = ([row for by_length in run["selected"].values() for row in by_length.values()] if "selected" in run
            else table_rows(run["evaluation"]))
    conditioned = [row for row in rows if row.get("condition", "")]
    if not conditioned:
        return "", []
    return conditioned[0]["condition"], sorted({float(row["condition_value"]) for row in conditioned})


def evaluation_settings(run):
    """The distinct (method, step, sampler, positions_max_length, samples) of a run's evaluation
    rows, sorted: what a selection can pick from (for error messages)."""
    return sorted({(r["method"], r["step"], r["sampler"], r["positions_max_length"], r["samples"])
                   for r in table_rows(run["evaluation"])})


def probe_settings(run):
    """The distinct (length, step, sampler, positions_max_length) of a run's probe rows, sorted
    (empty when it has none): what a probe selection can pick from (for error messages)."""
    if run["probes"] is None:
        return []
    return sorted({(r["length"], r["step"], r["sampler"], r["positions_max_length"])
                   for r in table_rows(run["probes"])})


def task_name(run):
    """The task's name from the run's config (the `task:` block's `name:`); PyYAML when it is
    installed, else the block read with a regex (the resolved config writes it in block style).
    A run of a per-run file has no config: its task column (None in a file without one)."""
    if "config" not in run:
        return run.get("task")
    try:
        import yaml
    except ImportError:
        block = re.search(r"^task:[ \t]*\n((?:[ \t]+.*\n?)*)", run["config"], re.M).group(1)
        indent = re.match(r"[ \t]*", block).group()
        return re.search(rf"^{indent}name:[ \t]*(.*?)[ \t]*$", block, re.M).group(1).strip("'\"")
    return str(yaml.safe_load(run["config"])["task"]["name"])


def attention_maps(path, length):
    """(probs (N, layers, heads, T, T) float32, tokens (N, T), positions (N, T)) stored at `length`."""
    with _h5py().File(path, "r") as f:
        group = f["attention"][f"length_{length}"]
        return group["probs"][()].astype(np.float32), group["tokens"][()], group["positions"][()]


def score_terms(path, length):
    """The attention terms stored at `length` (docs/analysis.md, "Attention terms"): a dict of
    names (list of str), mean_abs and correlation (layers, heads, terms), scores_mean_abs
    (layers, heads); None when the file has maps but no terms at that length (older files)."""
    with _h5py().File(path, "r") as f:
        group = f["attention"][f"length_{length}"]
        if "terms" not in group:
            return None
        terms = group["terms"]
        return dict(names=[_text(n) for n in terms["names"][()]],
                    **{k: terms[k][()].astype(np.float64) for k in TERM_DATASETS})


def sweep_runs(sweep_dir, load_runs=True):
    """The runs of a sweep index (sweep.h5): a list of dicts with id, status, error, overrides (a dict
    of key path -> value text), path (its run file) and, for complete runs with `load_runs`, the
    loaded run."""
    path = os.path.join(sweep_dir, "sweep.h5")
    with _h5py().File(path, "r") as f:
        table = f["table"]
        rows = [dict(id=_text(i), status=_text(s), error=_text(e), overrides_text=_text(o))
                for i, s, e, o in zip(table["id"][()], table["status"][()], table["error"][()],
                                      table["overrides"][()])]
    for row in rows:
        row["overrides"] = parse_overrides(row["overrides_text"])
        row["path"] = os.path.join(sweep_dir, "runs", row["id"], "run.h5")
        row["run"] = None
        if row["status"] == "complete" and load_runs:
            try:
                row["run"] = load(row["path"])
            except (OSError, KeyError, SchemaError) as error:  # truncated, moved or foreign: named, left out
                print(f"warning: {row['path']}: cannot be read ({error}); left out", file=sys.stderr)
        elif row["status"] in ("failed", "pending"):
            print(f"note: {row['id']} is {row['status']}; left out", file=sys.stderr)
    return rows


def parse_overrides(text):
    """"seed=0 encoding={name: rope, base: 10}" -> {"seed": "0", "encoding": "{name: rope, base: 10}"}."""
    parts = re.split(r" (?=[A-Za-z_][A-Za-z0-9_.]*=)", text) if text else []
    return dict(p.split("=", 1) for p in parts)


# the columns of a per-run file (pelab report's report_runs.csv) read as numbers
_PER_RUN_INTEGERS = {"length", "beyond_training", "samples", "train_min_length", "train_max_length", "train_steps"}
_PER_RUN_FLOATS = {"per_token_accuracy", "per_sequence_accuracy", "loss", "chance_token_accuracy",
                   "chance_sequence_accuracy", "chance_loss", "in_distribution_token_accuracy",
                   "position_free_token_accuracy", "position_free_sequence_accuracy"}


def per_run_file(path):
    """The runs of a per-run file (pelab report's report_runs.csv; a study ships one per sweep as
    <sweep>_runs.csv): a list of dicts shaped like sweep_runs' complete rows: id, path, overrides
    (a dict) and run, a dict of task, seed (None in a file written before the column),
    train_min_length, train_max_length, train_steps,
    in_distribution_token_accuracy (None when not evaluated within training), learned (None
    when not judged) and `selected`: {method: {length: row}}, the rows that report selected,
    which select_rows returns. A file without the untrained column reads as having none."""
    import csv
    runs = {}
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ["run", "overrides", "method", "length", "per_token_accuracy", "train_max_length"]
                   if c not in (reader.fieldnames or [])]
        if missing:
            raise SchemaError(f"{path}: not a per-run file (pelab report's report_runs.csv): no column "
                              f"{', '.join(missing)}")
        for line in reader:
            row = {k: (int(v) if k in _PER_RUN_INTEGERS else float(v) if k in _PER_RUN_FLOATS and v != "" else v)
                   for k, v in line.items()}
            row.setdefault("untrained", "")
            for k in ("position_free_token_accuracy", "position_free_sequence_accuracy"):  # none: NaN
                if row.get(k, "") == "":
                    row[k] = float("nan")
            r = runs.get(row["run"])
            if r is None:
                r = runs[row["run"]] = dict(
                    id=row["run"], path=path, status="complete", error="", overrides=parse_overrides(row["overrides"]),
                    run=dict(task=row.get("task") or None,
                             seed=int(row["seed"]) if row.get("seed") not in (None, "") else None,
                             train_min_length=row["train_min_length"], train_max_length=row["train_max_length"],
                             train_steps=row["train_steps"],
                             in_distribution_token_accuracy=(None if row["in_distribution_token_accuracy"] == ""
                                                             else row["in_distribution_token_accuracy"]),
                             learned={"1": True, "0": False}.get(row["learned"]), selected={}))
            row.setdefault("condition", "")
            if row["condition"]:
                row["condition_value"] = float(row["condition_value"])
            r["run"]["selected"].setdefault(row_key(row), {})[row["length"]] = row
    return list(runs.values())


def study_sweep_runs(source, sweep):
    """The complete runs of the sweep `sweep` of a study, from `source`: the study's run folder
    (runs/studies/NAME: the sweep folder SWEEP in it, or NAME itself for a study of one sweep)
    or the folder of its shipped files (docs/studies/NAME: SWEEP_runs.csv in it). None when the
    sweep has not run."""
    folder = source if os.path.basename(os.path.normpath(source)) == sweep else os.path.join(source, sweep)
    if os.path.exists(os.path.join(folder, "sweep.h5")):
        return [r for r in sweep_runs(folder) if r["run"] is not None]
    shipped = os.path.join(source, f"{sweep}_runs.csv")
    return per_run_file(shipped) if os.path.exists(shipped) else None


def report_options(sweep_file):
    """The options of a study's sweep file line "# report: OPTIONS" (scripts/studies.sh), as a
    list: the table's metric and the study's --learned threshold; [] without the line."""
    import shlex
    with open(sweep_file) as f:
        for line in f:
            if line.startswith("# report: "):
                return shlex.split(line[len("# report: "):])
    return []


def learned_threshold(sweep_file):
    """The study's --learned threshold (a fraction) from its sweep file's report line; None when it
    states none."""
    options = report_options(sweep_file)
    return float(options[options.index("--learned") + 1]) if "--learned" in options else None


def judged_accuracy(run, selected, metric="token"):
    """The accuracy (metric: "token" or "sequence") of a run at the longest of its selected lengths
    within its training lengths, where pelab report --learned judges whether it has learned its
    task (the hardest training length: a mean would let an easy short length carry a run); inf
    (learned) when no length there was evaluated. run: a run dict (sweep_runs' or per_run_file's
    "run"); selected: {length: row} of one method."""
    key = "per_sequence_accuracy" if metric == "sequence" else "per_token_accuracy"
    within = [length for length in selected if run["train_min_length"] <= length <= run["train_max_length"]]
    return float(selected[max(within)][key]) if within else float("inf")


def complete_runs_of_sweeps(root, names):
    """(name, row) for every complete run (sweep_runs' rows, loaded) of the sweeps NAME of a study
    (see study_sweep_runs: root is its run folder or its shipped files' folder), in the order of
    `names`; a sweep not run yet gives none."""
    for name in names:
        for r in study_sweep_runs(root, name) or []:
            yield name, r


def scheme_name(overrides):
    """The scheme of a sweep run, from its `encoding` mapping or `encoding.name` axis (None when
    the run's overrides do not set it)."""
    if "encoding.name" in overrides:
        return overrides["encoding.name"]
    match = re.search(r"\bname:\s*['\"]?([\w-]+)", overrides.get("encoding", ""))
    return match.group(1) if match else None


def group_label(overrides):
    """The axis values of a run but its seed, short enough for a legend: `rope max_length=20`,
    `sinusoidal layout=concatenated sampler=randomized` (an `encoding` axis shows its scheme
    and options without the key; other keys their last part; a list of mappings that each set
    max_length, as train.phases, its lengths with each phase's other keys: `phases=32(share=0.9)->128`)."""
    def label(key):
        parts = key.split(".")
        return parts[-2] if parts[-1] == "name" and len(parts) > 1 else parts[-1]

    def fields(inside):  # "name: X, option: v" (a flow mapping's inside) -> {"name": "X", "option": "v"}
        return {k.strip(): v.strip() for k, v in (f.split(":", 1) for f in inside.split(", ") if ":" in f)}

    def item(key, value):
        name = label(key)
        mappings = re.findall(r"\{([^{}]*)\}", value) if value.startswith("[") and value.endswith("]") else []
        phases = [fields(m) for m in mappings]
        if mappings and all("max_length" in p for p in phases):  # [{share: 0.9, max_length: 32}, {max_length: 128}]
            def phase(p):
                rest = ",".join(f"{k}={v}" for k, v in p.items() if k != "max_length")
                return p["max_length"] + (f"({rest})" if rest else "")
            return f"{name}=" + "->".join(phase(p) for p in phases)
        if value.startswith("{") and value.endswith("}"):  # a mapping: {name: X, option: v}
            pairs = fields(value[1:-1])
            inner = " ".join([pairs.pop("name")] if "name" in pairs else [])
            inner = " ".join([inner] + [f"{k}={v}" for k, v in pairs.items()]).strip()
            return inner if name == "encoding" else f"{name}=({inner})"
        return value if name == "encoding" else f"{name}={value}"
    text = " ".join(item(k, v) for k, v in overrides.items() if k != "seed")
    return text or "(base)"


def median_interval(values):
    """(median, low, high, coverage) of the values: pelab report's --aggregate median-ci in Python
    (experiments/report.cpp). Of the n values sorted, [x_(k), x_(n+1-k)] holds the median of
    their distribution unless k or more fall on one side of it: with probability 1 - 2
    P(Binomial(n, 1/2) <= k - 1), the coverage; k is the largest with at least 95% (n = 6 to 8:
    the range, n = 9 to 11: the second smallest and largest). Below 6 values none has 95%, and
    the range is given with what it holds (1 - 2^(1-n)); one value: itself, coverage 0."""
    x = sorted(values)
    n = len(x)
    if n == 0:
        raise ValueError("median_interval: no values")
    median = (x[(n - 1) // 2] + x[n // 2]) / 2
    k, coverage = _median_interval_rank(n)
    return median, x[k - 1], x[n - k], coverage


def median_interval_coverage(n):
    """The probability that median_interval's interval of n values holds the median of their
    distribution (n = 6: 96.9%): what a table of n seeds states beside its intervals."""
    if n < 1:
        raise ValueError("median_interval_coverage: no values")
    return _median_interval_rank(n)[1]


def _median_interval_rank(n):
    """(k, coverage) of median_interval for n >= 1 values: [x_(k), x_(n+1-k)], k the largest
    with at least 95% (at least 1), and the probability that it holds the median."""
    from math import comb

    def coverage(k):
        return 1 - 2 * sum(comb(n, i) for i in range(k)) / 2 ** n
    k = 1
    while k + 1 <= n // 2 and coverage(k + 1) >= 0.95:
        k += 1
    return k, coverage(k) if n >= 2 else 0.0
