"""Where a run's time goes: the parts of an experiment, the models each trains or reuses, and the claims each
serves, so that a recipe's cost shows per finding (``run.json`` ``time``; docs/claim-costs.md).

An experiment wraps each part of its run in ``with ctx.part(name, claims=[...])`` (:meth:`Ledger.part`): the
part's wall time (its training and its evaluation) is summed over the seed passes, the models ``ctx.trained``
trains inside it are timed, and a model trained by another part and asked for again here (or named as a warm
start's source) is noted as reused. A claim *needs* the parts whose ``claims`` patterns match its id
(:func:`fnmatch.fnmatchcase` patterns; one starting with ``!`` excludes) and the models those parts reuse: its cost is
their seconds, counted once each, and its share is that cost over the run's wall time. Claims of one part share its
cost, so shares do not sum to one. What a part reads of another besides its models (a closed form computed there)
is not charged, nor the source of a reused model's own warm start; the time outside every part (shared set-up,
figures drawn outside a part, the claims judged over seeds, writing the metrics) is reported as such, with the
models trained there.

A resumed run adds the training its earlier sessions did (its checkpoints record it, :class:`iclab.train.TrainResult`
``earlier_seconds``) to the model, to the part that asked for it, and to the run's wall time (:attr:`Ledger.earlier`);
what those sessions evaluated before they stopped is done again and counted once. A run whose checkpoints were copied
from another (a continuation, a judging again) counts none of the training they record: it is that run's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase


@dataclass
class Part:
    """One part's time: its wall seconds, the seconds each model it trained took, the models it reused from
    other parts, and the patterns of the claims it serves."""

    claims: tuple[str, ...]
    seconds: float = 0.0
    training: dict[str, float] = field(default_factory=dict)
    reused: set[str] = field(default_factory=set)

    def serves(self, claim: str) -> bool:
        """Whether the claim ``claim`` (an id) needs this part: some pattern matches it and no ``!`` pattern does."""
        wanted = [p for p in self.claims if not p.startswith("!")]
        excluded = [p[1:] for p in self.claims if p.startswith("!")]
        return any(fnmatchcase(claim, p) for p in wanted) and not any(fnmatchcase(claim, p) for p in excluded)


@dataclass
class Ledger:
    """The parts of one run and their time (see the module's docstring); shared by every seed pass of the run."""

    parts: dict[str, Part] = field(default_factory=dict)
    outside: dict[str, float] = field(default_factory=dict)
    """Training seconds of the models trained outside every part."""
    earlier: float = 0.0
    """Training seconds of earlier sessions of a resumed run, which this session's clock does not see."""
    inherited: bool = False
    """The run's checkpoints were copied from another run (a continuation, a judging again): the training they
    record is that run's, not counted here."""
    _open: str | None = field(default=None, init=False, repr=False)
    failed_in: str | None = field(default=None, init=False, repr=False)
    """The part a failure left (None: none was open)."""

    @contextmanager
    def part(self, name: str, claims: Sequence[str]) -> Iterator[None]:
        """Time the block as part ``name``, serving the claims matching ``claims`` (a list of patterns). Entered
        again (the next seed's pass), the time adds up; parts do not nest."""
        if isinstance(claims, str):
            raise TypeError(f"part {name!r}: claims is a list of patterns, not one string")
        if self._open is not None:
            raise RuntimeError(f"part {name!r} opened inside part {self._open!r}: parts do not nest")
        part = self.parts.setdefault(name, Part(tuple(claims)))
        if part.claims != tuple(claims):
            raise ValueError(f"part {name!r} was opened before with other claim patterns")
        self._open, started = name, time.perf_counter()
        try:
            yield
        except BaseException:
            self.failed_in = name  # what a failure's message names
            raise
        finally:
            part.seconds += time.perf_counter() - started
            self._open = None

    def trained(self, model: str, seconds: float, earlier: float = 0.0) -> None:
        """Book ``seconds`` of training of ``model`` to the open part (or to :attr:`outside`), and ``earlier``
        seconds that earlier sessions of a resumed run spent training it (to the open part's time as well)."""
        earlier = 0.0 if self.inherited else earlier
        book = self.outside if self._open is None else self.parts[self._open].training
        book[model] = book.get(model, 0.0) + seconds + earlier
        self.earlier += earlier
        if self._open is not None:
            self.parts[self._open].seconds += earlier

    def uses(self, model: str) -> None:
        """Note that the open part uses ``model``, trained by another part (asked for again, or a warm start's
        source); nothing outside a part."""
        if self._open is not None:
            self.parts[self._open].reused.add(model)

    def summary(self, wall_seconds: float, claims: Iterable[str]) -> dict:
        """``run.json``'s ``time``: the run's wall seconds; each part's seconds, share, training per model, reused
        models and the claims it serves; the seconds outside every part and the models trained there; each claim's
        parts, reused models, seconds and share (the module's docstring says how they are counted)."""
        claims = list(dict.fromkeys(claims))
        wall = max(wall_seconds, 1e-9)
        inside = sum(part.seconds for part in self.parts.values())
        out = {
            "wall_seconds": round(wall_seconds, 2),
            "parts": {
                name: {
                    "seconds": round(part.seconds, 2),
                    "share": round(part.seconds / wall, 4),
                    "training": {m: round(s, 2) for m, s in part.training.items()},
                    "reused": sorted(part.reused - part.training.keys()),
                    "claims": [c for c in claims if part.serves(c)],
                }
                for name, part in self.parts.items()
            },
            "outside_parts_seconds": round(max(wall_seconds - inside, 0.0), 2),
            "outside_parts_training": {m: round(s, 2) for m, s in self.outside.items()},
            "claims": {},
        }
        for claim in claims:
            needed = [name for name, part in self.parts.items() if part.serves(claim)]
            reused = {m for name in needed for m in self.parts[name].reused} - {
                m for name in needed for m in self.parts[name].training
            }
            seconds = sum(self.parts[name].seconds for name in needed) + sum(self._training(m) for m in reused)
            out["claims"][claim] = {
                "parts": needed,
                "reused": sorted(reused),
                "seconds": round(seconds, 2),
                "share": round(seconds / wall, 4),
            }
        return out

    def _training(self, model: str) -> float:
        """Every second spent training ``model``, in any part or outside them."""
        return self.outside.get(model, 0.0) + sum(part.training.get(model, 0.0) for part in self.parts.values())
