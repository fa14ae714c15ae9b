#!/usr/bin/python3
"""pelab against PyTorch eager (tests/benchmarks/torch_eager.py, Debian's python3-torch: the
same LibTorch 1.13) on the same model, batch and training step, interleaved: each round
measures every scheme with pelab, then with eager, each in a fresh process, so that the
machine's drift hits both alike. Prints the median step time over rounds and the speed-up
(eager / pelab; above 1: pelab is faster) with its range over rounds. With --baseline, a
second pelab binary (e.g. before a change) is measured in the same rounds.

  tests/benchmarks/compare.py --shape large --rounds 3 [--threads 2] [--schemes none,rope]
Shapes: small = Ruoss et al. (d_model 64, 5 layers, 8 heads, d_ff 256, batch 128, T 80);
large = d_model 256, 4 layers, 8 heads, d_ff 1024, batch 8, T 512.
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMES = "none,sinusoidal,learned,alibi,t5_bias,rope,relative_key,kerple,fire"
SHAPES = {"small": dict(d_model=64, layers=5, heads=8, d_ff=256, batch=128, T=80, repeats=5),
          "large": dict(d_model=256, layers=4, heads=8, d_ff=1024, batch=8, T=512, repeats=3)}


def shape_args(s, threads):
    return ["--d-model", str(s["d_model"]), "--layers", str(s["layers"]), "--heads", str(s["heads"]),
            "--d-ff", str(s["d_ff"]), "--batch", str(s["batch"]), "--warmup", "2", "--repeats", str(s["repeats"]),
            "--threads", str(threads), "--lengths", str(s["T"])]


def result_ms(command):
    out = subprocess.run(command, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == "RESULT":
            return float(parts[3])
    raise RuntimeError(f"no result from {' '.join(command)}:\n{out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=SHAPES, default="small")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--schemes", default=SCHEMES)
    parser.add_argument("--pelab", default=os.environ.get("PELAB", os.path.join(ROOT, "build", "pelab")))
    parser.add_argument("--baseline", help="another pelab binary measured in the same rounds")
    args = parser.parse_args()
    s = SHAPES[args.shape]
    common = shape_args(s, args.threads)
    schemes = args.schemes.split(",")
    binaries = {"pelab": args.pelab}
    if args.baseline:
        binaries["baseline"] = args.baseline
    times = {(who, scheme): [] for scheme in schemes for who in list(binaries) + ["eager"]}
    for r in range(args.rounds):
        for scheme in schemes:
            for who, binary in binaries.items():
                times[(who, scheme)].append(result_ms([binary, "bench", "--worker", "--scheme", scheme] + common))
            times[("eager", scheme)].append(
                result_ms(["/usr/bin/python3", os.path.join(ROOT, "tests", "benchmarks", "torch_eager.py"),
                           "--schemes", scheme] + common))
            print(f"round {r + 1}/{args.rounds} {scheme}: " +
                  ", ".join(f"{who} {times[(who, scheme)][-1]:.1f} ms" for who in list(binaries) + ["eager"]),
                  file=sys.stderr, flush=True)
    print(f"shape {args.shape} ({s}), {args.threads} threads, {args.rounds} interleaved rounds; median step ms")
    header = "| scheme | pelab ms | eager ms | speed-up (range) |" + (" baseline ms | pelab / baseline |" if args.baseline else "")
    print(header)
    print("|---|---:|---:|---:|" + ("---:|---:|" if args.baseline else ""))
    for scheme in schemes:
        p, e = times[("pelab", scheme)], times[("eager", scheme)]
        ratios = [b / a for a, b in zip(p, e)]
        line = (f"| {scheme} | {statistics.median(p):.1f} | {statistics.median(e):.1f} | "
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")
        if args.baseline:
            b = times[("baseline", scheme)]
            line += f" {statistics.median(b):.1f} | {statistics.median([x / y for x, y in zip(p, b)]):.2f} |"
        print(line)


if __name__ == "__main__":
    main()
