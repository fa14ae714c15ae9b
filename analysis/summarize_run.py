#!/usr/bin/python3
"""Prints a pelab run file's evaluation table, and optionally writes it as CSV.

  python3 analysis/summarize_run.py runs/quickstart/run.h5 [--csv table.csv] [--check]

--check only validates the file against the documented schema (exit 1 with the reason).
"""
import argparse
import os
import csv
import sys

from runfile import SchemaError, load, table_rows

CSV_COLUMNS = ["method", "length", "step", "sampler", "positions_max_length", "samples", "per_token_accuracy",
               "chance_token_accuracy", "per_sequence_accuracy", "chance_sequence_accuracy", "loss", "chance_loss",
               "untrained"]


def sampler_text(sampler, max_length):
    """A position sampler as `contiguous` or `randomized(64)`."""
    return f"{sampler}({max_length})" if max_length else sampler


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_file", help="a run.h5 written by `pelab train`, or its folder")
    parser.add_argument("--csv", help="also write the evaluation table to this CSV file")
    parser.add_argument("--check", action="store_true", help="validate the schema and print a one-line summary")
    args = parser.parse_args()
    if os.path.isdir(args.run_file):  # a run's folder
        args.run_file = os.path.join(args.run_file, "run.h5")
    try:
        run = load(args.run_file)
    except FileNotFoundError as error:  # an unfinished run, or none: what is there
        print(f"{error}", file=sys.stderr)
        return 1
    except (SchemaError, OSError, KeyError) as error:
        print(f"{args.run_file}: not a valid pelab run file: {error}", file=sys.stderr)
        return 1
    ev, curve = run["evaluation"], run["evaluation_curve"]
    curve_text = f"{len(curve['length'])} evaluation-curve rows" if curve is not None else "no evaluation curve"
    snapshots = run["snapshot_steps"]
    if args.check:
        print(f"{args.run_file}: ok (run '{run['run_name']}', {len(ev['length'])} evaluation rows, "
              f"{run['parameter_counts']['total']} parameters, {len(run['training']['step'])} curve points, "
              f"{curve_text}, snapshots: {len(snapshots)})")
        return 0
    env = run["environment"]
    kernels = f" ({env['cpu_kernels']} CPU kernels)" if env.get("cpu_kernels") else ""  # older files lack it
    print(f"run '{run['run_name']}': pelab {env['pelab_version']} ({env['git_commit']}), torch "
          f"{env['torch_version']}, {env['device']}{kernels}, {env['threads']} threads, "
          f"trained {env['training_seconds']:.1f}s")
    print(f"evaluation ({run['task_format']}): {run['protocol']}")
    print(f"trained {run['train_steps']} steps on lengths {run['train_min_length']}-{run['train_max_length']}; "
          f"evaluation sampler {sampler_text(run['run_sampler'], run['run_positions_max_length'])}")
    print(f"{'extrapolation':>13} {'length':>8} {'step':>7} {'sampler':>18} {'samples':>7} {'token acc':>10} "
          f"{'(chance)':>9} {'seq acc':>10} {'(chance)':>9} {'loss':>8} {'(chance)':>9}")
    rows, untrained = [], {}
    for row in table_rows(ev):
        beyond = "  (beyond training)" if row["length"] > run["train_max_length"] else ""
        if row["untrained"]:
            untrained.setdefault(row["untrained"], []).append(row["length"])
        print(f"{row['method']:>13} {row['length']:>8} {row['step']:>7} "
              f"{sampler_text(row['sampler'], row['positions_max_length']):>18} {row['samples']:>7} "
              f"{100 * row['per_token_accuracy']:>9.2f}% {100 * row['chance_token_accuracy']:>8.2f}% "
              f"{100 * row['per_sequence_accuracy']:>9.2f}% {100 * row['chance_sequence_accuracy']:>8.2f}% "
              f"{row['loss']:>8.4f} {row['chance_loss']:>9.4f}{' !' if row['untrained'] else ''}{beyond}")
        rows.append([row[c] for c in CSV_COLUMNS])
    for text, lengths in untrained.items():
        print(f"! used rows no training step updated: {text} (length {', '.join(map(str, sorted(set(lengths))))})")
    if curve is not None and len(curve["step"]):
        curve_text += f" (steps {min(curve['step'])}-{max(curve['step'])})"
    print(f"{curve_text}; snapshots: {len(snapshots)}" + (f" (steps {', '.join(map(str, snapshots))})" if snapshots else ""))
    for name, trained in (run["trained_rows"] or {}).items():
        print(f"{name}: {int(trained.sum())} of {len(trained)} rows trained")
    if args.csv:
        with open(args.csv, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["extrapolation"] + CSV_COLUMNS[1:])
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
