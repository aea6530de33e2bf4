"""The Python API; every command-line verb is one of these functions."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from . import experiments
from .config import ConfigError, parse_assignment, resolve, set_key
from .devices import pick_device
from .experiments.base import RunContext
from .report import write_index, write_report
from .runs import RunFolder
from .train import TrainingDiverged

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
    return [(name, experiments.summary(name)) for name in experiments.names()]


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
    folder = RunFolder.create(experiment, config, out, root)
    return _execute(folder, config, dev, progress, fresh=True)


def resume(
    path: str | Path, device: str | None = None, progress: bool = True,
    overrides: Iterable[str] | Mapping[str, object] = (),
) -> RunResult:
    """Finish an interrupted run: training continues from its last checkpoints.

    ``overrides`` change config keys for the rest of the run (e.g. ``{"train.lr": 1e-4}`` after a
    divergence); they are applied to ``config.yaml`` and listed under its ``resume_overrides``.
    """
    folder = RunFolder.open(path)
    if folder.finished:
        raise ConfigError(f"{path} has already finished (claims.json exists)")
    if not folder.has_checkpoint:
        raise ConfigError(f"{path} has no checkpoint to resume from; start the run again with `iclab run`")
    config = folder.read_config()
    pairs = list(overrides.items() if isinstance(overrides, Mapping) else map(parse_assignment, overrides))
    if pairs:
        for key, value in pairs:
            set_key(config, key, value)
        config["resume_overrides"] = config.get("resume_overrides", []) + [f"{k}={v}" for k, v in pairs]
        folder.write_config(config)
    return _execute(folder, config, pick_device(device), progress)


def _execute(folder: RunFolder, config: dict, device, progress: bool, fresh: bool = False) -> RunResult:
    """Run the experiment into ``folder``. A ``fresh`` run that fails before its first checkpoint
    leaves no folder behind (there is nothing to resume); later failures keep it resumable."""
    spec = experiments.get(config["experiment"])
    log.info("running %s (%s scale) into %s on %s", spec.name, config["scale"], folder.path, device)
    context = RunContext(folder, device, progress)
    try:
        claims = spec.run(config, context)
    except BaseException as err:
        kept = folder.has_checkpoint
        if fresh and not kept:
            folder.discard()
        if isinstance(err, TrainingDiverged):
            advice = (f"the last good checkpoints are kept: `iclab resume {folder.path} --set train.lr=<smaller>`"
                      if kept else "no checkpoint was written and the run folder was removed: rerun with a smaller train.lr")
            raise ConfigError(f"{spec.name}: {err}; {advice}") from None
        raise
    folder.write_metrics(context.rows)
    folder.write_claims(claims)
    write_report(folder)
    return RunResult(folder, folder.read_claims())


def report(path: str | Path) -> Path:
    """(Re)write a run folder's ``report.html`` from its files."""
    return write_report(RunFolder.open(path))


def reproduce(
    scale: str = "quick", root: str | Path = "runs", device: str | None = None, progress: bool = True,
    seed: int | None = None,
) -> tuple[list[RunResult], Path]:
    """Run every experiment (with base ``seed`` when given), then write ``<root>/index.html``;
    returns the results and the index."""
    overrides = {} if seed is None else {"seed": seed}
    results = [run(name, scale=scale, overrides=overrides, device=device, progress=progress, root=root)
               for name in experiments.names()]
    return results, write_index(Path(root), [r.folder for r in results])
