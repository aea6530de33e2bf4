"""Autoregressive linear dynamics in context: x_{t+1} = W x_t (Zheng et al., docs/papers.md §5).

Each sequence has its own W, drawn fresh: a complex diagonal unitary W = diag(e^{iθ_j}),
θ_j ~ U[0, 2π), or (the real variant, d even) a block-diagonal matrix of 2×2 rotations by
θ_k. The start x_1 is real: Gaussian N(0, σ²I), sparse ±c·e_j (j and the sign uniform), or
the all-ones vector. The sequence x_t = W^{t−1} x_1 is computed from the powers of W in
float64 (exact phases, no accumulated rounding) and then cast to the requested precision.

An :class:`Episode` of this task holds the whole sequence x_1..x_T as ``xs`` (B, T, d) and has
no labels or queries: the target of step t is the next element x_{t+1}
(:class:`iclab.prompts.AutoregressiveFormat` builds tokens and targets). ``truth["theta"]``
holds the angles.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..config import ConfigError
from .base import Episode

STARTS = ("gaussian", "sparse", "ones")
ROTATIONS = ("complex", "real")


@dataclass(frozen=True)
class StartDistribution:
    """The law of the real start x_1 ∈ R^d.

    Args:
        kind: ``"gaussian"`` (N(0, scale²I)), ``"sparse"`` (±scale·e_j) or ``"ones"`` (all ones;
            ``scale`` multiplies it).
        scale: σ or c.
    """

    kind: str = "gaussian"
    scale: float = 1.0

    def __post_init__(self):
        if self.kind not in STARTS:
            raise ConfigError(f"start must be one of {STARTS}, got {self.kind!r}")
        if not self.scale > 0:
            raise ConfigError(f"the start's scale must be > 0, got {self.scale}")

    def sample(self, batch: int, d: int, generator: torch.Generator) -> torch.Tensor:
        """``(batch, d)`` float64 starts."""
        device = generator.device
        if self.kind == "gaussian":
            return self.scale * torch.randn(batch, d, generator=generator, device=device, dtype=torch.float64)
        if self.kind == "ones":
            return torch.full((batch, d), self.scale, device=device, dtype=torch.float64)
        j = torch.randint(d, (batch,), generator=generator, device=device)
        sign = 2.0 * torch.randint(2, (batch,), generator=generator, device=device) - 1.0
        x = torch.zeros(batch, d, device=device, dtype=torch.float64)
        return x.scatter_(1, j[:, None], (self.scale * sign[:, None]).double())

    def abs_moment(self, k: int, d: int) -> float:
        """E|x_j|^k of one coordinate (the same for every j), k even."""
        s = self.scale**k
        if self.kind == "gaussian":
            return s * math.prod(range(k - 1, 0, -2))  # (k − 1)!! σ^k
        return s / d if self.kind == "sparse" else s

    def cross_moment(self, p: int, q: int, d: int) -> float:
        """E|x_j|^p |x_k|^q for two different coordinates j ≠ k (p, q even)."""
        if self.kind == "sparse":
            return 0.0  # only one coordinate is non-zero
        if self.kind == "ones":
            return self.scale ** (p + q)
        return self.abs_moment(p, d) * self.abs_moment(q, d)


@dataclass(frozen=True)
class AutoregressiveSequences:
    """Sequences x_{t+1} = W x_t with a fresh rotation W per sequence.

    Args:
        d: dimension of x (even for ``rotation="real"``).
        length: T, the number of elements x_1..x_T.
        start: the law of x_1.
        rotation: ``"complex"`` (diagonal unitary, complex sequences) or ``"real"``
            (block-diagonal 2×2 rotations, real sequences).
    """

    d: int = 5
    length: int = 100
    start: StartDistribution = StartDistribution()
    rotation: str = "complex"

    def __post_init__(self):
        if self.d < 1 or self.length < 3:
            raise ConfigError(f"need d >= 1 and length >= 3, got d={self.d}, length={self.length}")
        if self.rotation not in ROTATIONS:
            raise ConfigError(f"rotation must be one of {ROTATIONS}, got {self.rotation!r}")
        if self.rotation == "real" and self.d % 2:
            raise ConfigError(f"the real (2×2 block) rotation needs an even d, got {self.d}")

    def sample(self, batch: int, generator: torch.Generator, dtype=torch.float32) -> Episode:
        """Draw ``batch`` sequences; complex tensors (complex64 for float32) unless real rotation."""
        device = generator.device
        n_angles = self.d if self.rotation == "complex" else self.d // 2
        theta = 2 * math.pi * torch.rand(batch, n_angles, generator=generator, device=device, dtype=torch.float64)
        x1 = self.start.sample(batch, self.d, generator)
        angle = theta[:, None, :] * torch.arange(self.length, device=device, dtype=torch.float64)[None, :, None]
        if self.rotation == "complex":
            xs = torch.polar(torch.ones_like(angle), angle) * x1[:, None, :]
            xs = xs.to(torch.complex64 if dtype == torch.float32 else torch.complex128)
        else:
            # Block k rotates the pair (x_{2k}, x_{2k+1}) by θ_k per step.
            u, v = x1[:, None, 0::2], x1[:, None, 1::2]
            cos, sin = angle.cos(), angle.sin()
            xs = torch.stack([cos * u - sin * v, sin * u + cos * v], dim=-1).flatten(2).to(dtype)
        empty = xs.new_zeros(batch, 0)
        return Episode(xs, empty, xs.new_zeros(batch, 0, self.d), empty, truth={"theta": theta.to(dtype)})

    def transition(self, theta: torch.Tensor) -> torch.Tensor:
        """The matrices W, ``(B, d, d)``, for angles from ``truth["theta"]`` (float64/complex128)."""
        theta = theta.double()
        if self.rotation == "complex":
            return torch.diag_embed(torch.polar(torch.ones_like(theta), theta))
        cos, sin = theta.cos(), theta.sin()
        blocks = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
        return _block_diag(blocks)


def _block_diag(blocks: torch.Tensor) -> torch.Tensor:
    """(B, K, 2, 2) blocks → (B, 2K, 2K) block-diagonal matrices."""
    b, k = blocks.shape[:2]
    out = blocks.new_zeros(b, k, 2, k, 2)
    index = torch.arange(k)
    out[:, index, :, index, :] = blocks.transpose(0, 1)
    return out.reshape(b, 2 * k, 2 * k)


def autoregressive_from_config(cfg: Mapping[str, Any]) -> AutoregressiveSequences:
    """Build the task from a config section: ``d``, ``length``, ``start``, ``scale``, ``rotation``."""
    d, length = cfg["d"], cfg["length"]
    if not isinstance(d, int) or not isinstance(length, int):
        raise ConfigError(f"task.d and task.length must be integers, got {d!r}, {length!r}")
    start = StartDistribution(cfg.get("start", "gaussian"), float(cfg.get("scale", 1.0)))
    return AutoregressiveSequences(d, length, start, cfg.get("rotation", "complex"))
