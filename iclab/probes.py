"""Probes: what a trained model's hidden states encode (Akyürek et al. 2023, §5).

For every layer's hidden states and every target, one probe reads a prompt's hidden states
``(T, W)``, pools them over positions with learned scores (one softmax over the T positions per
prefix length n, independent of the content) and maps the pooled state through a head, linear
or a 2-layer GELU MLP, to the target after n examples (n = 1…N). Akyürek et al. apply a linear map
before pooling; pooling first gives the same probe (the weights sum to 1) and the map composes
with the head's first linear layer, so it is left out.

Targets (:func:`probe_targets`) are the moments Xᵀy and the minimum-norm least-squares weights
w_OLS after n examples. They are standardised per prefix and coordinate with the training
prompts' mean and spread, so every n weighs alike in the loss and the score. Probes are trained
on one set of prompts and scored on held-out prompts (:func:`score`): R² = 1 − SSE/SST in
standardised units, and the mean squared error per coordinate in the target's own units.

All S × K probes (S hidden states, K targets) train together as one module with stacked
parameters: they share no parameter, so Adam trains each as if alone. This module reads a
model's residual stream (its named activations, :mod:`iclab.models.activations`); models never import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from .learners import LeastSquares
from .models import rebuildable
from .models.activations import residual_stream
from .prompts import InterleavedFormat, Prompt
from .rng import generator
from .tasks.base import Episode

TARGETS = ("xty", "w_ols")
"""Probe targets: ``xty`` = Σ_{i≤n} y_i x_i, ``w_ols`` = the minimum-norm OLS weights of the first n examples."""


def probe_targets(episode: Episode) -> torch.Tensor:
    """``(B, K, N, d)`` float64: the :data:`TARGETS` after n = 1…N examples of each prompt."""
    e = episode.to(dtype=torch.float64)
    xty = torch.cumsum(e.ys[..., None] * e.xs, dim=1)  # (B, N, d)
    w_ols = torch.stack([LeastSquares().weights(e.xs[:, :n], e.ys[:, :n]) for n in range(1, e.xs.shape[1] + 1)], 1)
    return torch.stack([xty, w_ols], dim=1).cpu()


def hidden_states(
    model: nn.Module, episode: Episode, prompt_format=InterleavedFormat(), chunk: int = 4096
) -> torch.Tensor:
    """``(B, L + 1, T, W)``: the model's residual stream after the read-in and after each of its L
    blocks (its :func:`~iclab.models.activations.residual_stream` activations)."""
    parameter = next(model.parameters())
    prompt = prompt_format.encode(episode.to(parameter.device, parameter.dtype))
    n_layers = sum(name.endswith(".hook_resid_post") for name in model.activation_names())
    names = residual_stream(n_layers)
    out = []
    with torch.no_grad():
        for i in range(0, len(prompt.tokens), chunk):
            _, found = model(prompt.tokens[i : i + chunk], prompt.n_context, activations=names)
            out.append(torch.stack([found[name] for name in names], dim=1).cpu())  # (b, L + 1, T, W)
    return torch.cat(out)


def standardise(targets: torch.Tensor, reference: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``targets (B, K, N, d)`` in units of ``reference``'s mean and spread per (target, n,
    coordinate); returns (standardised targets, mean, std)."""
    mean, std = reference.mean(0), reference.std(0).clamp_min(1e-8)
    return (targets - mean) / std, mean, std


@rebuildable
class PoolingProbes(nn.Module):
    """S × K independent attention-pooled probes (see the module docstring).

    ``forward(hidden (B, S, T, W)) -> (B, S, K, N, O)``: probe (s, k) reads hidden state s and
    predicts target k after n = 1…N examples. ``hidden_units`` None gives a linear head, an
    integer a 2-layer GELU MLP head of that width.
    """

    def __init__(
        self,
        n_states: int,
        n_targets: int,
        n_prefixes: int,
        seq_len: int,
        width: int,
        out_dim: int,
        hidden_units: int | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        shape = (n_states, n_targets)
        self.scores = nn.Parameter(torch.zeros(*shape, n_prefixes, seq_len))  # uniform pooling at the start
        sizes = [width, out_dim] if hidden_units is None else [width, hidden_units, out_dim]
        self.weights = nn.ParameterList(
            nn.Parameter(torch.randn(*shape, a, b, generator=generator) / math.sqrt(a))
            for a, b in zip(sizes, sizes[1:])
        )
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(*shape, b)) for b in sizes[1:])

    def forward(self, hidden: torch.Tensor, n_context: int | None = None) -> torch.Tensor:
        """Predictions ``(B, S, K, N, O)`` (``n_context`` is accepted for the training loop and unused)."""
        z = torch.einsum("sknt,bstw->bsknw", self.scores.softmax(-1), hidden)  # (B, S, K, N, W)
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            if i:
                z = nn.functional.gelu(z)
            z = torch.einsum("bsknw,skwo->bskno", z, weight) + bias[:, :, None]
        return z


class ProbeData:
    """Random minibatches of (hidden states, standardised targets) for :func:`iclab.train.train`:
    ``Prompt(tokens=hidden (b, S, T, W), targets=(b, S, K, N, O), n_context=N)``, drawn from the
    ``(seed, "probe-minibatch", step)`` stream."""

    def __init__(self, hidden: torch.Tensor, targets: torch.Tensor):
        self.hidden, self.targets = hidden, targets

    def batch(self, seed: int, step: int, device, batch_size: int) -> Prompt:
        index = torch.randint(len(self.hidden), (batch_size,), generator=generator(seed, "probe-minibatch", step))
        hidden, targets = self.hidden[index].to(device), self.targets[index].to(device)
        return Prompt(hidden, targets[:, None].expand(-1, hidden.shape[1], -1, -1, -1), targets.shape[2])


def score(
    probes: PoolingProbes, hidden: torch.Tensor, targets: torch.Tensor, std: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Held-out scores of every probe, each ``(S, K)``: ``r2`` = 1 − SSE/SST over prompts, prefixes and
    coordinates in standardised units (SST about the held-out mean), and ``mse`` = the mean squared
    error per coordinate in the target's units. ``targets (B, K, N, d)`` are standardised, ``std`` is
    their scale."""
    parameter = next(probes.parameters())
    with torch.no_grad():
        prediction = probes(hidden.to(parameter)).double().cpu()  # (B, S, K, N, d)
    error = prediction - targets[:, None]
    spread = (targets - targets.mean(0)).pow(2).sum((0, 2, 3))  # (K,)
    return {
        "r2": 1 - error.pow(2).sum((0, 3, 4)) / spread,
        "mse": (error * std).pow(2).mean((0, 3, 4)),
    }


@dataclass(frozen=True)
class ProbeSplits:
    """The prompts a model is probed on: a ``train`` split the probes fit and a ``test`` split they are scored
    on (:attr:`episodes`), with their :func:`probe_targets` standardised by the training split's mean and
    spread (:attr:`targets`, and that spread, :attr:`std`)."""

    episodes: dict[str, Episode]
    targets: dict[str, torch.Tensor]
    std: torch.Tensor

    @classmethod
    def draw(cls, task, train: int, test: int, seed: int) -> ProbeSplits:
        """``train`` and ``test`` prompts of ``task``, from the seed's ``probe-train`` and ``probe-test``
        streams."""
        sizes = {"train": train, "test": test}
        episodes = {name: task.sample(size, generator(seed, f"probe-{name}")) for name, size in sizes.items()}
        raw = {name: probe_targets(e) for name, e in episodes.items()}  # (B, K, N, d)
        _, mean, std = standardise(raw["train"], raw["train"])
        return cls(episodes, {name: (t - mean) / std for name, t in raw.items()}, std)

    def hidden(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Each split's :func:`hidden_states` of ``model``, ``(B, L + 1, T, W)``."""
        return {name: hidden_states(model, e) for name, e in self.episodes.items()}

    def data(self, hidden: dict[str, torch.Tensor]) -> ProbeData:
        """The training split's hidden states and targets, as the probes' training data."""
        return ProbeData(hidden["train"], self.targets["train"].float())

    def score(self, probes: PoolingProbes, hidden: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """:func:`score` on the test split."""
        return score(probes, hidden["test"], self.targets["test"], self.std)
