"""What an experiment is, and the context it runs in.

An :class:`Experiment` is a default config, per-scale overrides, a function
``run(config, context) -> list[Claim]`` that trains, evaluates, logs metric rows and draws
figures through the :class:`RunContext`, and optionally ``checks(config)``, which rejects values
the config's types allow but the experiment cannot run. A run's config is made and checked once
(:meth:`Experiment.configure`): the experiment receives it with each training block a
:class:`~iclab.train.TrainConfig`.

A run of several seeds judges each: ``run`` is called once per seed (:meth:`Experiment.run_seeds`), each
call seeing one seed as a run of that seed alone would, while ``ctx.trained`` trains the run's seeds together
the first time a model is asked for (stacked parameters, one optimizer step for all) and hands each
seed's call its own.

The context is the kit an experiment is written with (docs/design.md, "Writing an experiment"):
``ctx.seeds``; ``ctx.trained(name, ...)``, a model's trained weights per seed (trained once per run and
name); the run's evaluation prompts (``ctx.eval_episode``) and losses on them (``ctx.evaluate``); metric
rows (``ctx.log``, ``ctx.log_metrics``, ``ctx.log_band``) and the training history (``ctx.history``) for
the figures.
Results are keyed by a learner's name or a ``(model, seed)`` pair, never by a parsed string.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import re
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..claims import Claim
from ..config import ConfigError, coerce, leaves, merge, resolve, set_key
from ..cores import CoreShare
from ..ledger import Ledger
from ..metrics import band_rows, evaluate
from ..models import describe
from ..prompts import PairedFormat, describe_format
from ..report.live import LiveLog, check_logging
from ..resources import check_memory
from ..rng import generator
from ..runs import RunFolder
from ..tasks import describe_task
from ..tasks.base import Episode
from ..train import TrainConfig, TrainResult, data_source
from ..train import train as train_models  # `train` is ctx.trained's training block
from ..version import __version__

log = logging.getLogger(__name__)

Key = Hashable
"""A result's key: a learner's or reference's name (``"ols"``), or a trained model's ``(name, seed)``."""


SAMPLE_SIZE = re.compile(r"(?:^|\.)(?:\w*_prompts|\w*draws|test_size|eval_samples)$")
"""Config keys that count the samples a claim's statistic is taken over (evaluation prompts, Monte Carlo
draws): each must be at least 2, the fewest a mean's standard error or a band needs."""

TIMING_ATTEMPTS = 3
"""How many times a timed run measures a model whose marginal step time came out 0 or less (noise)."""


# Keys the framework adds to every experiment's config (experiments do not define them).
COMMON_DEFAULTS = {
    # TensorBoard event files under tb/ and a Weights & Biases run (the optional extras tensorboard and wandb),
    # both fed as training goes; the W&B project's name
    "log": {"tensorboard": False, "wandb": False, "wandb_project": "iclab"},
    # the memory a run may hold, in GB; null: what the machine (or the process's limit) has (iclab.resources)
    "limits": {"memory_gb": None},
}


@dataclass
class RunContext:
    """Everything an experiment needs besides its config: the run folder, the device, the
    experiment's name and its resolved config (``seed`` and ``seeds`` are read from it), a sink
    for long-format metric rows (see :meth:`RunFolder.write_metrics`) and the live log the training
    rows go to as they are recorded (:class:`~iclab.report.live.LiveLog`), with the helpers every
    experiment shares."""

    folder: RunFolder
    device: torch.device
    progress: bool = True
    rows: list[dict] = field(default_factory=list)
    experiment: str | None = None
    config: dict = field(default_factory=lambda: {"seed": 0, "seeds": 1})
    live: LiveLog | None = None
    together: list[int] | None = None
    """The seeds a model trains for when first asked (the run's seeds, on a seed's pass); None: :attr:`seeds`."""
    cores: CoreShare | None = None
    """The run's share of the machine's cores, looked at again at every logging step (:mod:`iclab.cores`)."""
    timing: int | None = None
    """In a timed run (:func:`iclab.api.time_recipe`): each model trains this many steps, not its recipe's, and its
    time per step is recorded in :attr:`costs` (:meth:`_timed`); None: every model trains as its recipe says."""
    costs: list[dict] = field(default_factory=list)
    """A timed run's models: name, seeds, the steps the recipe plans and the measured seconds per step."""
    ledger: Ledger = field(default_factory=Ledger)
    """Where the run's time goes, part by part (:meth:`part`; ``run.json`` ``time``)."""
    _trained: dict[str, list[tuple[dict, TrainResult]]] = field(default_factory=dict, repr=False)

    @property
    def seeds(self) -> list[int]:
        """The seeds this context judges, ``seed, seed + 1, …, seed + seeds − 1`` (each reproducible alone;
        one on a seed's pass, see :meth:`for_seed`)."""
        return [self.config["seed"] + k for k in range(self.config.get("seeds", 1))]

    def for_seed(self, seed: int) -> RunContext:
        """The context of ``seed``'s pass of this run: its config is that of a run of ``seed`` alone, its
        models are trained beside the run's other seeds (:meth:`trained`), its rows and trained models are
        this context's, and its figures go to ``figures/`` for the run's first seed and to
        ``figures/seed<seed>/`` for the others."""
        return dataclasses.replace(
            self,
            config={**self.config, "seed": seed, "seeds": 1},
            together=self.seeds,
            folder=self.folder if seed == self.seeds[0] else self.folder.seed_figures(seed),
        )

    def part(self, name: str, claims: Sequence[str]) -> AbstractContextManager[None]:
        """A context timing the block as part ``name`` of the run, the part the claims matching ``claims`` need
        (:mod:`iclab.ledger`: a list of fnmatch patterns of claim ids, ``!`` excludes). Wrap each part of ``run``,
        e.g. ``with ctx.part("one-layer", claims=["a-*"]):``."""
        return self.ledger.part(name, claims)

    def log(self, **row: Any) -> None:
        """Record one metric row, e.g. ``log(setting="iso", model="ols", metric="mse", value=1.2)``. On a
        seed's pass of a run of several seeds, a row without a seed (a learner's, the theory's) gets the
        pass's seed, whose prompts it measured."""
        if row.get("seed") is None and self.together is not None and len(self.together) > 1:
            row["seed"] = self.config["seed"]
        self.rows.append(row)

    def log_metrics(self, metrics: Mapping[str, float], **keys: Any) -> None:
        """Record one row per metric, each with the same ``keys``, e.g.
        ``log_metrics({"ab": 0.2, "loss": 1.3}, setting="iso", model="lsa", seed=0)``."""
        for metric, value in metrics.items():
            self.log(**keys, metric=metric, value=value)

    def log_band(
        self, setting: str | None, model: str, metric: str, band: Mapping[str, torch.Tensor], seed: int | None = None
    ) -> None:
        """Record a by-prefix curve with its bootstrap band (``{"mean", "low", "high"}``, each ``(N,)``,
        as :func:`iclab.metrics.loss_by_prefix` returns): rows ``metric``, ``metric_p05`` and
        ``metric_p95`` at every prefix length ``n`` (see :func:`iclab.metrics.band_rows`)."""
        for row in band_rows(band, metric):
            self.log(setting=setting, model=model, seed=seed, **row)

    def history(self, metric: str = "train_loss", setting: str | None = None, model: str | None = None):
        """The logged rows of ``metric`` that carry a training step (the training loss, a callback's
        metric), optionally of one setting and model, as a pandas frame with columns ``setting, model,
        seed, step, metric, value`` (what :func:`iclab.report.figures.training_curve` draws)."""
        import pandas as pd

        rows = [
            r
            for r in self.rows
            if r.get("step") is not None
            and r.get("metric") == metric
            and (setting is None or r.get("setting") == setting)
            and (model is None or r.get("model") == model)
        ]
        return pd.DataFrame(rows, columns=["setting", "model", "seed", "step", "metric", "value"])

    def eval_episode(
        self, task, n_prompts: int, *stream: int | str, dtype: torch.dtype = torch.float64, seed: int | None = None
    ) -> Episode:
        """The run's evaluation prompts: ``n_prompts`` of ``task`` from the ``(seed, "eval", *stream)``
        stream of the base seed (or of ``seed``: a callback measuring each seed's model on that seed's own
        prompts), shared by every model and learner of the run. They are drawn in float32 (the training
        precision) and converted to ``dtype``, so every dtype holds the same prompts."""
        seed = self.config["seed"] if seed is None else seed
        return task.sample(n_prompts, generator(seed, "eval", *stream)).to(dtype=dtype)

    def evaluate(
        self,
        predictors: Mapping[Key, Any],
        task,
        n_prompts: int,
        loss: str = "mse",
        setting: str | None = None,
        prompt_format=PairedFormat(),
        stderr: bool = False,
    ) -> dict[Key, float] | dict[Key, tuple[float, float]]:
        """Every predictor's mean loss on the run's ``n_prompts`` evaluation prompts
        (:func:`iclab.metrics.evaluate`: a predictor is a model reading ``prompt_format``, a learner or
        an episode → predictions function), logged as metrics ``loss`` and ``<loss>_stderr``.

        A predictor's key is a learner's name (logged without a seed) or a trained model's
        ``(name, seed)``; the returned means have the same keys (with ``stderr``, ``(mean, standard
        error)`` pairs)."""
        losses = evaluate(predictors, task, n_prompts, self.config["seed"], loss, prompt_format=prompt_format)
        for key, (mean, error) in losses.items():
            model, seed = key if isinstance(key, tuple) else (key, None)
            self.log_metrics({loss: mean, f"{loss}_stderr": error}, setting=setting, model=model, seed=seed)
        return losses if stderr else {key: mean for key, (mean, _) in losses.items()}

    def trained(
        self,
        name: str,
        make_model,
        data=None,
        *,
        train: Mapping[str, Any],
        task=None,
        format=None,
        seeds: Iterable[int] | None = None,
        setting: str | None = None,
        together: bool | None = None,
        keep_models: bool = True,
        **kwargs,
    ) -> TrainResult:
        """The trained models ``name``, one per seed (default :attr:`seeds`), a :class:`~iclab.train.TrainResult`:
        trained once per run by :func:`iclab.train.train` with this run's checkpoints, device and progress bar,
        the history logged as rows of model ``name`` and ``setting``. ``train``: the config's training block (a
        :class:`~iclab.train.TrainConfig`) or one with changes (``{**config["train"], "lr": 0.1}``). The
        prompts are ``task``'s in ``format`` (fresh at every step, or a fixed set when the block sets
        ``train_size``: :func:`~iclab.train.data_source`), or come from ``data`` (a curriculum, token blocks,
        probe data); the loop asks for the block's ``batch_size``. ``kwargs`` go to :func:`iclab.train.train`.

        On a seed's pass of a run of several seeds (:meth:`for_seed`), the first ask trains the run's seeds
        together (every pass then gets its own seed's model) unless the model has a ``callback`` (which may
        measure it with this pass's own data) or an ``init`` (this pass's models): those train per pass.
        ``together=True``: the callback measures each model from its seed and the config alone
        (``ctx.eval_episode(..., seed=s)``); ``together=False``: the recipe depends on the seed (a task drawn
        from it). Explicit ``seeds`` train exactly those. Asked again for ``name`` with the same recipe, it
        returns the trained models (:meth:`_trained_already`). The weights files record what
        :func:`iclab.load_model` needs (:meth:`_facts`). ``keep_models=False``: the caller reads the history alone
        (curves, best steps), so neither the result nor the run holds the models (their weights are in the run's
        checkpoints): a run of many large models, e.g. abstract-symbols' copying widths up to 4096 at the paper
        scale, would otherwise hold every one until it ends.
        """
        config = TrainConfig.from_config(train)
        if (data is None) == (task is None) or (task is None) != (format is None):
            raise ValueError(f"model {name!r}: give its data, or its task and format")
        data = data_source(task, format, config.train_size) if data is None else data
        wanted = self.seeds if seeds is None else list(seeds)
        seeds = self._seeds_to_train(seeds, together, kwargs) or wanted
        recipe = {"train": dataclasses.asdict(config), "vectorize": kwargs.get("vectorize", True), **_data_recipe(data)}
        trained = self._trained_already(name, make_model, recipe, seeds, wanted, keep_models)
        if trained is not None:
            self.ledger.uses(name)
            return trained
        started = time.perf_counter()
        if self.timing is not None:
            result = self._timed(name, make_model, data, config, seeds, kwargs)
        else:
            result = self._train(name, make_model, data, config, seeds, setting, kwargs)
        self.ledger.trained(name, time.perf_counter() - started, result.earlier_seconds)
        for row in result.history:
            self.log(setting=setting, model=name, **row)
        if self.live is not None:
            self.live.flush(self.rows)
        known = {**recipe, "model": describe(result.models[0])}
        if not keep_models:
            result = result.without_models()
        self._trained.setdefault(name, []).append((known, result))
        return result.select(wanted)

    def _train(
        self, name: str, make_model, data, config: TrainConfig, seeds: list[int], setting: str | None, kwargs: dict
    ) -> TrainResult:
        """Model ``name`` trained for ``seeds`` by its recipe, with this run's checkpoints (and their manifest),
        device, progress bar, weights facts and live log."""
        return train_models(
            make_model,
            data,
            config,
            seeds,
            device=self.device,
            checkpoint_dir=self.folder.checkpoints,
            manifest=self.folder.manifest,
            name=name,
            progress=self.progress,
            describe=lambda model: self._facts(model, data, setting),
            on_log=self._on_log(name, setting),
            **kwargs,
        )

    def _timed(self, name: str, make_model, data, config: TrainConfig, seeds: list[int], kwargs: dict) -> TrainResult:
        """Model ``name`` in a timed run: its recipe's ``config`` cut to :attr:`timing` steps (one log, no
        checkpoint; its warm-up kept, so the steps are the recipe's first, which some recipes need to stay finite:
        mesa-ar's plain gradient descent from a sharp start diverges at its full step). It trains for one step to
        warm up (first-call costs: allocation, compilation), then for one step three times and for those steps; the
        marginal time per step of the last and the fastest single step (what a step costs once the model is built
        and has run its first) is recorded in :attr:`costs` beside the steps the recipe plans. A marginal time of
        0 or less is a measurement the machine's noise spoilt (every single step slowed, the long run not), and is
        taken again, up to :data:`TIMING_ATTEMPTS` times. Returns the longest training."""
        steps = max(2, min(self.timing, config.steps))
        for _ in range(TIMING_ATTEMPTS):
            seconds, result = [], None
            for n in (1, 1, 1, 1, steps):
                cut = dataclasses.replace(config, epochs=None, steps=n, log_every=n, checkpoint_every=n)
                started = time.perf_counter()
                result = train_models(
                    make_model, data, cut, seeds, device=self.device, name=name, progress=False, **kwargs
                )
                seconds.append(time.perf_counter() - started)
            # A machine's noise only adds time: the fastest of the single steps is the one least inflated, where one
            # measurement alone, inflated, left a small model's marginal step below zero.
            per_step = (seconds[-1] - min(seconds[1:-1])) / (steps - 1)
            if per_step > 0:
                break
        self.costs.append({"model": name, "seeds": len(seeds), "planned_steps": config.steps, "step_seconds": per_step})
        return result

    def _seeds_to_train(self, seeds: Iterable[int] | None, together: bool | None, kwargs: dict) -> list[int] | None:
        """The run's seeds when :meth:`trained` trains them together on this pass's ask (see there), else None."""
        if together is None:  # a callback may read this pass's data; a warm start is from this pass's models
            together = kwargs.get("callback") is None and kwargs.get("init") is None
        return self.together if seeds is None and self.together is not None and together else None

    def _trained_already(
        self, name: str, make_model, recipe: dict, seeds: list[int], wanted: list[int], keep_models: bool
    ):
        """The result of model ``name`` for the ``wanted`` seeds when this run has trained them with this
        ``recipe`` (training config, data kind, task, prompt format and model description), whichever
        ``setting`` asked first (the model keeps its rows and checkpoint), else None. Another recipe for any
        of ``seeds`` raises ``ValueError``: the two would share one checkpoint folder; so does asking for the
        models of one trained with ``keep_models=False``. A task without a
        description is compared by the prompts it draws, a data source without a task by its ``describe()``
        (by identity when it has none)."""
        for known, result in self._trained.get(name, []):
            if not set(seeds) & set(result.seeds):
                continue  # trained apart, for other seeds
            recipe = {**recipe, "model": describe(make_model(generator(seeds[0], "init")))}
            differ = sorted(k for k in recipe if recipe[k] != known[k])
            if differ:
                raise ValueError(
                    f"model {name!r} was already trained in this run with another recipe "
                    f"({', '.join(differ)} differ): give the new one its own name, or, when the recipe "
                    "depends on the seed, train it with together=False"
                )
            if keep_models and not result.models:
                raise ValueError(
                    f"model {name!r} was trained in this run without keeping its models (keep_models=False): "
                    "ask for them the first time it trains"
                )
            if set(wanted) <= set(result.seeds):
                return result.select(wanted)
        return None

    def _facts(self, model, data, setting: str | None) -> dict:
        """What a weights file of :meth:`trained` records for :func:`iclab.load_model` to rebuild the model and
        evaluate it: its class and constructor arguments, and the prompt format and task of ``data``
        (``data.format`` and ``data.task`` when it has them; null otherwise, e.g. for token blocks)."""
        task, prompt_format = getattr(data, "task", None), getattr(data, "format", None)
        return {
            **describe(model),
            "experiment": self.experiment,
            "setting": setting,
            "prompt_format": None if prompt_format is None else describe_format(prompt_format),
            "task": None if task is None else describe_task(task),
            "iclab": __version__,
        }

    def _on_log(self, name: str, setting: str | None):
        """The training loop's hook at each logging step of model ``name``: the cores shared again, the live
        report shown the rows so far; None when there is neither."""
        if self.live is None and self.cores is None:
            return None
        training: list[dict] = []  # this model's rows so far, before they join :attr:`rows`

        def on_log(rows: list[dict]) -> None:
            if self.cores is not None:
                self.cores.rebalance()
            if self.live is not None:
                new = [{"setting": setting, "model": name, **row} for row in rows]
                training.extend(new)
                self.live.update(new, lambda: self.rows + training)

        return on_log


def check_training(block: Mapping[str, Any], path: str = "train") -> TrainConfig:
    """The :class:`~iclab.train.TrainConfig` of a training block, or :class:`~iclab.config.ConfigError` naming
    ``path`` (for a block an experiment's ``checks`` merge from several, e.g. a fine-tuning block's changes
    over ``train``; the blocks of :attr:`Experiment.train_blocks` are checked by the framework)."""
    try:
        return TrainConfig.from_config(block)
    except (ConfigError, TypeError) as err:
        raise ConfigError(f"{path}: {err}" if path != "train" else str(err)) from None


def _data_recipe(data) -> dict:
    """What identifies a data source for :meth:`RunContext.trained`: its kind, and its task's and prompt
    format's descriptions (for a task that has none, a digest of prompts it draws from a fixed stream; with
    no task, the source's own ``describe()``, else the source object itself)."""
    task, prompt_format = getattr(data, "task", None), getattr(data, "format", None)
    if task is not None:
        described = describe_task(task) or _task_digest(task)
    else:
        described = data.describe() if hasattr(data, "describe") else id(data)
    return {
        "data": type(data).__name__,
        "task": described,
        "format": None if prompt_format is None else describe_format(prompt_format),
    }


def _task_digest(task) -> str:
    """A task without a description, identified by what it draws: a digest of four prompts from a fixed
    stream (two tasks drawing the same prompts train a model alike)."""
    episode = task.sample(4, generator(0, "task-digest"))
    digest = hashlib.sha256()
    for tensor in (episode.xs, episode.ys, episode.x_query, episode.y_query):
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def _block(config: dict, path: str) -> dict | None:
    """The nested dict at the dotted ``path`` of ``config``, or None when it is absent."""
    node = config
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, dict) else None


def _value(config: Mapping[str, Any], path: str, missing: Any = None) -> Any:
    """The value at the dotted ``path`` of ``config`` (a block or a leaf), or ``missing`` when it is absent."""
    node: Any = config
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return missing
        node = node[part]
    return node


@dataclass(frozen=True)
class RunConfig:
    """A run's config, made and checked once (:meth:`Experiment.configure`, :meth:`Experiment.reconfigure`).

    ``record`` holds plain values: what ``config.yaml`` records and recipes are compared by. ``values`` is
    what the experiment's ``run`` and ``checks`` receive: the same config, each block of
    :attr:`Experiment.train_blocks` a :class:`~iclab.train.TrainConfig` (which reads as the block)."""

    record: dict
    values: dict

    def with_keys(self, **keys: Any) -> RunConfig:
        """This config with top-level ``keys`` added to both views (a resume's ``resume_overrides``)."""
        return RunConfig({**self.record, **keys}, {**self.values, **keys})


def _fill(config: dict, defaults: Mapping[str, Any]) -> None:
    """Give ``config`` (in place) every key of ``defaults`` it lacks, block by block, its own keys and order kept."""
    for key, value in defaults.items():
        if isinstance(value, Mapping) and isinstance(config.get(key), dict):
            _fill(config[key], value)
        else:
            config.setdefault(key, copy.deepcopy(value))


@dataclass(frozen=True)
class Experiment:
    """A named, runnable reproduction of a paper's setting.

    ``checks(config)`` raises :class:`~iclab.config.ConfigError` for a resolved config the
    experiment cannot run (an impossible size, an unknown name); it is cheap and trains nothing.

    ``train_blocks`` names the config's training blocks (dotted paths; by default ``("train",)`` when the
    defaults have a ``train`` block, else none): each is a full :class:`~iclab.train.TrainConfig`, the
    keys the experiment leaves out filled with its defaults, so every ``--set <block>.<key>`` works and
    ``config.yaml`` shows the whole recipe. Blocks of overrides to a training block (e.g. ``deep_train``
    in ``task-descriptors``) are not listed and stay partial.

    ``continuable``: every model trains from scratch on the ``train`` block for ``train.steps`` (none is
    built from another model, fine-tuned, probed or sized by epochs), so a finished run can go on for
    more steps (``iclab resume DIR --set train.steps=N``) from its checkpoints.

    ``claims_version``: the version of the claims' definitions (their tests and tolerances), raised whenever
    one changes, so that runs judged by older definitions stop counting on the scoreboard
    (:class:`iclab.runs.Recipe`); ``tools/smoke_claims.py`` refuses to record changed smoke claims under an
    unchanged version.

    ``timing``: the overrides (dotted keys) that shrink a run's evaluation (prompt counts, bootstrap sizes), never
    a model, its batches or its data, for a timed run of a scale (:func:`iclab.api.time_recipe`: each model trains
    a few steps to measure what the scale's training costs).

    ``nullable``: the blocks of the defaults a config may set to null (a part turned off, e.g. a curriculum) besides
    those its defaults or a scale already set to null; any other block set to null is refused when the config is
    checked (the run needs it).

    ``later_defaults``: keys added to the defaults after runs were recorded, by block (``{"model": {"init":
    "small"}}``), with the value every earlier run used: a config at those values is the recipe it was before the
    keys existed, so those runs keep counting (:func:`iclab.runs.without_execution`).
    """

    name: str
    paper: str
    defaults: dict
    scales: dict
    run: Callable[[dict, RunContext], list[Claim]]
    checks: Callable[[dict], None] | None = None
    train_blocks: tuple[str, ...] | None = None
    continuable: bool = False
    claims_version: int = 1
    timing: dict = field(default_factory=dict)
    nullable: tuple[str, ...] = ()
    later_defaults: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.train_blocks is None:
            object.__setattr__(self, "train_blocks", ("train",) if isinstance(self.defaults.get("train"), dict) else ())
        missing = [path for path in self.train_blocks if _block(self.defaults, path) is None]
        if missing:
            raise ValueError(f"experiment {self.name}: train_blocks {missing} are not blocks of its defaults")

    def run_seeds(self, config: dict, ctx: RunContext) -> dict[int, list[Claim]]:
        """Each seed's claims, ``{seed: claims}``: :attr:`run` once per seed of the run, on that seed's pass
        (:meth:`RunContext.for_seed`), the models trained together on the first pass that asks for them."""
        by_seed = {}
        for k, seed in enumerate(ctx.seeds):
            if len(ctx.seeds) > 1:
                log.info("%s: seed %d (%d of %d)", self.name, seed, k + 1, len(ctx.seeds))
            if ctx.cores is not None:
                ctx.cores.rebalance()
            seed_ctx = ctx.for_seed(seed)
            by_seed[seed] = self.run(seed_ctx.config, seed_ctx)
        return by_seed

    def complete(self, config: Mapping[str, Any]) -> dict:
        """A copy of ``config`` with every block of :attr:`train_blocks` it holds filled with
        :class:`~iclab.train.TrainConfig`'s defaults (the block's own keys first), and the keys of
        :attr:`later_defaults` it lacks at their values. Resolving a config does this; so does resuming a run whose
        ``config.yaml`` predates a default."""
        out = merge(config, {})
        _fill(out, self.later_defaults)
        defaults = dataclasses.asdict(TrainConfig())
        for path in self.train_blocks:
            block = _block(out, path)
            if block is not None:
                block.update({key: value for key, value in defaults.items() if key not in block})
        return out

    def resolve(self, scale: str, overrides: Iterable[str] | Mapping[str, object] = ()) -> dict:
        """The config of ``scale`` with ``overrides``, unchecked: the defaults with :data:`COMMON_DEFAULTS`
        and the training blocks filled (:meth:`complete`), the scale preset, then the overrides, each
        coerced to its default's type (see :func:`iclab.config.resolve`). A run's config is :meth:`configure`'s."""
        return resolve(self.complete(merge(self.defaults, COMMON_DEFAULTS)), self.scales, scale, overrides)

    def configure(
        self,
        scale: str,
        overrides: Iterable[str] | Mapping[str, object] = (),
        seeds: int | None = None,
        memory: bool = True,
    ) -> RunConfig:
        """A new run's config, made and checked in one place: :meth:`resolve`, the number of ``seeds`` when
        given (else the config's), the experiment's name first, then every check a run needs
        (:meth:`_checked`). Called by :func:`iclab.run`, ``iclab show`` and :func:`iclab.sweep` (every grid
        point, before Ray starts), so a bad value fails at once with one line, before any folder is made.
        ``memory=False`` leaves out the memory check (``iclab show`` prints the estimate instead)."""
        config = self.resolve(scale, overrides)
        if seeds is not None:
            if seeds < 1:
                raise ConfigError(f"--seeds must be >= 1, got {seeds}")
            config["seeds"] = seeds
        return self._checked({"experiment": self.name, **config}, memory)

    def reconfigure(
        self, stored: Mapping[str, Any], changes: Iterable[tuple[str, Any]] = (), continued: bool = False
    ) -> RunConfig:
        """The config of a run folder's ``config.yaml`` (``stored``) with ``changes`` (``(dotted key,
        value)`` pairs, a resume's overrides) set, completed (:meth:`complete`: a file written before a
        training default existed gets it) and checked as :meth:`configure` checks a new one. ``continued``:
        the run has finished and goes on as a new run, which it may only for more ``train.steps`` of a
        :attr:`continuable` experiment."""
        before = self.complete(stored)
        self._check_stored_types(before)
        config = merge(before, {})
        for key, value in changes:
            set_key(config, key, value)
        if continued:
            self._check_continuation(before.get("train", {}), config.get("train", {}))
        return self._checked(config)

    def _check_stored_types(self, stored: Mapping[str, Any]) -> None:
        """A :class:`ConfigError` naming the first value of a run folder's ``config.yaml`` whose type is not its
        default's (a file edited by hand: ``steps: banana``), as ``--set`` would refuse it."""
        try:
            recipe = self.resolve(stored.get("scale", "quick"))
        except ConfigError:
            recipe = self.resolve("quick")
        for key, value in leaves(stored):
            default = _value(recipe, key)
            if default is not None and not isinstance(default, Mapping):
                try:
                    coerce(key, value, default)
                except ConfigError as err:
                    raise ConfigError(f"the run's config.yaml: {err}") from None

    def _check_continuation(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        if not self.continuable or before.get("epochs") is not None:
            raise ConfigError(
                f"{self.name} cannot continue a finished run (some of its models are built from others or sized "
                "by epochs): start a new run with more steps"
            )
        if not after.get("steps", 0) > before.get("steps", 0):
            raise ConfigError(
                f"`iclab resume` with `--set train.steps=N`, N above its {before.get('steps')}, continues it for "
                "more steps, as a new run"
            )

    def _checked(self, record: dict, memory: bool = True) -> RunConfig:
        """``record`` checked and typed: seeds, sample sizes, the loggers' packages, every training block
        (made into its :class:`~iclab.train.TrainConfig` here, the one time a run makes it), the memory it needs
        (:func:`iclab.resources.check_memory`), then the experiment's own ``checks`` on the typed config. A value
        of a kind no check foresaw (null where a number is needed) still fails with one line, a
        :class:`~iclab.config.ConfigError`."""
        try:
            values = self._typed(record)
            if memory:  # before checks that build a task of its sizes
                check_memory(record, defaults=self.resolve("quick"))
            if self.checks is not None:
                self.checks(values)
        except ConfigError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError, IndexError) as err:
            nulled = self._nulled(record)
            if nulled:  # the likely cause: a value the recipe needs, set to null
                raise ConfigError(
                    f"{self.name} cannot run with {', '.join(f'{key}=null' for key in nulled)}: its recipe needs "
                    f"{'a value' if len(nulled) == 1 else 'values'} there ({type(err).__name__}: {err})"
                ) from None
            raise ConfigError(f"{self.name} cannot run this config: {type(err).__name__}: {err}") from None
        return RunConfig(record, values)

    def _refuse_null_blocks(self, record: dict) -> None:
        """A :class:`ConfigError` for a block of the defaults that ``record`` sets to null, unless the block may be
        null (:attr:`nullable`, or null in the defaults or a scale): the run needs it."""
        defaults = merge(self.defaults, COMMON_DEFAULTS)
        allowed = set(self.nullable) | {
            key for preset in (defaults, *self.scales.values()) for key, v in leaves(preset) if v is None
        }
        for key, value in leaves(record):
            default = _value(defaults, key)
            if value is None and isinstance(default, Mapping) and default and key not in allowed:
                example, shown = next(iter(default.items()))
                raise ConfigError(
                    f"{key}=null: {self.name} needs its {key} block; set the block's keys one by one instead "
                    f"(e.g. --set {key}.{example}={shown})"
                )

    def _nulled(self, record: dict) -> list[str]:
        """The dotted keys ``record`` sets to null where the experiment's defaults hold a value or a block."""
        defaults = merge(self.defaults, COMMON_DEFAULTS)
        return [key for key, value in leaves(record) if value is None and _value(defaults, key) is not None]

    def _typed(self, record: dict) -> dict:
        """A copy of ``record`` with each block of :attr:`train_blocks` made a :class:`~iclab.train.TrainConfig`,
        after the checks no block's type makes."""
        if not isinstance(record.get("seeds", 1), int) or record.get("seeds", 1) < 1:
            raise ConfigError(f"seeds must be >= 1 (an integer), got {record['seeds']!r}")
        seed = record.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise ConfigError(f"seed must be an integer in [0, 2^63), got {seed!r}")
        for key, value in leaves(record):
            if SAMPLE_SIZE.search(key) and isinstance(value, int) and value < 2:
                raise ConfigError(f"{key} must be >= 2 (a claim's statistic needs two samples), got {value}")
        check_logging(record)
        self._refuse_null_blocks(record)
        values = merge(record, {})
        for path in self.train_blocks:
            block = _block(values, path)
            if block is not None:
                train = check_training(block, path)
                # A warm-up as long as the run never reaches its learning rate: a slip in a config (an
                # experiment may still schedule its own, as mesa-ar's step-size warm-up from its theory).
                if 0 < train.steps <= train.warmup:
                    raise ConfigError(
                        f"{path}.warmup ({train.warmup}) must be shorter than the run ({path}.steps {train.steps}): "
                        f"the learning rate would never reach {path}.lr"
                    )
                parent, _, key = path.rpartition(".")
                (_block(values, parent) if parent else values)[key] = train
        return values
