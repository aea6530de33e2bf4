"""What a resolved config needs of the machine's memory, known before anything allocates.

:func:`needs` reads a config's size keys by their names (the same names across experiments: ``d``,
``n_context``, ``width``, ``n_layers``, ``batch_size``, ``eval_prompts``, …; see :data:`ROLES`) and sizes
the tensors a run of it holds at once: the model's parameters with their gradients and Adam's two moments,
a training batch's activations, the evaluation's prompts, the learners' per-prefix solves, the dense d × d
matrices of the theory, the evaluation's forward pass and the bootstrap's resampling. Each is an upper
estimate in float32 (float64 where the learners and the theory compute), never a measurement.
:func:`check_memory` refuses, in one line naming the key that drives it, a config whose total exceeds what the
machine has (or ``limits.memory_gb``)."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .config import ConfigError, leaves

GB = 1024**3

ROLES: dict[str, Callable[[str], bool]] = {
    "d": lambda key: key in ("d", "d_sweep"),
    "n": lambda key: key in ("n_context", "n_contexts", "deep_n_context", "d_sweep_n_context", "length", "block"),
    "width": lambda key: key in ("width", "hidden", "hidden_units", "net_hidden"),
    "layers": lambda key: key in ("n_layers", "depths", "deep_layers", "d_sweep_deep", "layers"),
    "heads": lambda key: key == "n_heads",
    "batch": lambda key: key in ("batch_size", "eval_batch"),
    "prompts": lambda key: (
        key.endswith(("_prompts", "draws")) or key in ("test_size", "train_size", "sizes", "eval_samples")
    ),
    # the number of symbols (rows of an embedding table): abstract-symbols' alphabet sizes, a tokenizer's vocabulary
    "vocab": lambda key: key in ("vocab_size", "n", "plain_n", "ntk_n", "validation", "test"),
    # the prompts a model is evaluated on at once (an experiment that evaluates in batches names their size)
    "evaluated": lambda key: key in ("eval_prompts", "test_size", "eval_samples"),
    "eval_batch": lambda key: key == "eval_batch",
    "bootstrap": lambda key: key == "bootstrap",
}
"""Each size a memory estimate reads, by the last part of a config key's name (a list's largest value counts)."""

FALLBACK = {"d": 1, "n": 16, "layers": 1, "heads": 1, "batch": 1, "prompts": 1, "vocab": 0, "evaluated": 1}
"""The sizes of an experiment without such a key (a model with no width is a d + 1-wide linear attention)."""


@dataclass(frozen=True)
class Size:
    """One size a config sets: its value and the dotted key it comes from (``None``: :data:`FALLBACK`)."""

    value: int
    key: str | None = None


@dataclass(frozen=True)
class Need:
    """Memory a run holds for one purpose (``what``), in bytes, and the sizes that set it."""

    what: str
    bytes: float
    sizes: tuple[Size, ...]


def sizes(config: Mapping[str, Any]) -> dict[str, Size]:
    """The largest value of each role of :data:`ROLES` in ``config`` (positive integers only, the loggers' keys
    aside), with its key; the roles no key sets from :data:`FALLBACK`."""
    found: dict[str, Size] = {}
    for key, value in leaves(config):
        values = value if isinstance(value, list) else [value]
        numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0]
        name = key.rpartition(".")[2]
        if not numbers or key.startswith("log."):
            continue
        for role, matches in ROLES.items():
            if matches(name) and (role not in found or max(numbers) > found[role].value):
                found[role] = Size(max(numbers), key)
    for role, value in FALLBACK.items():
        found.setdefault(role, Size(value))
    found.setdefault("width", Size(found["d"].value + 1))
    found.setdefault("eval_batch", found["evaluated"])
    found.setdefault("bootstrap", Size(1000))  # iclab.metrics.mean_band's default
    return found


def needs(config: Mapping[str, Any]) -> list[Need]:
    """The memory a run of ``config`` holds at once, one :class:`Need` a purpose, largest first."""
    s = sizes(config)
    d, n, w, layers = s["d"].value, s["n"].value, s["width"].value, s["layers"].value
    batch, prompts, heads, vocab = s["batch"].value, s["prompts"].value, s["heads"].value, s["vocab"].value
    evaluated = min(s["evaluated"].value, s["eval_batch"].value)
    parameters = layers * 12 * w * w + (2 * (d + 1) + vocab + n) * w
    out = [
        # weights, gradients and Adam's two moments, float32
        Need(
            "the model's parameters and optimizer state", 16 * parameters, (s["width"], s["layers"], s["d"], s["vocab"])
        ),
        # about 24 floats a token, width and layer kept for the backward pass, and each head's n × n scores
        Need(
            "a training batch's activations",
            4 * batch * layers * (24 * n * w + 2 * heads * n * n),
            (s["batch"], s["n"], s["width"], s["layers"], s["heads"]),
        ),
        # the prompts in float64 (the learners' precision) and a copy
        Need("the evaluation's prompts", 16 * prompts * n * (d + 1), (s["prompts"], s["n"], s["d"])),
        # a Gram or kernel matrix, its Cholesky factor and a triangular solve per prompt
        Need("the learners' per-prefix solves", 24 * prompts * min(n, d) ** 2, (s["prompts"], s["n"], s["d"])),
        # a covariance, its factor, a preconditioner and its inverse, float64
        Need("the d × d matrices of the task and the theory", 32 * d * d, (s["d"],)),
        # without gradients: 48 bytes a token and width (measured: a GPT of 4 × 64 and one of 16 × 512), and a layer's
        # n × n scores and their softmax for each head
        Need(
            "the evaluation's forward pass",
            evaluated * 2 * n * (48 * w + 8 * heads * 2 * n),
            (s["evaluated"], s["eval_batch"], s["n"], s["width"], s["heads"]),
        ),
        # iclab.metrics.mean_band draws 100 replicates at a time: an index, counts and ones per prompt, 8 bytes each
        Need(
            "the bootstrap's resampling",
            24 * min(100, s["bootstrap"].value) * s["evaluated"].value,
            (s["evaluated"], s["bootstrap"]),
        ),
    ]
    return sorted(out, key=lambda need: -need.bytes)


def machine_memory() -> float:
    """The bytes this process may hold: the machine's memory, or its address-space limit where one is set
    (``ulimit -v``). A heap cap (the test suite's ``RLIMIT_DATA``) is a safety stop, not a size to plan by."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return float(total if soft == resource.RLIM_INFINITY else min(total, soft))


def gigabytes(count: float) -> str:
    """``count`` bytes in words: ``30.8 GB``, ``0.02 GB``."""
    value = count / GB
    return f"{value:.3g} GB" if value < 10 else f"{value:.1f} GB"


def driver(need: Need, defaults: Mapping[str, Any] | None = None) -> Size:
    """The size of ``need`` that drives it: the one furthest above its value in ``defaults`` (the experiment's
    quick config) where given, else the largest."""
    known = [size for size in need.sizes if size.key is not None] or list(need.sizes)
    base = sizes(defaults) if defaults is not None else {}

    def growth(size: Size) -> float:
        before = next((b.value for b in base.values() if b.key == size.key), None)
        return size.value / before if before else float(size.value)

    return max(known, key=growth)


def describe_memory(config: Mapping[str, Any]) -> str:
    """One line for ``iclab show``: the estimate, its largest part, and what the machine has."""
    parts = needs(config)
    top, total, allowed = parts[0], sum(p.bytes for p in parts), limit(config)
    return (
        f"estimated memory: about {gigabytes(total)} at once (the largest part, {top.what}, {gigabytes(top.bytes)}); "
        f"this machine lets a run hold {gigabytes(allowed)}"
        + (
            ": more than that, so `iclab run` refuses it (limits.memory_gb on a larger machine)"
            if total > allowed
            else ""
        )
    )


def limit(config: Mapping[str, Any]) -> float:
    """The bytes a run of ``config`` may hold: ``limits.memory_gb`` where set, else :func:`machine_memory`."""
    given = (config.get("limits") or {}).get("memory_gb")
    if given is None:
        return machine_memory()
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not 0 < given < float("inf"):
        raise ConfigError(f"limits.memory_gb must be a positive number of GB (or null: the machine's), got {given!r}")
    return given * GB


def check_memory(config: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> None:
    """A :class:`ConfigError` naming the key that drives it when the run of ``config`` would need more memory
    than :func:`limit` allows; ``defaults`` (the experiment's quick config) tells which key grew."""
    parts = needs(config)
    total, allowed = sum(p.bytes for p in parts), limit(config)
    if total <= allowed:
        return
    top = parts[0]
    size = driver(top, defaults)
    named = f"{size.key} = {size.value}" if size.key else "this config"
    raise ConfigError(
        f"{named} needs about {gigabytes(total)} ({top.what}: {gigabytes(top.bytes)}); this machine lets a run hold "
        f"{gigabytes(allowed)}: lower {size.key or 'its sizes'}, or set limits.memory_gb if it has more"
    )


ALLOCATOR_MESSAGES = ("can't allocate memory", "out of memory", "not enough memory", "failed to allocate")
"""What torch's allocators say when a tensor does not fit (CPU and CUDA), in lower case."""


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is an allocation that did not fit: Python's ``MemoryError``, torch's ``OutOfMemoryError``
    or an allocator's ``RuntimeError`` (read by its message: torch raises no class of its own on a CPU)."""
    if isinstance(err, MemoryError) or any(kind.__name__ == "OutOfMemoryError" for kind in type(err).__mro__):
        return True
    return isinstance(err, RuntimeError) and any(text in str(err).lower() for text in ALLOCATOR_MESSAGES)


def largest_key(config: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> str:
    """The size of ``config`` that drives its largest need, as ``key = value`` (for a message)."""
    size = driver(needs(config)[0], defaults)
    return f"{size.key} = {size.value}" if size.key else "its sizes"
