#!/usr/bin/env python3
"""Many tiny runs on one GPU (issue 49): aggregate training steps per second and GPU busy for
K runs at once at the tiny shape (configs/bench/tiny_shape.yaml: Ruoss et al.'s d_model 64, 5
layers, batch 128, lengths 1-40), for each way of running them:

  processes   K `pelab train` processes (pelab sweep --runs-per-process 1 --jobs K)
  mps         the same under CUDA MPS (nvidia-cuda-mps-control -d, started and stopped here)
  packed      one process training the K runs on K threads, each with its own CUDA stream
              and graphs (pelab sweep --runs-per-process K --jobs 1)
  ensemble    the PyTorch peer: K copies of the eager reference model stacked with
              torch.func.stack_module_state and vmapped (tests/benchmarks/torch_ensemble.py),
              one length per step for all K; ensemble_compile: under torch.compile

A pelab figure is K x N / (t(2N) - t(N)): the wall time of the same sweep of K runs with N and
with 2N training steps, so start-up, evaluation and the first steps of each run cancel out.

  source .gpu-deps/env.sh && python3 tests/benchmarks/many_runs.py --pelab build-cuda/pelab \\
      --out $OUT/many_runs [--copies 1,4,16,64] [--schemes none,rope,relative_key] [--deadline-s 400]

On the CPU, a quick end-to-end check of the script itself:

  /usr/bin/python3 tests/benchmarks/many_runs.py --device cpu --copies 1,2 --steps 4 \\
      --schemes none --approaches processes,packed --out /tmp/many_runs

Writes <out>/many_runs.md (the table) and <out>/results.csv, rewritten after every figure.
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from tiny_shape import GpuBusy  # noqa: E402

APPROACHES = ["processes", "mps", "packed", "ensemble", "ensemble_compile"]


def sweep_file(folder, scheme, copies, steps, device):
    """A sweep of `copies` tiny-shape runs (seeds 0..K-1) -> its path."""
    path = os.path.join(folder, f"{scheme}_{copies}_{steps}.yaml")
    with open(path, "w") as f:
        f.write(f"name: many_{scheme}_{copies}_{steps}\nbase: {os.path.join(ROOT, 'configs/bench/tiny_shape.yaml')}\n"
                f"set:\n  train.steps: {steps}\n  encoding.name: {scheme}\n  device: {device}\n"
                f"grid:\n  seed: [{', '.join(str(k) for k in range(copies))}]\n"
                f"output: {os.path.join(folder, f'out_{scheme}_{copies}_{steps}')}\n")
    return path


def timed(command, timeout, env=None):
    """-> (seconds, GPU busy percent or None, exit status)."""
    busy = GpuBusy(shutil.which("nvidia-smi") is not None)
    start = time.perf_counter()
    try:
        status = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, timeout=timeout,
                                env=env).returncode
    except subprocess.TimeoutExpired:
        status = "timeout"
    return time.perf_counter() - start, busy.stop(), status


def pelab_figure(args, scheme, copies, packed, env=None):
    """-> (aggregate steps/s, busy %, note)."""
    folder = os.path.join(args.out, "sweeps")
    os.makedirs(folder, exist_ok=True)
    seconds, busy = {}, None
    for steps in (args.steps, 2 * args.steps):
        path = sweep_file(folder, scheme, copies, steps, args.device)
        shutil.rmtree(os.path.join(folder, f"out_{scheme}_{copies}_{steps}"), ignore_errors=True)
        per_process = copies if packed else 1
        command = [args.pelab, "sweep", path, "--runs-per-process", str(per_process), "--jobs",
                   str(1 if packed else copies), "--threads", "1"]
        seconds[steps], busy, status = timed(command, args.timeout, env)
        if status != 0:
            return None, busy, f"exit {status}"
    difference = seconds[2 * args.steps] - seconds[args.steps]
    if difference <= 0:
        return None, busy, "no difference"
    return copies * args.steps / difference, busy, ""


def ensemble_figure(args, scheme, copies, compiled):
    command = [args.python, os.path.join(HERE, "torch_ensemble.py"), "--device", args.device, "--schemes", scheme,
               "--copies", str(copies), "--train-steps", str(args.steps)] + (["--compile"] if compiled else [])
    busy = GpuBusy(shutil.which("nvidia-smi") is not None)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, busy.stop(), "timeout"
    for line in done.stdout.splitlines():
        if line.startswith("RESULT_ENSEMBLE"):
            value = line.split()[3]
            return (float(value), busy.stop(), "") if value != "failed:" else (None, busy.stop(), line.split(":", 1)[1])
    errors = done.stderr.strip().splitlines()
    return None, busy.stop(), "no result" + (f": {errors[-1]}" if errors else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pelab", default=os.path.join(ROOT, "build-cuda", "pelab"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--schemes", default="none,rope,relative_key")
    parser.add_argument("--copies", default="1,4,16,64")
    parser.add_argument("--approaches", default=",".join(APPROACHES))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--deadline-s", type=float, default=0, help="stop starting figures after this many seconds")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    rows = []
    approaches = args.approaches.split(",")
    mps = shutil.which("nvidia-cuda-mps-control")
    for scheme in args.schemes.split(","):
        for copies in (int(k) for k in args.copies.split(",")):
            for approach in approaches:
                if args.deadline_s and time.perf_counter() - start > args.deadline_s:
                    value, busy, note = None, None, "deadline"
                elif approach == "mps":
                    if not mps:
                        value, busy, note = None, None, "no nvidia-cuda-mps-control"
                    else:
                        subprocess.run([mps, "-d"], check=False)
                        value, busy, note = pelab_figure(args, scheme, copies, packed=False)
                        subprocess.run([mps], input="quit\n", text=True, check=False)
                elif approach in ("processes", "packed"):
                    value, busy, note = pelab_figure(args, scheme, copies, packed=approach == "packed")
                else:
                    value, busy, note = ensemble_figure(args, scheme, copies, approach == "ensemble_compile")
                rows.append(dict(scheme=scheme, copies=copies, approach=approach,
                                 steps_per_second="" if value is None else f"{value:.1f}",
                                 busy="" if busy is None else f"{busy:.0f}", note=note))
                print(rows[-1], flush=True)
                write(args, rows)


def write(args, rows):
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    singles = {r["scheme"]: float(r["steps_per_second"]) for r in rows
               if r["copies"] == 1 and r["approach"] == "packed" and r["steps_per_second"]}
    lines = [f"Aggregate training steps/s at the tiny shape ({args.device}, {args.steps} and {2 * args.steps} steps "
             "per run); busy: nvidia-smi's utilization.gpu; x one: over one packed run of the same scheme.", "",
             "| scheme | K | approach | steps/s | busy % | x one | note |", "|---|---:|---|---:|---:|---:|---|"]
    for r in rows:
        one = singles.get(r["scheme"])
        ratio = f"{float(r['steps_per_second']) / one:.2f}" if one and r["steps_per_second"] else ""
        lines.append(f"| {r['scheme']} | {r['copies']} | {r['approach']} | {r['steps_per_second']} | {r['busy']} | "
                     f"{ratio} | {r['note']} |")
    with open(os.path.join(args.out, "many_runs.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
