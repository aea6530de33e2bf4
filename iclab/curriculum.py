"""A training curriculum over the input dimension d and the number of examples N (Garg et al.).

Training starts on easy prompts (few active coordinates, few examples) and grows both every
``every`` steps up to the full task. Fewer coordinates are obtained by truncation: the task is
drawn at the current dimension and its inputs are zero-padded to the full d, so the token size
(and hence the model) never changes. The schedule depends only on the step, so a resumed run
sees exactly the prompts it would have seen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .config import ConfigError
from .prompts import Prompt
from .rng import generator


@dataclass(frozen=True)
class Curriculum:
    """d grows from ``d_start`` by ``d_step`` and N from ``n_start`` by ``n_step`` every ``every``
    steps, up to ``d_end`` and ``n_end`` (the full task)."""

    d_start: int
    d_end: int
    n_start: int
    n_end: int
    d_step: int = 1
    n_step: int = 2
    every: int = 2000

    def __post_init__(self):
        if not (1 <= self.d_start <= self.d_end and 1 <= self.n_start <= self.n_end):
            raise ConfigError("curriculum needs 1 <= d_start <= d_end and 1 <= n_start <= n_end")
        if min(self.d_step, self.n_step, self.every) < 1:
            raise ConfigError("curriculum d_step, n_step and every must be >= 1")

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Curriculum:
        """Build from a ``curriculum:`` config block (same keys as the fields)."""
        try:
            return cls(**section)
        except TypeError as err:
            raise ConfigError(f"bad curriculum keys: {err}") from None

    @classmethod
    def towards(cls, section: Mapping[str, Any], d: int, n: int) -> Curriculum:
        """The curriculum of a ``curriculum:`` block that ends at the task's own d and N: the block's
        ``d_start``, ``n_start`` (default ``n``: N fixed), steps and ``every``, its starts clipped to
        (d, N); a block that names ``d_end`` or ``n_end`` must name the task's."""
        if section.get("d_end", d) != d or section.get("n_end", n) != n:
            raise ConfigError(f"curriculum.d_end and n_end must equal the task's d = {d} and N = {n}")
        block = {"n_start": n, **section}
        return cls.from_config(
            {
                **block,
                "d_start": min(block.get("d_start", d), d),
                "n_start": min(block["n_start"], n),
                "d_end": d,
                "n_end": n,
            }
        )

    def at(self, step: int) -> tuple[int, int]:
        """(d, N) at ``step`` (0-based)."""
        stage = step // self.every
        return min(self.d_end, self.d_start + stage * self.d_step), min(self.n_end, self.n_start + stage * self.n_step)


class CurriculumPrompts:
    """Fresh prompts each step from ``make_task(d, n)``, following ``curriculum``.

    Inputs of a task drawn at d' < d_end are zero-padded to d_end coordinates (truncation).
    A drop-in data source for :func:`iclab.train.train`.
    """

    def __init__(self, make_task: Callable[[int, int], Any], prompt_format, curriculum: Curriculum):
        self.make_task, self.format, self.curriculum = make_task, prompt_format, curriculum
        self._tasks: dict[tuple[int, int], Any] = {}

    @property
    def task(self):
        """The task of the curriculum's last stage: what the model is trained to."""
        return self.make_task(self.curriculum.d_end, self.curriculum.n_end)

    def batch(self, seed: int, step: int, device, batch_size: int) -> Prompt:
        d, n = self.curriculum.at(step)
        if (d, n) not in self._tasks:
            self._tasks[d, n] = self.make_task(d, n)
        episode = self._tasks[d, n].sample(batch_size, generator(seed, "train", step)).to(device)
        pad = self.curriculum.d_end - d
        if pad:
            widen = lambda x: torch.nn.functional.pad(x, (0, pad))
            episode = type(episode)(
                widen(episode.xs), episode.ys, widen(episode.x_query), episode.y_query, episode.truth
            )
        return self.format.encode(episode)


def training_data(task, prompt_format, curriculum: Mapping[str, Any] | None, make_task: Callable[[int, int], Any]):
    """The data arguments of :meth:`iclab.experiments.base.RunContext.trained` for a model of ``task`` read in
    ``prompt_format``: the task's own prompts (``{"task", "format"}``) when ``curriculum`` (a config block) is
    None, else ``{"data"}``, the curriculum towards the task's d and N with ``make_task(d, n)`` drawing each
    stage's prompts."""
    if curriculum is None:
        return {"task": task, "format": prompt_format}
    schedule = Curriculum.towards(curriculum, task.d, task.n_context)
    return {"data": CurriculumPrompts(make_task, prompt_format, schedule)}
