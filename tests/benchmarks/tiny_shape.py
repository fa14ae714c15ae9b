#!/usr/bin/env python3
"""Training steps per second at the tiny shape of Ruoss et al. 2023 (issue 35): reverse_string
(binary) in the encoder format, d_model 64, 5 layers, 8 heads, d_ff 256, batch 128, a new
input length uniform in 1-40 every step, for pelab (train.sync_every 1 and 16 without CUDA
graphs, and 16 with them: train.cuda_graphs), PyTorch
eager (tests/benchmarks/torch_eager.py --train-steps) and, with --compile-too, the same
eager model under torch.compile(mode="reduce-overhead"), on one device, each run in a
process of its own.

On the GPU machine (docs/gpu.md: build-cuda built against Python torch's LibTorch, the
bundle's libraries on LD_LIBRARY_PATH), from the project root:

  source .gpu-deps/env.sh && python3 tests/benchmarks/tiny_shape.py --device cuda --compile-too \\
      --pelab build-cuda/pelab --deadline-s 560 --out $OUT

Without --compile-too (or with --only pelab,eager) it needs no Triton compilation and takes
a fraction of the time; --only compile adds that column's runs to the same --out folder's
results (rows are merged by scheme from results.csv).

On the CPU, a quick end-to-end check:

  /usr/bin/python3 tests/benchmarks/tiny_shape.py --device cpu --threads 1 --steps 4 --warmup 1 \\
      --schemes none,alibi --max-length 8 --out /tmp/tiny_shape

How each figure is made:
- pelab: `pelab train configs/bench/tiny_shape.yaml` with train.steps N and again with 2N
  (same seed: the first N steps are the same), steps/s = N / (t(2N) - t(N)), where t is the
  run's training seconds (run.h5 /environment training_seconds, read with h5py; without
  h5py the log line's "trained N steps in X.Ys", 0.1 s resolution). The difference removes
  what both runs share: start-up, the first steps (CUDA context, allocator, the
  unused-parameter check of the first 20 steps) and the checkpoint written when training
  ends; evaluation is outside t. Adam at 1e-4 with the global gradient norm clipped at 1.
- eager and compile: torch_eager.py --train-steps N after --length-warmup-passes passes
  over every length in the range (torch.compile compiles and records its CUDA graphs there)
  and --warmup steps; the device is synchronized at the start and the end of the N timed
  steps only. Same optimizer and clipping as pelab; on cuda the attention is
  F.scaled_dot_product_attention (--eager-attention), as a researcher would run it there.
  Eager draws its lengths with its own seeded RNG (the same for every scheme), pelab with
  its own: both uniform in [--min-length, --max-length].

Writes <out>/tiny_shape.md (the table and the settings), <out>/results.csv (one row per
scheme and column) and every process's output under <out>/logs/; the files are rewritten
after each process, so a run stopped part-way leaves what it measured.
"""
import argparse
import csv
import datetime
import os
import platform
import re
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPE = dict(d_model=64, layers=5, heads=8, d_ff=256)
COLUMNS = ["pelab_sync1", "pelab_sync16", "pelab_graphs", "eager", "compile"]
TITLES = {"pelab_sync1": "pelab sync 1", "pelab_sync16": "pelab sync 16", "pelab_graphs": "pelab graphs",
          "eager": "eager", "compile": "compile"}


class GpuBusy:
    """The GPU's busy fraction while a process runs: nvidia-smi's utilization.gpu (the share of
    each 100 ms sample in which a kernel ran), averaged from the first to the last nonzero
    sample, which leaves out the process's start-up before its first kernel and its exit."""

    def __init__(self, enabled):
        self.proc = None
        if enabled:
            try:
                self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--id=0",
                                              "--format=csv,noheader,nounits", "-lms", "100"],
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            except OSError:
                self.proc = None

    def stop(self):
        """-> mean busy percent, or None."""
        if self.proc is None:
            return None
        self.proc.terminate()
        out, _ = self.proc.communicate()
        samples = [int(x) for x in out.split() if x.strip().isdigit()]
        nonzero = [i for i, x in enumerate(samples) if x > 0]
        if not nonzero:
            return None
        kept = samples[nonzero[0]:nonzero[-1] + 1]
        return sum(kept) / len(kept)


BUSY = {"enabled": False, "last": None}


def run(command, log_path, timeout):
    """-> (exit status or 'timeout', stdout + stderr); the output also goes to log_path. On
    cuda, BUSY["last"] is the GPU's busy percent during the process (GpuBusy)."""
    start = time.perf_counter()
    busy = GpuBusy(BUSY["enabled"])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        status, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        out += (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        status = "timeout"
    BUSY["last"] = busy.stop()
    with open(log_path, "w") as f:
        f.write(f"$ {shlex.join(command)}\n# exit {status} after {time.perf_counter() - start:.1f}s\n{out}")
    return status, out


def training_seconds(run_dir, log):
    """-> (training seconds of a pelab run, where they came from)."""
    try:
        import h5py
        with h5py.File(os.path.join(run_dir, "run.h5"), "r") as f:
            return float(f["environment"].attrs["training_seconds"]), "run.h5"
    except ImportError:
        pass
    m = re.search(r"trained (\d+) steps in ([0-9.]+)s", log)
    if not m:
        raise RuntimeError("no 'trained N steps in Xs' line")
    return float(m.group(2)), "log (0.1 s)"


class Results:
    """One row per scheme: steps/s per column and a note per column; kept in results.csv."""

    def __init__(self, out, schemes):
        self.path = os.path.join(out, "results.csv")
        self.rows = {}
        if os.path.exists(self.path):  # an earlier command's columns (--only)
            with open(self.path) as f:
                for r in csv.DictReader(f):
                    self.rows[r["scheme"]] = r
        for s in schemes:
            self.rows.setdefault(s, {"scheme": s})

    def set(self, scheme, column, value, note=""):
        self.rows[scheme][column] = "" if value is None else f"{value:.4g}"
        self.rows[scheme][column + "_note"] = note

    def get(self, scheme, column):
        v = self.rows.get(scheme, {}).get(column, "")
        return float(v) if v not in ("", None) else None

    def write(self, args, schemes, settings):
        fields = ["scheme"] + [x for c in COLUMNS for x in (c, c + "_note")]
        with open(self.path, "w", newline="") as f:
            w = csv.DictWriter(f, fields, extrasaction="ignore")
            w.writeheader()
            for s in self.rows:
                w.writerow({k: self.rows[s].get(k, "") for k in fields})
        table = self.table(list(self.rows))
        with open(os.path.join(args.out, "tiny_shape.md"), "w") as f:
            f.write(settings + "\n\n" + table + "\n")
        return table

    def table(self, schemes):
        def cell(s, c):
            v = self.get(s, c)
            note = self.rows[s].get(c + "_note", "")
            if v is None:
                return note or "n/a"
            return f"{v:.1f}" + (f" ({note})" if note else "")

        def ratio(a, b):
            return f"{a / b:.2f}x" if a and b else "n/a"
        lines = ["| scheme | pelab sync 1 | pelab sync 16 | pelab graphs | eager | compile | pelab / eager "
                 "| pelab / compile |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for s in schemes:
            best = self.get(s, "pelab_graphs") or self.get(s, "pelab_sync16")
            lines.append(f"| {s} | " + " | ".join(cell(s, c) for c in COLUMNS) +
                         f" | {ratio(best, self.get(s, 'eager'))} | {ratio(best, self.get(s, 'compile'))} |")
        return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--schemes", default="none,rope,alibi,relative_key,t5_bias")
    parser.add_argument("--steps", type=int, default=300, help="timed steps (pelab: N and 2N, the difference)")
    parser.add_argument("--warmup", type=int, default=20, help="eager/compile: random-length steps before timing")
    parser.add_argument("--length-warmup-passes", type=int,
                        help="eager/compile: passes over every length before --warmup (default 3 on cuda, 1 on cpu)")
    parser.add_argument("--min-length", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="intra-op threads of every process")
    parser.add_argument("--compile-too", action="store_true", help='also torch.compile(mode="reduce-overhead")')
    parser.add_argument("--only", default="pelab,eager,compile",
                        help="which of pelab, eager, compile to run (compile also needs --compile-too)")
    parser.add_argument("--pelab-columns", default="sync1,sync16,graphs",
                        help="which pelab columns: sync1, sync16 (without CUDA graphs), graphs (cuda only)")
    parser.add_argument("--eager-attention", choices=["math", "sdpa"],
                        help="eager/compile attention (default: sdpa on cuda, math on cpu)")
    parser.add_argument("--pelab", default=os.path.join(ROOT, "build", "pelab"))
    parser.add_argument("--config", default=os.path.join(ROOT, "configs", "bench", "tiny_shape.yaml"))
    parser.add_argument("--python", default=sys.executable, help="the Python with torch for eager and compile")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per process")
    parser.add_argument("--deadline-s", type=float, default=0,
                        help="start no process after this many seconds, and cut each one off there (0: none)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    schemes = args.schemes.split(",")
    only = set(args.only.split(","))
    pelab_columns = set(args.pelab_columns.split(","))
    passes = args.length_warmup_passes if args.length_warmup_passes is not None else (3 if args.device == "cuda" else 1)
    attention = args.eager_attention or ("sdpa" if args.device == "cuda" else "math")
    logs = os.path.join(args.out, "logs")
    os.makedirs(logs, exist_ok=True)
    results = Results(args.out, schemes)
    began = time.perf_counter()
    N = args.steps
    settings = (f"Tiny shape (Ruoss et al. 2023): reverse_string encoder, d_model {SHAPE['d_model']}, "
                f"{SHAPE['layers']} layers, {SHAPE['heads']} heads, d_ff {SHAPE['d_ff']}, batch {args.batch}, "
                f"input lengths uniform in {args.min_length}-{args.max_length}, Adam 1e-4, clip 1, {args.precision}; "
                f"device {args.device}, {args.threads} threads; training steps per second (higher is better). "
                f"pelab: N / (t(2N) - t(N)) with N = {N} (start-up and first steps removed); eager and compile: "
                f"{N} steps after {passes} passes over every length and {args.warmup} steps, attention {attention}. "
                f"pelab sync 1 and 16: train.cuda_graphs off; pelab graphs: on, sync 16; pelab / eager and pelab / compile "
                f"use pelab graphs (sync 16 without a GPU). "
                f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}.\n\n"
                f"`{shlex.join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])}`")

    BUSY["enabled"] = args.device == "cuda"

    def busy_note():
        return "" if BUSY["last"] is None else f"; GPU busy {BUSY['last']:.0f}%"

    def timeout():
        if not args.deadline_s:
            return args.timeout
        return min(args.timeout, args.deadline_s - (time.perf_counter() - began))

    def progress(message):
        print(f"[{time.perf_counter() - began:6.0f}s] {message}", file=sys.stderr, flush=True)

    def pelab(scheme, sync, graphs):
        seconds = {}
        for steps in (N, 2 * N):
            name = f"pelab_{scheme}_sync{sync}{'_graphs' if graphs == 'on' else ''}_{steps}"
            run_dir = os.path.join(args.out, "runs", name)
            command = [args.pelab, "train", args.config, "--set", f"train.steps={steps}",
                       "--set", f"device={args.device}", "--set", f"encoding.name={scheme}",
                       "--set", f"train.sync_every={sync}", "--set", f"train.cuda_graphs={graphs}",
                       "--set", f"threads={args.threads}",
                       "--set", f"precision={args.precision}", "--set", f"train.batch_size={args.batch}",
                       "--set", f"train.min_length={args.min_length}", "--set", f"train.max_length={args.max_length}",
                       "--out", run_dir]
            if timeout() <= 0:
                return None, "skipped: deadline"
            status, out = run(command, os.path.join(logs, name + ".txt"), timeout())
            if status != 0:
                return None, f"failed: exit {status}, logs/{name}.txt"
            seconds[steps], source = training_seconds(run_dir, out)
        difference = seconds[2 * N] - seconds[N]
        note = f"single run {N / seconds[N]:.1f}" + ("" if source == "run.h5" else f"; {source}") + busy_note()
        if difference <= 0:
            return None, f"t(2N) <= t(N): {seconds[2 * N]:.3f}s, {seconds[N]:.3f}s"
        return N / difference, note

    def eager(scheme, compiled):
        name = f"{'compile' if compiled else 'eager'}_{scheme}"
        command = [args.python, os.path.join(ROOT, "tests", "benchmarks", "torch_eager.py"), "--schemes", scheme,
                   "--train-steps", str(N), "--warmup", str(args.warmup), "--length-warmup-passes", str(passes),
                   "--min-length", str(args.min_length), "--max-length", str(args.max_length),
                   "--d-model", str(SHAPE["d_model"]), "--layers", str(SHAPE["layers"]),
                   "--heads", str(SHAPE["heads"]), "--d-ff", str(SHAPE["d_ff"]), "--batch", str(args.batch),
                   "--threads", str(args.threads), "--device", args.device, "--precision", args.precision,
                   "--attention", attention] + (["--compile"] if compiled else [])
        if timeout() <= 0:
            return None, "skipped: deadline"
        status, out = run(command, os.path.join(logs, name + ".txt"), timeout())
        m = re.search(r"^RESULT_TRAIN \S+ ([0-9.eE+-]+)$", out, re.M)
        if status != 0 or not m:
            last = [line for line in out.strip().splitlines() if line.strip()][-1:] or [""]
            return None, f"failed: exit {status}, logs/{name}.txt: {last[0][:120]}"
        info = re.search(r"^INFO_TRAIN .*$", out, re.M)
        note = busy_note().lstrip("; ")
        if compiled and info:
            fields = dict(x.split("=", 1) for x in info.group(0).split()[2:] if "=" in x)
            note = (f"{fields.get('unique_graphs', '?')} graphs, {fields.get('cudagraph_skips', '?')} cudagraph skips"
                + busy_note())
        return float(m.group(1)), note

    def record(scheme, column, result):
        value, note = result
        results.set(scheme, column, value, note)
        results.write(args, schemes, settings)
        progress(f"{scheme} {TITLES[column]}: " + (f"{value:.1f} steps/s" if value else "-") +
                 (f" ({note})" if note else ""))

    for scheme in schemes:  # pelab and eager first, interleaved by scheme: the table the comparison needs
        if "pelab" in only:
            for sync in (1, 16):  # without graphs: the steps launched one kernel at a time
                if f"sync{sync}" in pelab_columns:
                    record(scheme, f"pelab_sync{sync}", pelab(scheme, sync, "off"))
            if args.device == "cuda" and "graphs" in pelab_columns:
                record(scheme, "pelab_graphs", pelab(scheme, 16, "on"))
        if "eager" in only:
            record(scheme, "eager", eager(scheme, compiled=False))
    if args.compile_too and "compile" in only:  # then compilation, the longest part
        for scheme in schemes:
            record(scheme, "compile", eager(scheme, compiled=True))
    print(settings + "\n")
    print(results.write(args, schemes, settings))
    print(f"\nwritten: {os.path.join(args.out, 'tiny_shape.md')}, {results.path}; logs in {logs} "
          f"({time.perf_counter() - began:.0f}s)")


if __name__ == "__main__":
    main()
