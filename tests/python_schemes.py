#!/usr/bin/env python3
"""Schemes written in Python (docs/python-schemes.md) through `import pelab`: the three examples
of examples/schemes/ equal their built-ins (the same seed gives the same losses over 100 steps
to 1e-6 relative, the same parameters after them, the same attention maps and logits); the
tutorial scheme trains, its parameters are in the run file and state_dict; the registry lists
what a config's `schemes:` loads; and the errors a user will make are one clear line.

  tests/python_schemes.py WORKDIR   (PYTHONPATH: the repository's python/; PELAB_BUILD_DIR: the build)
"""
import os
import shutil
import sys

import pelab  # first: before numpy and torch load OpenBLAS, pelab has it run the CLI's kernels

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

WORK = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
EXAMPLES = os.path.join(REPO, "examples", "schemes")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)

STEPS = 100


def tiny(encoding, schemes=(), causal=False, **more):
    cfg = {"name": "tiny", "seed": 3, "threads": 1, "task": {"name": "reverse_string"},
           "model": {"d_model": 32, "num_layers": 2, "num_heads": 4, "d_ff": 64, "causal": causal},
           "encoding": encoding,
           "train": {"steps": STEPS, "batch_size": 16, "min_length": 1, "max_length": 8, "log_every": 1},
           "eval": {"lengths": [4, 8, 12], "samples": 32},
           "analysis": {"probes": False, "attention_lengths": [12], "attention_examples": 2}}
    if schemes:
        cfg["schemes"] = [os.path.join(EXAMPLES, s) for s in schemes]
    cfg.update(more)
    return cfg


def losses(run_file):
    with h5py.File(run_file, "r") as f:
        return f["training"]["loss"][()]


def relative_difference(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12)))


def test_examples_equal_their_built_ins():
    for file, python_name, built_in, causal in [("alibi.py", "py_alibi", "alibi", False),
                                                ("alibi.py", "py_alibi", "alibi", True),
                                                ("rope.py", "py_rope", "rope", False),
                                                ("t5_bias.py", "py_t5_bias", "t5_bias", False),
                                                ("t5_bias.py", "py_t5_bias", "t5_bias", True)]:
        label = f"{python_name} ({'causal' if causal else 'bidirectional'})"
        mine = pelab.train(tiny({"name": python_name}, [file], causal), out=f"{python_name}_{causal}", quiet=True)
        theirs = pelab.train(tiny({"name": built_in}, causal=causal), out=f"{built_in}_{causal}", quiet=True)
        a, b = losses(mine), losses(theirs)
        assert a.shape == (STEPS,) and b.shape == (STEPS,), (label, a.shape, b.shape)
        difference = relative_difference(a, b)
        assert difference <= 1e-6, f"{label}: losses differ by {difference:.3g} relative"
        run_mine, run_theirs = pelab.load(mine), pelab.load(theirs)
        state_mine, state_theirs = run_mine.state_dict(), run_theirs.state_dict()
        assert set(state_mine) == set(state_theirs), (label, set(state_mine) ^ set(state_theirs))
        for name in state_theirs:
            d = relative_difference(state_mine[name].flatten(), state_theirs[name].flatten()) \
                if state_theirs[name].numel() else 0.0
            assert torch.allclose(state_mine[name], state_theirs[name], rtol=1e-5, atol=1e-6), (label, name, d)
        maps_mine, maps_theirs = run_mine.attention_maps(12, 2), run_theirs.attention_maps(12, 2)
        assert torch.allclose(maps_mine["probs"], maps_theirs["probs"], rtol=1e-5, atol=1e-6), label
        tokens = run_theirs.examples(12, 3)["tokens"]
        out_mine, out_theirs = run_mine(tokens), run_theirs(tokens)
        assert torch.allclose(out_mine["logits"], out_theirs["logits"], rtol=1e-5, atol=1e-5), label
        print(f"  {label}: losses within {difference:.2g} relative of {built_in}'s over {STEPS} steps")


def test_tutorial_scheme_trains_and_stores_its_parameters():
    path = pelab.train(tiny({"name": "dynamic_position_bias", "log_distance": True}, ["dynamic_position_bias.py"]),
                       out="dpb", quiet=True)
    run = pelab.load(path)
    names = [n for n in run.state_dict() if n.startswith("position_encoding.")]
    assert "position_encoding.mlp.0.weight" in names and "position_encoding.mlp.4.bias" in names, names
    with h5py.File(path, "r") as f:
        stored = []
        f["checkpoint"].visit(lambda n: stored.append(n))
        assert any("position_encoding.mlp.0.weight" in n for n in stored), stored[:20]
    frame = run.evaluate(lengths=[8])
    assert frame["per_token_accuracy"].iloc[0] > 0.6, frame  # it learned something within training
    # the registry lists it once loaded, with its declared options
    schemes = pelab.schemes()
    assert schemes["dynamic_position_bias_py"]["options"]["depth"]["range"] == "in [1, 16]", schemes["dynamic_position_bias_py"]


PER_LAYER = """import torch
import pelab


class PerLayerDecay(pelab.Scheme):
    name = "per_layer_decay"
    description = "a learned decay rate of |query - key| per head and layer"
    relative = True

    def __init__(self, context, options):
        super().__init__(context, options)
        # a parameter for the blocks this scheme serves only (encoding_mix gives the others away)
        self.rates = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.full((context.num_heads,), 0.1 * (layer + 1))) for layer in range(context.num_layers)
             if context.serves(layer)])
        self.index = {layer: i for i, layer in enumerate(l for l in range(context.num_layers) if context.serves(l))}

    def score_bias(self, q, k, attention):
        distance = pelab.offsets(attention.positions).to(q.dtype).abs()[:, None]  # (B'|1, 1, Tq, Tk)
        return -self.rates[self.index[attention.layer]].view(1, -1, 1, 1) * distance
"""


def test_per_layer_parameters_mixes_and_real_positions():
    path = write("per_layer.py", PER_LAYER)
    cfg = tiny({"name": "per_layer_decay"}, train={"steps": 20, "batch_size": 16, "min_length": 1, "max_length": 8})
    cfg["schemes"] = [path]
    cfg["model"]["num_layers"] = 4
    run = pelab.load(pelab.train(cfg, out="per_layer", quiet=True))
    assert [n for n in run.state_dict() if n.startswith("position_encoding.")] == \
        [f"position_encoding.rates.{i}" for i in range(4)], list(run.state_dict())
    # encoding_mix: RoPE on every second block, the Python scheme (and its parameters) on the others
    mixed = dict(cfg, encoding_mix={"name": "rope", "every": 2})
    names = [n for n in pelab.load(pelab.train(mixed, out="mixed", quiet=True)).state_dict() if "rates" in n]
    assert len(names) == 2, names
    # real-valued positions reach the hooks as float64
    real = dict(cfg, positions={"sampler": "random_float", "max_length": 64})
    frame = pelab.load(pelab.train(real, out="real", quiet=True)).evaluate(lengths=[8])
    assert frame["per_token_accuracy"].notna().all(), frame
    # pelab.check_scheme from Python: every property holds, bidirectional and causal
    table = pelab.check_scheme("per_layer_decay", schemes=[path])
    assert set(table["causal"]) == {False, True} and table["passed"].all(), table
    assert "a gradient for every parameter" in set(table["property"]), table


def expect_error(cfg, *fragments, kind=None):
    try:
        pelab.train(cfg, out="error_run", quiet=True)
    except Exception as error:  # noqa: BLE001
        text = str(error)
        for fragment in fragments:
            assert fragment in text, f"{fragment!r} not in: {text}"
        assert "\n" not in text.strip(), f"not one line: {text}"
        if kind is not None:
            assert isinstance(error, kind), (type(error), text)
        return text
    raise AssertionError(f"no error for {fragments}")


def write(name, text):
    with open(name, "w") as f:
        f.write(text)
    return os.path.abspath(name)


def test_errors_a_user_will_make():
    header = "import torch\nimport pelab\n\n"
    wrong_shape = write("wrong_shape.py", header + "class Wrong(pelab.Scheme):\n    name = 'wrong_shape'\n\n"
                        "    def score_bias(self, q, k, attention):\n        return torch.zeros(q.size(2), q.size(2))\n")
    text = expect_error(tiny({"name": "wrong_shape"}, [wrong_shape]), "python scheme 'wrong_shape': score_bias",
                        f"{wrong_shape}:7", "returned shape", "expected (B|1, H|1, Tq, Tk)")
    print("  wrong shape:", text)
    raising = write("raising.py", header + "class Raising(pelab.Scheme):\n    name = 'raising'\n\n"
                    "    def rotate(self, q, k, attention):\n        return q / 0 + undefined_name, k\n")
    text = expect_error(tiny({"name": "raising"}, [raising]), "python scheme 'raising': rotate",
                        "NameError: name 'undefined_name' is not defined", f"rotate ({raising}:7)", f"at {raising}:8")
    print("  exception:", text)
    syntax = write("syntax.py", header + "class Broken(pelab.Scheme)\n    name = 'broken'\n")
    text = expect_error(tiny({"name": "broken"}, [syntax]), f"{syntax}:4:", "SyntaxError", kind=pelab.ConfigError)
    print("  syntax error:", text)
    expect_error(tiny({"name": "x"}, ["missing.py"]), "schemes:", "missing.py does not exist", kind=pelab.ConfigError)
    clash = write("clash.py", header + "class Rope(pelab.Scheme):\n    pass\n")
    text = expect_error(tiny({"name": "rope"}, [clash]), "class Rope is named 'rope', a built-in scheme's",
                        kind=pelab.ConfigError)
    print("  clash:", text)
    none = write("nothing.py", header + "x = 1\n")
    expect_error(tiny({"name": "x"}, [none]), "defines no subclass of pelab.Scheme", kind=pelab.ConfigError)
    text = expect_error(tiny({"name": "dynamic_position_bias", "depth": 40}, ["dynamic_position_bias.py"]),
                        "encoding.depth", "out of range", kind=pelab.ConfigError)
    print("  option out of range:", text)


def main():
    for name, test in list(globals().items()):
        if name.startswith("test_") and callable(test):
            print(name)
            test()
    print("python schemes: all passed")


if __name__ == "__main__":
    main()
