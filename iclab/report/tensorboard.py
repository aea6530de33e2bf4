"""TensorBoard event files for a run (``--set log.tensorboard=true``), written from ``metrics.parquet``.

    tb/seed<k>/   rows of seed k      tb/unseeded/   rows of no seed (reference learners, theory)

Tags are ``<setting>/<model>/<metric>``: training history at its steps, so the seeds of a
model overlay in one chart. Final evaluations (rows with no step) are tagged
``final/<setting>/<model>/<metric>`` at step ``n`` (the prefix length, for per-prefix losses)
or 0. While the run trains, :class:`TensorBoardWriters` add each logging step's rows (flushed at once,
for watching, see :mod:`iclab.report.live`); when it finishes, :func:`write_events` writes the events
anew from the same rows as the metrics file, so a resumed run's events hold its history once, exactly
as ``metrics.parquet`` does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from ..runs import RunFolder


def _absent(value) -> bool:
    return value is None or pd.isna(value)


def _tag(row: dict) -> str:
    parts = [str(row.get(k)) for k in ("setting", "model", "metric") if not _absent(row.get(k))]
    return "/".join(parts if not _absent(row.get("step")) else ["final", *parts])


def _step(row: dict) -> int:
    """A row's step: its training step, else its prefix length ``n``, else 0."""
    return int(next((row[k] for k in ("step", "n") if not _absent(row.get(k))), 0))


class TensorBoardWriters:
    """One event writer per seed under ``folder`` (``seed<k>/``, ``unseeded/``), opened as rows arrive."""

    def __init__(self, folder: Path):
        self.folder, self.writers = folder, {}

    def add(self, rows) -> None:
        """Add metric rows (dicts) as scalars and flush, so TensorBoard shows them now."""
        for row in rows:
            seed = row.get("seed")
            name = "unseeded" if _absent(seed) else f"seed{seed}"
            if name not in self.writers:
                from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

                self.writers[name] = SummaryWriter(self.folder / name)
            self.writers[name].add_scalar(_tag(row), float(row["value"]), _step(row))
        for writer in self.writers.values():
            writer.flush()

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


def write_events(run: RunFolder) -> Path:
    """Write the run's metric rows as TensorBoard scalars under ``tb/`` (replacing what the live log
    wrote there); returns that folder."""
    folder = run.path / "tb"
    shutil.rmtree(folder, ignore_errors=True)
    writers = TensorBoardWriters(folder)
    writers.add(run.read_metrics().sort_values("seed", kind="stable").to_dict("records"))
    writers.close()
    return folder
