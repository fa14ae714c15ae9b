#!/usr/bin/python3
"""Where a training step's time goes: the operators of a LibTorch profiler trace (the
Chrome trace `pelab bench --trace FILE` writes) ranked by self time (an operator's time
minus that of the operators it called), per thread, summed over calls.

  build/pelab bench --schemes none --lengths 512 --d-model 256 --layers 4 --heads 8 \\
      --d-ff 1024 --batch 8 --threads 2 --trace none.json
  tests/benchmarks/trace_top.py none.json [--top 25] [--callers aten::fill_]

The trace records LibTorch operators and autograd nodes: pelab's fused attention shows as
pelab::fused_attention_forward and its backward node
(torch::autograd::CppNode<...FusedAttention>).

The "x mm" column is each operator's time over the same step's matrix products (aten::mm,
OpenBLAS, which pelab's changes leave alone). On a shared machine whose speed swings by
+-30% within seconds, those ratios compare two builds far more steadily than milliseconds
do: trace each build a few times, interleaved, and compare the "x mm" of the operators the
change touched and of the whole step.
"""
import argparse
import collections
import json
import sys


def load_events(path):
    with open(path) as f:
        return [e for e in json.load(f) if e.get("ph") == "X"]


def nest(events):
    """Per thread, in start order, each event with its enclosing events (a stack)."""
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e["tid"]].append(e)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in thread_events:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            yield e, list(stack)
            stack.append(e)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", help="a Chrome trace written by pelab bench --trace")
    parser.add_argument("--top", type=int, default=25, help="operators to list")
    parser.add_argument("--callers", metavar="OPERATOR", help="instead: where OPERATOR's time is spent, by caller")
    args = parser.parse_args()
    events = load_events(args.trace)
    if not events:
        sys.exit(f"{args.trace}: no operator events (was it written by pelab bench --trace?)")

    if args.callers:
        time, calls = collections.Counter(), collections.Counter()
        for e, stack in nest(events):
            if e["name"] == args.callers:
                path = " > ".join(s["name"] for s in stack[-3:]) or "(top level)"
                time[path] += e["dur"]
                calls[path] += 1
        if not time:
            sys.exit(f"{args.trace}: no operator named {args.callers}")
        print(f"{'ms':>9} {'calls':>6}  callers of {args.callers} (innermost last)")
        for path, t in time.most_common(args.top):
            print(f"{t / 1000:9.2f} {calls[path]:6d}  {path}")
        return

    self_time, calls, children = collections.Counter(), collections.Counter(), collections.Counter()
    covered = 0.0  # top-level operator time
    for e, stack in nest(events):
        calls[e["name"]] += 1
        self_time[e["name"]] += e["dur"]
        if stack:
            self_time[stack[-1]["name"]] -= e["dur"]
        else:
            covered += e["dur"]
    start = min(e["ts"] for e in events)
    span = max(e["ts"] + e["dur"] for e in events) - start
    threads = len({e["tid"] for e in events})
    mm = self_time.get("aten::mm", 0.0)
    per_mm = (lambda t: f"{t / mm:7.3f}") if mm > 0 else (lambda t: f"{'':>7}")
    print(f"step: {span / 1000:.1f} ms from the first operator to the last, {threads} thread(s) recording" +
          (f"; {span / mm:.3f} x the matrix products' (aten::mm) time" if mm > 0 else ""))
    print(f"{'ms':>9} {'share':>6} {'x mm':>7} {'calls':>6}  operator (self time)")
    for name, t in self_time.most_common(args.top):
        print(f"{t / 1000:9.1f} {100 * t / span:5.1f}% {per_mm(t)} {calls[name]:6d}  {name}")
    outside = max(0.0, span - covered)
    print(f"{outside / 1000:9.1f} {100 * outside / span:5.1f}% {per_mm(outside)}        between operators")


if __name__ == "__main__":
    main()
