"""The Python API; every command-line verb is one of these functions."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from . import experiments
from .config import ConfigError, resolve
from .devices import pick_device
from .experiments.base import RunContext
from .report import write_index, write_report
from .runs import RunFolder

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """A finished run: its folder, claims and metrics table."""

    folder: RunFolder
    claims: list[dict]

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def metrics(self) -> pd.DataFrame:
        return self.folder.read_metrics()

    @property
    def all_hold(self) -> bool:
        return all(c["holds"] for c in self.claims)


def list_experiments() -> list[tuple[str, str]]:
    """(name, one-line summary) of every experiment."""
    return [(name, experiments.get(name).summary) for name in experiments.names()]


def run(
    experiment: str,
    scale: str = "quick",
    seeds: int | None = None,
    overrides: Iterable[str] | Mapping[str, object] = (),
    out: str | Path | None = None,
    device: str | None = None,
    progress: bool = True,
    root: str | Path = "runs",
) -> RunResult:
    """Run an experiment into a new run folder and return its result.

    Args:
        experiment: a name from :func:`list_experiments`.
        scale: ``quick`` (minutes on a laptop CPU) or ``paper`` (the paper's sizes).
        seeds: number of seeds (overrides the config's ``seeds``).
        overrides: ``["train.steps=500", ...]`` or ``{"train.steps": 500}``.
        out: the run folder to create (default ``<root>/<experiment>-<timestamp>``).
        device: ``cpu``, ``cuda`` or None for the best available.
    """
    spec = experiments.get(experiment)
    config = resolve(spec.defaults, spec.scales, scale, overrides)
    if seeds is not None:
        if seeds < 1:
            raise ConfigError(f"--seeds must be >= 1, got {seeds}")
        config["seeds"] = seeds
    config = {"experiment": experiment, **config}
    dev = pick_device(device)
    folder = RunFolder.create(experiment, out, root)
    folder.write_config(config)
    return _execute(folder, config, dev, progress)


def resume(path: str | Path, device: str | None = None, progress: bool = True) -> RunResult:
    """Finish an interrupted run: training continues from its last checkpoints."""
    folder = RunFolder.open(path)
    if folder.finished:
        raise ConfigError(f"{path} has already finished (claims.json exists)")
    return _execute(folder, folder.read_config(), pick_device(device), progress)


def _execute(folder: RunFolder, config: dict, device, progress: bool) -> RunResult:
    spec = experiments.get(config["experiment"])
    log.info("running %s (%s scale) into %s on %s", spec.name, config["scale"], folder.path, device)
    context = RunContext(folder, device, progress)
    claims = spec.run(config, context)
    folder.write_metrics(context.rows)
    folder.write_claims(claims)
    write_report(folder)
    return RunResult(folder, folder.read_claims())


def report(path: str | Path) -> Path:
    """(Re)write a run folder's ``report.html`` from its files."""
    return write_report(RunFolder.open(path))


def reproduce(
    scale: str = "quick", root: str | Path = "runs", device: str | None = None, progress: bool = True
) -> tuple[list[RunResult], Path]:
    """Run every experiment, then write ``<root>/index.html``; returns the results and the index."""
    results = [run(name, scale=scale, device=device, progress=progress, root=root) for name in experiments.names()]
    return results, write_index(Path(root), [r.folder for r in results])
