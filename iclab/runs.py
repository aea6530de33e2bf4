"""Run folders: where a run's config, metrics, claims, checkpoints, figures and report live.

    runs/<experiment>-<yyyymmdd-hhmmss>/
      config.yaml  metrics.parquet  claims.json  checkpoints/  figures/*.png  report.html

A run folder is never overwritten. ``claims.json`` is written last, so its presence marks a
finished run; a folder without it can be resumed.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import shutil
from pathlib import Path

import pandas as pd
import yaml

from .claims import Claim
from .config import ConfigError, dump


class RunFolder:
    """Paths and readers/writers for one run folder."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._created = False  # whether create() made the directory itself

    @classmethod
    def create(cls, experiment: str, config: dict, out: str | Path | None = None, root: str | Path = "runs") -> "RunFolder":
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
            except ConfigError:
                continue

    def _claim(self, config: dict) -> None:
        try:
            self.path.mkdir(parents=True)
            self._created = True
        except FileExistsError:
            if not self.path.is_dir():
                raise ConfigError(f"{self.path} already exists and is not a folder") from None
        try:
            with open(self.config_file, "x") as f:
                f.write(dump(config))
        except FileExistsError:
            raise ConfigError(f"{self.path} already exists and is not empty; runs are never overwritten") from None
        if any(p != self.config_file for p in self.path.iterdir()):
            self.config_file.unlink()
            raise ConfigError(f"{self.path} already exists and is not empty; runs are never overwritten")

    def discard(self) -> None:
        """Remove what :meth:`create` made: the folder (or, for an ``out`` that existed empty, its contents)."""
        if self._created:
            shutil.rmtree(self.path)
            return
        for child in self.path.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()

    @classmethod
    def open(cls, path: str | Path) -> "RunFolder":
        """An existing run folder (it must hold ``config.yaml``)."""
        run = cls(path)
        if not run.config_file.exists():
            raise ConfigError(f"{path} is not a run folder (no config.yaml)")
        return run

    config_file = property(lambda self: self.path / "config.yaml")
    metrics_file = property(lambda self: self.path / "metrics.parquet")
    claims_file = property(lambda self: self.path / "claims.json")
    report_file = property(lambda self: self.path / "report.html")
    checkpoints = property(lambda self: self.path / "checkpoints")

    @property
    def finished(self) -> bool:
        return self.claims_file.exists()

    @property
    def has_checkpoint(self) -> bool:
        """Whether any model has written a checkpoint (what :func:`iclab.resume` continues from)."""
        return self.checkpoints.is_dir() and any(self.checkpoints.glob("*.safetensors"))

    def figure(self, name: str) -> Path:
        """Path for ``figures/<name>.png`` (the folder is created)."""
        folder = self.path / "figures"
        folder.mkdir(exist_ok=True)
        return folder / f"{name}.png"

    def figures(self) -> list[Path]:
        return sorted((self.path / "figures").glob("*.png"))

    def write_config(self, config: dict) -> None:
        """Rewrite ``config.yaml`` (e.g. with the overrides of a resume)."""
        self.config_file.write_text(dump(config))

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
        frame.to_parquet(self.metrics_file, index=False)

    def read_metrics(self) -> pd.DataFrame:
        return pd.read_parquet(self.metrics_file)

    def write_claims(self, claims: list[Claim]) -> None:
        self.claims_file.write_text(json.dumps([c.to_dict() for c in claims], indent=2, default=float) + "\n")

    def read_claims(self) -> list[dict]:
        return json.loads(self.claims_file.read_text()) if self.claims_file.exists() else []
