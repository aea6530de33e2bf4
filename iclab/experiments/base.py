"""What an experiment is, and the context it runs in.

An :class:`Experiment` is a default config, per-scale overrides, a function
``run(config, context) -> list[Claim]`` that trains, evaluates, logs metric rows and draws
figures through the :class:`RunContext`, and optionally ``checks(config)``, which rejects values
the config's types allow but the experiment cannot run (see :meth:`Experiment.validate`).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import torch

from ..claims import Claim
from ..config import ConfigError, merge, resolve
from ..models import describe
from ..prompts import describe_format
from ..runs import RunFolder
from ..tasks import describe_task
from ..train import TrainConfig, TrainResult, train


# Keys the framework adds to every experiment's config (experiments do not define them).
COMMON_DEFAULTS = {
    "log": {"tensorboard": False},  # true: TensorBoard event files under tb/ (needs the tensorboard package)
}


def iclab_version() -> str | None:
    """The installed iclab's version (None when imported from a source tree that was never installed)."""
    try:
        return importlib.metadata.version("iclab")
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass
class RunContext:
    """Everything an experiment needs besides its config: the run folder, the device, the
    experiment's name, and a sink for long-format metric rows (see :meth:`RunFolder.write_metrics`)."""

    folder: RunFolder
    device: torch.device
    progress: bool = True
    rows: list[dict] = field(default_factory=list)
    experiment: str | None = None

    def log(self, **row: Any) -> None:
        """Record one metric row, e.g. ``log(setting="iso", model="ols", metric="mse", value=1.2)``."""
        self.rows.append(row)

    def train(self, name: str, make_model, data, config: TrainConfig, seeds, setting: str | None = None, **kwargs) -> TrainResult:
        """:func:`iclab.train.train` with this run's checkpoints, device and progress bar;
        the training history is logged as rows of model ``name``.

        The weights files record what :func:`iclab.load_model` needs to rebuild the model and
        evaluate it: its class and constructor arguments, and the prompt format and task of ``data``
        (``data.format`` and ``data.task`` when it has them; null otherwise, e.g. for token blocks).
        """
        def facts(model) -> dict:
            task, prompt_format = getattr(data, "task", None), getattr(data, "format", None)
            return {**describe(model), "experiment": self.experiment, "setting": setting,
                    "prompt_format": None if prompt_format is None else describe_format(prompt_format),
                    "task": None if task is None else describe_task(task), "iclab": iclab_version()}

        result = train(
            make_model, data, config, seeds, device=self.device, checkpoint_dir=self.folder.checkpoints,
            name=name, progress=self.progress, describe=facts, **kwargs,
        )
        for row in result.history:
            self.log(setting=setting, model=name, **row)
        return result


@dataclass(frozen=True)
class Experiment:
    """A named, runnable reproduction of a paper's setting.

    ``checks(config)`` raises :class:`~iclab.config.ConfigError` for a resolved config the
    experiment cannot run (an impossible size, an unknown name); it is cheap and trains nothing.
    """

    name: str
    paper: str
    defaults: dict
    scales: dict
    run: Callable[[dict, RunContext], list[Claim]]
    checks: Callable[[dict], None] | None = None

    def resolve(self, scale: str, overrides: Iterable[str] | Mapping[str, object] = ()) -> dict:
        """A run's config: the defaults with :data:`COMMON_DEFAULTS`, the scale preset, then the
        validated overrides (see :func:`iclab.config.resolve`)."""
        return resolve(merge(self.defaults, COMMON_DEFAULTS), self.scales, scale, overrides)

    def validate(self, config: dict) -> None:
        """Raise :class:`~iclab.config.ConfigError` unless ``config`` (resolved, seeds set) can run.

        Called by :func:`iclab.run` and :func:`iclab.resume` before any folder is made or touched,
        and by :func:`iclab.sweep` for every grid point before Ray starts, so a bad value fails at
        once with one line instead of inside a run (or a Ray worker)."""
        if config.get("seeds", 1) < 1:
            raise ConfigError(f"seeds must be >= 1, got {config['seeds']}")
        if self.checks is not None:
            self.checks(config)
