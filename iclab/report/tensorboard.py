"""TensorBoard event files for a run (``--set log.tensorboard=true``), written from ``metrics.parquet``.

    tb/seed<k>/   rows of seed k      tb/unseeded/   rows of no seed (reference learners, theory)

Tags are ``<setting>/<model>/<metric>``: training history at its steps, so the seeds of a
model overlay in one chart. Final evaluations (rows with no step) are tagged
``final/<setting>/<model>/<metric>`` at step ``n`` (the prefix length, for per-prefix losses)
or 0. The events are written when the run finishes, from the same rows as the metrics file,
so a resumed run's events hold its history once, exactly as ``metrics.parquet`` does.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from ..config import ConfigError
from ..runs import RunFolder


def check_tensorboard(config: dict) -> None:
    """Raise :class:`ConfigError` before a run starts if it asks for TensorBoard events and the
    ``tensorboard`` package is missing."""
    if config.get("log", {}).get("tensorboard") and importlib.util.find_spec("tensorboard") is None:
        raise ConfigError("log.tensorboard=true needs the tensorboard package: pip install 'iclab[tensorboard]'")


def _tag(row) -> str:
    parts = [str(p) for p in (row.setting, row.model, row.metric) if not pd.isna(p)]
    return "/".join(parts if not pd.isna(row.step) else ["final", *parts])


def write_events(run: RunFolder) -> Path:
    """Write the run's metric rows as TensorBoard scalars under ``tb/``; returns that folder."""
    from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

    metrics = run.read_metrics()
    folder = run.path / "tb"
    for seed, rows in metrics.groupby("seed", dropna=False, sort=True):
        with SummaryWriter(folder / ("unseeded" if pd.isna(seed) else f"seed{seed}")) as writer:
            for row in rows.itertuples():
                step = row.step if not pd.isna(row.step) else (row.n if not pd.isna(row.n) else 0)
                writer.add_scalar(_tag(row), float(row.value), int(step))
    return folder
