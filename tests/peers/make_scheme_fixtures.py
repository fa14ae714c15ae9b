"""Fixtures of the peers' position modules for pelab's scheme-level peer tests.

Run in the build's peer environment (scripts/peer-env.sh):
    build/peer-venv/bin/python tests/peers/make_scheme_fixtures.py OUT_DIR
writes OUT_DIR/schemes.h5, one group per case: the pelab scheme and options it is compared
with (attributes scheme, options as YAML, causal), random q and k (B, H, T, Dh), the peer's
output, a random cotangent R, the gradients of sum(output * R) with respect to q, k and the
peer's parameters, and those parameters under pelab's names (params/, grad/).
Output kinds: bias (B|1, H, T, T), added to the scaled scores; rotated (2, B, H, T, Dh), q
and k after the rotation; rotated_scores (B, H, T, T), q' k'^T after the rotation (xPos: the
peer centres its decay at T // 2, which cancels in q' k'^T but not in q' or k' alone).
"""
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F
import transformers
import x_transformers
from x_transformers.x_transformers import (AlibiPositionalBias, CoPE, PolarEmbedding, RelativePositionBias,
                                           RotaryEmbedding, apply_polar_pos_emb, apply_rotary_pos_emb)

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
torch.set_num_threads(1)
B, H, Dh = 2, 4, 8
cases = {}


def case(name, scheme, options, causal, kind, T, peer, params=None, heads=H):
    """peer(q, k) -> output; params: pelab name -> the peer's parameter (copied in, gradients kept)."""
    torch.manual_seed(len(cases) + 1)
    q = torch.randn(B, heads, T, Dh, requires_grad=True)
    k = torch.randn(B, heads, T, Dh, requires_grad=True)
    params = params or {}
    with torch.no_grad():  # zero-initialized references (CoPE) get random values to compare
        for p in params.values():
            p.copy_(torch.randn_like(p) * 0.5)
    out = peer(q, k)
    cotangent = torch.randn_like(out)
    if causal and kind != "rotated":  # what a causal model never uses is not compared
        cotangent = cotangent * torch.ones(T, T).tril()
    if out.requires_grad:  # (ALiBi's bias depends on neither q nor k)
        (out * cotangent).sum().backward()
    zero_if_none = lambda g, like: g if g is not None else torch.zeros_like(like)
    cases[name] = dict(scheme=scheme, options=options, causal=int(causal), kind=kind, q=q, k=k, output=out,
                       cotangent=cotangent, grad_q=zero_if_none(q.grad, q), grad_k=zero_if_none(k.grad, k),
                       params={n: p.detach().clone() for n, p in params.items()},
                       grads={n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in params.items()})


# --- x-transformers: ALiBi (AlibiPositionalBias; Press's slopes, also for 6 heads; alibi_num_heads)
for heads in (4, 6):
    case(f"xt_alibi_{heads}_heads", "alibi", "{}", False, "bias", 20,
         lambda q, k, h=heads: AlibiPositionalBias(h)(q.shape[-2], k.shape[-2]).unsqueeze(0), heads=heads)
case("xt_alibi_2_of_4_heads", "alibi", "{heads: 2}", False, "bias", 20,
     lambda q, k: AlibiPositionalBias(2, total_heads=4)(q.shape[-2], k.shape[-2]).unsqueeze(0))

# --- x-transformers: T5 bias (RelativePositionBias, scale 1), lengths past max_distance
for causal in (False, True):
    t5 = RelativePositionBias(scale=1.0, causal=causal, num_buckets=16, max_distance=40, heads=H)
    case(f"xt_t5_{'causal' if causal else 'bidirectional'}", "t5_bias", "{num_buckets: 16, max_distance: 40}", causal,
         "bias", 70, lambda q, k, t5=t5: t5(q.shape[-2], k.shape[-2]).unsqueeze(0),
         {"relative_attention_bias": t5.relative_attention_bias.weight})

# --- HF transformers: T5's own relative bias (T5Attention.compute_bias), encoder and decoder
for decoder in (False, True):
    config = transformers.T5Config(d_model=H * Dh, d_kv=Dh, num_heads=H, relative_attention_num_buckets=32,
                                   relative_attention_max_distance=128, is_decoder=decoder)
    attention = transformers.models.t5.modeling_t5.T5Attention(config, has_relative_attention_bias=True)
    case(f"hf_t5_{'decoder' if decoder else 'encoder'}", "t5_bias", "{num_buckets: 32, max_distance: 128}", decoder,
         "bias", 150, lambda q, k, a=attention: a.compute_bias(q.shape[-2], k.shape[-2]),
         {"relative_attention_bias": attention.relative_attention_bias.weight})

# --- x-transformers: rotary (interleaved pairs), partial rotary (rotary_emb_dim), another base
def rotated(rotary):
    def peer(q, k):
        freqs, _ = rotary(torch.arange(q.shape[-2]))
        return torch.stack([apply_rotary_pos_emb(q, freqs), apply_rotary_pos_emb(k, freqs)])
    return peer


case("xt_rotary", "rope", "{layout: interleaved}", False, "rotated", 40, rotated(RotaryEmbedding(Dh)))
case("xt_rotary_half_of_head", "rope", "{layout: interleaved, rotary_fraction: 0.5}", False, "rotated", 40,
     rotated(RotaryEmbedding(Dh // 2)))
case("xt_rotary_base_500", "rope", "{layout: interleaved, base: 500}", False, "rotated", 40,
     rotated(RotaryEmbedding(Dh, base=500)))


# --- x-transformers: xPos (RotaryEmbedding use_xpos: q times scale, k times 1 / scale)
def xpos_scores(q, k, scale_base=16):
    rotary = RotaryEmbedding(Dh, use_xpos=True, scale_base=scale_base)
    freqs, scale = rotary(torch.arange(q.shape[-2]))
    qr, kr = apply_rotary_pos_emb(q, freqs, scale), apply_rotary_pos_emb(k, freqs, scale ** -1)
    return qr @ kr.transpose(-1, -2)


case("xt_xpos", "xpos", "{scale_base: 16}", True, "rotated_scores", 40, xpos_scores)

# --- x-transformers: CoPE (the paper's listing), causal: gates of the masked, scaled logits
cope = CoPE(Dh, H, max_pos=12)


def cope_bias(q, k):
    T = q.shape[-2]
    logits = (q @ k.transpose(-1, -2)) * Dh ** -0.5
    logits = logits.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -torch.finfo(q.dtype).max)
    return cope(q, logits).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), 0.0)


case("xt_cope", "cope", "{npos_max: 12}", True, "bias", 30, cope_bias, {"table_0": cope.pos_emb})

# --- x-transformers: PoPE (PolarEmbedding, apply_polar_pos_emb): softplus magnitudes, phases
# p base^(-c/Dh), the keys' learned phase bias, clamped to [-2 pi, 0] (the random bias is
# partly outside, so the clamp's zero gradients are compared too)
polar = PolarEmbedding(Dh, H)


def pope_scores(q, k):
    freqs, bias = polar(torch.arange(q.shape[-2]))
    return apply_polar_pos_emb(q, freqs) @ apply_polar_pos_emb(k, freqs + bias).transpose(-1, -2)


case("xt_pope", "pope", "{}", False, "rotated_scores", 30, pope_scores, {"key_bias": polar.learned_bias})
for stored in ("params", "grads"):  # the peer's (H, 1, Dh) as pelab's (H, Dh)
    cases["xt_pope"][stored]["key_bias"] = cases["xt_pope"][stored]["key_bias"].reshape(H, Dh)


# --- flash-linear-attention's naive references (FoX, PaTH, stick-breaking): whole attention
# layers. x (B, T, D) is projected by the layer's qkv weights (pelab's [W_q; W_k; W_v]); the
# reference runs on q, k, v and the gates it is given, computed here from the scheme's own
# weights as pelab's scheme defines them; pelab's output projection is set to the identity.
import importlib.metadata
import importlib.util


def fla_naive(module, function):
    # the naive file alone: the package's __init__ loads the Triton kernels
    path = os.path.join(importlib.util.find_spec("fla").submodule_search_locations[0], "ops", module, "naive.py")
    spec = importlib.util.spec_from_file_location(f"fla_naive_{module}", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return getattr(loaded, function)


def attention_case(name, scheme, options, T, reference, params, causal=True):
    """reference(q, k, v, x, qkv_weight, qkv_bias) -> o, each (B, T, H, Dh); params: pelab name ->
    tensor (random)."""
    torch.manual_seed(len(cases) + 100)
    D = H * Dh
    x = torch.randn(B, T, D, requires_grad=True)
    qkv_weight = (torch.randn(3 * D, D) / D ** 0.5).requires_grad_()
    qkv_bias = (0.1 * torch.randn(3 * D)).requires_grad_()
    for p in params.values():
        p.requires_grad_()
    q, k, v = (x @ qkv_weight.T + qkv_bias).split(D, dim=-1)
    split = lambda t: t.reshape(B, T, H, Dh)
    out = reference(split(q), split(k), split(v), x, qkv_weight, qkv_bias).reshape(B, T, D)
    cotangent = torch.randn_like(out)
    (out * cotangent).sum().backward()
    cases[name] = dict(scheme=scheme, options=options, causal=int(causal), kind="attention", x=x, qkv_weight=qkv_weight,
                       qkv_bias=qkv_bias, output=out, cotangent=cotangent, grad_x=x.grad,
                       grad_qkv_weight=qkv_weight.grad, grad_qkv_bias=qkv_bias.grad,
                       params={n: p.detach().clone() for n, p in params.items()},
                       grads={n: p.grad for n, p in params.items()})


D = H * Dh
naive_forgetting_attn = fla_naive("forgetting_attn", "naive_forgetting_attn")
fox = {"gates.0.weight": torch.randn(H, D) * 0.3, "gates.0.bias": torch.randn(H) * 0.5 + 2}
attention_case("fla_fox", "fox", "{}", 24, lambda q, k, v, x, *_: naive_forgetting_attn(
    q, k, v, F.logsigmoid(x @ fox["gates.0.weight"].T + fox["gates.0.bias"])), fox)

naive_stickbreaking_attn = fla_naive("stickbreaking_attn", "naive_stickbreaking_attn")
for attend_current in (False, True):
    attention_case(f"fla_stick_breaking{'_attend_current' if attend_current else ''}", "stick_breaking",
                   f"{{attend_current: {str(attend_current).lower()}}}", 24,
                   lambda q, k, v, x, *_, a=attend_current: naive_stickbreaking_attn(q, k, v, attend_current=a)[0], {})

naive_path_attn = fla_naive("path_attn", "naive_path_attn")
# the reference's w_proj has no bias (fla/layers/path_attn.py): pelab's is set to zero
path = {"directions.0.weight": torch.randn(D, D) / D ** 0.5, "directions.0.bias": torch.zeros(D),
        "strengths.0.weight": torch.randn(H, D) * 0.3, "strengths.0.bias": torch.randn(H) * 0.5}


def path_reference(q, k, v, x, *_):
    w = (x @ path["directions.0.weight"].T + path["directions.0.bias"]).reshape(B, -1, H, Dh)
    w = F.normalize(w, dim=-1)
    beta = 2 * torch.sigmoid(x @ path["strengths.0.weight"].T + path["strengths.0.bias"])
    g = torch.zeros(B, x.shape[1], H)  # no forget gate (PaTH alone)
    return naive_path_attn(q, k, v, w, beta, g, scale=Dh ** -0.5, chunk_size=8)


attention_case("fla_path", "path", "{}", 24, path_reference, path)

# --- HF transformers: DeBERTa-v2's DisentangledSelfAttention (c2p + p2c, log buckets, shared
# keys as DeBERTa-v3), its rel_embeddings and their LayerNorm as DebertaV2Encoder holds them;
# 40 tokens past max_relative_positions 32 (buckets exact to 4, logarithmic beyond)
from transformers.models.deberta_v2 import modeling_deberta_v2 as deberta_v2

deberta_config = transformers.DebertaV2Config(
    hidden_size=D, num_attention_heads=H, relative_attention=True, position_buckets=8, max_relative_positions=32,
    pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm", layer_norm_eps=1e-7,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
deberta_attention = deberta_v2.DisentangledSelfAttention(deberta_config).eval()
deberta = {"rel_embeddings": torch.randn(16, D), "rel_norm.weight": 1 + 0.2 * torch.randn(D),
           "rel_norm.bias": 0.1 * torch.randn(D)}


def deberta_reference(q, k, v, x, qkv_weight, qkv_bias):
    weights = {f"{name}_proj.{part}": tensor.split(D)[i] for part, tensor in (("weight", qkv_weight), ("bias", qkv_bias))
               for i, name in enumerate(("query", "key", "value"))}
    rel = F.layer_norm(deberta["rel_embeddings"], (D,), deberta["rel_norm.weight"], deberta["rel_norm.bias"], eps=1e-7)
    T = x.shape[1]
    relative_pos = deberta_v2.build_relative_position(x, x, bucket_size=8, max_position=32)
    mask = torch.ones(B, 1, T, T, dtype=torch.bool)
    context = torch.func.functional_call(deberta_attention, weights, (x, mask),
                                         dict(relative_pos=relative_pos, rel_embeddings=rel))
    context = context[0] if isinstance(context, tuple) else context
    return context.reshape(B, T, H, Dh)


attention_case("hf_deberta_v2", "deberta", "{position_buckets: 8, max_relative_positions: 32, share_att_key: true}",
               40, deberta_reference, deberta, causal=False)

with h5py.File(os.path.join(out_dir, "schemes.h5"), "w") as f:
    f.attrs["x_transformers"] = str(getattr(x_transformers, "__version__", "2.31.10"))
    f.attrs["transformers"] = str(transformers.__version__)
    f.attrs["fla_core"] = importlib.metadata.version("fla-core")
    for name, c in cases.items():
        g = f.create_group(name)
        for key in ("scheme", "options", "causal", "kind"):
            g.attrs[key] = c[key]
        for key in ("q", "k", "x", "qkv_weight", "qkv_bias", "output", "cotangent", "grad_q", "grad_k", "grad_x",
                    "grad_qkv_weight", "grad_qkv_bias"):
            if key in c:
                g[key] = c[key].detach().numpy().astype(np.float32)
        for sub in ("params", "grads"):
            s = g.create_group(sub)
            for n, t in c[sub].items():
                s[n] = t.detach().numpy().astype(np.float32)

# --- x-transformers' DynamicPositionBias against examples/schemes/dynamic_position_bias.py (a
# Python scheme: tests/peers/python_scheme_peers.py compares it in Debian's Python with pelab)
from x_transformers.x_transformers import DynamicPositionBias

torch.manual_seed(200)
dynamic = DynamicPositionBias(16, heads=H, depth=2, log_distance=True)
with torch.no_grad():
    for p in dynamic.parameters():
        p.copy_(torch.randn_like(p) * 0.5)
bias = dynamic(30, 30)  # (H, T, T)
cotangent = torch.randn_like(bias)
(bias * cotangent).sum().backward()
names = {"mlp.0.0": "mlp.0", "mlp.1.0": "mlp.2", "mlp.2": "mlp.4"}  # x-transformers -> the example's Sequential
with h5py.File(os.path.join(out_dir, "python_schemes.h5"), "w") as f:
    g = f.create_group("xt_dynamic_position_bias")
    g.attrs["scheme"], g.attrs["options"] = "dynamic_position_bias", "width: 16, depth: 2, log_distance: true"
    g["output"], g["cotangent"] = bias.detach().numpy(), cotangent.numpy()
    for name, p in dynamic.named_parameters():
        module, part = name.rsplit(".", 1)
        g[f"params/{names[module]}.{part}"] = p.detach().numpy()
        g[f"grads/{names[module]}.{part}"] = p.grad.numpy()
print(f"peer fixtures: {len(cases)} scheme cases in {out_dir}/schemes.h5, 1 in python_schemes.h5")
