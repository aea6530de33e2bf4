"""Non-attention baselines on token sequences (Boix-Adserà et al., docs/papers.md §6).

(The module is not called ``mlp.py``: ``iclab.models.mlp`` is the feature-map function of
:mod:`iclab.models.features`, and a submodule of that name would replace it on the package.)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ConfigError
from .registry import rebuildable


@rebuildable
class OneHotMLP(nn.Module):
    """A ReLU MLP on the concatenated one-hot tokens, optionally also given the equality matrix.

    The first layer is a linear map of the concatenation [onehot(x_1); …; onehot(x_L)] (and,
    with ``equality``, of the L² entries 1[x_i = x_j]), stored as one weight row per (position,
    token) so that it is a lookup rather than a product with a (B, L·V) one-hot matrix. A
    token's rows get gradient only when it occurs, so the rows of symbols never seen in
    training keep their random initialisation, and since no weight is shared between positions
    the MLP cannot tell an unseen αβα from an unseen αβγ: it stays at chance on new symbols
    (the paper's theorem). The equality matrix breaks that symmetry.

    Args:
        vocab_size, length: V and the sequence length L.
        hidden: the hidden width.
        depth: the number of linear layers (≥ 2; the paper's "depth-3 MLP" has 3).
        equality: append the equality matrix to the input.
        generator: initialisation stream; every layer is initialised as ``nn.Linear`` does
            (uniform on ±1/√fan_in, fan_in = L·V (+ L²) for the first layer).

    Parameter names: ``embed`` (L·V, hidden), ``equality`` (L², hidden), ``bias``,
    ``layers.{i}``, ``read_out``.
    """

    def __init__(
        self,
        vocab_size: int,
        length: int,
        hidden: int = 256,
        depth: int = 3,
        equality: bool = False,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if min(vocab_size, length, hidden) < 1 or depth < 2:
            raise ConfigError(f"MLP needs positive sizes and depth >= 2, got hidden={hidden}, depth={depth}")
        self.vocab_size, self.length = vocab_size, length
        self.embed = nn.Parameter(torch.empty(length * vocab_size, hidden))
        self.equality = nn.Parameter(torch.empty(length * length, hidden)) if equality else None
        self.bias = nn.Parameter(torch.empty(hidden))
        self.layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(depth - 2))
        self.read_out = nn.Linear(hidden, 1)
        fan_in = length * vocab_size + (length * length if equality else 0)
        with torch.no_grad():
            for p in (self.embed, self.equality, self.bias):
                if p is not None:
                    nn.init.uniform_(p, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), generator=generator)
            for layer in (*self.layers, self.read_out):
                bound = 1 / math.sqrt(layer.in_features)
                for p in (layer.weight, layer.bias):
                    nn.init.uniform_(p, -bound, bound, generator=generator)

    def forward(self, tokens: torch.Tensor, n_context: int | None = None) -> torch.Tensor:
        """Predictions ``(B, 1)`` from token ids ``(B, L)`` (``n_context`` is unused)."""
        return self.read_out(self.features(tokens))

    def features(self, tokens: torch.Tensor) -> torch.Tensor:
        """The read-out's input ``(B, hidden)``: the last hidden layer after its ReLU."""
        rows = tokens + self.vocab_size * torch.arange(self.length, device=tokens.device)  # (B, L): row of (p, x_p)
        h = F.embedding(rows, self.embed).sum(1) + self.bias  # (B, hidden)
        if self.equality is not None:
            same = (tokens[:, :, None] == tokens[:, None, :]).flatten(1).to(h.dtype)  # (B, L²)
            h = h + same @ self.equality
        for layer in self.layers:
            h = layer(F.relu(h))
        return F.relu(h)
