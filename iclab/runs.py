"""Run folders: where a run's config, metrics, claims, checkpoints, figures and report live.

    runs/<experiment>-<yyyymmdd-hhmmss>/
      config.yaml  metrics.parquet  claims.json  checkpoints/  figures/*.png  report.html

A run folder is never overwritten. ``claims.json`` is written last, so its presence marks a
finished run; a folder without it can be resumed.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd
import yaml

from .claims import Claim
from .config import ConfigError, dump


class RunFolder:
    """Paths and readers/writers for one run folder."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def create(cls, experiment: str, out: str | Path | None = None, root: str | Path = "runs") -> "RunFolder":
        """Make a new folder: ``out`` exactly (must not exist or be empty), else a timestamped one."""
        if out is not None:
            path = Path(out)
            if path.exists() and (not path.is_dir() or any(path.iterdir())):
                raise ConfigError(f"{path} already exists and is not empty; runs are never overwritten")
        else:
            stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            path = Path(root) / f"{experiment}-{stamp}"
            suffix = 1
            while path.exists():
                suffix += 1
                path = Path(root) / f"{experiment}-{stamp}-{suffix}"
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

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

    def figure(self, name: str) -> Path:
        """Path for ``figures/<name>.png`` (the folder is created)."""
        folder = self.path / "figures"
        folder.mkdir(exist_ok=True)
        return folder / f"{name}.png"

    def figures(self) -> list[Path]:
        return sorted((self.path / "figures").glob("*.png"))

    def write_config(self, config: dict) -> None:
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
