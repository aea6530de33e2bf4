"""Batches of problems with their hidden truth: the :class:`Episode` of real-valued in-context
examples, and the :class:`TokenBatch` of token-id sequences."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import torch


class Batched:
    """Tensor fields plus a ``truth`` dict of tensors, all batched along dimension 0."""

    def map(self, fn):
        """Apply ``fn`` to every tensor (e.g. ``lambda t: t.double()``)."""
        tensors = {f.name: fn(getattr(self, f.name)) for f in fields(self) if f.name != "truth"}
        return replace(self, **tensors, truth={k: fn(v) for k, v in self.truth.items()})

    def to(self, device=None, dtype=None):
        """Move every tensor to ``device`` and/or floating tensors to ``dtype``."""
        return self.map(lambda t: t.to(device=device, dtype=dtype if t.is_floating_point() else None))

    def __getitem__(self, index):
        """Select prompts along the batch dimension."""
        return self.map(lambda t: t[index])


@dataclass(frozen=True)
class Episode(Batched):
    """A batch of B prompts, each with N context examples and Q queries.

    Attributes:
        xs: context inputs, ``(B, N, d)``.
        ys: context labels, ``(B, N)``.
        x_query: query inputs, ``(B, Q, d)``.
        y_query: query labels, ``(B, Q)`` (what a model should predict).
        truth: the hidden task parameters for analysis, e.g. ``{"w": (B, d), "mu": (B, d)}``.
    """

    xs: torch.Tensor
    ys: torch.Tensor
    x_query: torch.Tensor
    y_query: torch.Tensor
    truth: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        return self.xs.shape[0]

    @property
    def n_context(self) -> int:
        return self.xs.shape[1]

    @property
    def dim(self) -> int:
        return self.xs.shape[2]

    @staticmethod
    def cat(episodes: list[Episode]) -> Episode:
        """Concatenate episodes along the batch dimension."""
        first = episodes[0]
        tensors = {
            f.name: torch.cat([getattr(e, f.name) for e in episodes]) for f in fields(first) if f.name != "truth"
        }
        truth = {k: torch.cat([e.truth[k] for e in episodes]) for k in first.truth}
        return Episode(**tensors, truth=truth)


@dataclass(frozen=True)
class TokenBatch(Batched):
    """A batch of B sequences of token ids with what a model should predict from them.

    Attributes:
        tokens: token ids ``(B, T)`` (long).
        targets: ``(B, Q)``: real labels (float) or token ids (long), e.g. one label per
            sequence (Q = 1) or the next token at every position (Q = T).
        truth: the hidden structure for analysis, e.g. ``{"template": (B,)}``.
    """

    tokens: torch.Tensor
    targets: torch.Tensor
    truth: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        return self.tokens.shape[0]
