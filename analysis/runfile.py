"""Reads pelab run files (HDF5) through the documented schema (docs/run-files.md).

Every name used here is part of the schema; core/io/schema.h is its C++ twin.
"""
import h5py
import numpy as np

SCHEMA_VERSION = 5

ROOT_ATTRS = ["schema_version", "run_name", "status"]
ENVIRONMENT_ATTRS = ["pelab_version", "git_commit", "torch_version", "device", "threads",
                     "hostname", "created_utc", "training_seconds"]
TRAINING_DATASETS = ["step", "loss", "accuracy", "learning_rate", "tokens_per_second"]
EVALUATION_DATASETS = ["method", "length", "sequence_length", "samples", "loss", "per_token_accuracy",
                       "per_sequence_accuracy", "chance_token_accuracy", "chance_sequence_accuracy", "chance_loss"]
EVALUATION_ATTRS = ["train_min_length", "train_max_length", "task_format", "protocol"]
ATTENTION_STATISTICS = ["mean_distance", "entropy", "diagonal", "first", "last"]  # evaluation/attention/*
PROBE_DATASETS = ["length", "layer", "position_accuracy", "position_chance", "position_r2", "order_accuracy",
                  "distance_r2"]


class SchemaError(Exception):
    pass


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


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
    for group, names in [("training", TRAINING_DATASETS), ("evaluation", EVALUATION_DATASETS)]:
        lengths = set()
        for name in names:
            if name not in f[group]:
                raise SchemaError(f"dataset '{group}/{name}' is missing")
            lengths.add(f[group][name].shape)
        if len(lengths) != 1:
            raise SchemaError(f"datasets of '{group}' differ in shape: {sorted(lengths)}")
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
    if "probes" in f:
        shapes = {f["probes"][name].shape for name in PROBE_DATASETS}
        if len(shapes) != 1:
            raise SchemaError(f"datasets of 'probes' differ in shape: {sorted(shapes)}")
    counted = sum(int(v) for k, v in f["parameter_counts"].attrs.items() if k != "total")
    stored = sum(int(np.prod(d.shape)) for d in f["checkpoint"].values())
    if counted != int(f["parameter_counts"].attrs["total"]):
        raise SchemaError("parameter_counts do not add up to total")
    if stored < counted:
        raise SchemaError(f"checkpoint holds {stored} numbers, fewer than the {counted} parameters")


def load(path):
    """A plain dict of one run: config text, environment, training curve, evaluation table."""
    with h5py.File(path, "r") as f:
        check(f)
        return {
            "run_name": _text(f.attrs["run_name"]),
            "config": _text(f["config"][()]),
            "environment": {k: (_text(v) if isinstance(v, (bytes, str)) else v.item())
                            for k, v in f["environment"].attrs.items()},
            "parameter_counts": {k: int(v) for k, v in f["parameter_counts"].attrs.items()},
            "training": {k: f["training"][k][()] for k in TRAINING_DATASETS},
            "evaluation": {k: ([_text(m) for m in f["evaluation"][k][()]] if k == "method" else f["evaluation"][k][()])
                           for k in EVALUATION_DATASETS},
            "train_min_length": int(f["evaluation"].attrs["train_min_length"]),
            "train_max_length": int(f["evaluation"].attrs["train_max_length"]),
            "task_format": _text(f["evaluation"].attrs["task_format"]),
            "protocol": _text(f["evaluation"].attrs["protocol"]),
            "attention_statistics": ({k: f["evaluation/attention"][k][()] for k in ATTENTION_STATISTICS}
                                     if "attention" in f["evaluation"] else None),
            "probes": ({k: f["probes"][k][()] for k in PROBE_DATASETS} if "probes" in f else None),
            "attention_lengths": sorted(int(g.attrs["length"]) for g in f.get("attention", {}).values()),
        }


def attention_maps(path, length):
    """(probs (N, layers, heads, T, T) float32, tokens (N, T), positions (N, T)) stored at `length`."""
    with h5py.File(path, "r") as f:
        group = f["attention"][f"length_{length}"]
        return group["probs"][()].astype(np.float32), group["tokens"][()], group["positions"][()]


def sweep_runs(sweep_dir):
    """The runs of a sweep index (sweep.h5): a list of dicts with id, status, error, overrides (a dict
    of key path -> value text) and, for complete runs, the loaded run."""
    import os
    import re
    path = os.path.join(sweep_dir, "sweep.h5")
    with h5py.File(path, "r") as f:
        table = f["table"]
        rows = [dict(id=_text(i), status=_text(s), error=_text(e), overrides_text=_text(o))
                for i, s, e, o in zip(table["id"][()], table["status"][()], table["error"][()],
                                      table["overrides"][()])]
    for row in rows:
        parts = re.split(r" (?=[A-Za-z_][A-Za-z0-9_.]*=)", row["overrides_text"]) if row["overrides_text"] else []
        row["overrides"] = dict(p.split("=", 1) for p in parts)
        row["run"] = load(os.path.join(sweep_dir, "runs", row["id"], "run.h5")) if row["status"] == "complete" else None
    return rows


def group_label(overrides):
    """The axis values of a run but its seed, as `encoding=rope max_length=20`."""
    def label(key):
        parts = key.split(".")
        return parts[-2] if parts[-1] == "name" and len(parts) > 1 else parts[-1]
    text = " ".join(f"{label(k)}={v}" for k, v in overrides.items() if k != "seed")
    return text or "(base)"
