"""What an experiment is, and the context it runs in.

An :class:`Experiment` is a default config, per-scale overrides and a function
``run(config, context) -> list[Claim]`` that trains, evaluates, logs metric rows and draws
figures through the :class:`RunContext`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..claims import Claim
from ..runs import RunFolder
from ..train import TrainConfig, TrainResult, train


@dataclass
class RunContext:
    """Everything an experiment needs besides its config: the run folder, the device, and a
    sink for long-format metric rows (see :meth:`RunFolder.write_metrics`)."""

    folder: RunFolder
    device: torch.device
    progress: bool = True
    rows: list[dict] = field(default_factory=list)

    def log(self, **row: Any) -> None:
        """Record one metric row, e.g. ``log(setting="iso", model="ols", metric="mse", value=1.2)``."""
        self.rows.append(row)

    def train(self, name: str, make_model, data, config: TrainConfig, seeds, setting: str | None = None, **kwargs) -> TrainResult:
        """:func:`iclab.train.train` with this run's checkpoints, device and progress bar;
        the training history is logged as rows of model ``name``."""
        result = train(
            make_model, data, config, seeds, device=self.device, checkpoint_dir=self.folder.checkpoints,
            name=name, progress=self.progress, **kwargs,
        )
        for row in result.history:
            self.log(setting=setting, model=name, **row)
        return result


@dataclass(frozen=True)
class Experiment:
    """A named, runnable reproduction of a paper's setting."""

    name: str
    paper: str
    defaults: dict
    scales: dict
    run: Callable[[dict, RunContext], list[Claim]]
