"""Sweeps: a grid of runs of one experiment on Ray, on this machine or on a cluster.

    result = iclab.sweep("lsa-linear", {"task.d": [2, 4], "train.lr": [0.01, 0.05]}, seeds=3)
    result.table        # every point's metric rows, the grid values as columns
    result.claims       # claim × point, holds

Each grid point is an ordinary run folder inside the sweep folder (see
:class:`~iclab.runs.SweepFolder`), run by a Ray core task that reserves ``cpus_per_trial`` CPUs and
``gpus_per_trial`` GPUs, so Ray runs as many at once as the machine (or cluster) holds. Core tasks
rather than Ray Tune: a point is a plain function call whose run folder already checkpoints and
resumes itself, so Tune's trial directories, schedulers and checkpoint syncing would only duplicate
what iclab does. The driver tracks which points finished and on which Ray node; a failed point
records its error and does not stop the others, and a resumed sweep skips finished points and
resumes interrupted ones. A point whose node (or worker process) is lost is run again by Ray on
another node, where it resumes the run folder the lost attempt left.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import math
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from . import api, experiments
from .config import ConfigError, parse_assignment, parse_value
from .report import write_sweep_report
from .runs import Lock, RunFolder, SweepFolder, expand, first_line, point_name, write_atomic

# How many times Ray runs a point again after its node or worker process died (each retry resumes the point's
# folder); an exception inside a point is its result, never retried.
LOST_NODE_RETRIES = 3


class PointOutcome(NamedTuple):
    """How one point ended: ``status`` (finished / failed), its ``error``, and the Ray node its last attempt ran
    on (``node``: the node id, ``node_ip``: its address; None when not known, e.g. finished by a killed sweep)."""

    status: str
    error: str | None = None
    node: str | None = None
    node_ip: str | None = None


@dataclass
class SweepResult:
    """A sweep's folder and tables (read from its files, so a resumed sweep reads the same)."""

    folder: SweepFolder

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def table(self) -> pd.DataFrame:
        """Every finished point's metric rows with the grid values as columns (``sweep.parquet``)."""
        return self.folder.read_table(self.folder.metrics_file)

    @property
    def claims(self) -> pd.DataFrame:
        """One row per (point, claim) with ``holds`` (``claims.parquet``; <NA> for a claim judged at
        another scale, named in ``judged_at``)."""
        return self.folder.read_table(self.folder.claims_file)

    @property
    def points(self) -> pd.DataFrame:
        """One row per point: grid values, ``status`` (finished / failed), ``error``, and the Ray ``node`` (id)
        and ``node_ip`` its last attempt ran on."""
        return self.folder.read_table(self.folder.points_file)

    @property
    def failed(self) -> int:
        """How many points failed."""
        return int((self.points["status"] != "finished").sum())


def parse_grid(specs: Iterable[str]) -> dict[str, list]:
    """``["train.lr=0.01,0.1", "task.d=2,4"]`` → ``{"train.lr": [0.01, 0.1], "task.d": [2, 4]}``.

    Values are YAML like ``--set`` values; commas inside brackets belong to the value
    (``inits=[[0.1,0.1]],[[2,2]]`` has two values)."""
    grid = {}
    for spec in specs:
        key, sep, raw = spec.partition("=")
        key = key.strip()
        if not sep or not key or not raw.strip():
            raise ConfigError(f"--grid expects key=value1,value2,..., got {spec!r}")
        if key in grid:
            raise ConfigError(f"--grid names {key!r} twice")
        grid[key] = [parse_value(key, part) for part in _split_top_level(raw)]
    return grid


def _split_top_level(text: str) -> list[str]:
    """Split at the commas that are not inside brackets or braces."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char in "[{") - (char in "]}")
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def sweep(
    experiment: str,
    grid: Mapping[str, list] | Iterable[str],
    *,
    seeds: int | None = None,
    scale: str = "quick",
    overrides: Iterable[str] | Mapping[str, object] = (),
    out: str | Path | None = None,
    root: str | Path = "runs",
    metric: str = "train_loss",
    claim: str | None = None,
    claim_target: float | None = None,
    address: str | None = None,
    cpus_per_trial: float = 1,
    gpus_per_trial: float = 0,
    progress: bool = True,
) -> SweepResult:
    """Run ``experiment`` at every point of ``grid`` (× ``seeds`` seeds) and write the sweep folder.

    Args:
        grid: ``{"train.lr": [0.01, 0.1]}`` or ``["train.lr=0.01,0.1"]``; keys are config keys.
        seeds: run each point for seeds ``seed, seed + 1, ..., seed + seeds - 1`` (a ``seed`` grid key), each
            point one seed (``seeds=1`` unless ``overrides`` says otherwise: a scale that trains several seeds a run
            would train the next point's seeds again).
        overrides: config changes shared by every point, as for :func:`iclab.run`.
        out: the sweep folder (default ``<root>/sweep-<experiment>-<timestamp>``).
        metric: the metric the report draws against each swept key (default the training loss).
        claim: ``ID`` or ``ID:PATH``, a claim the sweep follows as a ladder: each seed's number at every point
            (:func:`iclab.ladders.claim_number`: the measured value, at the dotted ``PATH`` into it when given),
            drawn against the swept key with a band over seeds and the paper's number as a line, and the trend
            (:func:`iclab.ladders.ladder_trend`) in the report (:func:`iclab.report.sweep.ladder`).
        claim_target: the number the ladder should move toward (default: the paper's number, where it gives one).
        address: a Ray cluster to join (its head's ``host:port``, ``auto`` or ``ray://host:port``); None starts
            a local Ray with this machine's CPUs. A point whose node is lost runs again on another (see
            :data:`LOST_NODE_RETRIES`) and ``points.parquet`` names each point's node.
        cpus_per_trial: the CPUs each point reserves (and so how many run at once).
        gpus_per_trial: the GPUs each point reserves (0: it runs on the CPU).

    Every point's config is checked before anything runs: an unknown key, a value of the wrong
    type or one the experiment cannot run (:meth:`~iclab.experiments.base.Experiment.configure`)
    raises :class:`ConfigError`. A point that fails while running (e.g. a diverging training) is
    recorded with its error in ``points.parquet`` and the others go on; see :attr:`SweepResult.failed`.
    """
    spec = experiments.get(experiment)
    overrides = dict(overrides.items() if isinstance(overrides, Mapping) else map(parse_assignment, overrides))
    grid = parse_grid(grid) if not isinstance(grid, Mapping) else {k: list(v) for k, v in grid.items()}
    base = spec.resolve(scale, overrides)
    if seeds is not None:
        if seeds < 1:
            raise ConfigError(f"--seeds must be >= 1, got {seeds}")
        if "seed" in grid:
            raise ConfigError("give seeds either as --seeds or as a 'seed' grid key, not both")
        if "seed" not in base:
            raise ConfigError(f"{experiment} has no seed key to sweep")
        grid["seed"] = [base["seed"] + k for k in range(seeds)]
        if "seeds" in base and "seeds" not in overrides:  # one seed a point: the seed key steps by one
            overrides["seeds"] = 1
    if not grid:
        raise ConfigError("a sweep needs at least one --grid key or --seeds")
    for point in expand(grid):  # every point's config must resolve and pass its checks before anything runs
        spec.configure(scale, {**overrides, **point})
    _check_resources(cpus_per_trial, gpus_per_trial, address)
    _check_metric(experiment, metric)
    if claim is not None and not claim.partition(":")[0].strip():
        raise ConfigError(
            f"--claim expects ID or ID:PATH (a claim's id, a dotted path into its measured value), got {claim!r}"
        )
    sweep_spec = {
        "experiment": experiment,
        "scale": scale,
        "grid": grid,
        "overrides": overrides,
        "metric": metric,
        "claim": claim,
        "claim_target": claim_target,
        "cpus_per_trial": cpus_per_trial,
        "gpus_per_trial": gpus_per_trial,
    }
    return _run(SweepFolder.create(sweep_spec, out, root), address, progress)


def resume_sweep(
    path: str | Path,
    *,
    address: str | None = None,
    cpus_per_trial: float | None = None,
    gpus_per_trial: float | None = None,
    progress: bool = True,
) -> SweepResult:
    """Finish an interrupted sweep: finished points are skipped, interrupted ones resume from their
    checkpoints, failed and unstarted ones run. Trial resources may change (they are not science)."""
    folder = SweepFolder.open(path)
    spec = folder.read_spec()
    changed = {
        k: v for k, v in (("cpus_per_trial", cpus_per_trial), ("gpus_per_trial", gpus_per_trial)) if v is not None
    }
    _check_resources(
        changed.get("cpus_per_trial", spec["cpus_per_trial"]),
        changed.get("gpus_per_trial", spec["gpus_per_trial"]),
        address,
    )
    if changed:
        folder.write_spec({**spec, **changed})
    return _run(folder, address, progress)


def rejudge_sweep(path: str | Path, *, progress: bool = True) -> SweepResult:
    """Judge a sweep's trained models by the current claims, as :func:`iclab.rejudge` does a run's: a new sweep
    folder beside it, ``<name>-claims<V>``, of the same grid (its ``sweep.yaml`` records ``rejudged_from``), whose
    points start from copies of the old points' checkpoints. A finished point is evaluated and judged with nothing
    trained again, an interrupted one trains on from its last checkpoint, one never started runs afresh; the points
    run on a local Ray as a sweep's do. Refused, before anything is written, when a point's recipe (its scale's,
    with the point's values and the sweep's overrides) has changed since it ran, when a finished point kept no
    checkpoints, when a worker still trains a point, and when every finished point was judged by the current
    claims (``iclab sweep --resume`` finishes the others)."""
    old = SweepFolder.open(path)
    spec = old.read_spec()
    _check_resources(spec["cpus_per_trial"], spec["gpus_per_trial"], None)
    with contextlib.ExitStack() as held:
        copies = []
        for point in expand(spec["grid"]):
            run = old.run(point_name(point))
            if run.finished and not run.has_checkpoint:
                raise ConfigError(f"{run.path} finished without keeping its checkpoints: its models cannot be judged")
            if run.has_checkpoint:
                held.enter_context(run.writer())  # refused while a worker of the old sweep trains it
                copies.append((run, *api.judging_config(run, {**spec["overrides"], **point})))
        if not copies:
            raise ConfigError(f"{path}: no point has trained yet: `iclab sweep --resume {path}` runs it")
        current, finished = copies[0][2], [(run, recipe) for run, _, recipe in copies if run.finished]
        out = api.claims_sibling(old.path, current)
        if out == old.path or (finished and all(api.judged_by(run, recipe) for run, recipe in finished)):
            raise ConfigError(
                f"{path} is already judged by the current claims (version {current.claims_version}); "
                f"`iclab sweep --resume {path}` runs the points it has not finished"
            )
        new = SweepFolder.create({**spec, "rejudged_from": old.path.name}, out)
        try:
            for run, config, _ in copies:
                api.copy_checkpoints(run, config, new.run(run.path.name).path)
        except BaseException:  # a half-copied sweep would train the points it lacks from scratch
            shutil.rmtree(new.path, ignore_errors=True)
            raise
    return _run(new, None, progress)


def _check_metric(experiment: str, metric: str) -> None:
    """A metric other than the training loss (which every trained model logs) must be one the experiment
    logs (:func:`iclab.api.logged_metrics`, a smoke run of seconds), or the sweep would find out after its
    last point."""
    if metric == "train_loss":
        return
    known = api.logged_metrics(experiment)
    if known is not None and metric not in known:
        close = difflib.get_close_matches(metric, sorted(known), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; it logs {', '.join(sorted(known))}"
        raise ConfigError(f"--metric {metric!r}: {experiment} logs no such metric{hint}")


def _check_resources(cpus: float, gpus: float, address: str | None) -> None:
    """Trial resources must be possible; on a local Ray, a point needing more than this machine has
    would wait forever."""
    if not cpus > 0:
        raise ConfigError(f"--cpus-per-trial must be > 0, got {cpus}")
    if gpus < 0:
        raise ConfigError(f"--gpus-per-trial must be >= 0, got {gpus}")
    if address is None:
        import torch

        for name, need, have in (("CPUs", cpus, os.cpu_count()), ("GPUs", gpus, torch.cuda.device_count())):
            if need > have:
                raise ConfigError(
                    f"each point asks for {need:g} {name} but this machine has {have} (no --address given)"
                )


def _run(folder: SweepFolder, address: str | None, progress: bool) -> SweepResult:
    """Run every unfinished point of ``folder`` on Ray, then write its tables and report."""
    import ray
    from tqdm.auto import tqdm

    spec = folder.read_spec()
    points = expand(spec["grid"])
    todo = [p for p in points if not folder.run(point_name(p)).finished]
    known = _recorded_nodes(folder)
    status = {point_name(p): known.get(point_name(p), PointOutcome("finished")) for p in points if p not in todo}
    if todo:
        started_here = not ray.is_initialized()
        if started_here:
            # "local" always starts a fresh Ray of this machine's CPUs (never a stray running one).
            ray.init(
                address=address or "local",
                num_cpus=None if address else os.cpu_count(),
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        try:
            task = ray.remote(_run_point).options(
                num_cpus=spec["cpus_per_trial"], num_gpus=spec["gpus_per_trial"], max_retries=LOST_NODE_RETRIES
            )
            pending = {
                task.remote(
                    str(folder.run(point_name(p)).path),
                    spec["experiment"],
                    spec["scale"],
                    {**spec["overrides"], **p},
                    spec["cpus_per_trial"],
                    spec["gpus_per_trial"],
                ): point_name(p)
                for p in todo
            }
            bar = tqdm(
                total=len(points),
                initial=len(status),
                desc=f"sweep {spec['experiment']}",
                unit="point",
                disable=not progress,
            )
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                name = pending.pop(done[0])
                try:
                    status[name] = ray.get(done[0])
                except ray.exceptions.RayError as err:  # lost more often than Ray retries: a resumed sweep goes on
                    status[name] = PointOutcome("failed", f"{type(err).__name__}: {first_line(err)}")
                bar.update()
                if status[name].status != "finished":
                    bar.write(f"{name}: failed: {status[name].error}")
            bar.close()
        finally:
            if started_here:
                ray.shutdown()
    _write_tables(folder, points, status)
    write_sweep_report(folder)
    return SweepResult(folder)


def _recorded_nodes(folder: SweepFolder) -> dict[str, PointOutcome]:
    """The finished points of an earlier pass over ``folder`` with the nodes ``points.parquet`` records for them, so
    a resumed sweep keeps them."""
    table = folder.read_table(folder.points_file)
    if "node" not in table:  # never written (a killed first pass), or written before nodes were recorded
        return {}
    finished = table[table["status"] == "finished"]
    return {
        row.point: PointOutcome("finished", node=row.node, node_ip=row.node_ip)
        for row in finished[["point", "node", "node_ip"]].itertuples()
    }


def _run_point(path: str, experiment: str, scale: str, overrides: dict, cpus: float, gpus: float) -> PointOutcome:
    """One grid point, in a Ray worker: resume its run folder if it has one (see :func:`iclab.resume`),
    else run it. Returns its :class:`PointOutcome` with this worker's node; errors are returned, not raised, so
    one point failing stops no other. When Ray runs it again because its node was lost, it resumes the folder
    the lost attempt left.

    The point is run under an exclusive lock on ``.locks/<point>.lock`` in the sweep folder: a
    worker orphaned by a killed driver goes on with its point for a while, and a resumed sweep must
    wait for it rather than run the same folder twice (the lock dies with its process, so a killed
    worker never leaves it held: :class:`~iclab.runs.Lock`, as a run folder's own lock)."""
    import ray
    import torch

    torch.set_num_threads(max(1, math.floor(cpus)))
    node = {"node": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address()}
    folder = Path(path)
    locks = folder.parent / ".locks"
    locks.mkdir(exist_ok=True)
    with Lock(locks / f"{folder.name}.lock", wait=True):
        try:
            run = RunFolder(folder)
            if run.finished:  # finished by the orphaned worker we waited for
                return PointOutcome("finished", **node)
            if run.config_file.exists():  # interrupted: from its checkpoints, or afresh from its config.yaml
                api.resume(folder, device=None if gpus else "cpu", progress=False)
            else:
                api.run(
                    experiment,
                    scale=scale,
                    overrides=overrides,
                    out=folder,
                    device=None if gpus else "cpu",
                    progress=False,
                )
            return PointOutcome("finished", **node)
        except Exception as err:  # noqa: BLE001 (any failure is the point's result, recorded with its message)
            return PointOutcome("failed", f"{type(err).__name__}: {err}", **node)


def _write_tables(folder: SweepFolder, points: list[dict], status: dict[str, PointOutcome | tuple]) -> None:
    """``points.parquet``, ``sweep.parquet`` and ``claims.parquet`` from the point folders (``status``: each
    point's :class:`PointOutcome`, or its leading fields, e.g. ``("finished", None)``)."""
    rows, metrics, claims = [], [], []
    for point in points:
        name = point_name(point)
        outcome = PointOutcome(*status[name])
        grid_values = {key: _cell(value) for key, value in point.items()}
        rows.append({"point": name, **grid_values, **outcome._asdict()})
        if outcome.status != "finished":
            continue
        run = folder.run(name)
        frame = run.read_metrics()
        for key, value in grid_values.items():
            if key not in frame:  # a run's own rows already carry their seed
                frame[key] = value
        frame["point"] = name
        metrics.append(frame)
        claims += [
            {
                "point": name,
                **grid_values,
                "claim": c["id"],
                "holds": c["holds"],
                "judged_at": c.get("judged_at"),
                "over_seeds": "seed_test_z" in c,
                "measured": str(c["measured"]),
                "expected": str(c["expected"]),
            }
            for c in run.read_claims()
        ]
    columns = ["point", *points[0], "claim", "holds", "judged_at", "over_seeds", "measured", "expected"]
    claims = pd.DataFrame(claims, columns=columns)
    # <NA>: measured, judged at another scale or over seeds (a point runs one seed), or not measured: not a failure
    claims["holds"] = claims["holds"].astype("boolean")
    tables = {folder.points_file: pd.DataFrame(rows), folder.claims_file: claims}
    if metrics:
        tables[folder.metrics_file] = pd.concat(metrics, ignore_index=True)
    for path, table in tables.items():
        write_atomic(path, functools.partial(table.to_parquet, index=False))


def _cell(value: Any) -> Any:
    """A grid value as a table cell: scalars as they are, lists and dicts as their JSON text."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value
