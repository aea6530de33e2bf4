"""The Python API; every command-line verb is one of these functions."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import multiprocessing
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import yaml
from tqdm.auto import tqdm

from . import experiments
from .claims import EVALUATION_SEEDS, SMOKE_SCALE, over_seeds, tally
from .config import ConfigError, differences, dump, merge, parse_assignment
from .cores import CoreShare
from .devices import pick_device
from .experiments.base import RunConfig, RunContext
from .formatting import spans
from .identification.report import IDENTIFICATION, write_identification_report
from .ledger import Ledger
from .report import (
    aggregate,
    diagnoses,
    write_evaluation_report,
    write_index,
    write_non_reproductions,
    write_report,
    write_seed_table,
    write_sweep_report,
)
from .report.diagnosis import diagnose as diagnose_claims
from .report.diagnosis import verdicts
from .report.index import Scoreboard
from .report.live import LiveLog
from .report.parity import write_parity
from .resources import largest_key, out_of_memory
from .runs import (
    NOT_RECIPE,
    WRITE_FAILURES,
    EvaluationFolder,
    Recipe,
    RunFolder,
    SweepFolder,
    Unwritable,
    expand,
    point_name,
    run_folders,
    unwritable,
    without_execution,
)
from .train import TrainingDiverged
from .version import __version__

log = logging.getLogger(__name__)


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C; its message says where it stopped and how to go on (the command line
    prints it in one line and exits with 130)."""


def _interrupted(folder: RunFolder, kept: bool, fresh: bool) -> RunInterrupted:
    if kept:
        try:
            latest = max(folder.weights(), key=lambda c: c.step, default=None)
        except Exception:  # a damaged file: the interruption is still what to say
            latest = None
        where = f" (the latest: {latest.model} at step {latest.step})" if latest else ""
        return RunInterrupted(f"interrupted; its checkpoints are kept{where}: `iclab resume {folder.path}` continues")
    if fresh:
        return RunInterrupted("interrupted before the first checkpoint: nothing to resume, the run folder was removed")
    return RunInterrupted(f"interrupted before the first checkpoint: `iclab resume {folder.path}` starts it again")


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
        """Whether every claim judged at this run's scale holds (one judged at another scale is neither)."""
        return tally(self.claims).all_hold


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
    """Run an experiment into a new run folder and return its result. The config is checked before the folder is
    made (a bad value is a :class:`ConfigError` and writes nothing); a run that fails before its first checkpoint
    leaves no folder.

    Args:
        experiment: a name from :func:`list_experiments`.
        scale: ``smoke`` (the pipeline in seconds; its verdicts mean nothing), ``quick`` (minutes on a CPU),
            ``long`` (within an hour on a CPU, where the experiment defines it) or ``paper`` (the paper's sizes).
        seeds: number of seeds, ``seed`` to ``seed + seeds - 1`` (overrides the config's ``seeds``).
        overrides: ``["train.steps=500", ...]`` or ``{"train.steps": 500}``.
        out: the run folder to create, new or empty (default ``<root>/<experiment>-<timestamp>``).
        device: ``cpu``, ``cuda``, ``cuda:N`` or None for the best available.
        progress: show a progress bar (or a line per logging step when not on a terminal) while models train.
        root: where the default run folder goes.
    """
    config = experiments.get(experiment).configure(scale, overrides, seeds)
    dev = pick_device(device)
    folder = RunFolder.create(experiment, config.record, out, root)
    return _execute(folder, config, dev, progress, fresh=True)


def time_recipe(
    experiment: str, scale: str = "paper", steps: int = 20, device: str | None = None, overrides: dict | None = None
) -> dict:
    """What one seed of ``experiment``'s ``scale`` recipe (with ``overrides``, dotted keys, e.g. the part of it one
    claim needs) costs to train here, measured, not run: a timed run of one seed in a scratch folder, with the
    experiment's ``timing`` overrides (a smaller evaluation), in which each model
    trains ``steps`` steps and its marginal seconds per step are recorded (:attr:`RunContext.timing`). Returns
    ``{"seconds": the recipe's planned steps × seconds per step, summed over its models, "timed_steps", "device",
    "threads", "wall_seconds": the timed run's own wall time, "models": {name: {"planned_steps", "step_seconds"}}}``.
    The evaluation's own cost is not in it."""
    import tempfile

    if steps < 2:
        raise ConfigError(f"a timed run needs at least 2 steps per model, got {steps}")
    spec = experiments.get(experiment)
    config = spec.configure(scale, {**(overrides or {}), **spec.timing}, seeds=1)
    dev = pick_device(device)
    with tempfile.TemporaryDirectory() as scratch:
        folder = RunFolder.create(experiment, config.record, Path(scratch) / "run")
        context = RunContext(folder, dev, False, experiment=experiment, config=config.values, timing=steps)
        started = time.perf_counter()
        spec.run_seeds(config.values, context)
        wall = time.perf_counter() - started
    models = {
        cost["model"]: {"planned_steps": cost["planned_steps"], "step_seconds": cost["step_seconds"]}
        for cost in context.costs
    }
    return {
        "seconds": sum(m["planned_steps"] * m["step_seconds"] for m in models.values()),
        "timed_steps": steps,
        "device": str(dev),
        "threads": torch.get_num_threads(),
        "wall_seconds": wall,
        "models": models,
    }


@functools.cache
def logged_metrics(experiment: str) -> frozenset[str] | None:
    """The metrics ``experiment`` logs, learnt from a run of its smoke scale in a scratch folder (seconds);
    None when it has no smoke scale. What a run logs does not depend on its sizes, so a sweep checks its
    ``--metric`` against these before its first point."""
    import tempfile

    if SMOKE_SCALE not in experiments.get(experiment).scales:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        result = run(experiment, SMOKE_SCALE, out=Path(scratch) / "run", progress=False)
        return frozenset(result.metrics["metric"].dropna().unique())


def resolved_config(
    experiment: str, scale: str = "quick", overrides: Iterable[str] | Mapping[str, object] = ()
) -> dict:
    """The config a run of ``experiment`` at ``scale`` with ``overrides`` would use, checked as a run
    checks it, without running anything (``iclab show``), but for its memory: ``iclab show`` prints the estimate
    (:func:`iclab.resources.describe_memory`) where a run would be refused."""
    return experiments.get(experiment).configure(scale, overrides, memory=False).record


def resume(
    path: str | Path,
    device: str | None = None,
    progress: bool = True,
    overrides: Iterable[str] | Mapping[str, object] = (),
) -> RunResult:
    """Finish an interrupted run: training continues from its last checkpoints, and a run stopped
    before its first checkpoint starts again from its ``config.yaml`` in the same folder. A finished
    run continues for more steps (a larger ``train.steps`` among ``overrides``) as a new run folder
    beside it, which starts from a copy of its checkpoints and records it as ``continued_from``.

    ``overrides`` change config keys for the rest of the run (e.g. ``{"train.lr": 1e-4}`` after a
    divergence); they are applied to ``config.yaml`` and listed under its ``resume_overrides``. A run another
    process is training is refused (:meth:`~iclab.runs.RunFolder.writer`); a damaged latest checkpoint falls back
    to the previous one (:mod:`iclab.train`); a finished run stopped before its report was written gets it.
    """
    folder = RunFolder.open(path)
    pairs = list(overrides.items() if isinstance(overrides, Mapping) else map(parse_assignment, overrides))
    # Refused while another process trains it; everything it reads (the config, whether it finished) is read holding
    # the lock, so a resume that follows another writer sees the folder that writer left.
    with folder.writer():
        stored = folder.read_config()
        spec = experiments.get(stored["experiment"])
        if folder.finished and not pairs and not folder.report_file.exists():  # stopped after claims.json, before this
            write_report(folder)
            return RunResult(folder, folder.read_claims())
        try:
            config = spec.reconfigure(stored, pairs, continued=folder.finished)
        except ConfigError as err:
            if not folder.finished:
                raise
            raise ConfigError(f"{path} has already finished (claims.json exists); {err}") from None
        device = pick_device(device)
        if pairs:  # recorded once the overrides and the device are known to be good
            done = config.record.get("resume_overrides", [])
            config = config.with_keys(resume_overrides=done + [f"{k}={v}" for k, v in pairs])
        if not folder.finished:
            if pairs:
                folder.write_config(config.record)
            if not folder.has_checkpoint:  # nothing trained survives: whatever else is there is partial
                folder.restart()
            return _execute(folder, config, device, progress)
        # The finished run stays as it is; its continuation starts from a copy of its checkpoints, taken under its
        # lock, and is trained under its own.
        config = config.with_keys(continued_from=folder.path.name)
        child = copy_checkpoints(folder, config, root=folder.path.parent)
    return _execute(child, config, device, progress)


def copy_checkpoints(folder: RunFolder, config: RunConfig, out: Path | None = None, **where) -> RunFolder:
    """A new run folder of ``config`` (``out``, or ``where``: :meth:`RunFolder.create`'s ``root``) that starts from a
    copy of ``folder``'s checkpoints; no folder is left behind when the copy fails."""
    child = RunFolder.create(config.record["experiment"], config.record, out=out, **where)
    try:
        shutil.copytree(folder.checkpoints, child.checkpoints)
    except BaseException as err:  # a partial copy would resume from truncated files
        child.discard()
        if isinstance(err, OSError):  # a full disk
            raise unwritable(child.checkpoints, err, "copy the checkpoints to") from None
        raise
    return child


CLAIM_KEYS = ("tolerance", "judged_at_long", "judged_at_paper")
"""Config blocks that belong to the claims, not to the training: a rejudged run takes them from the current recipe
(with its claims), so a claim whose tolerance changed, or that a scale no longer leaves to another, is judged again
by the new setting."""


def rejudge(path: str | Path, device: str | None = None, progress: bool = True) -> RunResult:
    """Judge a finished run's trained models by the current claims: a new run folder beside it,
    ``<name>-claims<V>`` (V: the experiment's current ``claims_version``), starts from a copy of its checkpoints at
    their last step, so nothing trains again and the experiment evaluates and judges the models as a run of the same
    config would, with the current claims and their settings (:data:`CLAIM_KEYS`); its ``run.json`` records
    ``rejudged_from``. What a change of claims asks, without the hours of training again. Refused for a run that has
    not finished (``iclab resume`` finishes it, judged by the current claims) and for one whose recipe has changed
    since it ran (its models are not the current recipe's). A sweep's points: :func:`iclab.sweeps.rejudge_sweep`."""
    folder = RunFolder.open(path)
    with folder.writer():
        if not folder.finished:
            raise ConfigError(
                f"{path} has not finished: `iclab resume {path}` finishes it, judged by the current claims"
            )
        config, current = judging_config(folder)
        if judged_by(folder, current):
            raise ConfigError(f"{path} is already judged by the current claims (version {current.claims_version})")
        device = pick_device(device)
        child = copy_checkpoints(folder, config, claims_sibling(folder.path, current))
    return _execute(child, config, device, progress, provenance={"rejudged_from": folder.path.name})


def judging_config(folder: RunFolder, overrides: Mapping[str, object] | None = None) -> tuple[RunConfig, Recipe]:
    """The config that judges ``folder``'s trained models by the current claims and the current recipe they must
    be of (:func:`recipe_gap`); raises :class:`ConfigError` when that recipe no longer resolves or has changed
    since the run's config was written."""
    config, current, gap = recipe_gap(folder, overrides)
    if gap:
        raise ConfigError(f"{folder.path} is not a run of its scale's current recipe ({'; '.join(gap)}): run it again")
    return config, current


def recipe_gap(folder: RunFolder, overrides: Mapping[str, object] | None = None) -> tuple[RunConfig, Recipe, list[str]]:
    """``folder``'s config with the current recipe's :data:`CLAIM_KEYS` (what judges its models by the current
    claims), the current :class:`~iclab.runs.Recipe` its models must be of (its scale's, with ``overrides``: a sweep
    point's values and its sweep's overrides; a run's own overrides make no recipe), and what separates the
    config from that recipe, in words (empty for a run of it; the claims it was judged by aside). Raises
    :class:`ConfigError` when the recipe no longer resolves."""
    stored = folder.read_config()
    spec, current = experiments.get(stored["experiment"]), recipe(stored["experiment"], stored["scale"], overrides)
    if current is None:
        raise ConfigError(f"{folder.path}: its scale {stored['scale']!r} no longer resolves: run it again")
    claims = {key: current.config[key] for key in CLAIM_KEYS if key in current.config}
    config = spec.reconfigure({**stored, **claims})
    mine = Recipe(_normal(config.record), spec.claims_version)
    return config, current, current.changes(config.record, mine.fingerprint)


def judged_by(folder: RunFolder, current: Recipe) -> bool:
    """Whether finished ``folder`` was judged by ``current``'s recipe and claims (its ``run.json`` fingerprint)."""
    return folder.finished and folder.read_info().get("fingerprint") == current.fingerprint


def claims_sibling(path: Path, current: Recipe) -> Path:
    """Where a folder judged again by ``current``'s claims goes: ``<name>-claims<V>`` beside ``path`` (an earlier
    ``-claims<N>`` suffix replaced)."""
    return path.with_name(re.sub(r"-claims\d+$", "", path.name) + f"-claims{current.claims_version}")


def _normal(config: Mapping, later: bool = True) -> dict:
    """A config as ``config.yaml`` holds it, without the keys of :data:`iclab.runs.NOT_RECIPE` (a resume's
    overrides and a continuation's parent stay: they make a variant) and its training blocks'
    execution keys (:data:`iclab.runs.EXECUTION`), nor its experiment's keys at the value every run before them had
    (:attr:`~iclab.experiments.base.Experiment.later_defaults`, where the config names it; with ``later=False`` those
    stay, every value shown)."""
    dropped = experiments.get(config["experiment"]).later_defaults if later and "experiment" in config else None
    return without_execution(
        yaml.safe_load(dump({k: v for k, v in config.items() if k not in NOT_RECIPE})), later=dropped
    )


def recipe_changes(config: Mapping) -> dict:
    """The keys where a run's ``config`` differs from its scale's recipe, with the run's values: a run
    with any is a variant, which the scoreboard shows apart and never counts. Keys a config written by
    an older iclab lacks are the recipe's; a scale that no longer resolves is itself the change."""
    try:
        recipe = resolved_config(config["experiment"], config["scale"])
    except ConfigError as err:
        return {"scale": f"{config['scale']} (no recipe: {err})"}
    return {key: mine for key, (mine, _) in differences(_normal(merge(recipe, config)), _normal(recipe)).items()}


BOOKKEEPING = ("log_every", "checkpoint_every", "keep", "compile", "attention")
"""Keys that change how a run is kept and how fast it goes, never what it computes (``attention``: the same map by
another kernel, :data:`iclab.models.attention.ATTENTION`): left out of a recipe's distance to another."""


def recipe_distance(experiment: str, scale: str = "quick", to: str = "paper") -> dict[str, tuple[Any, Any]]:
    """The config values where ``experiment``'s ``scale`` recipe differs from its ``to`` recipe (by default the
    paper's): dotted key → (the scale's value, ``to``'s value), without the seeds, what a run logs, the scale's name
    and :data:`BOOKKEEPING`. The distance a verdict at ``scale`` stands from the paper's recipe, read from the
    configs themselves."""
    mine, theirs = (_normal(resolved_config(experiment, name), later=False) for name in (scale, to))
    return {
        key: values
        for key, values in differences(mine, theirs).items()
        if key != "scale" and key.rpartition(".")[2] not in BOOKKEEPING
    }


def _paper_cost(experiment: str) -> dict | None:
    """The paper recipe's measured or estimated time of ``experiment`` here (``times.json``), or None."""
    return experiments.measured_time(experiment, "paper")


def diagnose(root: str | Path | Scoreboard) -> dict[tuple[str, str, str], str]:
    """Why each paper claim that does not reproduce among the runs under ``root`` (or a scoreboard of them already
    read, :func:`iclab.report.aggregate`) does not, in words, by
    ``(experiment, scale, claim id)`` (:func:`iclab.report.diagnosis.diagnoses`, with the current recipes, their
    distance to the paper's and the paper recipe's cost here): what the scoreboard and the seed table print."""
    return diagnoses(root, recipe, recipe_distance, _paper_cost, sweep_changes)


def sweep_changes(folder: SweepFolder) -> list[str]:
    """What separates a sweep's finished points from their current recipes (each its scale's, with the point's
    values and the sweep's overrides, :func:`recipe_gap`) and from their experiment's current claims
    (the claims version each was judged by and the claims' settings in its config), in words, each change once:
    empty when every point is current. A sweep with any is no ladder of the current recipe; where only the claims
    changed, :func:`iclab.sweeps.rejudge_sweep` judges its models again."""
    spec = folder.read_spec()
    found = []
    for point in expand(spec["grid"]):
        run = folder.run(point_name(point))
        if not run.finished:
            continue
        try:
            judging, current, gap = recipe_gap(run, {**spec["overrides"], **point})
        except ConfigError:
            found.append("its config or its recipe no longer resolves")
            continue
        gap += current.claims_change(run.read_info().get("fingerprint"))
        stored = run.read_config()
        gap += [f"its {key} settings changed" for key in CLAIM_KEYS if stored.get(key) != judging.record.get(key)]
        found += gap
    return list(dict.fromkeys(found))


def recipe(experiment: str, scale: str, overrides: Mapping[str, object] | None = None) -> Recipe | None:
    """The current :class:`~iclab.runs.Recipe` of ``experiment`` at ``scale`` (its resolved config, with
    ``overrides`` such as a sweep point's, and its claims version), or None for an experiment, scale or override
    that no longer resolves."""
    try:
        config = resolved_config(experiment, scale, overrides or {})
    except ConfigError:
        return None
    return Recipe(_normal(config), experiments.get(experiment).claims_version)


def _execute(
    folder: RunFolder, config: RunConfig, device, progress: bool, fresh: bool = False, provenance: dict | None = None
) -> RunResult:
    """Run the experiment into ``folder``, holding its lock (:meth:`RunFolder.writer`: one process writes a run). A
    ``fresh`` run that fails before its first checkpoint leaves no folder behind (there is nothing to resume); later
    failures, and a file that could not be written (a full disk) at any time, keep it resumable (:func:`_stopped`)."""
    record = config.record
    spec = experiments.get(record["experiment"])
    log.info("running %s (%s scale) into %s on %s", spec.name, record["scale"], folder.path, device)
    with folder.writer():
        live = context = None
        try:
            live = LiveLog(folder, record)
            share = CoreShare()
            inherited = "continued_from" in record or "rejudged_from" in (provenance or {})  # another run's checkpoints
            context = RunContext(
                folder,
                device,
                progress,
                experiment=spec.name,
                config=config.values,
                live=live,
                cores=share,
                ledger=Ledger(inherited=inherited),
            )
            changes = recipe_changes(record)
            started, clock, cpu = dt.datetime.now().astimezone(), time.perf_counter(), time.process_time()
            checkout = _git_commit()  # the code that runs: a checkout moved while it trains does not rename it
            with share:
                claims = over_seeds(spec.run_seeds(config.values, context))
            folder.write_metrics(context.rows)
            live.close(context.rows, claims)
            live = None  # closed: a failure below has none to close
            wall = time.perf_counter() - clock + context.ledger.earlier  # a resumed run's earlier training too
            folder.write_info(
                {
                    **_environment(device, checkout),
                    "started": started.isoformat(timespec="milliseconds"),  # orders runs of the same second
                    "resumed": not fresh,
                    "wall_seconds": round(wall, 2),
                    "earlier_seconds": round(context.ledger.earlier, 2),  # of the wall: earlier sessions' training
                    "cpu_seconds": round(time.process_time() - cpu, 2),
                    "recipe_changes": changes,
                    "fingerprint": Recipe(_normal(record), spec.claims_version).fingerprint,
                    "time": context.ledger.summary(wall, [claim["id"] for claim in claims]),
                    **(provenance or {}),
                }
            )
            folder.write_claims(claims)
            write_report(folder)
        except BaseException as err:
            if live is not None:
                live.close()
            where = context.ledger.failed_in if context is not None else None
            stopped = _stopped(err, folder, spec.name, fresh, record, where)
            if stopped is None:
                raise
            raise stopped from None
    return RunResult(folder, folder.read_claims())


def _stopped(
    err: BaseException, folder: RunFolder, name: str, fresh: bool, record: dict | None = None, part: str | None = None
) -> BaseException | None:
    """What a run stopped by ``err`` raises instead of it, in one line (None: ``err`` itself, a bug's traceback);
    an allocation that did not fit names the ``part`` of the run it stopped and the size of ``record`` that drives
    the run's memory.
    A ``fresh`` run with no checkpoint is removed, unless a file could not be written: then, as a run with
    checkpoints, it is kept, and `iclab resume` finishes it once the disk has room. What it reads of the folder here
    may fail in turn (a damaged file, a disk gone): then the folder is kept, and ``err`` is not hidden."""
    if isinstance(err, OSError) and err.errno in WRITE_FAILURES:  # a figure, an event file, a checkpoint
        err = unwritable(err.filename or folder.path, err)
    try:
        kept = folder.has_checkpoint
    except Exception:  # (whatever it says, what stopped the run is what the user must see)
        kept = True  # not known: nothing is removed
    if fresh and not kept and not isinstance(err, Unwritable):
        with contextlib.suppress(OSError):
            folder.discard()
    if isinstance(err, KeyboardInterrupt):
        return _interrupted(folder, kept, fresh)
    if isinstance(err, TrainingDiverged):
        resume = f"`iclab resume {folder.path} --set train.lr=<smaller>`"
        if kept:
            advice = f"the last good checkpoints are kept: {resume}"
        elif fresh:
            advice = "no checkpoint was written and the run folder was removed: rerun with a smaller train.lr"
        else:
            advice = f"no checkpoint was written: {resume} starts it again"
        return ConfigError(f"{name}: {err}; {advice}")
    if isinstance(err, Unwritable):
        return Unwritable(f"{name}: {err}, then `iclab resume {folder.path}` finishes the run (its folder is kept)")
    if out_of_memory(err):
        again = f"`iclab resume {folder.path}` continues from its checkpoints" if kept else "run it again"
        return ConfigError(
            f"{name}: out of memory in {f'part {part!r}' if part else 'the run'} ({type(err).__name__}); the largest "
            f"size is {largest_key(record or {}, experiments.get(name).resolve('quick'))}: free memory or lower it, "
            f"then {again}"
        )
    return None


def _environment(device, checkout: dict) -> dict:
    """What ran the experiment: iclab's version and ``checkout`` (the git commit it started from, when it runs from
    a checkout: :func:`_git_commit`), Python, torch, the device (a GPU by name too) and torch's CPU threads."""
    gpu = {"device_name": torch.cuda.get_device_name(device)} if torch.device(device).type == "cuda" else {}
    return {
        "iclab": __version__,
        **checkout,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": str(device),
        **gpu,
        "threads": torch.get_num_threads(),
    }


def _git_commit() -> dict:
    """``{"commit": sha, "dirty": bool}`` of the checkout iclab is imported from, or ``{}`` (an installed copy)."""
    source = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(source), *args], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() / "iclab" != source:
            return {}  # a repository around an installed copy (e.g. a virtual environment inside one)
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {}


def report(
    path: str | Path,
    seed_table: str | Path | None = None,
    non_reproductions: str | Path | None = None,
    parity: str | Path | None = None,
) -> Path:
    """(Re)write a sweep folder's, an evaluation folder's or a run folder's ``report.html``, or, for a
    folder of runs, every run's report and the folder's ``index.html``; returns the page written (the
    report or the index). ``seed_table``: also write the folder of runs' markdown claim × seed table to
    that path; ``non_reproductions``: also write why each paper claim that does not reproduce does not
    (:mod:`iclab.report.diagnosis`: the distance to the paper's recipe, its cost, the runs at it and the ladders
    toward it, among the runs and sweeps of the folder, and the parity records under its ``parity/``); ``parity``: also
    write the folder's parity page, each quantity measured by iclab and by the authors' code
    (:mod:`iclab.report.parity`). A run folder of a folder of runs whose files cannot be read
    (or whose report cannot be written) is skipped and every other run reported; then a :class:`ConfigError` says
    which, a line each."""
    path = Path(path)
    sweep, evaluation = SweepFolder(path), EvaluationFolder(path)
    kind = (
        "sweep"
        if sweep.spec_file.exists()
        else "evaluation"
        if evaluation.spec_file.exists()
        else "run"
        if (path / "config.yaml").exists()
        else None
    )
    if kind and (seed_table is not None or non_reproductions is not None or parity is not None):
        raise ConfigError(
            f"--seed-table, --non-reproductions and --parity read a folder of runs; {path} is a {kind} folder"
        )
    if kind == "sweep":
        return write_sweep_report(sweep)
    if kind == "evaluation":
        identification = evaluation.read_spec().get("kind") == IDENTIFICATION
        return (write_identification_report if identification else write_evaluation_report)(evaluation)
    if kind == "run":
        run = RunFolder.open(path)
        page = write_report(run)
        if not run.finished:
            log.warning(
                "iclab: %s: the run has not finished, its report shows what it has: `iclab resume %s` finishes it",
                path,
                path,
            )
        elif not run.info_file.exists():
            log.warning(
                "iclab: %s is missing (the run's environment, times and recipe fingerprint): the report leaves them "
                "out and the scoreboard cannot count the run",
                run.info_file,
            )
        return page
    runs = run_folders(path)
    if not runs:
        raise ConfigError(f"{path} is not a run folder (no config.yaml), a sweep folder nor a folder of runs")
    board = aggregate(path, recipe)  # read once for every page below
    diagnosed = diagnose_claims(board, recipe_distance, _paper_cost, sweep_changes)  # its sweeps read once too
    explained = verdicts(diagnosed)
    if seed_table is not None:  # first: a path it cannot write stops the command before any page is rewritten
        write_seed_table(board, seed_table, recipe, explained)
    if non_reproductions is not None:
        write_non_reproductions(diagnosed, non_reproductions)
    if parity is not None:
        write_parity(path, parity)
    skipped = []
    for run in runs:  # a run whose files cannot be read or written is skipped, and said so; the others are reported
        try:
            write_report(run)
        except ConfigError as err:
            skipped.append(f"skipped {run.path}: {err}")
    index = write_index(board, recipe, explained)
    if skipped:  # a line per skipped run folder, after every other run is reported
        raise ConfigError("\n".join([*skipped[:-1], f"{skipped[-1]} ({index} reports every other run)"]))
    return index


def parse_seeds(spec: int | str | Sequence[int]) -> list[int]:
    """The seeds of ``iclab reproduce --seeds``: a count S of evaluation seeds (``3`` or ``"3"``: seeds 100 to
    100 + S − 1, from :data:`~iclab.claims.EVALUATION_SEEDS`' first, what a user asking for three seeds means), a
    range ``"0-4"`` (both ends included: tuning seeds are named this way) or a list of seeds."""
    first_evaluation = EVALUATION_SEEDS[0]
    if isinstance(spec, str):
        found = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", spec)
        if not found:
            raise ConfigError(f"--seeds expects a count (e.g. 3) or a range (e.g. 0-4), got {spec!r}")
        first, last = found.groups()
        if last is None:
            seeds = list(range(first_evaluation, first_evaluation + int(first)))
        else:
            seeds = list(range(int(first), int(last) + 1))
    elif isinstance(spec, int):
        seeds = list(range(first_evaluation, first_evaluation + spec))
    else:
        seeds = list(spec)
    if not seeds or any(not isinstance(s, int) or s < 0 for s in seeds):
        raise ConfigError(f"--seeds must give at least one seed >= 0, got {spec!r}")
    return seeds


def reproduce(
    scale: str = "quick",
    root: str | Path = "runs",
    device: str | None = None,
    progress: bool = True,
    seed: int | None = None,
    seeds: int | str | Sequence[int] | None = None,
    only: Iterable[str] | None = None,
    overrides: Iterable[str] | Mapping[str, object] = (),
    jobs: int = 1,
) -> tuple[list[RunResult], Path]:
    """Run every experiment (or those named in ``only``), then write ``<root>/index.html``, the
    scoreboard of every run under ``root`` (rewritten after each run, so it shows progress); returns
    the results (in plan order) and the index.

    ``jobs`` > 1 runs that many experiments at once, each in its own process with an equal share of
    torch's CPU threads (on a CPU, two small models on one thread each train faster than one after the
    other on two threads); their progress bars are off, a bar counts finished runs instead.

    By default, and with ``seeds`` (see :func:`parse_seeds`): one run per experiment and span of
    consecutive seeds, which trains them together and judges each,
    ``<root>/<experiment>-seeds<first>-<last>-<timestamp>`` (``-seed<S>-`` for one seed), on the evaluation
    seeds (:data:`iclab.claims.EVALUATION_SEEDS`, which the scoreboard counts) unless ``seeds`` names
    others; resumable like a sweep: a finished folder of the same config is kept, an unfinished one
    resumes from its checkpoints (one without checkpoints starts afresh). With a base ``seed`` instead: one new run per
    experiment, ``<root>/<experiment>-<timestamp>``, with each experiment's own number of seeds.
    ``overrides`` apply to every experiment. Every config is checked before anything runs.
    """
    if seeds is not None and seed is not None:
        raise ConfigError("give the base --seed or the --seeds to run, not both")
    if seed is None and seeds is None:
        seeds = list(EVALUATION_SEEDS)
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    names = list(experiments.names() if only is None else only)
    if not names:
        raise ConfigError("--only needs at least one experiment")
    overrides = dict(overrides.items() if isinstance(overrides, Mapping) else map(parse_assignment, overrides))
    by_seed = seeds is not None
    if by_seed and ("seed" in overrides or "seeds" in overrides):
        raise ConfigError("a reproduction over seeds sets each run's seeds: drop --set seed / --set seeds")
    if not by_seed:
        if "seed" in overrides:
            raise ConfigError("give the base seed as --seed, not as --set seed")
        overrides = {**overrides, "seed": seed}
    spans = _spans(parse_seeds(seeds)) if by_seed else [None]
    plans = [
        (name, span, _named_config(name, scale, overrides if span is None else {**overrides, **span}))
        for span in spans
        for name in names
    ]
    one = functools.partial(_reproduce_one, str(root), by_seed, device)
    results = [None] * len(plans)
    for i, result in _finished_runs(one, plans, jobs, progress, _expected_seconds):
        results[i] = result
        write_index(root, recipe, diagnose(root))
    return results, Path(root) / "index.html"


def _expected_seconds(plan: tuple) -> float:
    """How long a planned run of :func:`reproduce` should take, from its scale's measured time a seed
    (``times.json``; unmeasured: infinite, so it starts first), times its seeds."""
    name, _, config = plan
    measured = experiments.measured_time(name, config.record["scale"])
    if not measured or not measured.get("seconds"):
        return float("inf")
    return measured["seconds"] / measured.get("seeds_per_run", 1) * config.record.get("seeds", 1)


def _spans(seeds: list[int]) -> list[dict]:
    """The seeds as runs' ``{"seed": first, "seeds": count}``, one per span of consecutive seeds."""
    return [{"seed": first, "seeds": last - first + 1} for first, last in spans(seeds)]


def _finished_runs(one, plans: list, jobs: int, progress: bool, seconds=lambda plan: 0.0):
    """``(index, result)`` of each plan as its run finishes: one after the other in this process, or
    ``jobs`` at a time in spawned processes sharing torch's threads, the longest plans first (``seconds(plan)``,
    their expected time: no worker waits alone on a long last run), a bar over the runs; the workers' training
    writes a line per logging step where the parent writes to a file, not a terminal (where their bars would
    fight). A worker ignores Ctrl-C but while it runs a plan (:func:`_interruptible`): a run stops where it is and
    says so, an idle worker prints no traceback."""
    if jobs == 1:
        for i, plan in enumerate(plans):
            yield i, one(progress, plan)
        return
    threads = max(1, torch.get_num_threads() // jobs)
    spawn = multiprocessing.get_context("spawn")  # a forked child would inherit torch's thread pools
    start = (threads, os.getpid())
    lines = progress and not sys.stderr.isatty()
    order = sorted(range(len(plans)), key=lambda i: -seconds(plans[i]))  # stable: unmeasured plans keep their order
    with (
        ProcessPoolExecutor(jobs, mp_context=spawn, initializer=_start_worker, initargs=start) as pool,
        tqdm(total=len(plans), desc="reproduce", unit="run", disable=not progress) as bar,
    ):
        pending = {pool.submit(_interruptible, one, lines, plans[i]): i for i in order}
        try:
            for done in as_completed(pending):
                result = done.result()
                bar.update()
                yield pending[done], result
        except BaseException:
            pool.shutdown(cancel_futures=True)  # the runs already going finish; no new one starts
            raise


def _start_worker(threads: int, parent: int):
    """A reproduction worker's set-up: its share of torch's threads, and a watch that ends it when its
    parent is gone (killed by a signal that reached it alone, such as SIGTERM, which would otherwise leave
    the worker running its experiment as an orphan; its run folder resumes like any stopped run)."""
    torch.set_num_threads(threads)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: an idle worker has nothing to stop
    threading.Thread(target=_end_when_orphaned, args=(parent,), daemon=True).start()


def _interruptible(one, progress: bool, plan):
    """``one(progress, plan)`` in a worker, Ctrl-C raising ``KeyboardInterrupt`` while it runs (the run stops and
    keeps its checkpoints, its future holds the interruption), ignored again once it returns."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return one(progress, plan)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _end_when_orphaned(parent: int, every: float = 1.0):
    while os.getppid() == parent:
        time.sleep(every)
    os.kill(os.getpid(), signal.SIGTERM)


def _named_config(experiment: str, scale: str, overrides: Mapping[str, object]) -> RunConfig:
    """The config of one experiment of a reproduction (:meth:`~iclab.experiments.base.Experiment.configure`),
    whose errors name the experiment."""
    try:
        return experiments.get(experiment).configure(scale, overrides)
    except ConfigError as err:
        raise ConfigError(f"{experiment}: {err}") from None


def _reproduce_one(root: str, by_seed: bool, device: str | None, progress: bool, plan: tuple) -> RunResult:
    """One planned run of :func:`reproduce`, ``plan = (experiment, span, config)``: a new folder, or
    with ``by_seed`` the span's folder kept or resumed (:func:`_seed_run`)."""
    name, span, config = plan
    if by_seed:
        return _seed_run(Path(root), name, span, config, device, progress)
    folder = RunFolder.create(name, config.record, None, root)
    return _execute(folder, config, pick_device(device), progress, fresh=True)


def _seed_run(
    root: Path, experiment: str, span: dict, config: RunConfig, device: str | None, progress: bool
) -> RunResult:
    """``experiment`` on the seeds of ``span`` (``{"seed", "seeds"}``) in a reproduction over seeds: a
    finished folder ``<experiment>-seeds<first>-<last>-*`` (``-seed<S>-*`` for one) of the same config is
    kept, an unfinished one resumes (or, with no checkpoint, is removed and run again), else a new folder
    is made."""
    first, last = span["seed"], span["seed"] + span["seeds"] - 1
    stem = f"{experiment}-seed{first}" if first == last else f"{experiment}-seeds{first}-{last}"
    prefix, same = f"{stem}-", yaml.safe_load(dump(config.record))  # the config as config.yaml reads back
    complete = experiments.get(experiment).complete  # a folder written before a training default was filled in
    folders = [f for f in run_folders(root) if f.path.name.startswith(prefix) and complete(f.read_config()) == same]
    finished = [f for f in folders if f.finished]
    if finished:
        return RunResult(finished[-1], finished[-1].read_claims())
    if folders and folders[-1].has_checkpoint:
        return resume(folders[-1].path, device, progress)
    for folder in folders:  # stopped before its first checkpoint: nothing to resume
        shutil.rmtree(folder.path)
    folder = RunFolder.create(stem, config.record, None, root)
    return _execute(folder, config, pick_device(device), progress, fresh=True)
