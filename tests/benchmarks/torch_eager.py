#!/usr/bin/python3
"""The PyTorch-eager equivalent of `pelab bench`: the same encoder (token embedding, pre-LN
blocks with a fused qkv projection, GELU feed-forward, final LayerNorm, per-position head),
the same batch (reverse_string in the encoder format: T/2 input symbols, T/2 placeholders,
loss on the placeholders) and the same training step (forward, backward, Adam), written the
way a researcher would write it in Python, with each scheme as the reference codebases do
(HF BERT relative_key, HF T5 buckets, HF/GPT-NeoX rotate_half RoPE, x-transformers ALiBi and
FIRE). Uses Debian's python3-torch, the same LibTorch 1.13 as pelab.

  /usr/bin/python3 tests/benchmarks/torch_eager.py --schemes none,alibi --lengths 80 --d-model 64 \\
      --layers 5 --heads 8 --d-ff 256 --batch 128 --threads 2 [--attention-dropout 0.1]

Prints one line per scheme and length: RESULT scheme length median_ms

Training mode (--train-steps N): the training loop at a new input length per step, drawn
uniformly in [--min-length, --max-length] by a seeded RNG (the same lengths for every
scheme), reverse_string batches of --batch sequences (input symbols, then placeholders; the
loss on the placeholders), forward, backward, clipping by the global norm (--grad-clip) and
Adam. Before the timed steps: --length-warmup-passes passes over every length in the range
(torch.compile compiles its graphs and records its CUDA graphs there), then --warmup steps.
The device is synchronized at the start and the end of the N timed steps only. --compile
wraps the loss (model and cross-entropy) in torch.compile(mode="reduce-overhead") (torch 2.x);
the optimizer step stays eager. Batches are made on the host and copied with .to(device), as
a plain training loop does (a blocking copy on a GPU; --pin-memory: pinned, non_blocking).

  python3 tests/benchmarks/torch_eager.py --schemes none,rope --train-steps 300 --min-length 1 \
      --max-length 40 --d-model 64 --layers 5 --heads 8 --d-ff 256 --batch 128 --device cuda \
      --attention sdpa [--compile]

Prints one line per scheme: RESULT_TRAIN scheme steps_per_second, after an INFO_TRAIN line
(seconds, tokens/s, mean length, last loss, torch version).
"""
import argparse
import importlib
import math
import random
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SCHEMES = ["none", "sinusoidal", "learned", "alibi", "t5_bias", "rope", "relative_key", "kerple", "fire"]


class Scheme(nn.Module):
    """Hooks of one position-encoding scheme: embed (input), rotate (q, k), bias (scores)."""

    def __init__(self, name, d_model, heads, max_len):
        super().__init__()
        self.name, self.heads, self.dh = name, heads, d_model // heads
        if name == "learned":
            self.table = nn.Embedding(max_len, d_model)
        if name == "t5_bias":
            self.buckets = nn.Embedding(32, heads)
        if name == "relative_key":
            self.max_len = max_len
            self.distance = nn.Embedding(2 * max_len - 1, self.dh)
        if name == "kerple":
            self.r1 = nn.Parameter(torch.rand(heads) + 0.5)
            self.r2 = nn.Parameter(torch.rand(heads) + 0.5)
        if name == "fire":
            self.mlp = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, heads))
            self.c = nn.Parameter(torch.tensor(0.1))
            self.L = nn.Parameter(torch.tensor(512.0))
        if name == "alibi":
            start = 2 ** (-8 / heads)
            self.register_buffer("slopes", torch.tensor([start ** (i + 1) for i in range(heads)]))

    def embed(self, x):
        T, D = x.shape[1], x.shape[2]
        if self.name == "sinusoidal":
            position = torch.arange(T, dtype=torch.float32, device=x.device).unsqueeze(1)
            frequency = torch.exp(torch.arange(0, D, 2, dtype=torch.float32, device=x.device) * (-math.log(10000.0) / D))
            pe = torch.zeros(T, D, device=x.device)
            pe[:, 0::2] = torch.sin(position * frequency)
            pe[:, 1::2] = torch.cos(position * frequency)
            return x + pe
        if self.name == "learned":
            return x + self.table(torch.arange(T, device=x.device))
        return x

    def rotate(self, q, k):
        if self.name != "rope":
            return q, k
        T, dh = q.shape[-2], q.shape[-1]
        inv = 1.0 / (10000 ** (torch.arange(0, dh, 2, dtype=torch.float32, device=q.device) / dh))
        angles = torch.outer(torch.arange(T, dtype=torch.float32, device=q.device), inv)
        emb = torch.cat([angles, angles], -1)
        cos, sin = emb.cos(), emb.sin()

        def rotate_half(x):
            x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
            return torch.cat([-x2, x1], -1)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def bias(self, q, k):
        T = q.shape[-2]
        i = torch.arange(T, device=q.device)
        relative = i.view(1, T) - i.view(T, 1)  # key - query
        if self.name == "alibi":
            return -self.slopes.view(-1, 1, 1) * relative.abs()
        if self.name == "t5_bias":  # HF T5 _relative_position_bucket, bidirectional, 32 buckets, max_distance 128
            n = 16
            bucket = (relative > 0).long() * n
            distance = relative.abs()
            exact = n // 2
            large = exact + (torch.log(distance.float() / exact + 1e-6) / math.log(128 / exact) * (n - exact)).long()
            bucket = bucket + torch.where(distance < exact, distance, large.clamp(max=n - 1))
            return self.buckets(bucket).permute(2, 0, 1)
        if self.name == "relative_key":  # HF BERT: (T, T, Dh) embeddings, einsum with q
            embeddings = self.distance(-relative + self.max_len - 1)
            return torch.einsum("bhld,lrd->bhlr", q, embeddings) / math.sqrt(self.dh)
        if self.name == "kerple":
            return -self.r1.view(-1, 1, 1) * torch.log1p(self.r2.view(-1, 1, 1) * relative.abs())
        if self.name == "fire":  # x-transformers style: the MLP on a (T, T, 1) input
            distance = relative.abs().float()
            normalizer = torch.maximum(i.float(), self.L.abs()).view(T, 1)
            psi = torch.log1p(self.c.abs() * distance) / torch.log1p(self.c.abs() * normalizer)
            return self.mlp(psi.unsqueeze(-1)).permute(2, 0, 1)
        return None


class Block(nn.Module):
    def __init__(self, d_model, heads, d_ff):
        super().__init__()
        self.heads, self.sdpa, self.attention_dropout = heads, False, 0.0
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.out = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.ff_in, self.ff_out = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x, scheme):
        B, T, D = x.shape
        H = self.heads
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k = scheme.rotate(q, k)
        bias = scheme.bias(q, k)
        if not self.sdpa:
            scores = q @ k.transpose(-2, -1) / math.sqrt(D // H)
            if bias is not None:
                scores = scores + bias
        if self.sdpa:  # the fused kernels (GPUs): bias as additive mask, scaled by 1/sqrt(Dh)
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=None if bias is None else bias.to(q.dtype),
                                                     dropout_p=self.attention_dropout if self.training else 0.0)
        else:
            context = F.dropout(torch.softmax(scores, -1), self.attention_dropout, self.training) @ v
        x = x + self.out(context.transpose(1, 2).reshape(B, T, D))
        return x + self.ff_out(F.gelu(self.ff_in(self.norm2(x))))


class Encoder(nn.Module):
    def __init__(self, scheme, vocab, classes, d_model, layers, heads, d_ff, max_len):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model, padding_idx=0)
        self.embedding_norm = nn.LayerNorm(d_model)
        self.scheme = Scheme(scheme, d_model, heads, max_len)
        self.blocks = nn.ModuleList(Block(d_model, heads, d_ff) for _ in range(layers))
        self.final_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, classes)

    def forward(self, tokens):
        x = self.embedding_norm(self.scheme.embed(self.embedding(tokens)))
        for block in self.blocks:
            x = block(x, self.scheme)
        return self.head(self.final_norm(x))


def bench(scheme, T, args):
    torch.manual_seed(0)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.set_default_device(device)  # the schemes' position tables too (torch >= 2)
    model = Encoder(scheme, 4, 2, args.d_model, args.layers, args.heads, args.d_ff, max(T, 512)).to(device)
    for block in model.blocks:
        block.sdpa = args.attention == "sdpa"
        block.attention_dropout = args.attention_dropout
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    half = T // 2
    tokens = torch.cat([torch.randint(2, 4, (args.batch, half)), torch.ones(args.batch, T - half, dtype=torch.long)], 1)
    targets = torch.randint(0, 2, (args.batch, T - half))
    tokens, targets = tokens.to(device), targets.to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = []
    for step in range(args.warmup + args.repeats):
        sync()
        start = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            logits = model(tokens)[:, half:]
            loss = F.cross_entropy(logits.reshape(-1, 2).float(), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        sync()
        if step >= args.warmup:
            times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


class TrainingLoss(nn.Module):
    """The compiled unit of --compile: the model and the loss on the placeholders."""

    def __init__(self, model, bf16):
        super().__init__()
        self.model, self.bf16 = model, bf16

    def forward(self, tokens, targets):
        with torch.autocast(tokens.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            logits = self.model(tokens)[:, tokens.shape[1] - targets.shape[1]:]
            return F.cross_entropy(logits.reshape(-1, 2).float(), targets.reshape(-1))


def train(scheme, args):
    """-> (steps per second over the timed steps, info dict)."""
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    model = Encoder(scheme, 4, 2, args.d_model, args.layers, args.heads, args.d_ff,
                    max(2 * args.max_length, 512)).to(device)
    for block in model.blocks:
        block.sdpa = args.attention == "sdpa"
        block.attention_dropout = args.attention_dropout
    loss_of = TrainingLoss(model, args.precision == "bf16")
    mark_step = None
    if args.compile:
        dynamo = importlib.import_module("torch._dynamo")  # torch 2.x
        for limit in ("cache_size_limit", "recompile_limit"):  # room for one graph per shape if shapes stay static
            if hasattr(dynamo.config, limit):
                setattr(dynamo.config, limit, max(getattr(dynamo.config, limit), 64))
        loss_of = torch.compile(loss_of, mode="reduce-overhead")
        # a new step begins: the CUDA graphs may reuse the previous step's output memory
        mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(args.seed)
    pin = args.pin_memory and device.type == "cuda"

    def step(length):
        symbols = torch.randint(2, 4, (args.batch, length), generator=generator)
        tokens = torch.cat([symbols, torch.ones(args.batch, length, dtype=torch.long)], 1)
        targets = symbols.flip(1) - 2  # reverse_string: the input reversed, symbols 2, 3 -> classes 0, 1
        if pin:
            tokens, targets = tokens.pin_memory(), targets.pin_memory()
        tokens, targets = tokens.to(device, non_blocking=pin), targets.to(device, non_blocking=pin)
        if mark_step is not None:
            mark_step()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(tokens, targets)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        return loss.detach()

    rng = random.Random(args.seed)  # the same lengths for every scheme
    lengths = [rng.randint(args.min_length, args.max_length) for _ in range(args.warmup + args.train_steps)]
    counters = compile_counters()
    warmup_start = time.perf_counter()
    for _ in range(args.length_warmup_passes):
        for length in range(args.min_length, args.max_length + 1):
            step(length)
    for length in lengths[:args.warmup]:
        step(length)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    timed = lengths[args.warmup:]
    sync()
    warmup_seconds = time.perf_counter() - warmup_start
    start = time.perf_counter()
    for length in timed:
        loss = step(length)
    sync()
    seconds = time.perf_counter() - start
    info = dict(seconds=seconds, tokens_per_second=sum(2 * args.batch * n for n in timed) / seconds,
                mean_length=statistics.mean(timed), last_loss=float(loss), torch=torch.__version__,
                compile=bool(args.compile), warmup_seconds=warmup_seconds)
    if args.compile:  # graphs compiled and CUDA graphs skipped, over the whole run of this scheme
        info.update({k: v - counters.get(k, 0) for k, v in compile_counters().items()})
    return len(timed) / seconds, info


def compile_counters():
    """torch.compile's counters (torch 2.x): distinct graphs compiled, and graphs that
    reduce-overhead ran without CUDA graphs (inductor logs the reason)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {"unique_graphs": counters["stats"]["unique_graphs"],
            "cudagraph_skips": counters["inductor"]["cudagraph_skips"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    parser.add_argument("--lengths", default="80")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=256)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (timed with torch.cuda.synchronize)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16: autocast")
    parser.add_argument("--attention-dropout", type=float, default=0.0,
                        help="dropout on the attention probabilities (as pelab's model.attention_dropout)")
    parser.add_argument("--attention", default="math", choices=["math", "sdpa"],
                        help="sdpa: F.scaled_dot_product_attention (the fused GPU kernels)")
    training = parser.add_argument_group("training mode (RESULT_TRAIN scheme steps_per_second)")
    training.add_argument("--train-steps", type=int, default=0, help="timed training steps (0: the step-time mode)")
    training.add_argument("--min-length", type=int, default=1, help="input length range, one length per step")
    training.add_argument("--max-length", type=int, default=40)
    training.add_argument("--length-warmup-passes", type=int, default=2,
                          help="untimed passes over every length in the range before the --warmup steps")
    training.add_argument("--grad-clip", type=float, default=1.0, help="global gradient norm (0: no clipping)")
    training.add_argument("--seed", type=int, default=0, help="the model's initialization, the lengths and the data")
    training.add_argument("--compile", action="store_true", help='torch.compile(mode="reduce-overhead") (torch 2.x)')
    training.add_argument("--pin-memory", action="store_true",
                          help="cuda: pinned batches copied with non_blocking=True (default: plain .to(device), "
                               "which waits for the GPU)")
    args = parser.parse_args()
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"--compile needs torch 2.x (torch.compile); this is torch {torch.__version__}")
    if args.compile and not args.train_steps:
        sys.exit("--compile applies to the training mode (--train-steps N)")
    if args.train_steps and not 1 <= args.min_length <= args.max_length:
        sys.exit(f"--min-length {args.min_length} --max-length {args.max_length}: need 1 <= min <= max")
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # as pelab does
    if args.train_steps:
        for scheme in args.schemes.split(","):
            if scheme not in SCHEMES:
                print(f"SKIP {scheme} no eager reference")
                continue
            steps_per_second, info = train(scheme, args)
            print("INFO_TRAIN " + scheme + " " + " ".join(
                f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in info.items()), flush=True)
            print(f"RESULT_TRAIN {scheme} {steps_per_second:.4f}", flush=True)
        return
    for scheme in args.schemes.split(","):
        for T in (int(x) for x in args.lengths.split(",")):
            if scheme not in SCHEMES:
                print(f"SKIP {scheme} {T} no eager reference")
                continue
            print(f"RESULT {scheme} {T} {bench(scheme, T, args):.3f}", flush=True)


if __name__ == "__main__":
    main()
