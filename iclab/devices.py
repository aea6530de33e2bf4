"""Device selection: CUDA when available, CPU otherwise, or what the user asks for."""

from __future__ import annotations

import torch

from .config import ConfigError


def pick_device(requested: str | None = None) -> torch.device:
    """Return ``requested`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) or the best available device.

    Anything this machine cannot train on is a :class:`ConfigError`, raised before a run starts.
    """
    if requested in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as err:
        raise ConfigError(f"unknown device {requested!r}; use cpu, cuda, cuda:N or mps") from err
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda asked for, but no CUDA device is available")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"--device {requested}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return device
    if device.type == "mps" and torch.backends.mps.is_available():
        return device
    raise ConfigError(f"device {requested!r} is not available here; use cpu, cuda, cuda:N or mps")
