"""Figure helpers shared by the experiments (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..runs import write_atomic  # noqa: E402


def new_figure(n_panels: int = 1, width: float = 4.5, height: float = 3.4, rows: int = 1):
    """A figure with ``rows × n_panels`` axes (returned as a flat array)."""
    fig, axes = plt.subplots(rows, n_panels, figsize=(width * n_panels, height * rows), squeeze=False)
    return fig, axes.ravel()


def panel_grid(n_panels: int, width: float, height: float, columns: int = 4):
    """``n_panels`` axes in rows of at most ``columns`` (a figure of many models stays a readable size);
    the grid's unused axes are hidden."""
    shown = min(n_panels, columns)
    fig, axes = new_figure(shown, width, height, rows=-(-n_panels // shown))
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def save(fig, path: Path) -> Path:
    """Save as PNG, whole or not at all (:func:`iclab.runs.write_atomic`: a full disk or a file-size limit is a
    :class:`~iclab.config.ConfigError` naming the file), and close."""
    try:
        fig.tight_layout()
        write_atomic(path, lambda scratch: fig.savefig(scratch, dpi=110, format="png"))
    finally:
        plt.close(fig)
    return path


def band_line(ax, x, mean, low, high, **style):
    """A line through ``mean`` over ``x`` with its band from ``low`` to ``high`` shaded in the line's colour
    (arrays, lists or tensors); ``style`` goes to ``ax.plot``. Returns the line."""
    values = [np.asarray(v.numpy() if hasattr(v, "numpy") else v, dtype=float) for v in (x, mean, low, high)]
    line = ax.plot(values[0], values[1], **style)[0]
    ax.fill_between(values[0], values[2], values[3], color=line.get_color(), alpha=0.2)
    return line


def training_curve(ax, history: pd.DataFrame, label: str, metric: str = "train_loss", color=None):
    """Mean over seeds with a min–max band, from long-format rows (seed, step, metric, value)."""
    rows = history[history.metric == metric]
    table = rows.pivot_table(index="step", columns="seed", values="value")
    line = band_line(
        ax, table.index, table.mean(axis=1), table.min(axis=1), table.max(axis=1), label=label, color=color
    )
    ax.set_xlabel("step")
    return line


def heatmap(ax, matrix, title: str, limit: float | None = None):
    """A diverging heatmap centred at 0, with the matrix entries' scale in a colour bar."""
    matrix = np.asarray(matrix, dtype=float)
    limit = limit or max(float(np.abs(matrix).max()), 1e-12)
    image = ax.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
