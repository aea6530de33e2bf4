"""The Python API; every command-line verb is one of these functions."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import logging
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd
import torch

from . import experiments
from .config import ConfigError, parse_assignment, set_key
from .devices import pick_device
from .experiments.base import RunContext
from .report import run_folders, write_index, write_report, write_sweep_report
from .report.tensorboard import check_tensorboard, write_events
from .runs import RunFolder, SweepFolder
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
    config = spec.resolve(scale, overrides)
    if seeds is not None:
        if seeds < 1:
            raise ConfigError(f"--seeds must be >= 1, got {seeds}")
        config["seeds"] = seeds
    config = {"experiment": experiment, **config}
    spec.validate(config)
    check_tensorboard(config)
    dev = pick_device(device)
    folder = RunFolder.create(experiment, config, out, root)
    return _execute(folder, config, dev, progress, fresh=True)


def resume(
    path: str | Path, device: str | None = None, progress: bool = True,
    overrides: Iterable[str] | Mapping[str, object] = (),
) -> RunResult:
    """Finish an interrupted run: training continues from its last checkpoints, and a run stopped
    before its first checkpoint starts again from its ``config.yaml`` in the same folder.

    ``overrides`` change config keys for the rest of the run (e.g. ``{"train.lr": 1e-4}`` after a
    divergence); they are applied to ``config.yaml`` and listed under its ``resume_overrides``.
    """
    folder = RunFolder.open(path)
    if folder.finished:
        raise ConfigError(f"{path} has already finished (claims.json exists)")
    config = folder.read_config()
    pairs = list(overrides.items() if isinstance(overrides, Mapping) else map(parse_assignment, overrides))
    for key, value in pairs:
        set_key(config, key, value)
    experiments.get(config["experiment"]).validate(config)
    check_tensorboard(config)
    device = pick_device(device)
    if pairs:  # recorded once the overrides and the device are known to be good
        config["resume_overrides"] = config.get("resume_overrides", []) + [f"{k}={v}" for k, v in pairs]
        folder.write_config(config)
    if not folder.has_checkpoint:  # nothing trained survives: whatever else is there is partial
        folder.restart()
    return _execute(folder, config, device, progress)


def _execute(folder: RunFolder, config: dict, device, progress: bool, fresh: bool = False) -> RunResult:
    """Run the experiment into ``folder``. A ``fresh`` run that fails before its first checkpoint
    leaves no folder behind (there is nothing to resume); later failures keep it resumable."""
    spec = experiments.get(config["experiment"])
    log.info("running %s (%s scale) into %s on %s", spec.name, config["scale"], folder.path, device)
    context = RunContext(folder, device, progress)
    started, wall, cpu = dt.datetime.now().astimezone(), time.perf_counter(), time.process_time()
    try:
        claims = spec.run(config, context)
    except BaseException as err:
        kept = folder.has_checkpoint
        if fresh and not kept:
            folder.discard()
        if isinstance(err, TrainingDiverged):
            resume = f"`iclab resume {folder.path} --set train.lr=<smaller>`"
            if kept:
                advice = f"the last good checkpoints are kept: {resume}"
            elif fresh:
                advice = "no checkpoint was written and the run folder was removed: rerun with a smaller train.lr"
            else:
                advice = f"no checkpoint was written: {resume} starts it again"
            raise ConfigError(f"{spec.name}: {err}; {advice}") from None
        raise
    folder.write_metrics(context.rows)
    if config.get("log", {}).get("tensorboard"):
        write_events(folder)
    folder.write_info({
        **_environment(device), "started": started.isoformat(timespec="seconds"), "resumed": not fresh,
        "wall_seconds": round(time.perf_counter() - wall, 2), "cpu_seconds": round(time.process_time() - cpu, 2),
    })
    folder.write_claims(claims)
    write_report(folder)
    return RunResult(folder, folder.read_claims())


def _environment(device) -> dict:
    """What ran the experiment: iclab's version and git commit (when it runs from a checkout),
    Python, torch, the device and torch's CPU threads."""
    try:
        version = importlib.metadata.version("iclab")
    except importlib.metadata.PackageNotFoundError:  # imported from a source tree that was never installed
        version = None
    return {"iclab": version, **_git_commit(), "python": platform.python_version(), "torch": torch.__version__,
            "device": str(device), "threads": torch.get_num_threads()}


def _git_commit() -> dict:
    """``{"commit": sha, "dirty": bool}`` of the checkout iclab is imported from, or ``{}`` (an installed copy)."""
    source = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() / "iclab" != source:
            return {}  # a repository around an installed copy (e.g. a virtual environment inside one)
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {}


def report(path: str | Path) -> Path:
    """(Re)write a sweep folder's or a run folder's ``report.html``, or, for a folder of runs, every
    run's report and the folder's ``index.html``; returns the page written (the report or the index)."""
    path = Path(path)
    if SweepFolder(path).spec_file.exists():
        return write_sweep_report(SweepFolder(path))
    if (path / "config.yaml").exists():
        return write_report(RunFolder.open(path))
    runs = run_folders(path)
    if not runs:
        raise ConfigError(f"{path} is not a run folder (no config.yaml), a sweep folder nor a folder of runs")
    for run in runs:
        write_report(run)
    return write_index(path, runs)


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
