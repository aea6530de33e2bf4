"""Sine-wave regression in context: y = a·sin(x + φ) (the non-linear task of von Oswald et al. 2023).

The amplitude a, phase φ and inputs x are uniform on their ranges (the MAML-style defaults:
a ∈ [0.1, 5], φ ∈ [0, π], x ∈ [−5, 5]); inputs are one-dimensional.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import ConfigError
from .base import Episode


@dataclass
class SineRegression:
    """Prompts of a random sine wave; ``truth`` holds ``amplitude`` and ``phase`` (B,)."""

    n_context: int
    n_query: int = 1
    amplitude: tuple[float, float] = (0.1, 5.0)
    phase: tuple[float, float] = (0.0, torch.pi)
    x_range: tuple[float, float] = (-5.0, 5.0)

    def __post_init__(self):
        if self.n_context < 1 or self.n_query < 1:
            raise ConfigError(f"need n_context >= 1 and n_query >= 1, got {self.n_context}, {self.n_query}")
        for name in ("amplitude", "phase", "x_range"):
            low, high = getattr(self, name)
            if not high >= low:
                raise ConfigError(f"sine {name} range must have high >= low, got {(low, high)}")

    d = 1  # input dimension

    def sample(self, batch: int, generator: torch.Generator, dtype=torch.float32) -> Episode:
        """Draw ``batch`` prompts; pure given the generator."""

        def uniform(shape, bounds):
            u = torch.rand(shape, generator=generator, device=generator.device, dtype=dtype)
            return bounds[0] + (bounds[1] - bounds[0]) * u

        n = self.n_context
        amplitude, phase = uniform((batch, 1), self.amplitude), uniform((batch, 1), self.phase)
        x = uniform((batch, n + self.n_query), self.x_range)
        y = amplitude * torch.sin(x + phase)
        x = x[..., None]
        return Episode(
            x[:, :n], y[:, :n], x[:, n:], y[:, n:], truth={"amplitude": amplitude[:, 0], "phase": phase[:, 0]}
        )
