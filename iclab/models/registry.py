"""Models that can be rebuilt from a description: what a checkpoint records beside the weights.

A class decorated with :func:`rebuildable` is registered by its name, and each of its instances
records, when it is built, the arguments it was built with (defaults filled in; ``generator`` left
out, since it only draws the initial weights a checkpoint replaces) as a JSON-able

    model.spec = {"class": "LinearSelfAttention", "arguments": {"dim": 6, "n_layers": 1, ...}}

:func:`rebuild` builds the same architecture from such a spec; loading the state dict then gives
the same model. Argument values are JSON values, dataclasses (a :class:`GPTConfig`: its fields),
torch dtypes (``"float32"``) or other rebuildable modules (their own spec), so a model made of
models (:class:`FeatureLSA`) is rebuilt whole.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ..config import ConfigError

MODELS: dict[str, type[nn.Module]] = {}
"""The rebuildable classes by name (filled by :func:`rebuildable` as their modules are imported)."""


def rebuildable(cls: type[nn.Module]) -> type[nn.Module]:
    """Class decorator: register ``cls`` and record every instance's constructor arguments as ``spec``."""
    init = cls.__init__
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if type(self) is cls:  # a subclass records its own arguments (or none, if it is not rebuildable)
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments = {k: _encode(v) for k, v in list(bound.arguments.items())[1:] if k != "generator"}
            self.spec = {"class": cls.__name__, "arguments": arguments}

    cls.__init__ = __init__
    MODELS[cls.__name__] = cls
    return cls


def describe(model: nn.Module) -> dict:
    """``{"class", "arguments"}`` of a model; ``arguments`` is None for a class that is not
    :func:`rebuildable` (the checkpoint then names the class but cannot rebuild it)."""
    spec = getattr(model, "spec", None)
    if spec is None:
        return {"class": type(model).__name__, "arguments": None}
    try:
        json.dumps(spec)
    except TypeError as err:
        raise TypeError(f"{type(model).__name__} was built with an argument that is not JSON: {err}") from None
    return spec


def rebuild(spec: Mapping[str, Any]) -> nn.Module:
    """A freshly initialised model of the architecture ``spec`` describes (see :func:`describe`)."""
    name = spec.get("class")
    if name not in MODELS or spec.get("arguments") is None:
        known = ", ".join(sorted(MODELS))
        raise ConfigError(
            f"cannot rebuild a {name}: its class is not rebuildable (decorate it with "
            f"iclab.models.rebuildable and import its module first; known: {known})"
        )
    cls = MODELS[name]
    hints = typing.get_type_hints(cls.__init__)
    try:
        return cls(**{k: _decode(v, hints.get(k)) for k, v in spec["arguments"].items()})
    except TypeError as err:  # an argument this version of the class does not take
        raise ConfigError(f"cannot rebuild the {name}: {err}") from None


def _encode(value: Any) -> Any:
    if isinstance(value, nn.Module):
        return describe(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any, hint: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"class", "arguments"}:
        return rebuild(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint(**value)
    if hint is torch.dtype:
        return getattr(torch, value)
    return value
