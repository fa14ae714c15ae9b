"""ALiBi (Press, Smith & Lewis 2022) written in Python: the built-in `alibi` with its default
options (standard variant, every head, fixed slopes). tests/python_schemes.py checks that the
same seed gives the built-in's losses, maps and gradients."""
import math

import torch

import pelab


def press_slopes(heads):
    """Press et al.'s slopes: geometric from 2^(-8/n) for n a power of two; otherwise those of the
    closest smaller power of two, then every other slope of twice that."""
    def power_of_two(n):
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start ** (i + 1) for i in range(n)]
    closest = 2 ** int(math.floor(math.log2(heads)))
    slopes = power_of_two(closest)
    slopes += power_of_two(2 * closest)[0::2][: heads - closest]
    return torch.tensor(slopes, dtype=torch.float64).to(torch.float32)


class PyAlibi(pelab.Scheme):
    name = "py_alibi"
    description = "ALiBi in Python (examples/schemes/alibi.py): -m_h |query - key| per head"
    relative = True

    def __init__(self, context, options):
        super().__init__(context, options)
        self.register_buffer("slopes", press_slopes(context.num_heads), persistent=False)  # (H)

    def score_bias(self, q, k, attention):
        # q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B'|1, H, Tq, Tk)
        distance = pelab.offsets(attention.positions).to(q.dtype).abs()[:, None]  # (B'|1, 1, Tq, Tk)
        return self.slopes.to(q.dtype).view(1, -1, 1, 1) * -distance
