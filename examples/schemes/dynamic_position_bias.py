"""The tutorial scheme of docs/python-schemes.md: x-transformers' dynamic position bias
(lucidrains/x-transformers, DynamicPositionBias; after Wang et al.'s CrossFormer): a small MLP
maps each offset query - key (optionally sign(d) log(|d| + 1)) to one bias per head, shared by
every layer. pelab's built-in `dynamic_position_bias` (core/encodings/dynamic_position_bias.h)
is the same module in C++; this one is named dynamic_position_bias_py beside it.

    schemes: [examples/schemes/dynamic_position_bias.py]
    encoding: {name: dynamic_position_bias_py, depth: 2, log_distance: true}
"""
import torch

import pelab


class DynamicPositionBias(pelab.Scheme):
    name = "dynamic_position_bias_py"
    description = "an MLP of the offset query - key, one bias per head (x-transformers DynamicPositionBias)"
    relative = True  # a function of query - key only: shifting every position changes nothing
    options = {
        "width": pelab.option(32, "hidden width of the MLP", min=1, max=4096),
        "depth": pelab.option(2, "hidden layers (Linear + SiLU), then a Linear to the heads", min=1, max=16),
        "log_distance": pelab.option(False, "feed sign(d) log(|d| + 1) instead of d"),
    }

    def __init__(self, context, options):
        super().__init__(context, options)
        width, layers = options["width"], []
        for i in range(options["depth"]):
            layers += [torch.nn.Linear(1 if i == 0 else width, width), torch.nn.SiLU()]
        self.mlp = torch.nn.Sequential(*layers, torch.nn.Linear(width, context.num_heads))

    def score_bias(self, q, k, attention):
        # q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B'|1, H, Tq, Tk)
        offsets = pelab.offsets(attention.positions)  # (B'|1, Tq, Tk), query - key
        # the MLP runs once per distinct offset (2T - 1 of them), not per pair
        distinct, index = torch.unique(offsets, return_inverse=True)
        d = distinct.to(q.dtype)[:, None]  # (W, 1)
        if self.config["log_distance"]:
            d = d.sign() * (d.abs() + 1).log()
        per_offset = self.mlp(d)  # (W, H)
        return per_offset[index].permute(0, 3, 1, 2)  # (B'|1, H, Tq, Tk)
