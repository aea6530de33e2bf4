"""The registry of named experiments: iclab's own, then those other packages register.

Each built-in entry names the module that defines the experiment and the one-line summary
``iclab list`` prints; modules are imported only when an experiment is used, so listing them starts
no torch.

Another installed package adds experiments through the entry-point group ``iclab.experiments``
(``[project.entry-points."iclab.experiments"]`` in its ``pyproject.toml``): the entry point's name is
the experiment's name, its value ``package.module:OBJECT`` an :class:`~iclab.experiments.base.Experiment`
of that name (or ``package.module``, a module defining ``EXPERIMENT``). Such an experiment is listed,
run, swept and reproduced like a built-in one (``iclab reproduce`` runs the built-ins first, then the
registered ones in order of name). Its summary is the first line of the docstring of the module the
entry point names, read from the source without executing it, so ``iclab list`` imports the package
that holds that module (its ``__init__``) but not the module itself. A name already taken, by a
built-in or by an earlier registered experiment, is skipped with a logged warning: the first keeps it.
Registered experiments are looked up once per process (installed packages do not change while iclab runs).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
import importlib.util
import json
import logging
from pathlib import Path

from ..config import ConfigError

log = logging.getLogger(__name__)

GROUP = "iclab.experiments"
"""The entry-point group other packages register experiments under."""

_EXPERIMENTS = {
    # name: (module defining EXPERIMENT, one-line summary), in the order `iclab reproduce` runs them
    "lsa-linear": (
        "iclab.experiments.lsa_linear",
        "One-layer linear self-attention converges to one preconditioned GD step (Γ⁻¹).",
    ),
    "gpt-linear": (
        "iclab.experiments.gpt_linear",
        "A GPT-style transformer on interleaved prompts tracks OLS at every prefix length.",
    ),
    "gd-mechanism": (
        "iclab.experiments.gd_mechanism",
        "Trained linear self-attention matches GD (1 layer) and GD++ (deeper) on linear regression.",
    ),
    "task-descriptors": (
        "iclab.experiments.task_descriptors",
        "Task descriptors (the inputs' mean) lower the loss of LSA trained in context; exact one-layer optimum.",
    ),
    "mesa-ar": (
        "iclab.experiments.mesa_ar",
        "Autoregressive linear attention learns one GD step on in-context OLS; ab → ab* (not recovered for Gaussian "
        "starts).",
    ),
    "function-classes": (
        "iclab.experiments.function_classes",
        "One transformer per Garg et al. function class against their baselines, and the linear one under their "
        "shifted prompts.",
    ),
    "algorithm-selection": (
        "iclab.experiments.algorithm_selection",
        "Which learner a trained transformer matches (Akyürek et al.): SPD/ILWD, the Bayes ridge under noise, depth, "
        "probes.",
    ),
    "abstract-symbols": (
        "iclab.experiments.abstract_symbols",
        "Transformers on template tasks over unseen symbols with and without the identity terms, MLP baselines, "
        "copying vs width, the template kernel matrix.",
    ),
    "symbols-lm": (
        "iclab.experiments.symbols_lm",
        "A causal language model with and without a·XXᵀ (and its diagonal-masked variant): validation perplexity over "
        "seeds, learned a, diagonal attention mass.",
    ),
}


@functools.cache
def _registered() -> dict[str, importlib.metadata.EntryPoint]:
    """The experiments other packages register, by name, without the names already taken (once per process,
    so a clash is reported once)."""
    found = {}
    for entry in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name):
        if entry.name in _EXPERIMENTS or entry.name in found:
            log.warning(
                "iclab: experiment %r of %s is skipped: %s already has that name",
                entry.name,
                _distribution(entry),
                "iclab" if entry.name in _EXPERIMENTS else _distribution(found[entry.name]),
            )
            continue
        found[entry.name] = entry
    return found


def _distribution(entry: importlib.metadata.EntryPoint) -> str:
    """The name of the package that registered ``entry``."""
    return entry.dist.name if entry.dist is not None else "an unknown package"


def names() -> list[str]:
    """Every experiment's name, in the order ``iclab reproduce`` runs them (built-ins first)."""
    return list(_EXPERIMENTS) + list(_registered())


def origin(name: str) -> str | None:
    """The package that registered experiment ``name``, or None for a built-in one."""
    if name in _EXPERIMENTS:
        return None
    return _distribution(_entry(name))


def summary(name: str) -> str:
    """The one-line summary of an experiment, without importing its module: a built-in's from the table
    above, a registered one's from its module's docstring."""
    if name in _EXPERIMENTS:
        return _EXPERIMENTS[name][1]
    module = _entry(name).module
    try:
        doc = ast.get_docstring(_parsed(module))
    except (ImportError, OSError, SyntaxError, ValueError) as err:
        return f"(no summary: {module} cannot be read: {err})"
    return doc.strip().splitlines()[0] if doc else f"(no summary: {module} has no docstring)"


def scales(name: str) -> list[str]:
    """The names of an experiment's scales (the keys of its module's ``SCALES``), read from the source
    without importing it; empty when the source does not spell them out as a literal dict."""
    module = _EXPERIMENTS[name][0] if name in _EXPERIMENTS else _entry(name).module
    try:
        tree = _parsed(module)
    except (ImportError, OSError, SyntaxError, ValueError):
        return []
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and target.id == "SCALES" and isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def _parsed(module: str) -> ast.Module:
    """A module's source, parsed (its parent package is imported, the module itself is not)."""
    spec = importlib.util.find_spec(module)
    source = Path(spec.origin).read_text(encoding="utf-8") if spec and (spec.origin or "").endswith(".py") else ""
    return ast.parse(source)


TIMES = Path(__file__).with_name("times.json")
"""Measured wall times of the built-in experiments' recipes, per seed, written by
``benchmarks/reproduce_time.py`` from finished runs (with the machine, threads and commit they ran on)."""


@functools.cache
def _times() -> dict:
    return json.loads(TIMES.read_text(encoding="utf-8")) if TIMES.exists() else {}


def measured_time(name: str, scale: str) -> dict | None:
    """How long one seed of ``name`` took at ``scale``'s recipe when last measured: ``{"seconds", "runs",
    "threads", "jobs", "commit", "date", "machine"}``, or None where it was never measured."""
    return _times().get("experiments", {}).get(name, {}).get(scale)


def get(name: str):
    """The :class:`~iclab.experiments.base.Experiment` called ``name``."""
    if name in _EXPERIMENTS:
        return importlib.import_module(_EXPERIMENTS[name][0]).EXPERIMENT
    from .base import Experiment  # torch: only once an experiment is used

    entry = _entry(name)
    value = entry.load()
    experiment = getattr(value, "EXPERIMENT", None) if entry.attr is None else value
    if not isinstance(experiment, Experiment) or experiment.name != name:
        found = (
            f"an Experiment named {experiment.name!r}"
            if isinstance(experiment, Experiment)
            else type(experiment).__name__
        )
        raise ConfigError(
            f"experiment {name!r} of {_distribution(entry)} ({entry.value}) must be an Experiment named "
            f"{name!r}, found {found}"
        )
    return experiment


def _entry(name: str) -> importlib.metadata.EntryPoint:
    registered = _registered()
    if name not in registered:
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(list(_EXPERIMENTS) + list(registered))}")
    return registered[name]
