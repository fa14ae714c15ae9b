#!/usr/bin/python3
"""pelab against PyTorch eager (tests/benchmarks/torch_eager.py, Debian's python3-torch: the
same LibTorch 1.13) on the same model, batch and training step, interleaved: each round
measures every scheme with pelab, then with eager, each in a fresh process, so that the
machine's drift hits both alike. Prints the median step time over rounds and the speed-up
(eager / pelab; above 1: pelab is faster) with its range over rounds. Eager runs twice per
round: as a researcher would run it, and with OPENBLAS_CORETYPE set to the OpenBLAS kernels
pelab chose (core/kernels/blas_core.h), which separates pelab's own speed from the BLAS choice.
With --baseline, a second pelab binary (e.g. before a change) is measured in the same rounds.

  tests/benchmarks/compare.py --shape large --rounds 3 [--threads 2] [--schemes none,rope] [--attention-dropout 0.1]
Shapes: small = Ruoss et al. (d_model 64, 5 layers, 8 heads, d_ff 256, batch 128, T 80);
large = d_model 256, 4 layers, 8 heads, d_ff 1024, batch 8, T 512; gpu = d_model 512,
8 layers, 8 heads, d_ff 2048, batch 8, T 2048.
On a GPU (a CUDA build, docs/gpu.md), eager uses the fused
F.scaled_dot_product_attention, as a researcher would there, and runs once per round:
  python3 tests/benchmarks/compare.py --shape gpu --device cuda --precision bf16 --python python3
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMES = "none,sinusoidal,learned,alibi,t5_bias,rope,relative_key,kerple,fire"
SHAPES = {"small": dict(d_model=64, layers=5, heads=8, d_ff=256, batch=128, T=80, repeats=5),
          "large": dict(d_model=256, layers=4, heads=8, d_ff=1024, batch=8, T=512, repeats=3),
          "gpu": dict(d_model=512, layers=8, heads=8, d_ff=2048, batch=8, T=2048, repeats=10)}


def shape_args(s, threads):
    return ["--d-model", str(s["d_model"]), "--layers", str(s["layers"]), "--heads", str(s["heads"]),
            "--d-ff", str(s["d_ff"]), "--batch", str(s["batch"]), "--warmup", "2", "--repeats", str(s["repeats"]),
            "--threads", str(threads), "--lengths", str(s["T"])]


def run_worker(command, env=None):
    """-> (median step ms, OpenBLAS kernel family the process used or None)."""
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    out = done.stdout
    ms, blas = None, None
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == "RESULT":
            ms = float(parts[3])
        if parts and parts[0] == "BLAS":
            blas = parts[1]
    if ms is None:
        raise RuntimeError(f"no result from {' '.join(command)} (exit {done.returncode}):\n{out}{done.stderr[-2000:]}")
    return ms, blas


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=SHAPES, default="small")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--schemes", default=SCHEMES)
    parser.add_argument("--pelab", default=os.environ.get("PELAB", os.path.join(ROOT, "build", "pelab")))
    parser.add_argument("--baseline", help="another pelab binary measured in the same rounds")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--python", default="/usr/bin/python3", help="the Python with torch for the eager side")
    parser.add_argument("--attention-dropout", type=float, default=0.0,
                        help="dropout on the attention probabilities, in both (pelab: model.attention_dropout)")
    args = parser.parse_args()
    s = SHAPES[args.shape]
    common = shape_args(s, args.threads) + ["--device", args.device, "--precision", args.precision,
                                            "--attention-dropout", str(args.attention_dropout)]
    gpu = args.device != "cpu"
    schemes = args.schemes.split(",")
    binaries = {"pelab": args.pelab}
    if args.baseline:
        binaries["baseline"] = args.baseline
    eager_kinds = ["eager"] if gpu else ["eager", "eager_same_blas"]
    times = {(who, scheme): [] for scheme in schemes for who in list(binaries) + eager_kinds}
    eager_command = [args.python, os.path.join(ROOT, "tests", "benchmarks", "torch_eager.py")]
    if gpu:
        eager_command += ["--attention", "sdpa"]
    blas = None
    for r in range(args.rounds):
        for scheme in schemes:
            for who, binary in binaries.items():
                ms, core = run_worker([binary, "bench", "--worker", "--scheme", scheme] + common)
                times[(who, scheme)].append(ms)
                if who == "pelab":
                    blas = core
            # eager as a researcher runs it, and with the OpenBLAS kernels pelab chose (pelab
            # sets OPENBLAS_CORETYPE when OpenBLAS does not know the CPU: core/kernels/blas_core.h)
            times[("eager", scheme)].append(run_worker(eager_command + ["--schemes", scheme] + common)[0])
            if not gpu:
                env = dict(os.environ)
                if blas and blas != "other":
                    env["OPENBLAS_CORETYPE"] = blas
                times[("eager_same_blas", scheme)].append(
                    run_worker(eager_command + ["--schemes", scheme] + common, env)[0])
            print(f"round {r + 1}/{args.rounds} {scheme}: " +
                  ", ".join(f"{who} {times[(who, scheme)][-1]:.1f} ms" for who in list(binaries) + eager_kinds),
                  file=sys.stderr, flush=True)
    print(f"shape {args.shape} ({s}), {args.threads} threads, {args.rounds} interleaved rounds; median step ms; "
          f"device {args.device}, {args.precision}, attention dropout {args.attention_dropout}; "
          f"pelab's OpenBLAS kernels: {blas}")
    header = ("| scheme | pelab ms | eager ms | speed-up (range) | eager, pelab's BLAS kernels, ms | speed-up (range) |" +
              (" baseline ms | pelab / baseline |" if args.baseline else ""))
    print(header)
    print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.baseline else ""))

    def speedup(p, e):
        ratios = [b / a for a, b in zip(p, e)]
        return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
    for scheme in schemes:
        p, e, es = times[("pelab", scheme)], times[("eager", scheme)], times.get(("eager_same_blas", scheme))
        same_blas = f"{statistics.median(es):.1f} | {speedup(p, es)}" if es else "n/a | n/a"
        line = f"| {scheme} | {statistics.median(p):.1f} | {statistics.median(e):.1f} | {speedup(p, e)} | {same_blas} |"
        if args.baseline:
            b = times[("baseline", scheme)]
            line += f" {statistics.median(b):.1f} | {statistics.median([x / y for x, y in zip(p, b)]):.2f} |"
        print(line)

if __name__ == "__main__":
    main()
