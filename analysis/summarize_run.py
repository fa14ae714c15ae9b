#!/usr/bin/python3
"""Prints a pelab run file's evaluation table, and optionally writes it as CSV.

  python3 analysis/summarize_run.py runs/quickstart/run.h5 [--csv table.csv] [--check]

--check only validates the file against the documented schema (exit 1 with the reason).
"""
import argparse
import csv
import sys

from runfile import SchemaError, load


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_file", help="a run.h5 written by `pelab train`")
    parser.add_argument("--csv", help="also write the evaluation table to this CSV file")
    parser.add_argument("--check", action="store_true", help="validate the schema and print a one-line summary")
    args = parser.parse_args()
    try:
        run = load(args.run_file)
    except (SchemaError, OSError, KeyError) as error:
        print(f"{args.run_file}: not a valid pelab run file: {error}", file=sys.stderr)
        return 1
    ev = run["evaluation"]
    if args.check:
        print(f"{args.run_file}: ok (run '{run['run_name']}', {len(ev['length'])} test lengths, "
              f"{run['parameter_counts']['total']} parameters, {len(run['training']['step'])} curve points)")
        return 0
    env = run["environment"]
    kernels = f" ({env['cpu_kernels']} CPU kernels)" if env.get("cpu_kernels") else ""  # older files lack it
    print(f"run '{run['run_name']}': pelab {env['pelab_version']} ({env['git_commit']}), torch "
          f"{env['torch_version']}, {env['device']}{kernels}, {env['threads']} threads, "
          f"trained {env['training_seconds']:.1f}s")
    print(f"evaluation ({run['task_format']}): {run['protocol']}")
    print(f"{'extrapolation':>13} {'length':>8} {'token acc':>10} {'(chance)':>9} {'seq acc':>10} {'(chance)':>9} "
          f"{'loss':>8} {'(chance)':>9}")
    columns = ["per_token_accuracy", "chance_token_accuracy", "per_sequence_accuracy", "chance_sequence_accuracy",
               "loss", "chance_loss"]
    rows = []
    for i, length in enumerate(ev["length"]):
        beyond = "  (beyond training)" if length > run["train_max_length"] else ""
        method = ev["method"][i]
        v = {c: float(ev[c][i]) for c in columns}
        print(f"{method:>13} {length:>8} {100 * v['per_token_accuracy']:>9.2f}% {100 * v['chance_token_accuracy']:>8.2f}% "
              f"{100 * v['per_sequence_accuracy']:>9.2f}% {100 * v['chance_sequence_accuracy']:>8.2f}% "
              f"{v['loss']:>8.4f} {v['chance_loss']:>9.4f}{beyond}")
        rows.append([method, int(length)] + [v[c] for c in columns])
    if args.csv:
        with open(args.csv, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["extrapolation", "length"] + columns)
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
