"""A learned feature map before linear self-attention (the non-linear setting of von Oswald et al.).

Token rows [x; y] become [φ(x); y] with φ an MLP applied to every token's input (the query's
too), then an LSA stack reads them. With ``train_attention=False`` the attention weights are
buffers, not parameters: set them first (e.g. with :func:`gd_construction`) and only φ trains,
which is "GD on learned features".
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from ..config import ConfigError
from .lsa import LinearSelfAttention
from .registry import rebuildable


@rebuildable
class MLP(nn.Sequential):
    """``depth`` hidden ReLU layers of ``width``, then a linear map to ``d_out`` (init from ``generator``)."""

    def __init__(self, d_in: int, width: int, d_out: int, depth: int = 2, generator: torch.Generator | None = None):
        if depth < 1 or width < 1 or d_out < 1:
            raise ConfigError(f"the MLP needs depth, width and output size >= 1, got {depth}, {width}, {d_out}")
        sizes = [d_in] + [width] * depth
        layers: list[nn.Module] = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        super().__init__(*layers, nn.Linear(sizes[-1], d_out))
        with torch.no_grad():
            for p in self.parameters():  # PyTorch's default scheme, drawn from our stream
                bound = 1 / (p.shape[-1] ** 0.5 if p.ndim == 2 else width**0.5)
                p.uniform_(-bound, bound, generator=generator)


@rebuildable
class FeatureLSA(nn.Module):
    """``attention([features(x); y])``: an MLP feature map on the inputs, then an LSA.

    The LSA's token size must be the feature size + 1. ``forward(tokens, n_context)`` takes
    paired tokens [x; y] and returns the LSA's predictions.
    """

    def __init__(self, features: nn.Module, attention: LinearSelfAttention, train_attention: bool = True):
        super().__init__()
        self.features, self.attention = features, attention
        if not train_attention:
            for layer in attention.layers:
                for name, p in list(layer.named_parameters(recurse=False)):
                    delattr(layer, name)
                    layer.register_buffer(name, p.detach().clone())

    def activation_names(self) -> list[str]:
        """The names ``forward(..., activations=...)`` takes: its LSA's."""
        return self.attention.activation_names()

    def forward(self, tokens: torch.Tensor, n_context: int, activations: Iterable[str] | None = None):
        """The LSA's predictions (with ``activations``, and its named activations) on [φ(x); y]."""
        h = torch.cat([self.features(tokens[..., :-1]), tokens[..., -1:]], dim=-1)  # (B, T, k + 1)
        return self.attention(h, n_context, activations)
