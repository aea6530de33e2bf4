"""One training loop for every model: several seeds at once, checkpoints, exact resume.

Seeds are trained together by stacking their parameters and mapping the model over them
with ``torch.func.vmap`` (models that cannot be vmapped train one seed after another with
``vectorize=False``). Adam, AdamW and SGD act elementwise, so a stacked run updates each seed
exactly as if it trained alone; gradient clipping is applied per seed. Data for seed s at
step t depends only on (s, t), and checkpoints hold the optimizer state, so a run that is
interrupted and resumed ends with the same weights as one that never stopped.

Checkpoints of model ``name`` and seed k live in ``<checkpoint_dir>/<name>/seed<k>/``:

    model.safetensors   the weights (the module's state dict), with metadata: name, seed, step and
                        whatever the caller's ``describe(model)`` says (class, constructor arguments,
                        prompt format, task, ...), every value JSON-encoded
    state.safetensors   optimizer state (``optim.<param>.<state>``), the logged history
                        (``history.<metric>.step`` / ``.value``) and the seconds spent training until
                        this step, every session of an interrupted run together (``train_seconds``); metadata: step
    step<N>.safetensors the weights at a step of ``train.keep``, with the same metadata
    previous/           the checkpoint before the latest (model and state), with a manifest

Each file is written whole to a temporary name (``model.tmp``, on the disk) and renamed into place, so a
checkpoint file is never seen half-written. A run's training is given its manifest (:class:`iclab.runs.Manifest`):
the files of a save, every seed's, are recorded in it (the sha256 of the bytes written, their size checked on the
disk) in one atomic rewrite, which is when the save counts; the latest pair then moves to ``previous/`` as the new
one takes its place. A save stopped before that rewrite leaves the checkpoints as they were; one stopped after it
is finished on resume. A resume checks each file against its entry (its sha256: a save hashes each file once, the
bytes it writes, and reads nothing back); a damaged latest (truncated, overwritten) falls back to the previous
checkpoint, for every seed of the model, with one warning line, and the next save replaces it. Without a manifest
(a bare :func:`train` with ``checkpoint_dir``, a run written before manifests) there is no ``previous/``, the state
is renamed before the weights and a resume finishes an interrupted save from the files' steps. Runs written before
this layout hold one ``<name>-seed<k>.safetensors`` per seed (model.*, optim.* and history.* tensors; metadata:
step); training resumes from them and writes the new layout.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import errno
import gc
import hashlib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from tqdm.auto import tqdm

from .capture import CapturedStep
from .config import ConfigError
from .losses import batch_loss
from .prompts import Prompt
from .rng import generator

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "tf32", "bf16")
"""Training precisions (see :attr:`TrainConfig.precision`)."""

NO_DECAY = ("bias", "biases", "positions")
"""Parameter-name parts that are never weight-decayed, whatever their shape (see :func:`decays`)."""

BLOWUP_STEPS = 10
"""Consecutive steps above :attr:`TrainConfig.blowup` times the start that stop a seed's training."""


@dataclass
class TrainConfig(Mapping):
    """Optimisation settings (the ``train:`` block of an experiment config).

    It reads as the block it was made from, so an experiment writes ``config["train"]["steps"]`` and
    ``{**config["train"], "lr": 0.1}`` (a block with changes) whether its block is checked and typed
    (:meth:`iclab.experiments.Experiment.configure`) or a plain dict.

    Attributes:
        steps: optimisation steps (derived from ``epochs`` when that is set).
        epochs: passes over a fixed training set of ``train_size`` prompts, or None to train for
            ``steps``. When set, it replaces ``steps`` by epochs × ⌈train_size / batch_size⌉, the
            steps of that many passes (:class:`FixedTrainingSet` draws each step's minibatch at
            random, the whole set when ``batch_size >= train_size``). A block with ``epochs`` but no
            ``train_size`` is a recipe completed later (e.g. one training-set size per model, set in the
            block :meth:`iclab.experiments.RunContext.trained` trains with); training it as it is raises
            :class:`~iclab.config.ConfigError`.
        batch_size: prompts per step (per seed).
        lr: peak learning rate.
        optimizer: ``adam``, ``adamw`` or ``sgd``.
        weight_decay: decoupled for AdamW, L2 for the others; only on the tensors :func:`decays` names.
        momentum: SGD momentum.
        betas: Adam's [β₁, β₂], PyTorch's [0.9, 0.999] by default.
        eps: Adam's ε, added to the root of the second moment.
        clip: clip each seed's gradient to this global norm (None: no clipping).
        schedule: ``constant`` or ``cosine`` (cosine decay to 0 after ``warmup``).
        warmup: linear warm-up steps.
        train_size: prompts in a fixed training set, or None for fresh prompts every step.
        loss: the loss convention (``mse``, ``half_mse`` or ``half_sse``; see :data:`iclab.losses.LOSS_SCALES`;
            ``cross_entropy`` for token targets and logits, see :data:`iclab.losses.TOKEN_LOSSES`).
        log_every: record the training loss every this many steps.
        checkpoint_every: write checkpoints every this many steps (and at the end).
        keep: besides the latest checkpoint, keep the weights at these steps (a list), or at this
            many log-spaced steps from 1 to ``steps`` (an int K: ``round(steps^(i/(K−1)))``, i = 0…K−1,
            fewer when two round to the same step), as ``step<N>.safetensors``; None keeps none.
            Kept weights are never overwritten by later checkpoints; a resume that passes a kept step
            again writes it again (the same weights, unless resume overrides changed the training).
        compile: run the loss (forward and backward) through ``torch.compile``. It fuses the
            elementwise work and drops per-op overhead, which pays on small models and long runs
            (docs/performance.md measures it) at a compile of tens of seconds, repeated for every new
            prompt length; after torch's limit of 8 lengths (a long N curriculum) the rest runs uncompiled.
        precision: ``fp32``; ``tf32`` (CUDA matrix products in TensorFloat-32, fp32's range with a
            10-bit mantissa; no effect on a CPU); or ``bf16`` (the forward pass under autocast to
            bfloat16 on the run's device, the loss computed in fp32 from the predictions). Weights,
            gradients and optimizer state stay fp32 in every mode, so checkpoints and exact resume
            are unchanged.
        capture: on a CUDA device, replay each training step (forward, backward, clipping, the
            optimizer's update) as a CUDA graph (:class:`iclab.capture.CapturedStep`), made on the
            step's first prompt shape and made again when the shape changes (a curriculum's next N).
            Prompts are still made on the CPU from the seed's generators, so a seed sees the same
            prompts, and the weights equal an eager run's within float32 rounding. Needs ``adam`` or
            ``adamw``, no ``compile`` and a model without dropout; no effect on a CPU.
        blowup: stop as diverged, as for a non-finite loss, when a seed's training loss has been
            above this factor times its loss at the start (its initial weights on step 0's batch) at
            :data:`BLOWUP_STEPS` steps in a row (None: never). A loss starts at the scale of its
            targets (a regression loss near E[y²] for a model that predicts ~0, a cross-entropy
            near log V) and a healthy run lowers it, or raises it a few times at most (a curriculum
            that widens d); a learning rate far too large sends it orders of magnitude up and keeps
            it there. One batch can be that far out in a healthy run (a 3-layer LSA's batch loss in
            ``task-descriptors`` reaches 10¹² times its start on a batch with a far-out mean, for at
            most 2 steps in a row), hence the run of steps. Checkpoints due while a seed is above
            the limit are skipped, so the last ones written are from before a blow-up.
    """

    steps: int = 1000
    epochs: int | None = None
    batch_size: int = 256
    lr: float = 1e-3
    optimizer: str = "adam"
    weight_decay: float = 0.0
    momentum: float = 0.0
    betas: list[float] = dataclasses.field(default_factory=lambda: [0.9, 0.999])  # a list, as config.yaml reads back
    eps: float = 1e-8
    clip: float | None = None
    schedule: str = "constant"
    warmup: int = 0
    train_size: int | None = None
    loss: str = "mse"
    log_every: int = 10
    checkpoint_every: int = 1000
    compile: bool = False
    precision: str = "fp32"
    capture: bool = False
    keep: list[int] | int | None = None
    blowup: float | None = 1e4

    def __post_init__(self):
        if self.steps < 1 or self.batch_size < 1 or self.log_every < 1 or self.checkpoint_every < 1:
            raise ConfigError("train.steps, batch_size, log_every and checkpoint_every must be >= 1")
        if not (math.isfinite(self.lr) and self.lr >= 0):
            raise ConfigError(f"train.lr must be a finite number >= 0 (0 keeps the initial weights), got {self.lr}")
        if (
            self.warmup < 0
            or not (math.isfinite(self.weight_decay) and self.weight_decay >= 0)
            or not 0 <= self.momentum < 1
        ):
            raise ConfigError(
                f"train.warmup and weight_decay must be >= 0 and momentum in [0, 1), got {self.warmup}, "
                f"{self.weight_decay} and {self.momentum}"
            )
        if self.clip is not None and not self.clip > 0:
            raise ConfigError(f"train.clip must be > 0 or null, got {self.clip}")
        betas = self.betas
        if not (isinstance(betas, (list, tuple)) and len(betas) == 2 and all(_real(b) and 0 <= b < 1 for b in betas)):
            raise ConfigError(f"train.betas must be two numbers in [0, 1), got {betas!r}")
        self.betas = [float(betas[0]), float(betas[1])]
        if not (_real(self.eps) and self.eps > 0):
            raise ConfigError(f"train.eps must be a number > 0, got {self.eps!r}")
        if self.optimizer not in ("adam", "adamw", "sgd"):
            raise ConfigError(f"train.optimizer must be adam, adamw or sgd, got {self.optimizer!r}")
        if self.schedule not in ("constant", "cosine"):
            raise ConfigError(f"train.schedule must be constant or cosine, got {self.schedule!r}")
        if self.train_size is not None and self.train_size < 1:
            raise ConfigError("train.train_size must be >= 1 or null")
        if self.epochs is not None:
            if self.epochs < 1:
                raise ConfigError(f"train.epochs must be >= 1 or null, got {self.epochs}")
            if self.train_size is not None:
                self.steps = self.epochs * math.ceil(self.train_size / self.batch_size)
        if self.precision not in PRECISIONS:
            raise ConfigError(f"train.precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.capture and (self.compile or self.optimizer == "sgd"):
            raise ConfigError("train.capture needs optimizer adam or adamw and compile off")
        if self.blowup is not None and not self.blowup > 1:
            raise ConfigError(f"train.blowup must be > 1 or null, got {self.blowup}")
        step = lambda k: isinstance(k, int) and not isinstance(k, bool)
        keep = self.keep
        if not (
            keep is None
            or (step(keep) and keep >= 1)
            or (isinstance(keep, list) and all(step(k) and 1 <= k <= self.steps for k in keep))
        ):
            raise ConfigError(
                f"train.keep must be a list of steps in 1..{self.steps}, a number of steps >= 1 or "
                f"null, got {self.keep!r}"
            )

    def kept_steps(self) -> list[int]:
        """The steps whose weights :attr:`keep` keeps, in order."""
        if self.keep is None:
            return []
        if isinstance(self.keep, list):
            return sorted(set(self.keep))
        if self.keep == 1:
            return [self.steps]
        return sorted({round(self.steps ** (i / (self.keep - 1))) for i in range(self.keep)})

    def __getitem__(self, key: str) -> Any:
        if key not in self._fields():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())

    @classmethod
    def _fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> TrainConfig:
        """Build from a config dict, rejecting unknown keys (a TrainConfig is returned as it is)."""
        if isinstance(section, cls):
            return section
        unknown = set(section) - set(cls._fields())
        if unknown:
            raise ConfigError(f"unknown train keys: {', '.join(sorted(unknown))}")
        return cls(**section)

    def lr_at(self, step: int) -> float:
        """The learning rate at ``step`` (0-based)."""
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        if self.schedule == "constant":
            return self.lr
        progress = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * 0.5 * (1 + math.cos(math.pi * progress))


def _real(value: Any) -> bool:
    """A finite int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def decays(name: str, shape: Sequence[int]) -> bool:
    """Whether weight decay applies to the parameter ``name`` of shape ``shape`` (one model's,
    without the stacked seed dimension).

    GPT practice: matrices decay (linear maps, token embeddings, read-in and read-out); vectors and
    scalars do not (LayerNorm gains and shifts, biases, the per-head a·XXᵀ and b·AX scalars, a CLS
    token), nor learned positions (a matrix, but one vector per position) or anything named a bias
    (a probe stack's biases have more than one dimension): decay would pull those offsets and
    scales towards 0 (a LayerNorm gain's neutral value is 1), not just keep maps small.
    """
    return len(shape) >= 2 and not any(part in NO_DECAY for part in name.split("."))


class FreshPrompts:
    """A new batch of prompts from the task at every step (the infinite-data regime)."""

    def __init__(self, task, prompt_format):
        self.task, self.format = task, prompt_format

    def batch(self, seed: int, step: int, device, batch_size: int) -> Prompt:
        episode = self.task.sample(batch_size, generator(seed, "train", step)).to(device)
        return self.format.encode(episode)


class FixedTrainingSet:
    """A fixed set of ``size`` prompts per seed; each step takes a random minibatch (all when
    ``batch_size >= size``, i.e. full-batch training)."""

    def __init__(self, task, prompt_format, size: int):
        self.task, self.format, self.size = task, prompt_format, size
        self._sets: dict[int, Prompt] = {}

    def training_set(self, seed: int, device) -> Prompt:
        """The seed's whole training set (drawn once from the ``(seed, "train-set")`` stream)."""
        if seed not in self._sets:
            episode = self.task.sample(self.size, generator(seed, "train-set")).to(device)
            self._sets[seed] = self.format.encode(episode)
        return self._sets[seed]

    def batch(self, seed: int, step: int, device, batch_size: int) -> Prompt:
        full = self.training_set(seed, device)
        if batch_size >= self.size:
            return full
        index = torch.randperm(self.size, generator=generator(seed, "minibatch", step))[:batch_size].to(device)
        return Prompt(full.tokens[index], full.targets[index], full.n_context)


class TokenBlocks:
    """Language-model batches: each step takes ``batch_size`` random rows of ``blocks``
    ``(n_blocks, T + 1)`` (a token stream packed by :func:`iclab.data.pack_blocks`), with inputs
    ``row[:-1]`` and next-token targets ``row[1:]``, both ``(B, T)``, and ``n_context = T``."""

    def __init__(self, blocks: torch.Tensor):
        self.blocks = blocks

    def describe(self) -> dict:
        """What identifies these batches (their rows' shape and a digest of the tokens): a run's seeds share
        the source when they share the tokens."""
        digest = hashlib.sha256(self.blocks.cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
        return {"blocks": list(self.blocks.shape), "tokens_sha256": digest}

    def batch(self, seed: int, step: int, device, batch_size: int) -> Prompt:
        index = torch.randint(len(self.blocks), (batch_size,), generator=generator(seed, "minibatch", step))
        rows = self.blocks[index].to(device)  # (B, T + 1)
        return Prompt(rows[:, :-1], rows[:, 1:], rows.shape[1] - 1)


def data_source(task, prompt_format, train_size: int | None = None):
    """Prompts of ``task`` for :func:`train`: fresh ones at every step, or a fixed training set of
    ``train_size`` prompts per seed."""
    if train_size is None:
        return FreshPrompts(task, prompt_format)
    return FixedTrainingSet(task, prompt_format, train_size)


class TrainingDiverged(ConfigError):
    """A non-finite loss (or weights), or a loss blown up (see :attr:`TrainConfig.blowup`): training
    stopped without writing the bad state to a checkpoint."""

    def __init__(self, model: str, seeds: Sequence[int], step: int, reason: str = "non-finite loss"):
        self.model, self.seeds, self.step = model, list(seeds), step
        which = ", ".join(map(str, self.seeds))
        super().__init__(f"training of {model!r} diverged ({reason}) for seed {which} at step {step}")


@dataclass
class TrainResult:
    """Trained models (one per seed, in the order of ``seeds``; none in a result of the history alone,
    :meth:`without_models`) and the logged history.

    ``history`` rows are ``{"seed", "step", "metric", "value"}`` (metric ``train_loss`` plus
    whatever the callback returned).
    """

    models: list[nn.Module]
    history: list[dict]
    seeds: list[int] = dataclasses.field(default_factory=list)
    earlier_seconds: float = 0.0
    """The seconds earlier sessions of an interrupted run spent training these models, every seed trained beside them
    together (read from the checkpoints this one resumed from; a selection keeps its group's), which the caller's own
    clock does not see."""

    @property
    def by_seed(self) -> dict[int, nn.Module]:
        """``{seed: model}``."""
        return dict(zip(self.seeds, self.models))

    def select(self, seeds: Sequence[int]) -> TrainResult:
        """The result of ``seeds`` alone (each one of :attr:`seeds`): their models and history rows."""
        models, wanted = self.by_seed, set(seeds)
        history = [r for r in self.history if r["seed"] in wanted]
        kept = [models[s] for s in seeds] if self.models else []
        return TrainResult(kept, history, list(seeds), self.earlier_seconds)

    def without_models(self) -> TrainResult:
        """This result's history alone, for a caller that reads curves only and need not hold the models."""
        return dataclasses.replace(self, models=[])

    def curve(self, seed: int, metric: str) -> dict[int, float]:
        """``{step: value}`` of ``metric`` for ``seed``'s model, at every logging step."""
        return {r["step"]: r["value"] for r in self.history if r["seed"] == seed and r["metric"] == metric}

    def best_step(self, seed: int, metric: str) -> int:
        """The logging step at which ``seed``'s ``metric`` (a validation loss) is lowest, the latest of those
        that tie: the step whose held-out numbers a run reports. A loss on a finite validation set can stay flat
        for many steps while the model still changes; a later step tied with an earlier one is no worse."""
        curve = self.curve(seed, metric)
        lowest = min(curve.values())
        return max(step for step, value in curve.items() if value == lowest)


Callback = Callable[[int, dict[int, nn.Module]], Mapping[str, Sequence[float]] | None]
"""``callback(step, {seed: model})`` at every logging step, returning ``{metric: values}`` (one value per
model, in the dict's order) or None. It gets each model with its seed, so that what it measures can
depend on the seed (the seed's own held-out prompts), whichever seeds train beside it."""


def held_out(measures: Mapping[str, Callable[[nn.Module, int], float]]) -> Callback:
    """A :data:`Callback` that records, at every logging step, ``measure(model, seed)`` of every model for
    each named measure (a validation loss, a test perplexity: data the model does not train on), without
    gradients; :meth:`TrainResult.best_step` then picks the step a run reports."""

    def callback(step: int, models: dict[int, nn.Module]) -> dict[str, list[float]]:
        with torch.no_grad():
            return {name: [measure(m, seed) for seed, m in models.items()] for name, measure in measures.items()}

    return callback


WEIGHTS, STATE = "model.safetensors", "state.safetensors"
"""The latest weights and the training state in a seed's checkpoint folder."""

PREVIOUS = "previous"
"""The subfolder of a seed's checkpoint folder that holds the checkpoint before the latest (with a manifest)."""


class CheckpointManifest(Protocol):
    """What the loop needs of a run's checkpoint manifest (:class:`iclab.runs.Manifest`): every file's entry
    ``{"sha256", "bytes", "step"}`` by its path (one read), an atomic update of several (given the entries just read,
    which it does not read again), and whether a file is an entry's (its size and sha256)."""

    def entries(self) -> dict[Path, dict]: ...

    def update(self, entries: dict[Path, dict | None], current: dict[Path, dict] | None = None) -> None: ...

    def matches(self, path: Path, entry: dict | None) -> bool: ...


def checkpoint_folder(directory: str | Path, name: str, seed: int) -> Path:
    """``<directory>/<name>/seed<seed>``: the checkpoints of one model and seed."""
    return Path(directory) / name / f"seed{seed}"


def kept_weights(folder: Path, step: int) -> Path:
    """``<folder>/step<step>.safetensors``: weights kept by :attr:`TrainConfig.keep`."""
    return folder / f"step{step}.safetensors"


def legacy_checkpoint(directory: str | Path, name: str, seed: int) -> Path:
    """``<directory>/<name>-seed<seed>.safetensors``: the one-file checkpoint of runs written before
    the current layout (weights, optimizer state and history together)."""
    return Path(directory) / f"{name}-seed{seed}.safetensors"


def _saved_step(path: Path) -> int:
    with safe_open(path, "pt") as f:
        return int(f.metadata()["step"])


def _pending_step(path: Path) -> int | None:
    """The step of a temporary file a save left behind, or None when it is absent or incomplete."""
    try:
        return _saved_step(path)
    except (OSError, SafetensorError, KeyError):
        return None


def _pending(path: Path) -> Path:
    """The temporary file a save writes before it takes ``path``'s place."""
    return path.with_suffix(".tmp")


def _previous(path: Path) -> Path:
    """Where a latest weights or state file goes when its successor takes its place (with a manifest)."""
    return path.parent / PREVIOUS / path.name


def _write_pending(tensors: Mapping[str, torch.Tensor], path: Path, metadata: Mapping[str, str]) -> tuple[Path, dict]:
    """Write what belongs at ``path`` to a temporary file beside it, on the disk (fsync), which the caller renames to
    ``path`` (so ``path`` is always complete); returns that file and its manifest entry (the sha256 of the bytes
    written, taken once from memory, their number, the step). A failed write (a full disk) is an ``OSError`` naming
    ``path``."""
    data = save({k: v.contiguous().cpu() for k, v in tensors.items()}, metadata=dict(metadata))
    tmp = _pending(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # the part written gives back its room on a full disk
        raise OSError(err.errno, err.strerror, str(path)) from None
    return tmp, {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "step": int(metadata["step"])}


def train(
    make_model: Callable[[torch.Generator], nn.Module],
    data,
    config: TrainConfig,
    seeds: Sequence[int],
    device: str | torch.device = "cpu",
    checkpoint_dir: str | Path | None = None,
    name: str = "model",
    progress: bool = True,
    callback: Callback | None = None,
    vectorize: bool = True,
    init: Sequence[nn.Module] | None = None,
    describe: Callable[[nn.Module], Mapping[str, Any]] | None = None,
    on_log: Callable[[list[dict]], None] | None = None,
    manifest: CheckpointManifest | None = None,
) -> TrainResult:
    """Train one model per seed on ``data`` (a :class:`FreshPrompts`, :class:`FixedTrainingSet` or
    any object with ``batch(seed, step, device, batch_size) -> Prompt``; the loop asks for
    ``config.batch_size`` prompts a step).

    ``make_model(generator)`` builds a freshly initialised model from the seed's ``"init"``
    stream; ``init`` (one model per seed, in seed order) warm-starts seed k from a copy of
    ``init[k]``'s weights instead (``make_model`` still gives the architecture). With
    ``checkpoint_dir``, training resumes from the checkpoints found there.
    ``callback(step, {seed: model})`` runs at every logging step and may return
    ``{metric: per-seed values}`` to record (:data:`Callback`). ``describe(model)`` gives the JSON-able
    facts the weights files record about the model (its class and arguments, prompt format, task, ...: the loop itself
    knows no model or task). ``on_log(rows)`` gets the history rows (``seed, step, metric, value``) of
    every logging step as they are recorded (a live log of the run). ``manifest`` (a run's
    :class:`iclab.runs.Manifest`) records every checkpoint file written with its sha256, keeps the checkpoint before
    the latest, and makes a resume check them and fall back from a damaged latest (see the module docstring).
    """
    if init is not None and len(init) != len(seeds):
        raise ValueError(f"init has {len(init)} models for {len(seeds)} seeds")
    starts = dict(zip(seeds, init)) if init is not None else {}
    if config.epochs is not None and config.train_size is None:
        raise ConfigError(f"{name}: train.epochs counts passes over a fixed training set: it needs train.train_size")
    groups = [list(seeds)] if vectorize else [[s] for s in seeds]
    models, history, earlier = [], [], 0.0
    for group in groups:
        trainer = _SeedGroup(
            make_model, data, config, group, torch.device(device), checkpoint_dir, name, describe, starts, manifest
        )
        trainer.run(progress, callback, on_log)
        models += trainer.models()
        history += trainer.history
        earlier += trainer.earlier_seconds
        # The trainer refers to itself (the bound methods it keeps for its steps), so only the cyclic collector
        # frees its parameters, gradients and optimizer state: run it now, or a run of many large models holds
        # every finished model's state until some later collection.
        del trainer
        gc.collect()
    return TrainResult(models, history, list(seeds), earlier)


def _stacked(prompts: list[Prompt]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Each seed's prompts stacked: tokens and targets with the seeds first, and their ``n_context``."""
    return torch.stack([p.tokens for p in prompts]), torch.stack([p.targets for p in prompts]), prompts[0].n_context


@contextlib.contextmanager
def _matmul_precision(precision: str):
    """CUDA's fp32 matrix products in TensorFloat-32 inside the block for ``tf32`` (a global switch,
    restored on the way out). torch 2.9 renamed the switch (``fp32_precision = "tf32"``, before it
    ``allow_tf32 = True``, which newer versions deprecate): the name this torch has is used."""
    matmul = torch.backends.cuda.matmul
    switch, tf32 = ("fp32_precision", "tf32") if hasattr(matmul, "fp32_precision") else ("allow_tf32", True)
    before = getattr(matmul, switch)
    if precision == "tf32":
        setattr(matmul, switch, tf32)
    try:
        yield
    finally:
        setattr(matmul, switch, before)


class _SeedGroup:
    """Several seeds of one model trained in lockstep with stacked parameters."""

    def __init__(
        self, make_model, data, config, seeds, device, checkpoint_dir, name, describe=None, starts=None, manifest=None
    ):
        self.data, self.config, self.seeds, self.device = data, config, seeds, device
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.manifest = manifest
        self._fell_back = False  # resumed from older files than the latest on disk, which the next save replaces
        self.name, self.kept = name, set(config.kept_steps())
        members = [make_model(generator(seed, "init")).to(device) for seed in seeds]
        for seed, member in zip(seeds, members):
            if seed in (starts or {}):
                member.load_state_dict(starts[seed].state_dict())
        self.template = copy.deepcopy(members[0])
        self.description = {} if describe is None else dict(describe(self.template))
        params, self.buffers = stack_module_state(members)
        # Decaying tensors first, as the optimizer's groups hold them: it numbers its state by group,
        # then by tensor, and the checkpoints pair that numbering with this dict's order.
        order = sorted(params, key=lambda n: not decays(n, params[n].shape[1:]))
        self.params = {n: params[n].detach().clone().requires_grad_(True) for n in order}
        self.captured = CapturedStep(self._update, device) if config.capture and device.type == "cuda" else None
        if self.captured is not None and self._has_dropout():
            raise ConfigError(f"{name}: train.capture cannot replay a model with dropout (its masks change every step)")
        self.optimizer = self._make_optimizer()
        self._seed_losses = torch.compile(self._stacked_losses) if config.compile else self._stacked_losses
        self.step = 0
        self.earlier_seconds = 0.0  # spent training by the sessions before a resume (their checkpoints say)
        self._started = time.perf_counter()  # this session's training, for the checkpoints' train_seconds
        self._next_prompts = (-1,)  # the captured step's prompts made ahead: (step, tokens, targets, n_context)
        self.history: list[dict] = []
        self.start_losses = self._start_losses()  # before a resume replaces the initial weights
        self.loss_limits = self._loss_limits()
        self.steps_above = torch.zeros_like(self.start_losses, dtype=torch.long)  # (S,): in a row over the limit
        self._resume()

    def _make_optimizer(self) -> torch.optim.Optimizer:
        c = self.config
        split = {True: [], False: []}
        for n, p in self.params.items():
            split[decays(n, p.shape[1:])].append(p)  # p: (S, ...), the seeds stacked
        groups = [
            {"params": split[True], "weight_decay": c.weight_decay},
            {"params": split[False], "weight_decay": 0.0},
        ]
        groups = [g for g in groups if g["params"]]
        # The fused Adam kernel updates every tensor in one pass: at small sizes the per-parameter
        # elementwise ops of the default path cost as much as the model (it takes real floats only).
        fused = all(p.is_floating_point() for p in self.params.values()) or None
        if self.captured is not None:
            # A graph replays its kernels' arguments: the learning rate must be a tensor it reads, filled each step.
            adam = {"lr": torch.tensor(c.lr, device=self.device), "fused": fused, "capturable": True}
        else:
            adam = {"lr": c.lr, "fused": fused}
        adam |= {"betas": tuple(c.betas), "eps": c.eps}
        if c.optimizer == "adam":
            return torch.optim.Adam(groups, **adam)
        if c.optimizer == "adamw":
            return torch.optim.AdamW(groups, **adam)
        return torch.optim.SGD(groups, lr=c.lr, momentum=c.momentum)

    def _losses(self, prompts: list[Prompt], seed_losses: Callable | None = None) -> torch.Tensor:
        return (seed_losses or self._seed_losses)(self.params, self.buffers, *_stacked(prompts))

    def _start_losses(self) -> torch.Tensor:
        """Each seed's loss ``(S,)`` at its initial weights on step 0's batch (the reference of
        :attr:`TrainConfig.blowup`), so a resumed run recomputes it (a step's data depends only on
        the seed). Uncompiled: a compiled loss would compile again for the no-grad call."""
        with torch.no_grad():
            return self._losses(
                [self.data.batch(seed, 0, self.device, self.config.batch_size) for seed in self.seeds],
                self._stacked_losses,
            )

    def _loss_limits(self) -> torch.Tensor:
        """Each seed's blow-up limit ``(S,)``: ``blowup`` times its start, or infinite (the rule off,
        or a start that is not positive and finite, which gives no scale to judge by)."""
        start, off = self.start_losses, torch.full_like(self.start_losses, torch.inf)
        if self.config.blowup is None:
            return off
        return torch.where(torch.isfinite(start) & (start > 0), self.config.blowup * start, off)

    def _stacked_losses(self, params, buffers, tokens, targets, n_context: int) -> torch.Tensor:
        """Each seed's loss ``(S,)`` from stacked parameters and prompts (what ``compile`` compiles)."""
        # A model that computes this loss itself, in one pass with its gradients, is handed the targets.
        fused = self.config.loss in getattr(self.template, "fused_losses", ())

        def one_seed(params, buffers, tokens, targets):
            with torch.autocast(self.device.type, torch.bfloat16, enabled=self.config.precision == "bf16"):
                if fused:
                    return functional_call(
                        self.template, (params, buffers), (tokens,), {"n_context": n_context, "targets": targets}
                    )
                prediction = functional_call(self.template, (params, buffers), (tokens,), {"n_context": n_context})
            if prediction.dtype == torch.bfloat16:
                prediction = prediction.float()
            return batch_loss(prediction, targets, self.config.loss)

        if len(self.seeds) == 1:
            # One seed needs no vmap, and skipping it saves its per-op overhead (~20% on small models).
            # squeeze, not [0]: its backward is a view, where select's writes into a zero tensor.
            first = lambda tree: {k: v.squeeze(0) for k, v in tree.items()}
            return one_seed(first(params), first(buffers), tokens[0], targets[0])[None]
        # "different": each seed draws its own dropout masks (random ops are an error under vmap's default).
        return vmap(one_seed, randomness="different")(params, buffers, tokens, targets)

    def _has_dropout(self) -> bool:
        return any(isinstance(m, nn.Dropout) and m.p > 0 for m in self.template.modules())

    def _step_randomness(self):
        """For a model with dropout, torch's random state seeded from (first seed, step) for this step's
        forward pass and restored after, so an interrupted run resumes with the same masks (a seed's
        masks then depend on the seeds trained beside it); nothing for a model without randomness."""
        if not self._has_dropout():
            return contextlib.nullcontext()

        @contextlib.contextmanager
        def seeded():
            devices = [self.device] if self.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(
                    int(torch.randint(2**62, (1,), generator=generator(self.seeds[0], "dropout", self.step)))
                )
                yield

        return seeded()

    def _clip(self):
        grads = [p.grad for p in self.params.values()]
        norms = torch.stack([g.flatten(1).abs().pow(2).sum(1) for g in grads]).sum(0).sqrt()  # abs: complex weights
        scale = (self.config.clip / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *[1] * (g.ndim - 1)))

    def run(self, progress: bool, callback: Callback | None, on_log: Callable[[list[dict]], None] | None = None):
        with _matmul_precision(self.config.precision):
            self._run(progress, callback, on_log)

    def _run(self, progress: bool, callback: Callback | None, on_log: Callable[[list[dict]], None] | None):
        c = self.config
        bar = tqdm(total=c.steps, initial=self.step, desc=self.name, disable=None if progress else True, leave=False)
        lines = progress and bar.disable  # no terminal to draw a bar on (a log file, a pipe): a line per log step
        since = (self.step, time.perf_counter())
        while self.step < c.steps:
            losses, above = self._eager_step() if self.captured is None else self._captured_step()
            self.step += 1
            if self.step % c.log_every == 0 or self.step == c.steps:
                rows = self._record({"train_loss": losses.detach().cpu().tolist()})
                if callback is not None:
                    rows += self._record(callback(self.step, dict(zip(self.seeds, self.models()))) or {})
                if on_log is not None:
                    on_log(rows)
                bar.set_postfix(loss=f"{losses.mean().item():.4g}")
                if lines:
                    self._progress_line(losses.detach().cpu().tolist(), *since)
            if self.checkpoint_dir is not None and self.step in self.kept:
                self._save_kept()
            due = self.step % c.checkpoint_every == 0 and not above  # never a state that may be blowing up
            if self.checkpoint_dir is not None and (due or self.step == c.steps):
                self._save()
            bar.update(1)
        bar.close()

    def _eager_step(self) -> tuple[torch.Tensor, bool]:
        """One step as it runs: each seed's loss ``(S,)`` and whether one is above its blow-up limit, checked before
        the optimizer applies the step."""
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.lr_at(self.step)
        prompts = [self.data.batch(seed, self.step, self.device, self.config.batch_size) for seed in self.seeds]
        with self._step_randomness():
            losses = self._losses(prompts)
        above = self._stop_if_diverged(losses.detach(), self.step + 1)
        self._apply(losses)
        return losses.detach(), above

    def _captured_step(self) -> tuple[torch.Tensor, bool]:
        """One step replayed as a CUDA graph (:attr:`TrainConfig.capture`): as :meth:`_eager_step`, except that the
        blow-up check reads the loss after the update (a diverging run stops all the same, from the same checkpoint);
        the next step's prompts are made on the CPU while the device runs this one."""
        for group in self.optimizer.param_groups:
            group["lr"].fill_(self.config.lr_at(self.step))
        host = self._next_prompts if self._next_prompts[0] == self.step else self._host_prompts(self.step)
        losses = self.captured(*host[1:])
        if self.step + 1 < self.config.steps:
            self._next_prompts = self._host_prompts(self.step + 1)
        return losses, self._stop_if_diverged(losses, self.step + 1)

    def _host_prompts(self, step: int) -> tuple[int, torch.Tensor, torch.Tensor, int]:
        """``step``'s prompts of every seed made on the CPU, stacked: (step, tokens, targets, n_context)."""
        return step, *_stacked(
            [self.data.batch(seed, step, torch.device("cpu"), self.config.batch_size) for seed in self.seeds]
        )

    def _update(self, tokens: torch.Tensor, targets: torch.Tensor, n_context: int) -> torch.Tensor:
        """The whole step on stacked prompts, with no host synchronisation (what a CUDA graph captures): each seed's
        loss ``(S,)``, the gradients (made afresh) and the optimizer's update."""
        losses = self._seed_losses(self.params, self.buffers, tokens, targets, n_context)
        self._apply(losses)
        return losses.detach()

    def _apply(self, losses: torch.Tensor) -> None:
        """Fresh gradients of the seeds' summed loss, clipped, and the optimizer's update."""
        self.optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        if self.config.clip is not None:
            self._clip()
        self.optimizer.step()

    def _progress_line(self, losses: list[float], first_step: int, started: float) -> None:
        """One line on stderr: the step, each seed's loss, the rate since this session began and the time left."""
        rate = (self.step - first_step) / max(time.perf_counter() - started, 1e-9)
        left = (self.config.steps - self.step) / rate
        print(
            f"{self.name}: step {self.step}/{self.config.steps}, loss {', '.join(f'{v:.4g}' for v in losses)}, "
            f"{rate:.3g} steps/s, {left:.0f} s left",
            file=sys.stderr,
            flush=True,
        )

    def _stop_if_diverged(self, losses: torch.Tensor, step: int) -> bool:
        """Raise :class:`TrainingDiverged` if a seed's loss ``(S,)`` is non-finite or has been above its
        blow-up limit for :data:`BLOWUP_STEPS` steps in a row; returns whether any seed is above it now."""
        above = losses > self.loss_limits
        self.steps_above = torch.where(above, self.steps_above + 1, 0)
        finite = torch.isfinite(losses)
        all_finite, blown_up, any_above = torch.stack(  # one host sync per step
            [finite.all(), (self.steps_above >= BLOWUP_STEPS).any(), above.any()]
        ).tolist()
        if not all_finite:
            self._stop_unless_finite(finite, step)
        if blown_up:
            blown = self.steps_above >= BLOWUP_STEPS
            ratio = (losses / self.start_losses)[blown].min().item()
            raise TrainingDiverged(
                self.name,
                [s for s, b in zip(self.seeds, blown.tolist()) if b],
                step,
                f"loss {ratio:.3g} times its start, over {self.config.blowup:g} times for {BLOWUP_STEPS} steps",
            )
        return any_above

    def _stop_unless_finite(self, finite: torch.Tensor, step: int):
        """Raise :class:`TrainingDiverged` naming the seeds whose entry of ``finite`` ``(S,)`` is False."""
        if not finite.all():
            raise TrainingDiverged(self.name, [s for s, ok in zip(self.seeds, finite.tolist()) if not ok], step)

    def _record(self, metrics: Mapping[str, Sequence[float]]) -> list[dict]:
        """Append each seed's value of each metric at this step to the history; returns the new rows."""
        rows = [
            {"seed": seed, "step": self.step, "metric": metric, "value": float(value)}
            for metric, values in metrics.items()
            for seed, value in zip(self.seeds, values)
        ]
        self.history += rows
        return rows

    def models(self) -> list[nn.Module]:
        """One ordinary module per seed holding the current weights."""
        out = []
        for k in range(len(self.seeds)):
            model = copy.deepcopy(self.template)
            state = {**{n: p[k].detach() for n, p in self.params.items()}, **{n: b[k] for n, b in self.buffers.items()}}
            model.load_state_dict(state)
            out.append(model.eval())
        return out

    # Checkpoints (see the module docstring): per seed, its weights and its state.
    def _weights(self, k: int) -> dict[str, torch.Tensor]:
        """Seed k's state dict (parameters and buffers)."""
        return {**{n: p[k].detach() for n, p in self.params.items()}, **{n: b[k] for n, b in self.buffers.items()}}

    def _metadata(self, seed: int) -> dict[str, str]:
        facts = {**self.description, "name": self.name, "seed": seed, "step": self.step}
        return {"format": "pt", **{key: json.dumps(value) for key, value in facts.items()}}

    def _check_finite(self):
        # A finite loss with an infinite gradient still ruins the weights: never checkpoint those.
        finite = torch.stack([p.reshape(len(self.seeds), -1).isfinite().all(1) for p in self.params.values()]).all(0)
        self._stop_unless_finite(finite, self.step)

    def _save_kept(self):
        self._check_finite()
        written = {}
        for k, seed in enumerate(self.seeds):
            folder = checkpoint_folder(self.checkpoint_dir, self.name, seed)
            folder.mkdir(parents=True, exist_ok=True)
            path = kept_weights(folder, self.step)
            written[path] = _write_pending(self._weights(k), path, self._metadata(seed))
        self._commit(written)

    def _save(self):
        self._check_finite()
        state = self.optimizer.state_dict()["state"]
        seconds = torch.tensor(self.earlier_seconds + time.perf_counter() - self._started, dtype=torch.float64)
        written = {}
        for k, seed in enumerate(self.seeds):
            folder = checkpoint_folder(self.checkpoint_dir, self.name, seed)
            folder.mkdir(parents=True, exist_ok=True)
            tensors = {"train_seconds": seconds}  # the group's: one value for every seed's state
            for index, n in enumerate(self.params):
                for key, value in state.get(index, {}).items():
                    tensors[f"optim.{n}.{key}"] = value if value.ndim == 0 else value[k]
            rows = [r for r in self.history if r["seed"] == seed]
            for metric in {r["metric"] for r in rows}:
                picked = [r for r in rows if r["metric"] == metric]
                tensors[f"history.{metric}.step"] = torch.tensor([r["step"] for r in picked])
                tensors[f"history.{metric}.value"] = torch.tensor([r["value"] for r in picked], dtype=torch.float64)
            # The state before the weights: without a manifest, a seed whose state is in place has committed.
            written[folder / STATE] = _write_pending(tensors, folder / STATE, {"step": str(self.step)})
            written[folder / WEIGHTS] = _write_pending(self._weights(k), folder / WEIGHTS, self._metadata(seed))
        self._commit(written)
        self._fell_back = False
        for seed in self.seeds:
            legacy_checkpoint(self.checkpoint_dir, self.name, seed).unlink(missing_ok=True)  # now superseded

    def _commit(self, written: dict[Path, tuple[Path, dict]]) -> None:
        """Put the files of one save (``{path: (its temporary file, its entry)}``, every seed's) in place.

        Every file is whole before any takes its place. With a manifest (read once here), each file's size is checked
        against its entry (its sha256 was taken from the bytes written), the manifest then records them all in one
        rewrite (the commit: a save stopped after it is finished on resume, :meth:`_finish_save`; one stopped before
        it leaves the files it had to overwrite), and a latest weights or state file moves to ``previous/`` as its
        successor takes its place: unless the run fell back from it (damaged, or ahead of the step it resumed from),
        which is replaced, ``previous/`` keeping what the run resumed from. Without one, a kill leaves each seed at
        the step before or with its new files ready (:meth:`_finish_group_save`)."""
        if self.manifest is None:
            for path, (tmp, _) in written.items():
                os.replace(tmp, path)
            return
        recorded = self.manifest.entries()
        entries, moving = {}, set()
        for path, (tmp, entry) in written.items():
            if tmp.stat().st_size != entry["bytes"]:
                raise OSError(errno.EIO, "the checkpoint was not written whole", str(path))
            entries[path] = entry
            if path.name in (WEIGHTS, STATE) and not self._fell_back and recorded.get(path) and path.exists():
                entries[_previous(path)] = recorded[path]
                moving.add(path)
        self.manifest.update(entries, recorded)
        for path in written:
            if path in moving:
                _previous(path).parent.mkdir(exist_ok=True)
                os.replace(path, _previous(path))
            os.replace(_pending(path), path)

    def _finish_save(self, recorded: Mapping[Path, dict]) -> None:
        """Finish a save stopped after its commit (``recorded``: the manifest's entries): a temporary file whose
        sha256 is its final path's entry takes its place, the file there first moving to ``previous/`` when it is the
        one the manifest now records there (else it is one the run fell back from, and is replaced); a temporary file
        the manifest does not record was never committed and waits to be overwritten."""
        for seed in self.seeds:
            folder = checkpoint_folder(self.checkpoint_dir, self.name, seed)
            for path in (folder / STATE, folder / WEIGHTS):
                if _pending(path).exists() and self.manifest.matches(_pending(path), recorded.get(path)):
                    if self.manifest.matches(path, recorded.get(_previous(path))):
                        _previous(path).parent.mkdir(exist_ok=True)
                        os.replace(path, _previous(path))
                    os.replace(_pending(path), path)

    def _finish_group_save(self):
        """Finish a save stopped while its files took their places, in a run without a manifest (written before
        manifests): a seed whose state is in place and whose weights are ready takes them; a seed still at an
        older step whose new files (both whole) are at the step another seed reached takes them, so the seeds
        resume from one step."""
        folders = [checkpoint_folder(self.checkpoint_dir, self.name, seed) for seed in self.seeds]
        for folder in folders:
            state = _pending_step(folder / STATE)
            if state is not None and _pending_step(_pending(folder / WEIGHTS)) == state:
                os.replace(_pending(folder / WEIGHTS), folder / WEIGHTS)
        saved = [_pending_step(folder / STATE) for folder in folders]
        latest = max((step for step in saved if step is not None), default=None)
        for folder, step in zip(folders, saved):
            ready = [_pending(folder / name) for name in (STATE, WEIGHTS)]
            if latest is not None and step != latest and all(_pending_step(tmp) == latest for tmp in ready):
                os.replace(ready[0], folder / STATE)
                os.replace(ready[1], folder / WEIGHTS)

    def _checkpoint_in(
        self, folder: Path, recorded: Mapping[Path, dict]
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], int] | str | None:
        """The (weights, state tensors, step) of the checkpoint in ``folder`` (a seed's latest, or its ``previous/``);
        None when it holds none; otherwise why it cannot be used (a file that differs from its entry in ``recorded``,
        the manifest's, cannot be read or is missing, weights and state at different steps)."""
        weights, state = folder / WEIGHTS, folder / STATE
        if not weights.exists() and not state.exists():
            return None
        for path in (weights, state):
            entry = recorded.get(path)
            if not path.exists():
                return f"{path} is missing"
            if entry is not None and not self.manifest.matches(path, entry):
                return f"{path} is damaged (not the file the manifest recorded)"
        try:
            steps = {_saved_step(weights), _saved_step(state)}
            tensors = load_file(weights, device=str(self.device)), load_file(state, device=str(self.device))
        except (OSError, SafetensorError, KeyError, ValueError) as err:
            return f"{folder} cannot be read ({err})"
        if len(steps) != 1:
            return f"the weights and state in {folder} are at different steps {sorted(steps)}"
        return *tensors, steps.pop()

    def _latest(self, seed: int, recorded: Mapping[Path, dict]):
        """Seed's latest checkpoint, as :meth:`_checkpoint_in` gives it (from a one-file checkpoint of the layout
        before this one, where that is all it has)."""
        found = self._checkpoint_in(checkpoint_folder(self.checkpoint_dir, self.name, seed), recorded)
        legacy = legacy_checkpoint(self.checkpoint_dir, self.name, seed)
        if found is not None or not legacy.exists():
            return found
        try:
            tensors, step = load_file(legacy, device=str(self.device)), _saved_step(legacy)
        except (OSError, SafetensorError, KeyError, ValueError) as err:
            return f"{legacy} cannot be read ({err})"
        model = {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}
        return model, {k: v for k, v in tensors.items() if not k.startswith("model.")}, step

    def _fall_back(self, latest: list, recorded: Mapping[Path, dict]) -> list | None:
        """Every seed's checkpoint at the latest step all of them have usable, from their latest and previous ones,
        when their latest are not all usable at one step (``latest``: :meth:`_latest` of each seed); None to train
        from the start. A warning (one line) says what was wrong and where training goes on from."""
        problems = [found for found in latest if isinstance(found, str)]
        if not problems and any(found is None for found in latest):
            return None  # a seed never saved: the seeds start together
        options = []
        for seed, found in zip(self.seeds, latest):
            previous = self._checkpoint_in(checkpoint_folder(self.checkpoint_dir, self.name, seed) / PREVIOUS, recorded)
            options.append({f[2]: f for f in (found, previous) if isinstance(f, tuple)})
        steps = set.intersection(*(set(o) for o in options))
        if not problems:
            if not steps:
                found = sorted({f[2] for f in latest})
                raise ConfigError(f"checkpoints of {self.name} are at different steps {found}; cannot resume")
            problems = ["its seeds' latest checkpoints are at different steps"]
        self._fell_back = True
        if not steps:
            log.warning(
                "%s: %s; no usable checkpoint is left: it trains again from the start", self.name, "; ".join(problems)
            )
            return None
        step = max(steps)
        log.warning("%s: %s; it resumes from its previous checkpoint, at step %d", self.name, "; ".join(problems), step)
        return [o[step] for o in options]

    def _resume(self):
        if self.checkpoint_dir is None:
            return
        folders = [checkpoint_folder(self.checkpoint_dir, self.name, seed) for seed in self.seeds]
        recorded = (
            {} if self.manifest is None else self.manifest.entries()
        )  # (finishing a save leaves them as they are)
        if any(recorded.get(folder / STATE) for folder in folders):
            self._finish_save(recorded)
        else:
            self._finish_group_save()
        found = [self._latest(seed, recorded) for seed in self.seeds]
        if not all(isinstance(f, tuple) for f in found) or len({f[2] for f in found}) != 1:
            found = self._fall_back(found, recorded)
            if found is None:
                return
        steps = {step for _, _, step in found}
        with torch.no_grad():
            for n, p in self.params.items():
                p.copy_(torch.stack([weights[n] for weights, _, _ in found]))
        states = [state for _, state, _ in found]
        optimizer_state = {}
        for index, n in enumerate(self.params):
            keys = {key.split(".")[-1] for key in states[0] if key.startswith(f"optim.{n}.")}
            optimizer_state[index] = {
                key: states[0][f"optim.{n}.{key}"]
                if states[0][f"optim.{n}.{key}"].ndim == 0
                else torch.stack([t[f"optim.{n}.{key}"] for t in states])
                for key in keys
            }
        saved = self.optimizer.state_dict()
        self.optimizer.load_state_dict({"state": optimizer_state, "param_groups": saved["param_groups"]})
        self.step = steps.pop()
        self.earlier_seconds = float(states[0].get("train_seconds", 0.0))  # (none in checkpoints written before it)
        for seed, tensors in zip(self.seeds, states):
            metrics = {key[len("history.") :].rsplit(".", 1)[0] for key in tensors if key.startswith("history.")}
            for metric in metrics:
                for step, value in zip(
                    tensors[f"history.{metric}.step"].tolist(), tensors[f"history.{metric}.value"].tolist()
                ):
                    self.history.append({"seed": seed, "step": step, "metric": metric, "value": value})
        self.history.sort(key=lambda r: (r["step"], r["seed"]))
        log.info("resumed %s from step %d", self.name, self.step)
