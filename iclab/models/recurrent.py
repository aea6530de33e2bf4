"""Recurrent baselines on token sequences (Boix-Adserà et al., docs/papers.md §6): an RNN or an LSTM over token
embeddings."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..config import ConfigError
from .registry import rebuildable

CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM}
"""The recurrent layers a :class:`RecurrentReader` can stack: an Elman RNN (tanh) or an LSTM."""


@rebuildable
class RecurrentReader(nn.Module):
    """A stack of ``torch.nn.RNN`` or ``torch.nn.LSTM`` layers over token embeddings, read after the last token.

    The tokens' embeddings (N(0, 1) rows, as ``nn.Embedding``'s) run through ``layers`` recurrent layers of ``width``
    units; the last position's top hidden state is read by a LayerNorm without affine and a linear map, the read-out
    of the transformers it is compared with. A symbol never seen in training keeps its random embedding row.
    ``torch.nn.RNN`` and ``LSTM`` have no ``vmap`` batching rule: seeds of this model train one after another.

    Args:
        vocab_size: V, the number of token ids.
        width: the embedding width and every layer's hidden units.
        layers: the number of stacked recurrent layers.
        cell: ``"rnn"`` or ``"lstm"`` (:data:`CELLS`).
        generator: initialisation stream; every recurrent and read-out weight is uniform on ±1/√width, as PyTorch
            initialises them.

    Parameter names: ``embedding``, ``recurrent`` (``torch.nn.RNN``'s ``weight_ih_l{k}``, ...), ``read_out``.
    """

    def __init__(
        self,
        vocab_size: int,
        width: int = 256,
        layers: int = 2,
        cell: str = "rnn",
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if cell not in CELLS:
            raise ConfigError(f"unknown recurrent cell {cell!r}; choose from {', '.join(CELLS)}")
        if min(vocab_size, width, layers) < 1:
            raise ConfigError(f"a recurrent model needs positive sizes, got width={width}, layers={layers}")
        self.embedding = nn.Embedding(vocab_size, width)
        self.recurrent = CELLS[cell](width, width, num_layers=layers, batch_first=True)
        self.ln_out = nn.LayerNorm(width, elementwise_affine=False)
        self.read_out = nn.Linear(width, 1)
        bound = 1 / math.sqrt(width)
        with torch.no_grad():
            nn.init.normal_(self.embedding.weight, generator=generator)
            for p in (*self.recurrent.parameters(), *self.read_out.parameters()):
                nn.init.uniform_(p, -bound, bound, generator=generator)

    def forward(self, tokens: torch.Tensor, n_context: int | None = None) -> torch.Tensor:
        """Predictions ``(B, 1)`` from token ids ``(B, L)`` (``n_context`` is unused)."""
        return self.read_out(self.features(tokens))

    def features(self, tokens: torch.Tensor) -> torch.Tensor:
        """The read-out's input ``(B, width)``: the top layer's state after the last token, layer-normalised."""
        states, _ = self.recurrent(self.embedding(tokens))  # (B, L, width): the top layer at every position
        return self.ln_out(states[:, -1])
