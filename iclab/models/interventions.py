"""Interventions: write a model's named activations during a forward pass, not only read them.

Within ``with edited(model, {name: function})`` every forward pass of ``model`` (any iclab model that names its
activations, :mod:`iclab.models.activations`: a transformer's residual stream, attention scores, pattern, per-head
q, k, v and z, MLP output, …; an LSA's residual stream and attention output) applies ``function`` to the activation
``name`` as it is computed and goes on with the result, so everything after it sees the change. Two uses:

* :func:`patched`: replace activations by given values, e.g. those of another prompt's run (activation patching:
  does this activation carry what makes the first prompt's prediction?);
* :func:`ablated`: replace them by 0 or by their mean over the pass's prompts (or given means): zero- and
  mean-ablation (does the prediction need what this activation carries?).

The edits live on the model (its ``activation_edits`` attribute and those of its sub-models that name activations)
only inside the ``with`` block; unknown names are refused before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager

import torch
from torch import nn

from ..config import ConfigError

ABLATIONS = ("zero", "mean")


def _owners(model: nn.Module) -> list[nn.Module]:
    """The modules of ``model`` whose forward passes name activations (a model, or the LSA inside a FeatureLSA)."""
    return [m for m in model.modules() if hasattr(m, "activation_names")]


def check_names(model: nn.Module, names: Iterable[str]) -> None:
    """A :class:`ConfigError` unless every name is one of ``model``'s activations (listing them)."""
    names = list(names)
    if not names:
        return
    owners = _owners(model)
    if not owners:
        raise ConfigError(f"a {type(model).__name__} names no activations: only iclab's models can be edited")
    available = owners[0].activation_names()
    unknown = sorted(set(names) - set(available))
    if unknown:
        raise ConfigError(f"unknown activation(s) {', '.join(unknown)}; this model has: {', '.join(available)}")


@contextmanager
def edited(model: nn.Module, edits: Mapping[str, Callable[[torch.Tensor], torch.Tensor]]):
    """Apply ``edits`` (activation name → function of the activation) in every forward pass inside the block."""
    check_names(model, edits)
    owners = _owners(model)
    if any(getattr(owner, "activation_edits", None) for owner in owners):
        raise ConfigError("this model is already being edited: give every edit to one `edited` block")
    for owner in owners:
        owner.activation_edits = dict(edits)
    try:
        yield model
    finally:
        for owner in owners:
            del owner.activation_edits


def patched(model: nn.Module, values: Mapping[str, torch.Tensor]):
    """Replace each named activation by the given value (broadcast to its shape; e.g. another run's activation)."""
    return edited(model, {name: _replace_by(value) for name, value in values.items()})


def ablated(model: nn.Module, names: Iterable[str], how: str = "zero", means: Mapping[str, torch.Tensor] | None = None):
    """Zero- or mean-ablate the named activations: ``how="zero"`` replaces each by 0, ``how="mean"`` by its mean
    over the prompts of the pass (the first dimension), or by ``means[name]`` where given (e.g. a mean over other
    prompts, broadcast to the activation's shape)."""
    if how not in ABLATIONS:
        raise ConfigError(f"an ablation is one of {', '.join(ABLATIONS)}, got {how!r}")
    means = dict(means or {})

    def edit(name: str):
        if how == "zero":
            return torch.zeros_like
        if name in means:
            return _replace_by(means[name])
        return lambda value: value.mean(0, keepdim=True).expand_as(value)

    return edited(model, {name: edit(name) for name in names})


def _replace_by(value: torch.Tensor):
    return lambda current: value.to(current).expand_as(current)
