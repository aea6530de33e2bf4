"""Run and sweep folders: where a run's config, metrics, claims, checkpoints, figures and report live.

    runs/<experiment>-<yyyymmdd-hhmmss>/
      config.yaml  metrics.parquet  run.json  claims.json  checkpoints/  figures/*.png  tb/  report.html
      wandb/  (an offline Weights & Biases run, with log.wandb=true)
      eval-<stamp>/  (evaluations of its models: :class:`EvaluationFolder`)

A run folder is never overwritten. ``claims.json`` is written last, so its presence marks a
finished run; a folder without it can be resumed. While a run trains, ``metrics.parquet`` holds the
rows so far (rewritten at most once a second, and when a model's training ends; see
:mod:`iclab.report.live`), and the finished run writes it whole. Every file that marks or describes a run is
written whole or not at all (:func:`write_atomic`), so a run killed mid-write never looks finished
with a torn file. A sweep folder holds one run folder per grid point beside the sweep's own files
(see :class:`SweepFolder`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from .claims import Claim
from .config import ConfigError, differences, dump


class FolderTaken(ConfigError):
    """The folder a run would claim exists with something in it (an automatic name then tries the next)."""


@dataclass(frozen=True)
class Checkpoint:
    """One weights file of a run (see :mod:`iclab.train` for the layout): the model's name in the
    run, its seed, the training step and the file."""

    model: str
    seed: int
    step: int
    path: Path


_NOT_RECIPE = ("seed", "seeds", "log", "resume_overrides", "continued_from")
"""Keys of a run's ``config.yaml`` that are not its recipe: which seeds it trains, what it logs, and how it was
resumed or continued (a variant says that apart)."""


@dataclass(frozen=True)
class Recipe:
    """What a run's verdicts depend on besides its seeds: its scale's recipe (the resolved config in
    ``config.yaml``'s form, without the seeds and what it logs) and its experiment's ``claims_version`` (the
    version of its claims' definitions, raised whenever a claim's test changes). A finished run records the
    :attr:`fingerprint` of the recipe it ran in ``run.json``; the scoreboard counts a run only when that is the
    current recipe's, and lists the others apart with :meth:`changes`."""

    config: dict
    claims_version: int

    @property
    def fingerprint(self) -> dict:
        """``{"recipe": <16 hex digits of the config's sha256>, "claims": claims_version}``."""
        text = json.dumps(self.config, sort_keys=True, default=str, ensure_ascii=False)
        return {"recipe": hashlib.sha256(text.encode()).hexdigest()[:16], "claims": self.claims_version}

    def changes(self, config: dict, fingerprint: dict | None) -> list[str]:
        """What separates a run (its ``config.yaml`` and its ``run.json`` ``fingerprint``) from this recipe, in
        words: empty when the run is of this recipe."""
        if not fingerprint:
            return ["run by an iclab that recorded no fingerprint (older than its recipe and claims)"]
        out = []
        if fingerprint.get("claims") != self.claims_version:
            out.append(f"claims version {fingerprint.get('claims')} (now {self.claims_version})")
        if fingerprint.get("recipe") != self.fingerprint["recipe"]:
            mine = {k: v for k, v in config.items() if k in self.config or k not in _NOT_RECIPE}
            keys = differences(mine, self.config)
            out.append(
                "recipe changed since: "
                + (", ".join(f"{k} {a!r} → {b!r}" for k, (a, b) in keys.items()) or "its defaults' types or order")
            )
        return out


def read_weights(path: str | Path) -> tuple[dict, dict]:
    """A weights file's state dict (CPU tensors) and its metadata (every value JSON-decoded)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(path), "np") as f:
        metadata = f.metadata() or {}
    return load_file(str(path)), {k: json.loads(v) for k, v in metadata.items() if k != "format"}


def _weights_step(path: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(path), "np") as f:
        return int(f.metadata()["step"])


SCRATCH_SUFFIX = ".iclab-tmp"
"""The suffix of :func:`write_atomic`'s temporary files (``.<name>.<random>.iclab-tmp``)."""


def write_atomic(path: str | Path, content: str | Callable[[Path], None], exclusive: bool = False) -> None:
    """Write ``path`` whole or not at all.

    ``content`` (UTF-8 text, or a function that writes the file at the path it is given) goes to
    a temporary file beside ``path``, which then takes its place in one rename: a reader, or a
    run killed mid-write, sees the old file or the new one, never part of one (the temporary file
    of a killed writer may stay behind). ``exclusive``: raise ``FileExistsError`` instead of
    replacing an existing file (a hard link, which never replaces).
    """
    path = Path(path)
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(4)}{SCRATCH_SUFFIX}")
    try:
        if isinstance(content, str):
            scratch.write_text(content, encoding="utf-8")
        else:
            content(scratch)
        if exclusive:
            os.link(scratch, path)
        else:
            os.replace(scratch, path)
    finally:
        scratch.unlink(missing_ok=True)


class _Folder:
    """A folder with figures and a report: the part run and sweep folders share."""

    figure_folder = "figures"
    """Where :meth:`figure` puts figures, inside the folder (a seed's pass of a run puts its own apart)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    report_file = property(lambda self: self.path / "report.html")

    def figure(self, name: str) -> Path:
        """Path for ``figures/<name>.png`` (the folder is created)."""
        folder = self.path / self.figure_folder
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{name}.png"

    def figures(self) -> list[Path]:
        return sorted((self.path / "figures").glob("*.png"))


def latest_run(experiment: str, root: str | Path = "runs") -> Path:
    """The newest finished run folder of ``experiment`` directly under ``root`` (by when it finished), as
    ``iclab run`` and ``iclab reproduce`` name them (``<experiment>-...``)."""
    finished = [p.parent for p in Path(root).glob(f"{experiment}-*/claims.json")]
    if not finished:
        raise ConfigError(f"no finished {experiment} run under {root}: `iclab run {experiment}` makes one")
    return max(finished, key=lambda p: (p / "claims.json").stat().st_mtime)


class RunFolder(_Folder):
    """Paths and readers/writers for one run folder."""

    def __init__(self, path: str | Path):
        super().__init__(path)
        self._created = False  # whether create() made the directory itself

    @classmethod
    def create(
        cls, experiment: str, config: dict, out: str | Path | None = None, root: str | Path = "runs"
    ) -> RunFolder:
        """Make a new folder holding ``config.yaml``: ``out`` exactly (it must not exist, or be empty),
        else ``<root>/<experiment>-<timestamp>`` with a numbered suffix when taken.

        Creation is atomic (an exclusive ``mkdir``, then an exclusive create of ``config.yaml``), so
        two runs started at once, even from two processes, never share a folder.
        """
        if out is not None:
            folder = cls(out)
            folder._claim(config)
            return folder
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        for suffix in itertools.count(1):
            folder = cls(Path(root) / (f"{experiment}-{stamp}" + (f"-{suffix}" if suffix > 1 else "")))
            try:
                folder._claim(config)
                return folder
            except FolderTaken:
                continue

    def _claim(self, config: dict) -> None:
        try:
            self.path.mkdir(parents=True)
            self._created = True
        except FileExistsError:
            if not self.path.is_dir():
                raise FolderTaken(f"{self.path} already exists and is not a folder") from None
        except OSError as err:  # a parent that is a file, no permission, a read-only disk
            raise ConfigError(f"cannot create the run folder {self.path}: {err.strerror}") from None
        try:
            write_atomic(self.config_file, dump(config), exclusive=True)
        except FileExistsError:
            raise FolderTaken(f"{self.path} already exists and is not empty; runs are never overwritten") from None
        # Another process's scratch file is no content: it is claiming this folder too, and loses.
        if any(p != self.config_file and not p.name.endswith(SCRATCH_SUFFIX) for p in self.path.iterdir()):
            self.config_file.unlink()
            raise FolderTaken(f"{self.path} already exists and is not empty; runs are never overwritten")

    def discard(self) -> None:
        """Remove what :meth:`create` made: the folder (or, for an ``out`` that existed empty, its contents)."""
        if self._created:
            shutil.rmtree(self.path)
        else:
            self._remove_all_but()

    def restart(self) -> None:
        """Remove everything but ``config.yaml``: a run stopped before its first checkpoint starts
        again from its config as if it were new."""
        self._remove_all_but(self.config_file)

    def _remove_all_but(self, kept: Path | None = None) -> None:
        for child in self.path.iterdir():
            if child == kept:
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()

    @classmethod
    def open(cls, path: str | Path) -> RunFolder:
        """An existing run folder (it must hold ``config.yaml``)."""
        run = cls(path)
        if not run.config_file.exists():
            raise ConfigError(f"{path} is not a run folder (no config.yaml)")
        return run

    config_file = property(lambda self: self.path / "config.yaml")
    metrics_file = property(lambda self: self.path / "metrics.parquet")
    claims_file = property(lambda self: self.path / "claims.json")
    info_file = property(lambda self: self.path / "run.json")
    checkpoints = property(lambda self: self.path / "checkpoints")

    @property
    def finished(self) -> bool:
        return self.claims_file.exists()

    def evaluations(self) -> list[EvaluationFolder]:
        """The evaluations of this run's models (``iclab eval``) written inside it, oldest first."""
        found = (EvaluationFolder(p.parent) for p in self.path.glob("*/evaluation.yaml"))
        return sorted(found, key=lambda e: e.spec_file.stat().st_mtime)

    @property
    def has_checkpoint(self) -> bool:
        """Whether any model has written a checkpoint (what :func:`iclab.resume` continues from)."""
        from .train import STATE  # the layout's names; imported on use (torch), as the readers below

        return bool(self.legacy_checkpoints()) or any(self.checkpoints.glob(f"*/seed*/{STATE}"))

    def legacy_checkpoints(self) -> list[Path]:
        """The one-file checkpoints of a run written before the current layout (they resume, but
        record no model to rebuild)."""
        return sorted(self.checkpoints.glob("*-seed*.safetensors"))

    def weights(self) -> list[Checkpoint]:
        """Every weights file, latest and kept, ordered by model, seed and step (a kept step that is
        also the latest is listed once, as the latest)."""
        from .train import WEIGHTS

        found = {}
        for folder in sorted(self.checkpoints.glob("*/seed*")):
            seed = re.fullmatch(r"seed(\d+)", folder.name)
            if seed is None:
                continue
            kept = {
                int(m[1]): p
                for p in folder.glob("step*.safetensors")
                if (m := re.fullmatch(r"step(\d+)\.safetensors", p.name))
            }
            if (folder / WEIGHTS).exists():
                kept[_weights_step(folder / WEIGHTS)] = folder / WEIGHTS
            for step, path in kept.items():
                found[folder.parent.name, int(seed[1]), step] = Checkpoint(folder.parent.name, int(seed[1]), step, path)
        return [found[key] for key in sorted(found)]

    def write_config(self, config: dict) -> None:
        """Rewrite ``config.yaml`` (e.g. with the overrides of a resume)."""
        write_atomic(self.config_file, dump(config))

    def read_config(self) -> dict:
        return yaml.safe_load(self.config_file.read_text())

    def write_metrics(self, rows: list[dict]) -> None:
        """Long format: one row per (setting, model, seed, step, n, metric) with its value."""
        columns = ["setting", "model", "seed", "step", "n", "metric", "value"]
        frame = pd.DataFrame(rows)
        for column in columns:
            if column not in frame:
                frame[column] = None
        extra = [c for c in frame.columns if c not in columns]
        frame = frame[columns + extra]
        for column in ("seed", "step", "n"):
            frame[column] = frame[column].astype("Int64")
        write_atomic(self.metrics_file, lambda path: frame.to_parquet(path, index=False))

    def read_metrics(self) -> pd.DataFrame:
        return pd.read_parquet(self.metrics_file)

    def seed_figures(self, seed: int) -> RunFolder:
        """This folder, its figures going to ``figures/seed<seed>/`` (those of a run's later seeds: the
        report shows the first seed's, in ``figures/``)."""
        view = RunFolder(self.path)
        view.figure_folder = f"figures/seed{seed}"
        return view

    def write_claims(self, claims: list[Claim | dict]) -> None:
        """``claims.json``: claims, or their entries as :func:`iclab.claims.over_seeds` writes them."""
        entries = [c.to_dict() if isinstance(c, Claim) else c for c in claims]
        write_atomic(self.claims_file, json.dumps(entries, indent=2, default=float) + "\n")

    def read_claims(self) -> list[dict]:
        return json.loads(self.claims_file.read_text()) if self.claims_file.exists() else []

    def write_info(self, info: dict) -> None:
        """``run.json``: the environment and timing of the session that finished the run."""
        write_atomic(self.info_file, json.dumps(info, indent=2) + "\n")

    def read_info(self) -> dict:
        """``run.json``, or ``{}`` for an unfinished run (or one from before the file existed)."""
        return json.loads(self.info_file.read_text()) if self.info_file.exists() else {}


class SweepFolder(_Folder):
    """Paths and readers/writers for a sweep: one run folder per grid point, and the sweep's tables.

    runs/sweep-<experiment>-<yyyymmdd-hhmmss>/
      sweep.yaml        the command: experiment, scale, grid, seeds, overrides, metric, resources
      <point>/          an ordinary run folder per grid point (name: ``key=value__key=value``)
      points.parquet    one row per point: its grid values, status (finished / failed) and error
      sweep.parquet     every finished point's metric rows, with the grid values as columns
      claims.parquet    one row per (point, claim): grid values, claim id, holds, measured, expected
      figures/*.png  report.html
      .locks/           a lock per point, held while a worker runs it
    """

    spec_file = property(lambda self: self.path / "sweep.yaml")
    points_file = property(lambda self: self.path / "points.parquet")
    metrics_file = property(lambda self: self.path / "sweep.parquet")
    claims_file = property(lambda self: self.path / "claims.parquet")

    @classmethod
    def create(cls, spec: dict, out: str | Path | None = None, root: str | Path = "runs") -> SweepFolder:
        """A new sweep folder holding ``sweep.yaml``: ``out`` (which must not hold a sweep) or
        ``<root>/sweep-<experiment>-<timestamp>``."""
        if out is None:
            out = _new_folder(Path(root) / f"sweep-{spec['experiment']}-{dt.datetime.now():%Y%m%d-%H%M%S}")
        sweep = cls(out)
        sweep.path.mkdir(parents=True, exist_ok=True)
        try:
            write_atomic(sweep.spec_file, dump(spec), exclusive=True)
        except FileExistsError:
            raise ConfigError(f"{out} already holds a sweep; continue it with `iclab sweep --resume {out}`") from None
        return sweep

    @classmethod
    def open(cls, path: str | Path) -> SweepFolder:
        """An existing sweep folder (it must hold ``sweep.yaml``)."""
        sweep = cls(path)
        if not sweep.spec_file.exists():
            raise ConfigError(f"{path} is not a sweep folder (no sweep.yaml)")
        return sweep

    def read_spec(self) -> dict:
        return yaml.safe_load(self.spec_file.read_text())

    def write_spec(self, spec: dict) -> None:
        """Rewrite ``sweep.yaml`` (e.g. with a resume's new trial resources)."""
        write_atomic(self.spec_file, dump(spec))

    def run(self, point: str) -> RunFolder:
        """The run folder of one grid point."""
        return RunFolder(self.path / point)

    def read_table(self, path: Path) -> pd.DataFrame:
        """One of the sweep's parquet tables (empty when it was not written)."""
        return pd.read_parquet(path) if path.exists() else pd.DataFrame()


class EvaluationFolder(_Folder):
    """An evaluation of a trained model (``iclab eval``): a run folder's files without the training.

    <run>/eval-<yyyymmdd-hhmmss>/
      evaluation.yaml   the exact command, and what it resolved to: source, model, seed, steps, task,
                        shifts, learners, prompts, bootstrap, metric
      metrics.parquet   long format as a run's: setting (the shift), model (the model's name or a
                        learner's), seed, step (the checkpoint's; empty for learners), n (examples k),
                        metric (e.g. normalised_mse, normalised_mse_p05, normalised_mse_p95), value
      figures/*.png  report.html
    """

    spec_file = property(lambda self: self.path / "evaluation.yaml")
    metrics_file = property(lambda self: self.path / "metrics.parquet")
    write_metrics = RunFolder.write_metrics
    read_metrics = RunFolder.read_metrics

    @classmethod
    def create(cls, spec: dict, out: str | Path | None = None, root: str | Path = ".") -> EvaluationFolder:
        """A new folder holding ``evaluation.yaml``: ``out`` (which must not exist, or be empty), else
        ``<root>/eval-<timestamp>`` (numbered when taken)."""
        if out is None:
            out = _new_folder(Path(root) / f"eval-{dt.datetime.now():%Y%m%d-%H%M%S}")
        else:
            cls.refuse_taken(out)
        folder = cls(out)
        folder.path.mkdir(parents=True, exist_ok=True)
        folder.spec_file.write_text(dump(spec))
        return folder

    @staticmethod
    def refuse_taken(out: str | Path) -> None:
        """A :class:`ConfigError` unless ``out`` is absent or an empty folder (evaluations are never overwritten)."""
        out = Path(out)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise ConfigError(f"{out} already exists and is not an empty folder; evaluations are never overwritten")

    @classmethod
    def open(cls, path: str | Path) -> EvaluationFolder:
        """An existing evaluation folder (it must hold ``evaluation.yaml``)."""
        folder = cls(path)
        if not folder.spec_file.exists():
            raise ConfigError(f"{path} is not an evaluation folder (no evaluation.yaml)")
        return folder

    def read_spec(self) -> dict:
        return yaml.safe_load(self.spec_file.read_text())


def _new_folder(path: Path) -> Path:
    """Make ``path`` (or ``path-2``, ``path-3``, ... when taken) with an exclusive ``mkdir``."""
    for suffix in itertools.count(1):
        candidate = path.with_name(path.name + (f"-{suffix}" if suffix > 1 else ""))
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            continue
        except OSError as err:  # a parent that is a file, no permission, a read-only disk
            raise ConfigError(f"cannot create the folder {candidate}: {err.strerror}") from None
