"""The Python example schemes against their peers (tests/peers/README.md): run by Debian's
Python with pelab (its torch 1.13), on the fixtures that make_scheme_fixtures.py wrote in the
peer environment. examples/schemes/dynamic_position_bias.py against x-transformers'
DynamicPositionBias: the bias and the MLP's gradients to 1e-5 of the largest magnitude.
    /usr/bin/python3 tests/peers/python_scheme_peers.py SOURCE_DIR FIXTURES_DIR
"""
import importlib.util
import os
import sys

import h5py
import torch

import pelab
from pelab.scheme import Attention, Context, Positions

source_dir, fixtures = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("dynamic_position_bias",
                                              os.path.join(source_dir, "examples/schemes/dynamic_position_bias.py"))
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


def relative_error(actual, expected):
    return float((actual.detach().double() - expected.double()).abs().max() / expected.abs().max())


with h5py.File(os.path.join(fixtures, "python_schemes.h5"), "r") as f:
    g = f["xt_dynamic_position_bias"]
    expected = torch.from_numpy(g["output"][:])  # (H, T, T)
    H, T = expected.shape[0], expected.shape[1]
    scheme = example.DynamicPositionBias(Context(8 * H, H, 1, False, "dynamic_position_bias_py", []),
                                         {"width": 16, "depth": 2, "log_distance": True})
    own = dict(scheme.named_parameters())
    assert sorted(own) == sorted(g["params"]), (sorted(own), sorted(g["params"]))
    with torch.no_grad():
        for name in g["params"]:
            own[name].copy_(torch.from_numpy(g["params"][name][:]))
    positions = torch.arange(T)[None]
    q = torch.zeros(1, H, T, 8)
    bias = scheme.score_bias(q, q, Attention(Positions(positions, positions), 0, False, None, None, None))[0]
    error = relative_error(bias, expected)
    assert error < 1e-5, f"bias: {error}"
    (bias * torch.from_numpy(g["cotangent"][:])).sum().backward()
    for name in g["grads"]:
        grad_error = relative_error(own[name].grad, torch.from_numpy(g["grads"][name][:]))
        assert grad_error < 1e-5, f"gradient of {name}: {grad_error}"
        error = max(error, grad_error)
print(f"python scheme peers: all passed (largest relative error {error:.1e})")
