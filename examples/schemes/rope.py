"""RoPE (Su et al. 2021) written in Python: the built-in `rope` with its default options
(interleaved pairs, base 10000, the whole head rotated). tests/python_schemes.py checks that the
same seed gives the built-in's losses, maps and gradients."""
import torch

import pelab


class PyRope(pelab.Scheme):
    name = "py_rope"
    description = "RoPE in Python (examples/schemes/rope.py): q and k rotated by position, interleaved pairs"
    relative = True
    options = {"base": pelab.option(10000.0, "wavelength base", min=1.0, max=1e12)}

    def rotated(self, x, positions):
        # x: (B, H, T, Dh); positions: (B, T) -> (B, H, T, Dh)
        R = x.size(-1)
        inverse_frequencies = self.config["base"] ** (-torch.arange(0, R, 2, dtype=torch.float64, device=x.device) / R)
        angles = (pelab.rows(positions).to(torch.float64)[..., None] * inverse_frequencies).to(torch.float32)
        cos, sin = angles.cos()[:, None].to(x.dtype), angles.sin()[:, None].to(x.dtype)  # (B'|1, 1, T, R/2)
        pairs = x.unflatten(-1, (R // 2, 2))  # (B, H, T, R/2, 2)
        x1, x2 = pairs[..., 0], pairs[..., 1]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)

    def rotate(self, q, k, attention):
        # q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> the same
        return self.rotated(q, attention.positions.query), self.rotated(k, attention.positions.key)
