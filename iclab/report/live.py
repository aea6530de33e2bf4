"""A run's training as it goes: ``metrics.parquet`` rewritten with the rows so far, TensorBoard events
(``log.tensorboard=true``) and a Weights & Biases run (``log.wandb=true``) fed at every logging step.

What the live log writes is for watching. The finished run's files are written from its final rows
(``metrics.parquet`` by the run, ``tb/`` anew by :func:`~iclab.report.tensorboard.write_events`), so a
resumed run holds its history once. The W&B run is named after the run folder, holds the resolved
config, the training rows against ``train_step`` as ``<setting>/<model>/seed<k>/<metric>``, and, when the
run ends, the final metrics and each claim's verdict in its summary. ``WANDB_MODE=offline`` (W&B's own
variable) keeps it on disk, under the run folder's ``wandb/``.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable

from ..config import ConfigError
from ..runs import RunFolder
from .tensorboard import TensorBoardWriters, write_events

REWRITE_SECONDS = 1.0
"""The least time between two rewrites of ``metrics.parquet`` (its cost grows with the rows logged)."""


def check_logging(config: dict) -> None:
    """Raise :class:`ConfigError` before a run starts if it asks for a logger whose package is missing."""
    log = config.get("log", {})
    for key, package, extra in (("tensorboard", "tensorboard", "tensorboard"), ("wandb", "wandb", "wandb")):
        if log.get(key) and importlib.util.find_spec(package) is None:
            raise ConfigError(f"log.{key}=true needs the {package} package: pip install 'iclab[{extra}]'")


class LiveLog:
    """Feeds a run's loggers with the training rows of every logging step; :meth:`close` when it ends."""

    def __init__(self, folder: RunFolder, config: dict):
        log = config.get("log", {})
        self.folder, self.written = folder, 0.0
        self.tensorboard = TensorBoardWriters(folder.path / "tb") if log.get("tensorboard") else None
        self.wandb = _wandb_run(folder, config) if log.get("wandb") else None

    def update(self, new: list[dict], so_far: Callable[[], list[dict]]) -> None:
        """Log the ``new`` rows of one logging step (all of its ``step``); ``so_far()`` gives every row of the
        run until now."""
        if self.tensorboard is not None:
            self.tensorboard.add(new)
        if self.wandb is not None and new:
            self.wandb.log({"train_step": new[0]["step"], **{_key(r): r["value"] for r in new}})
        if time.monotonic() - self.written >= REWRITE_SECONDS:
            self.flush(so_far())

    def flush(self, rows: list[dict]) -> None:
        """Rewrite ``metrics.parquet`` with ``rows``, every row of the run until now (a model's training
        ends with one, whatever the time since the last)."""
        self.folder.write_metrics(rows)
        self.written = time.monotonic()

    def close(self, rows: list[dict] | None = None, claims: list | None = None) -> None:
        """Close the loggers; a finished run gives its final ``rows`` and ``claims`` (its ``claims.json``
        entries) for the W&B summary, and its TensorBoard events are written anew from its ``metrics.parquet``
        (evaluation rows included)."""
        if self.tensorboard is not None:
            self.tensorboard.close()
            if claims is not None:
                write_events(self.folder)
        if self.wandb is not None:
            for row in rows or []:
                if row.get("step") is None:
                    self.wandb.summary[_key(row)] = row["value"]
            for claim in claims or []:
                self.wandb.summary[f"claim/{claim['id']}"] = claim["holds"]
            self.wandb.finish(exit_code=0 if claims is not None else 1)


def _key(row: dict) -> str:
    parts = [row.get("setting"), row.get("model"), None if row.get("seed") is None else f"seed{row['seed']}"]
    return "/".join([*(str(p) for p in parts if p is not None), row["metric"]])


def _wandb_run(folder: RunFolder, config: dict):
    import wandb  # the optional extra: only a run that asks for it imports it

    run = wandb.init(
        project=config["log"].get("wandb_project") or "iclab",
        name=folder.path.name,
        dir=folder.path,
        config=config,
        reinit="create_new",  # a process that runs several experiments (a reproduction) gets a run each
    )
    run.define_metric("train_step")
    run.define_metric("*", step_metric="train_step")
    return run
