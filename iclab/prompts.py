"""Prompt formats: how an Episode becomes the token matrix a model reads.

Models never see Task objects, only a :class:`Prompt`. Tokens are stored as rows,
``tokens[b, t]`` is token t of prompt b (the papers write them as columns of E).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from .config import ConfigError
from .tasks.base import Episode, TokenBatch


class Prompt(NamedTuple):
    """Model input and target.

    Attributes:
        tokens: ``(B, T, D)`` token rows.
        targets: what the model's predictions are compared with (``(B, Q)`` for paired prompts,
            ``(B, N)`` for interleaved ones).
        n_context: the number of context examples (paired prompts: the first ``n_context`` tokens
            are the context, the rest are queries; interleaved: ``2·n_context`` tokens).
    """

    tokens: torch.Tensor
    targets: torch.Tensor
    n_context: int


@dataclass(frozen=True)
class PairedFormat:
    """Paired columns: context token z_i = [x_i; c; y_i], query token [x_q; c; 0].

    Row order (a contract): the d input rows, then the optional descriptor rows c, then the
    label row last. ``descriptor`` names an entry of ``episode.truth`` (e.g. ``"mu"``) that is
    appended to every token, or is None for the plain format [x; y].
    """

    descriptor: str | None = None

    def token_dim(self, episode: Episode) -> int:
        """D, the number of rows of a token for this episode."""
        extra = 0 if self.descriptor is None else episode.truth[self.descriptor].shape[-1]
        return episode.dim + extra + 1

    def encode(self, episode: Episode) -> Prompt:
        """Build the ``(B, N + Q, D)`` tokens; the queries' label rows are zero."""
        x = torch.cat([episode.xs, episode.x_query], dim=1)
        y = torch.cat([episode.ys, torch.zeros_like(episode.y_query)], dim=1)
        rows = [x]
        if self.descriptor is not None:
            c = episode.truth[self.descriptor]
            rows.append(c[:, None, :].expand(-1, x.shape[1], -1))
        rows.append(y[..., None])
        return Prompt(torch.cat(rows, dim=-1), episode.y_query, episode.n_context)


@dataclass(frozen=True)
class InterleavedFormat:
    """Interleaved x and y tokens, read as a causal sequence (Garg et al.; Akyürek et al.).

    Layout (a contract): ``2N`` tokens of size D = d + 1,

        token 2i     = [x_{i+1}; 0]      (the x token of example i + 1)
        token 2i + 1 = [0_d; y_{i+1}]    (its y token)

    so the d input rows come first and the label row last, as in :class:`PairedFormat`. A causal
    model predicts y_{i+1} at token 2i from tokens ≤ 2i, i.e. from the first i examples and
    x_{i+1}; ``targets`` are the context labels ``ys`` ``(B, N)`` and ``n_context`` is N.
    The episode's queries are not used: every example is a query for the prefix before it.
    """

    def token_dim(self, episode: Episode) -> int:
        """D = d + 1."""
        return episode.dim + 1

    def encode(self, episode: Episode) -> Prompt:
        """Build the ``(B, 2N, d + 1)`` tokens."""
        xs, ys = episode.xs, episode.ys
        x_tokens = torch.cat([xs, torch.zeros_like(ys)[..., None]], dim=-1)
        y_tokens = torch.cat([torch.zeros_like(xs), ys[..., None]], dim=-1)
        tokens = torch.stack([x_tokens, y_tokens], dim=2).flatten(1, 2)
        return Prompt(tokens, ys, episode.n_context)


@dataclass(frozen=True)
class AutoregressiveFormat:
    """Autoregressive tokens e_t = [x_t; x_{t−1}] with x_0 = 0 (Zheng et al.).

    Row order (a contract): the d rows of x_t, then the d rows of x_{t−1}. For a sequence
    x_1..x_T (``episode.xs``) the tokens are e_1..e_{T−1} (the last element has no successor
    to predict), ``(B, T − 1, 2d)``; the targets are x_3..x_T, ``(B, T − 2, d)``: token t ≥ 2
    predicts x_{t+1} (token 1 makes no prediction: its normalisation 1/(t − 1) is undefined).
    ``n_context`` is the number of tokens.
    """

    def encode(self, episode: Episode) -> Prompt:
        xs = episode.xs
        previous = torch.cat([torch.zeros_like(xs[:, :1]), xs[:, :-1]], dim=1)
        tokens = torch.cat([xs, previous], dim=-1)[:, :-1]
        return Prompt(tokens, xs[:, 2:], tokens.shape[1])

    def sequences(self, prompt: Prompt) -> torch.Tensor:
        """The sequences x_1..x_T ``(B, T, d)`` back from a prompt of :meth:`encode` (the tokens hold
        x_1..x_{T−1}, the last target x_T)."""
        d = prompt.targets.shape[-1]
        return torch.cat([prompt.tokens[..., :d], prompt.targets[:, -1:]], dim=1)


@dataclass(frozen=True)
class TokenFormat:
    """Token ids read as they are: a :class:`iclab.tasks.base.TokenBatch` becomes
    ``Prompt(tokens (B, T), targets (B, Q), n_context = T)`` (a model embeds the ids itself)."""

    def encode(self, batch: TokenBatch) -> Prompt:
        return Prompt(batch.tokens, batch.targets, batch.tokens.shape[1])


FORMATS = {f.__name__: f for f in (PairedFormat, InterleavedFormat, AutoregressiveFormat, TokenFormat)}
"""The prompt formats by class name (what :func:`describe_format` records)."""


def describe_format(prompt_format) -> dict:
    """``{"class": name, **fields}`` of a prompt format, e.g. ``{"class": "PairedFormat", "descriptor": "mu"}``."""
    fields = dataclasses.asdict(prompt_format) if dataclasses.is_dataclass(prompt_format) else {}
    return {"class": type(prompt_format).__name__, **fields}


def format_from_description(description: Mapping[str, Any]):
    """The prompt format :func:`describe_format` described."""
    fields = dict(description)
    name = fields.pop("class", None)
    if name not in FORMATS:
        raise ConfigError(f"unknown prompt format {name!r}; choose from {', '.join(FORMATS)}")
    return FORMATS[name](**fields)
