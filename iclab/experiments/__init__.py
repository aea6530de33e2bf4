"""The registry of named experiments (modules are imported only when used)."""

from __future__ import annotations

import importlib

from ..config import ConfigError
from .base import Experiment, RunContext

_MODULES = {
    "lsa-linear": "iclab.experiments.lsa_linear",
    "gpt-linear": "iclab.experiments.gpt_linear",
    "gd-mechanism": "iclab.experiments.gd_mechanism",
    "task-descriptors": "iclab.experiments.task_descriptors",
    "mesa-ar": "iclab.experiments.mesa_ar",
    "algorithm-selection": "iclab.experiments.algorithm_selection",
}


def names() -> list[str]:
    """Every experiment's name, in the order ``iclab reproduce`` runs them."""
    return list(_MODULES)


def get(name: str) -> Experiment:
    """The experiment called ``name``; a :class:`ConfigError` names the known ones otherwise."""
    if name not in _MODULES:
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(_MODULES)}")
    return importlib.import_module(_MODULES[name]).EXPERIMENT


__all__ = ["Experiment", "RunContext", "get", "names"]
