"""Reads pelab run files (HDF5) through the documented schema (README.md, "Run file schema").

Every name used here is part of the schema; core/io/schema.h is its C++ twin.
"""
import h5py
import numpy as np

SCHEMA_VERSION = 3

ROOT_ATTRS = ["schema_version", "run_name", "status"]
ENVIRONMENT_ATTRS = ["pelab_version", "git_commit", "torch_version", "device", "threads",
                     "hostname", "created_utc", "training_seconds"]
TRAINING_DATASETS = ["step", "loss", "accuracy", "learning_rate", "tokens_per_second"]
EVALUATION_DATASETS = ["method", "length", "sequence_length", "samples", "loss", "per_token_accuracy",
                       "per_sequence_accuracy", "chance_token_accuracy", "chance_sequence_accuracy", "chance_loss"]
EVALUATION_ATTRS = ["train_min_length", "train_max_length", "task_format", "protocol"]


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
    for name in EVALUATION_ATTRS:
        if name not in f["evaluation"].attrs:
            raise SchemaError(f"evaluation attribute '{name}' is missing")
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
        }
