"""Device selection: CUDA when available, CPU otherwise, or what the user asks for."""

from __future__ import annotations

import torch

from .config import ConfigError


def pick_device(requested: str | None = None) -> torch.device:
    """Return ``requested`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``) or the best available device."""
    if requested in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as err:
        raise ConfigError(f"unknown device {requested!r}") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda asked for, but no CUDA device is available")
    return device
