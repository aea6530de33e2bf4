"""Out-of-distribution prompts (Garg et al., NeurIPS 2022, §4; their ``eval.py`` and ``samplers.py``).

A shift maps a task's episode to another, applied at evaluation only:
``shift(episode, task, generator) -> Episode``. The shifted episode asks one query per prefix:
``x_query[:, k]`` is to be predicted from the first k context examples, k = 0…K−1 (K ≤ N), and
``y_query[:, k]`` is its label. Shifts that keep every example as the query of the prefix before
it return ``x_query = xs`` (the usual prefix evaluation). Labels of moved or new inputs are drawn
with ``task.labels`` and the episode's ``truth``, so the function stays the prompt's own and the
labels keep the task's noise (or its signs, for classification); an example shown again keeps its label.

The shifts by name (what the shifted prompt is):

- ``standard``: none
- ``skewed``: x ← Tx, T = U diag(λ) Uᵀ √(d / Σλ²), λ_i = 1/i, U a random rotation (one per evaluation):
  covariance eigenvalues ∝ 1/i², trace d
- ``subspace``: the same with λ = 1 on ⌊d/2⌋ directions, 0 on the rest: x in a random ⌊d/2⌋-dimensional
  subspace, E‖x‖² = d
- ``scale-x=s``: x ← s·x (labels follow)
- ``scale-y=s``: y ← s·y
- ``noisy``: y ← c·(y + σε), ε ~ N(0, 1), σ = 1, c = √(E[y²] / (E[y²] + σ²)) (Garg et al. rescale by the
  batch's empirical std; we by its expectation)
- ``random-orthants``: context x_i ← |x_i| ⊙ s with one random sign vector s per prompt (all in one orthant); the
  query after k examples is the unshifted x_{k+1}, in a random orthant
- ``orthogonal``: the query after k < d examples is x_{k+1} minus its projection on the span of x_1…x_k, rescaled
  to ‖x_{k+1}‖ (K = min(N, d))
- ``overlapping``: the query after k ≥ 1 examples is a copy of one of them, chosen uniformly, label and all
- ``duplicated``: every context example is shown twice in a row (x_1, x_1, x_2, x_2, …); the query after k
  examples is a fresh input (ours: not among Garg et al.'s)

``error_scale`` is the factor a shift applies to the zero predictor's expected error (s² for the
scalings, 1 otherwise): Garg et al.'s figures draw the trivial level there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .config import ConfigError
from .tasks.base import Episode


class Shift:
    """A named transform of evaluation prompts (see the module docstring)."""

    name = "shift"
    error_scale = 1.0

    def __call__(self, episode: Episode, task, generator: torch.Generator) -> Episode:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


def _as_prefix_queries(episode: Episode) -> Episode:
    """Every context example becomes the query of the prefix before it."""
    return replace(episode, x_query=episode.xs, y_query=episode.ys)


def _relabel(episode: Episode, task, xs: torch.Tensor, generator: torch.Generator) -> Episode:
    """Context inputs ``xs`` with labels drawn as the task draws them, as prefix queries."""
    return _as_prefix_queries(replace(episode, xs=xs, ys=task.labels(xs, episode.truth, generator)))


def _with_queries(episode: Episode, task, queries: torch.Tensor, generator: torch.Generator) -> Episode:
    """The episode's context with ``queries`` ``(B, K, d)`` (query k after k examples), labelled."""
    return replace(episode, x_query=queries, y_query=task.labels(queries, episode.truth, generator))


class Standard(Shift):
    name = "standard"

    def __call__(self, episode, task, generator):
        return _as_prefix_queries(episode)


class InputMap(Shift):
    """x ← Tx with T = U diag(λ) Uᵀ·√(d/Σλ²), U a random rotation (Garg et al.'s ``sample_transformation``);
    ``eigenvalues(d)`` gives λ."""

    def __init__(self, name: str, eigenvalues: Callable[[int], list[float]]):
        self.name, self.eigenvalues = name, eigenvalues

    def __call__(self, episode, task, generator):
        d = episode.dim
        lam = torch.as_tensor(self.eigenvalues(d), dtype=torch.float64)
        u, _ = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
        t = u @ torch.diag(lam) @ u.T * math.sqrt(d / lam.pow(2).sum())
        return _relabel(episode, task, episode.xs @ t.to(episode.xs), generator)


@dataclass(frozen=True, repr=False)
class ScaleInputs(Shift):
    scale: float

    @property
    def name(self) -> str:
        return f"scale-x={self.scale:g}"

    @property
    def error_scale(self) -> float:
        return self.scale**2

    def __call__(self, episode, task, generator):
        return _relabel(episode, task, self.scale * episode.xs, generator)


@dataclass(frozen=True, repr=False)
class ScaleLabels(Shift):
    scale: float

    @property
    def name(self) -> str:
        return f"scale-y={self.scale:g}"

    @property
    def error_scale(self) -> float:
        return self.scale**2

    def __call__(self, episode, task, generator):
        return _as_prefix_queries(replace(episode, ys=self.scale * episode.ys))


@dataclass(frozen=True, repr=False)
class NoisyLabels(Shift):
    noise: float = 1.0
    name = "noisy"

    def __call__(self, episode, task, generator):
        ys = episode.ys
        eps = torch.randn(ys.shape, generator=generator, dtype=ys.dtype).to(ys.device)
        scale = math.sqrt(task.zero_error / (task.zero_error + self.noise**2))
        return _as_prefix_queries(replace(episode, ys=scale * (ys + self.noise * eps)))


class RandomOrthants(Shift):
    name = "random-orthants"

    def __call__(self, episode, task, generator):
        xs = episode.xs
        signs = torch.randint(2, (len(xs), 1, xs.shape[2]), generator=generator).to(xs) * 2 - 1
        moved = _relabel(episode, task, xs.abs() * signs, generator)
        return replace(moved, x_query=xs, y_query=episode.ys)  # the unshifted examples, labels and all


class Orthogonal(Shift):
    name = "orthogonal"

    def __call__(self, episode, task, generator):
        xs = episode.xs
        k = min(episode.n_context, episode.dim)
        # Gram–Schmidt of x_1…x_K: column k of Q is x_{k+1}'s part orthogonal to x_1…x_k, over R_kk.
        q, r = torch.linalg.qr(xs[:, :k].transpose(1, 2))  # (B, d, K), (B, K, K)
        sign = torch.sign(r.diagonal(dim1=1, dim2=2))  # (B, K)
        queries = q.transpose(1, 2) * (sign * xs[:, :k].norm(dim=-1))[..., None]  # (B, K, d)
        return _with_queries(episode, task, queries, generator)


class Overlapping(Shift):
    name = "overlapping"

    def __call__(self, episode, task, generator):
        xs = episode.xs
        n = episode.n_context
        earlier = (torch.rand(len(xs), n, generator=generator, dtype=torch.float64) * torch.arange(n)).long()
        earlier[:, 0] = 0  # no earlier example: x_1 itself, as Garg et al.
        earlier = earlier.to(xs.device)
        queries = xs.gather(1, earlier[..., None].expand(-1, -1, xs.shape[2]))
        return replace(episode, x_query=queries, y_query=episode.ys.gather(1, earlier))  # shown again: its label


class Duplicated(Shift):
    name = "duplicated"

    def __call__(self, episode, task, generator):
        xs, n = episode.xs, episode.n_context
        doubled = replace(  # an example shown twice is the same example: its label too
            episode, xs=xs.repeat_interleave(2, dim=1)[:, :n], ys=episode.ys.repeat_interleave(2, dim=1)[:, :n]
        )
        fresh = torch.randn(xs.shape, generator=generator, dtype=xs.dtype).to(xs.device)
        return _with_queries(doubled, task, fresh, generator)


def _skewed(d: int) -> list[float]:
    return [1 / (i + 1) for i in range(d)]


def _half(d: int) -> list[float]:
    return [1.0 if i < d // 2 else 0.0 for i in range(d)]


NAMES = ("standard", "skewed", "subspace", "noisy", "random-orthants", "orthogonal", "overlapping", "duplicated")
"""The fixed shifts; ``scale-x=s`` and ``scale-y=s`` take any s > 0."""


def shift(name: str) -> Shift:
    """The shift called ``name`` (one of :data:`NAMES`, or ``scale-x=s`` / ``scale-y=s``)."""
    fixed = {
        "standard": Standard,
        "skewed": lambda: InputMap("skewed", _skewed),
        "subspace": lambda: InputMap("subspace", _half),
        "noisy": NoisyLabels,
        "random-orthants": RandomOrthants,
        "orthogonal": Orthogonal,
        "overlapping": Overlapping,
        "duplicated": Duplicated,
    }
    if name in fixed:
        return fixed[name]()
    kind, _, value = name.partition("=")
    if kind in ("scale-x", "scale-y"):
        try:
            scale = float(value)
        except ValueError:
            scale = float("nan")
        if scale > 0:
            return ScaleInputs(scale) if kind == "scale-x" else ScaleLabels(scale)
    raise ConfigError(f"unknown shift {name!r}; choose from {', '.join(NAMES)}, scale-x=<s> or scale-y=<s>")
