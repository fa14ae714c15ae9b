#!/usr/bin/env python3
"""The peer a PyTorch user reaches for to train K tiny models at once on one GPU: K copies of
the eager reference model (tests/benchmarks/torch_eager.py's Encoder) trained as one ensemble,
their parameters stacked with torch.func.stack_module_state and the step vmapped over them
(torch.func.functional_call under torch.func.vmap). Such an ensemble takes one input length
per step for all K (each copy its own batch of that length), Adam over the stacked
parameters, the global gradient norm clipped per copy. --compile wraps the vmapped loss in
torch.compile(mode="reduce-overhead").

  python3 tests/benchmarks/torch_ensemble.py --device cuda --schemes none,rope --copies 16 \\
      --train-steps 300 [--compile]

Prints per scheme: RESULT_ENSEMBLE scheme copies aggregate_steps_per_second, where one
aggregate step is one copy's step (K per ensemble step), as pelab's packed runs count them.
torch 2.x (torch.func); Debian's torch 1.13 has functorch's older names, also accepted.
"""
import argparse
import copy
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_eager  # noqa: E402  (the reference model)

try:
    from torch.func import functional_call, stack_module_state, vmap
except ImportError:  # torch 1.13: functorch
    from functorch import vmap
    from torch.nn.utils.stateless import functional_call

    def stack_module_state(models):
        params = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models])
                  for n, _ in models[0].named_parameters()}
        buffers = {n: torch.stack([dict(m.named_buffers())[n] for m in models]) for n, _ in models[0].named_buffers()}
        for p in params.values():
            p.requires_grad_()
        return params, buffers


def train(scheme, args):
    """-> aggregate copy-steps per second over the timed steps."""
    device = torch.device(args.device)
    models = []
    for k in range(args.copies):  # each copy its own initialization
        torch.manual_seed(args.seed + k)
        model = torch_eager.Encoder(scheme, 4, 2, args.d_model, args.layers, args.heads, args.d_ff,
                                    max(2 * args.max_length, 512)).to(device)
        for block in model.blocks:
            block.sdpa = device.type == "cuda"
        models.append(model)
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta") if hasattr(torch, "func") else models[0]

    def loss_of_one(p, b, tokens, targets):
        logits = functional_call(base, (p, b), (tokens,))[:, tokens.shape[1] - targets.shape[1]:]
        return F.cross_entropy(logits.reshape(-1, 2).float(), targets.reshape(-1))

    def ensemble_loss(p, b, tokens, targets):  # tokens (K, B, 2L), targets (K, B, L)
        return vmap(loss_of_one)(p, b, tokens, targets).sum()

    loss_fn = torch.compile(ensemble_loss, mode="reduce-overhead") if args.compile else ensemble_loss
    optimizer = torch.optim.Adam(params.values(), lr=1e-4)
    generator = torch.Generator().manual_seed(args.seed)

    def step(length):
        symbols = torch.randint(2, 4, (args.copies, args.batch, length), generator=generator)
        tokens = torch.cat([symbols, torch.ones(args.copies, args.batch, length, dtype=torch.long)], 2)
        targets = symbols.flip(2) - 2
        tokens, targets = tokens.to(device), targets.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(params, buffers, tokens, targets)
        loss.backward()
        if args.grad_clip > 0:  # each copy's global norm, as K separate runs clip
            norms = torch.stack([p.grad.reshape(args.copies, -1).pow(2).sum(1) for p in params.values()]).sum(0).sqrt()
            scale = (args.grad_clip / (norms + 1e-6)).clamp(max=1.0)
            for p in params.values():
                p.grad.mul_(scale.view(-1, *([1] * (p.grad.dim() - 1))))
        optimizer.step()
        return loss.detach()

    rng = random.Random(args.seed)
    lengths = [rng.randint(args.min_length, args.max_length) for _ in range(args.warmup + args.train_steps)]
    for _ in range(args.length_warmup_passes):
        for length in range(args.min_length, args.max_length + 1):
            step(length)
    for length in lengths[:args.warmup]:
        step(length)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for length in lengths[args.warmup:]:
        step(length)
    sync()
    return args.copies * args.train_steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemes", default="none,rope,relative_key")
    parser.add_argument("--copies", type=int, default=16, help="K models in the ensemble")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=5)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-ff", type=int, default=256)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--train-steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--length-warmup-passes", type=int, default=1)
    parser.add_argument("--min-length", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=40)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for scheme in args.schemes.split(","):
        try:
            print(f"RESULT_ENSEMBLE {scheme} {args.copies} {train(scheme, args):.3f}", flush=True)
        except Exception as error:  # a scheme vmap or compile cannot take: said, and the others go on
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            print(f"RESULT_ENSEMBLE {scheme} {args.copies} failed: {message}", flush=True)


if __name__ == "__main__":
    main()
