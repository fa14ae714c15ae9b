"""pelab.Scheme: a position encoding written in Python, trained by pelab's C++ model and trainer
(docs/python-schemes.md). Only torch is imported here: the `pelab` command imports this module
in the Python it embeds, without pelab's extension module.

A scheme overrides the hooks it needs; the others are never called (the base is NoPE). The hooks,
their order and shapes are those of the C++ interface (core/encodings/position_encoding.h):

    project -> rotate -> q k^T * attention_scale + score_bias + mask -> softmax (or
    attention_weights) -> probs v + value_term;  embed adds to the residual stream.

    class Decay(pelab.Scheme):
        name = "decay"
        description = "a learned exponential decay of |i - j| per head"
        relative = True                               # shifting every position changes nothing
        options = {"init": pelab.option(0.1, "initial rate", min=0.0, max=10.0)}

        def __init__(self, context, options):
            super().__init__(context, options)
            self.rate = torch.nn.Parameter(torch.full((context.num_heads,), options["init"]))

        def score_bias(self, q, k, attention):        # q: (B, H, Tq, Dh), k: (B, H, Tk, Dh)
            p = attention.positions
            distance = (p.query[:, None, :, None] - p.key[:, None, None, :]).abs()
            return -self.rate.view(1, -1, 1, 1) * distance   # (B, H, Tq, Tk)
"""
import torch


class Option:
    """A declared option: its default (its type: bool, int, float or str), help, and an inclusive
    range (int, float) or a list of choices (str). The config loader checks values against it."""

    def __init__(self, default, help="", min=None, max=None, choices=None):
        if not isinstance(default, (bool, int, float, str)):
            raise TypeError(f"an option's default must be bool, int, float or str, not {type(default).__name__}")
        if choices is not None and (not isinstance(default, str) or default not in choices):
            raise ValueError(f"default {default!r} is not one of the choices {list(choices)}")
        self.default, self.help, self.min, self.max = default, help, min, max
        self.choices = list(choices) if choices is not None else None

    def __repr__(self):
        return f"pelab.option({self.default!r}, {self.help!r}, min={self.min}, max={self.max}, choices={self.choices})"


def option(default, help="", *, min=None, max=None, choices=None):
    """Declares an option of a Scheme: `options = {"base": pelab.option(10000.0, "RoPE base", min=1)}`."""
    return Option(default, help, min, max, choices)


class Context:
    """What a scheme knows of the model it is plugged into (C++ EncodingContext)."""

    def __init__(self, d_model, num_heads, num_layers, causal, scheme, served, model_heads=0):
        self.d_model, self.num_heads, self.num_layers = d_model, num_heads, num_layers
        self.causal, self.scheme, self.served = causal, scheme, list(served)
        # under encoding_heads, the block's heads, of which this scheme serves num_heads; 0: num_heads
        self.model_heads = model_heads

    @property
    def head_dim(self):
        return self.d_model // (self.model_heads or self.num_heads)

    @property
    def attention_width(self):
        """num_heads x head_dim: the rows of each of q, k, v in qkv_weight (d_model unless under encoding_heads)."""
        return self.num_heads * self.head_dim

    def serves(self, layer):
        """Whether this scheme serves block `layer` (encoding_mix): make per-block parameters only there."""
        return not self.served or self.served[layer]

    def __repr__(self):
        return (f"Context(d_model={self.d_model}, num_heads={self.num_heads}, num_layers={self.num_layers}, "
                f"causal={self.causal}, scheme={self.scheme!r})")


class Positions:
    """query: (B, Tq), key: (B, Tk); int64, or float64 from the real-valued samplers (cape,
    random_float). Rows may be one broadcast row."""
    __slots__ = ("query", "key")

    def __init__(self, query, key):
        self.query, self.key = query, key


class Attention:
    """What one attention layer hands to the attention hooks besides q and k (C++ AttentionContext):
    positions, layer (0-based block), causal, input (B, T, D) the layer projected (after a pre-LN;
    None where the caller has none), qkv_weight (3D, D) rows [W_q; W_k; W_v] and qkv_bias (3D)."""
    __slots__ = ("positions", "layer", "causal", "input", "qkv_weight", "qkv_bias")

    def __init__(self, positions, layer, causal, input, qkv_weight, qkv_bias):
        self.positions, self.layer, self.causal = positions, layer, causal
        self.input, self.qkv_weight, self.qkv_bias = input, qkv_weight, qkv_bias


INPUT_LAYER = -1  # `layer` of embed at the token embeddings (before the embedding LayerNorm)

HOOKS = ("check_positions", "embed", "rotate", "score_bias", "score_terms", "value_term", "attention_weights")


class Scheme(torch.nn.Module):
    """Base of a position encoding written in Python: NoPE, every hook the identity.

    Class attributes: `name` (the registered name; default: the class name in lower case),
    `description`, `options` (name -> pelab.option or a plain default), `causal_only`,
    `relative` (True: the scheme sees positions only through query - key, so shifting every
    position changes nothing; the property tests check it), `attention_scale` (None:
    1/sqrt(head_dim)), `position_tables` ((parameter, row_kind, first_row_value) of tables
    indexed by position, offset or bucket, for the untrained-row report).

    Its torch.nn.Parameters are the scheme's parameters in pelab: trained, clipped,
    checkpointed and stored in the run file like a built-in scheme's; register tensors that are
    not trained as buffers. Parameter creation draws from torch's default generator, which pelab
    has seeded with the run's seed."""
    name = None
    description = ""
    options = {}
    causal_only = False
    relative = False
    attention_scale = None
    position_tables = ()

    def __init__(self, context, options):
        super().__init__()
        self.context = context
        self.config = dict(options)

    def _named_tensors(self):
        """name -> (is_parameter, tensor): the parameters and persistent buffers pelab registers."""
        out = {name: (True, p) for name, p in self.named_parameters()}
        for module_name, module in self.named_modules():
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent_buffers_set:
                    out[f"{module_name}.{name}" if module_name else name] = (False, buffer)
        return out

    def check_positions(self, positions):
        """Called once per forward pass: raise to reject positions the scheme cannot encode."""

    def embed(self, x, positions, layer):
        """Additive input encodings. x: (B, T, D) -> (B, T, D); layer = pelab.INPUT_LAYER on the
        token embeddings, l on the residual stream before block l."""
        return x

    def rotate(self, q, k, attention):
        """Rotary encodings. q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> the same shapes."""
        return q, k

    def score_bias(self, q, k, attention):
        """Added to the scaled scores. q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B|1, H|1, Tq, Tk) or None."""
        return None

    def score_terms(self, q, k, attention):
        """The named parts of score_bias, {name: (B|1, H|1, Tq, Tk)} adding up to it; by default one,
        "position bias"."""
        bias = self.score_bias(q, k, attention)
        return {} if bias is None else {"position bias": bias}

    def value_term(self, probs, attention):
        """Relative value terms (Shaw). probs: (B, H, Tq, Tk) -> (B, H, Tq, Dh) or None."""
        return None

    def attention_weights(self, scores, masked, attention):
        """Replaces the softmax (stick-breaking): scores (B, H, Tq, Tk), scaled, with any bias;
        masked: (B|1, 1, Tq|1, Tk) bool, True at the keys a query may not see, or None ->
        weights (B, H, Tq, Tk), 0 at masked keys."""
        raise NotImplementedError(f"{type(self).__name__} does not replace the softmax")


def rows(positions):
    """(B, T) positions -> (B'|1, T): one row when every row is the same broadcast row (as
    pelab's samplers make them), so a bias is computed once per batch."""
    return positions[:1] if positions.dim() == 2 and positions.size(0) > 1 and positions.stride(0) == 0 else positions


def offsets(positions):
    """query - key for every pair: (B'|1, Tq, Tk), of the positions' dtype (int64 or float64)."""
    return rows(positions.query)[:, :, None] - rows(positions.key)[:, None, :]


class OffsetTable:
    """The distinct offsets query - key of positions, ascending (`offsets`, (W)), and `spread`,
    which puts a per-offset tensor (H, W) on every (query, key) pair: (B'|1, H, Tq, Tk). As
    pelab's C++ relative schemes (RelativeGeometry): for positions 0..T-1 (shifted or not) the
    offsets are -(T-1) .. T-1 and each query row is a window of them, so a scheme computes a
    row per offset, not per pair, and its gradient sums the same way as the built-ins'."""

    def __init__(self, positions):
        q, k = rows(positions.query), rows(positions.key)
        T = q.size(-1)
        self.length = T
        self.contiguous = (not q.is_floating_point() and q.size(0) == 1 and k.size(0) == 1 and k.size(-1) == T
                           and T > 0 and torch.equal(q[0], k[0])
                           and torch.equal(q[0] - q[0, 0], torch.arange(T, device=q.device)))
        if self.contiguous:
            self.offsets, self.index = torch.arange(-(T - 1), T, device=q.device), None
        else:
            self.offsets, self.index = torch.unique(q[:, :, None] - k[:, None, :], return_inverse=True)

    def spread(self, per_offset):
        """(H, W) -> (B'|1, H, Tq, Tk), entry [i, j] the row of offset query_i - key_j."""
        if self.contiguous:  # window i of the ascending row holds offsets i - (T - 1) .. i: read backwards
            return per_offset.unfold(-1, self.length, 1).flip(-1).unsqueeze(0)
        return per_offset[:, self.index].permute(1, 0, 2, 3)


def overridden(cls, hook):
    """Whether `cls` overrides Scheme's `hook` (pelab calls only overridden hooks)."""
    return getattr(cls, hook) is not getattr(Scheme, hook)


def registered_name(cls):
    return cls.name if cls.name else cls.__name__.lower()


def declared_options(cls):
    """name -> Option, plain defaults wrapped."""
    out = {}
    for key, value in dict(cls.options).items():
        out[key] = value if isinstance(value, Option) else Option(value)
    return out


def schemes_in(module):
    """The Scheme subclasses a module defines (not those it imports)."""
    return [value for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, Scheme) and value is not Scheme
            and value.__module__ == module.__name__]


def where(function):
    """'file:line' of a function's definition."""
    code = getattr(function, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else "?"
