"""T5's relative attention bias (Raffel et al. 2020) written in Python: the built-in `t5_bias`
with its default options (32 buckets, max distance 128, scores scaled by 1/sqrt(Dh)); one
table shared by every layer. tests/python_schemes.py checks that the same seed gives the
built-in's losses, maps and gradients."""
import math

import torch

import pelab


def relative_bucket(key_minus_query, bidirectional, num_buckets, max_distance):
    """HF T5Attention._relative_position_bucket: exact buckets for small distances, log-spaced
    ones up to max_distance; bidirectional: half the buckets for keys after the query."""
    bucket = torch.zeros_like(key_minus_query)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (key_minus_query > 0).long() * num_buckets
        n = key_minus_query.abs()
    else:
        n = (-key_minus_query).clamp_min(0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(n.clamp_min(1).float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = large.clamp_max(num_buckets - 1)
    return bucket + torch.where(n < max_exact, n, large)


class PyT5Bias(pelab.Scheme):
    name = "py_t5_bias"
    description = "T5's bucketed relative bias in Python (examples/schemes/t5_bias.py), shared by all layers"
    relative = True
    options = {"num_buckets": pelab.option(32, "buckets (bidirectional: half per direction)", min=4, max=65536),
               "max_distance": pelab.option(128, "distances at or beyond this share the last bucket", min=2)}
    position_tables = (("relative_attention_bias", "bucket", 0),)

    def __init__(self, context, options):
        super().__init__(context, options)
        # HF: N(0, d_model^-1/2), (buckets, H)
        table = torch.randn(options["num_buckets"], context.num_heads) / math.sqrt(context.d_model)
        self.relative_attention_bias = torch.nn.Parameter(table)

    def score_bias(self, q, k, attention):
        # q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B'|1, H, Tq, Tk)
        table = pelab.OffsetTable(attention.positions)  # the distinct offsets query - key, (W)
        buckets = relative_bucket(-table.offsets, not self.context.causal, self.config["num_buckets"],
                                  self.config["max_distance"])  # (W)
        return table.spread(self.relative_attention_bias.t().index_select(1, buckets))  # (H, W) spread
