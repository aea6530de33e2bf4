"""Tasks as JSON: what a checkpoint records of the task its model was trained on, and back.

:func:`describe_task` gives ``{"kind": ..., **keys}`` (None for a task it cannot describe) and
:func:`task_from_description` rebuilds the task:

==================  ===========================================================  =================================
kind                keys                                                         built by
==================  ===========================================================  =================================
linear-regression   the experiment's task block (d, n_context, inputs, cov,     :func:`linear_regression_from_config`
                    noise, …)
function-class      class, d, n_context, n_query and the class's parameters     :func:`function_class`
                    (sparsity, noise, hidden, depth)
sine                n_context, n_query, amplitude, phase, x_range               :class:`SineRegression`
autoregressive      d, length, start {kind, scale}, rotation                    :class:`AutoregressiveSequences`
template            templates [{pattern, label, weight}], train_size,           :class:`TemplateTask`
                    validation_size, test_size
==================  ===========================================================  =================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..config import ConfigError
from .autoregressive import AutoregressiveSequences, StartDistribution
from .functions import FunctionClass, function_class
from .linear import LinearRegression, linear_regression_from_config
from .sine import SineRegression
from .templates import Template, TemplateTask

KINDS = ("linear-regression", "function-class", "sine", "autoregressive", "template")


def _fields(task) -> dict[str, Any]:
    return {f.name: getattr(task, f.name) for f in dataclasses.fields(task) if f.init}


def describe_task(task) -> dict | None:
    """A JSON-able description of ``task`` (see the module docstring), or None when it has none (a
    :class:`LinearRegression` built without a config block, or a task of another kind)."""
    if isinstance(task, FunctionClass):
        return {"kind": "function-class", "class": task.name, **_fields(task)}
    if isinstance(task, LinearRegression):
        return None if task.config is None else {"kind": "linear-regression", **task.config}
    if isinstance(task, SineRegression):
        return {"kind": "sine", **{k: list(v) if isinstance(v, tuple) else v for k, v in _fields(task).items()}}
    if isinstance(task, AutoregressiveSequences):
        return {"kind": "autoregressive", **dataclasses.asdict(task)}
    if isinstance(task, TemplateTask):
        sizes = {f"{split}_size": size for split, size in task.sizes.items()}
        return {"kind": "template", "templates": [dataclasses.asdict(t) for t in task.templates], **sizes}
    return None


def task_from_description(description: Mapping[str, Any]):
    """The task ``description`` describes; a bad kind or key is a :class:`ConfigError`."""
    keys = dict(description)
    kind = keys.pop("kind", None)
    try:
        if kind == "linear-regression":
            return linear_regression_from_config(keys)
        if kind == "function-class":
            return function_class(keys.pop("class"), **keys)
        if kind == "sine":
            return SineRegression(**{k: tuple(v) if isinstance(v, list) else v for k, v in keys.items()})
        if kind == "autoregressive":
            return AutoregressiveSequences(**{**keys, "start": StartDistribution(**keys["start"])})
        if kind == "template":
            return TemplateTask([Template(**t) for t in keys.pop("templates")], **keys)
    except (KeyError, TypeError) as err:
        raise ConfigError(f"bad {kind} task description {dict(description)}: {err}") from None
    raise ConfigError(f"unknown task kind {kind!r}; choose from {', '.join(KINDS)}")
