"""Deterministic random streams.

Every random draw in iclab comes from a ``torch.Generator`` derived from the run's seed and
a named stream (``"init"``, ``"data"``, step number, ...). Seed k of a multi-seed run uses
the base seed plus k, so it can be rerun alone; data at training step t depends only on
(seed, t), so a resumed run sees exactly the prompts it would have seen. Streams are CPU
generators (a CUDA generator yields different numbers from the same seed): data is drawn on the
CPU and then moved, so a seed sees the same prompts on every device.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch


def _entropy(part: int | str) -> int:
    return zlib.crc32(part.encode()) if isinstance(part, str) else int(part)


def generator(seed: int, *stream: int | str) -> torch.Generator:
    """A fresh CPU generator for ``(seed, *stream)``; different streams are independent."""
    state = np.random.SeedSequence([_entropy(seed), *map(_entropy, stream)]).generate_state(2)
    g = torch.Generator()
    g.manual_seed(int(state[0]) << 32 | int(state[1]))
    return g
