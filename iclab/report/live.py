"""A run's training as it goes: ``metrics.parquet`` rewritten with the rows so far, TensorBoard events
(``log.tensorboard=true``) and a Weights & Biases run (``log.wandb=true``) fed at every logging step.

What the live log writes is for watching. The finished run's files are written from its final rows
(``metrics.parquet`` by the run, ``tb/`` anew by :func:`~iclab.report.tensorboard.write_events`), so a
resumed run holds its history once. The W&B run is named after the run folder, holds the resolved
config, the training rows against ``train_step`` as ``<setting>/<model>/seed<k>/<metric>``, and, when the
run ends, the final metrics and each claim's verdict in its summary. ``WANDB_MODE=offline`` (W&B's own
variable) keeps it on disk, under the run folder's ``wandb/``; so does a W&B that cannot start online (no login,
no terminal to ask for one, no network), with one line saying so (``wandb sync`` uploads it later).

The loggers are for watching, never what a run depends on: a TensorBoard or W&B failure while the run goes
(a full disk, a lost connection) logs one line and turns that logger off; the run goes on.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable

from ..config import ConfigError
from ..runs import RunFolder, first_line
from .tensorboard import TensorBoardWriters, write_events

log = logging.getLogger(__name__)

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
            self._guarded("tensorboard", lambda: self.tensorboard.add(new))
        if self.wandb is not None and new:
            self._guarded(
                "wandb", lambda: self.wandb.log({"train_step": new[0]["step"], **{_key(r): r["value"] for r in new}})
            )
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
            self._guarded("tensorboard", lambda: self._close_tensorboard(claims is not None))
        if self.wandb is not None:
            self._guarded("wandb", lambda: self._close_wandb(rows, claims))

    def _close_tensorboard(self, finished: bool) -> None:
        self.tensorboard.close()
        if finished:
            write_events(self.folder)

    def _close_wandb(self, rows: list[dict] | None, claims: list | None) -> None:
        for row in rows or []:
            if row.get("step") is None:
                self.wandb.summary[_key(row)] = row["value"]
        for claim in claims or []:
            self.wandb.summary[f"claim/{claim['id']}"] = claim["holds"]
        self.wandb.finish(exit_code=0 if claims is not None else 1)

    def _guarded(self, logger: str, call: Callable[[], None]) -> None:
        """``call`` a logger (``tensorboard`` or ``wandb``); a failure logs one line and turns it off."""
        try:
            call()
        except Exception as err:  # a full disk, a lost connection: the run goes on without this logger
            setattr(self, logger, None)
            reason = first_line(err)
            log.warning("iclab: %s logging failed (%s) and is off for the rest of %s", logger, reason, self.folder.path)


def _key(row: dict) -> str:
    parts = [row.get("setting"), row.get("model"), None if row.get("seed") is None else f"seed{row['seed']}"]
    return "/".join([*(str(p) for p in parts if p is not None), row["metric"]])


def _wandb_run(folder: RunFolder, config: dict):
    """A W&B run for ``folder``: online where W&B can start one, else offline under ``wandb/`` with one line (no
    login and no terminal to ask for one, no network); None, with one line, where not even that starts."""
    import wandb  # the optional extra: only a run that asks for it imports it

    settings = dict(
        project=config["log"].get("wandb_project") or "iclab",
        name=folder.path.name,
        dir=folder.path,
        config=config,
        reinit="create_new",  # a process that runs several experiments (a reproduction) gets a run each
    )
    try:
        run = wandb.init(**settings)
    except Exception as err:
        reason = first_line(err)
        try:
            run = wandb.init(**settings, mode="offline", settings=wandb.Settings(silent=True))
        except Exception as again:
            log.warning("iclab: W&B could not start (%s; offline: %s): the run goes on without it", reason, again)
            return None
        log.warning(
            "iclab: W&B could not start online (%s): logging offline to %s; `wandb sync` uploads it later",
            reason,
            folder.path / "wandb",
        )
    run.define_metric("train_step")
    run.define_metric("*", step_metric="train_step")
    return run
