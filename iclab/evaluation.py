"""Evaluate a trained model (``iclab eval``): against reference learners at every prefix length, on its
training task, a changed task or out-of-distribution prompts, at one or every kept checkpoint.

The model is read with :func:`iclab.loading.open_source` (a run folder, an export or a Garg et al.
run). Every prompt comes from the source's base seed: the ``(seed, "eval")`` stream, as the run's own
evaluation (so the training task's standard prompts are the run's), and ``(seed, "shift", name)`` for a
shift's own randomness. Errors are :func:`iclab.metrics.normalised_prompt_errors` of the prefix queries
(the squared error over the zero predictor's, or the error rate of sign labels) with bootstrap bands over
the prompts, and, for every seed of a model at once, over seeds and prompts.
Everything is checked before anything is written: a bad choice writes no folder.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .config import ConfigError, parse_assignment
from .devices import pick_device
from .learners import learner as make_learner
from .loading import LoadedModel, open_source
from .metrics import (
    attention_patterns,
    band_rows,
    error_metric,
    mean_band,
    normalised_prompt_errors,
    prefix_query_predictions,
    seed_band,
)
from .models import GPTTransformer
from .prompts import InterleavedFormat, PairedFormat, describe_format
from .report import write_evaluation_report
from .report.evaluation import write_evaluation_folder
from .report.figures import band_line, new_figure, save
from .rng import generator
from .runs import EvaluationFolder
from .shifts import shift as make_shift
from .tasks import task_from_description
from .version import __version__

DEFAULT_LEARNERS = ("ols", "3-nn", "averaging")
"""Garg et al.'s baselines for every function class."""

EVALUATED = ("gpt-linear", "function-classes", "algorithm-selection", "lsa-linear", "gd-mechanism", "task-descriptors")
"""The experiments whose models ``iclab eval`` evaluates (regression on interleaved or paired prompts)."""


@dataclass
class EvaluationResult:
    """A written evaluation: its folder and metrics table."""

    folder: EvaluationFolder

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def metrics(self) -> pd.DataFrame:
        return self.folder.read_metrics()


def changed_task(description: Mapping[str, Any], changes: Mapping[str, Any]) -> dict:
    """A task description with ``changes`` (keys of its kind, e.g. ``d``, ``noise``, ``n_context``).
    ``class=<name>`` switches a linear-regression or function-class task to Garg et al.'s function
    class ``name`` at the same d and N (the old class's own parameters do not carry over)."""
    task, changes = dict(description), dict(changes)
    if "kind" in changes:
        raise ConfigError("a task's kind cannot be changed; class=<function class> switches to a function class")
    name = changes.pop("class", None)
    if name is not None and task.get("class") != name:
        if task["kind"] not in ("linear-regression", "function-class"):
            raise ConfigError(f"a {task['kind']} task cannot become a function class")
        task = {"kind": "function-class", "class": name, "d": task["d"], "n_context": task["n_context"]}
    return {**task, **changes}


def _task_changes(task: Mapping[str, Any] | Iterable[str]) -> dict:
    return dict(task) if isinstance(task, Mapping) else dict(parse_assignment(text) for text in task)


def _check_evaluable(loaded: LoadedModel) -> None:
    """A regression model on interleaved or paired prompts of a linear-regression or function-class task."""
    fmt, kind = loaded.prompt_format, (loaded.metadata.get("task") or {}).get("kind")
    if not isinstance(fmt, (InterleavedFormat, PairedFormat)) or kind not in ("linear-regression", "function-class"):
        if fmt is None and kind is None:  # e.g. algorithm-selection's probes, which read a model's hidden states
            what = f"a {loaded.metadata.get('class')} that records no prompt format or task: iclab.load_model loads it"
        else:
            reads = "no prompts" if fmt is None else f"{type(fmt).__name__} prompts"
            what = f"it reads {reads} of {'no recorded task' if kind is None else f'a {kind} task'}"
        raise ConfigError(
            f"iclab eval evaluates regression models on interleaved or paired prompts "
            f"({', '.join(EVALUATED)}); {loaded.name!r} is not one: {what}"
        )


def _check_shapes(model, episodes: Mapping[str, Any], fmt, description: dict) -> None:
    """One forward pass on two prompts of every episode: a task the model cannot read fails here."""
    try:
        for episode in episodes.values():
            prefix_query_predictions(model, episode[:2], fmt)
    except (RuntimeError, ConfigError, IndexError, KeyError) as err:  # KeyError: a descriptor the task lacks
        reason = str(err).splitlines()[0]
        raise ConfigError(f"the model cannot read prompts of the task {description}: {reason}") from None


def _curve_rows(curve: dict, setting: str, model: str, seed, step, metric: str) -> list[dict]:
    return [{"setting": setting, "model": model, "seed": seed, "step": step, **row} for row in band_rows(curve, metric)]


def evaluate(
    run: str | Path,
    model: str | None = None,
    seed: int | str | None = None,
    step: int | str | None = None,
    task: Mapping[str, Any] | Iterable[str] = (),
    shifts: Iterable[str] = ("standard",),
    learners: Iterable[str] = DEFAULT_LEARNERS,
    out: str | Path | None = None,
    prompts: int | None = None,
    bootstrap: int = 1000,
    attention: bool = False,
    device: str | None = None,
    command: str | None = None,
) -> EvaluationResult:
    """Evaluate one trained model and write an evaluation folder (see :class:`iclab.runs.EvaluationFolder`).

    Args:
        run: a finished run folder, an export or a Garg et al. run.
        model: which of its models (may be left out where there is one).
        seed: which of the model's seeds (may be left out where there is one); ``"all"`` evaluates every
            seed of the model and adds their mean, with a band over seeds and prompts
            (:func:`iclab.metrics.seed_band`), which the figures draw.
        step: a kept checkpoint's step, ``"all"`` for every kept one (and the figure of the error
            against the step), or None for the latest.
        task: changes to the training task, ``{"d": 10}`` or ``["noise=0.5", "class=quadratic"]``
            (see :func:`changed_task`).
        shifts: names from :mod:`iclab.shifts` (``standard``, ``skewed``, ``scale-x=2``, ...).
        learners: names from :mod:`iclab.learners.named` (``ols``, ``ridge=0.1``, ``3-nn``, ...).
        out: the folder to write (default ``<run>/eval-<timestamp>``; beside an export, ``<export>-eval-<timestamp>``).
        prompts: evaluation prompts (default: the run's ``eval_prompts``, else 1000).
        bootstrap: bootstrap resamplings for the 5–95% bands.
        attention: also draw the attention maps of two prompts (transformers only).
        device: where the model runs (default: CUDA if available).
        command: the command to record (the CLI passes its own; default: this call).
    """
    changes, shifts, learners = _task_changes(task), list(shifts), list(learners)
    request = _Request(run, model, seed, step, changes, shifts, learners, out, prompts, bootstrap, attention, command)
    if out is not None:
        EvaluationFolder.refuse_taken(out)
    source, checkpoints, latest = _open_model(request)
    plan = _Plan.build(request, source, latest)
    if attention:
        _check_attention(latest)
    dev = pick_device(device)
    _check_shapes(latest.model, plan.episodes, latest.prompt_format, plan.description)
    rows, curves, network = _curves(plan, source, checkpoints, latest, dev, over_seeds=seed == "all")
    maps = _attention_maps(network, plan.episode, latest.prompt_format, dev) if attention else None
    spec = _spec(request, source, checkpoints, latest, plan)
    return EvaluationResult(
        _write(spec, out, source, rows, lambda folder: _figures(folder, curves, spec, latest, maps))
    )


@dataclass(frozen=True)
class _Request:
    """The arguments of one :func:`evaluate` call that its parts read, with its task changes parsed and its shifts
    and learners listed."""

    run: str | Path
    model: str | None
    seed: int | str | None
    step: int | str | None
    changes: dict
    shifts: list[str]
    learners: list[str]
    out: str | Path | None
    prompts: int | None
    bootstrap: int
    attention: bool
    command: str | None

    def call(self) -> str:
        """This evaluation as the Python call that repeats it."""
        arguments = {
            "model": self.model,
            "seed": self.seed,
            "step": self.step,
            "task": self.changes or None,
            "shifts": self.shifts,
            "learners": self.learners,
            "out": None if self.out is None else str(self.out),
            "prompts": self.prompts,
            "attention": self.attention or None,
        }
        shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items() if v is not None)
        return f"iclab.evaluate({str(self.run)!r}, {shown})"


def _open_model(request: _Request) -> tuple[Any, list, LoadedModel]:
    """The requested model's source, the checkpoints it reads (see :func:`_checkpoints`) and the latest of them,
    loaded and checked to be a model ``iclab eval`` evaluates."""
    source = open_source(request.run)
    checkpoints = _checkpoints(source, request.model, request.seed, request.step)
    latest = source.load(checkpoints[-1])
    _check_evaluable(latest)
    return source, checkpoints, latest


def _checkpoints(source, model: str | None, seed: int | str | None, step: int | str | None) -> list:
    """The checkpoints an evaluation reads: one model and seed at one step or every kept step, or every seed
    of the model at one step (``seed="all"``)."""
    if step is not None and step != "all" and not isinstance(step, int):
        raise ConfigError(f"step must be a checkpoint's step, 'all' or omitted, got {step!r}")
    if seed == "all":
        if step == "all":
            raise ConfigError("--seed all evaluates one checkpoint of each seed: give --step S or none, not --step all")
        name, seeds = source.seeds(model)
        return [source.checkpoint(name, s, step) for s in seeds]
    checkpoints = source.pick(model, seed)
    if step != "all":
        checkpoints = [source.checkpoint(checkpoints[0].model, checkpoints[0].seed, step)]
    return checkpoints


@dataclass
class _Plan:
    """What an evaluation compares on: the evaluated task (its description and itself), its prompts from the
    source's base seed (``episode``) and their shifted versions by shift name, the reference learners, the number
    of prompts, the bootstrap size and the metric."""

    description: dict
    task: Any
    episode: Any
    episodes: dict
    shifts: dict
    reference: list
    prompts: int
    bootstrap: int
    seed: int
    metric: str

    @classmethod
    def build(cls, request: _Request, source, trained: LoadedModel) -> _Plan:
        """The plan for ``request`` on the task ``trained`` was trained on, with the request's changes, and
        (by default) the source's ``eval_prompts`` prompts, else 1000."""
        description = changed_task(trained.metadata["task"], request.changes)
        n_prompts = request.prompts if request.prompts is not None else (source.config or {}).get("eval_prompts", 1000)
        task = task_from_description(description)
        shift_of = {name: make_shift(name) for name in request.shifts}
        if not shift_of:
            raise ConfigError("give at least one shift (standard for the task itself)")
        reference = [make_learner(name) for name in request.learners]
        bootstrap, seed = request.bootstrap, source.seed
        if n_prompts < 2 or bootstrap < 1:
            raise ConfigError(f"need at least 2 prompts and 1 bootstrap resampling, got {n_prompts} and {bootstrap}")
        episode = task.sample(n_prompts, generator(seed, "eval")).to(dtype=torch.float64)
        episodes = {name: s(episode, task, generator(seed, "shift", name)) for name, s in shift_of.items()}
        metric = error_metric(task)
        return cls(description, task, episode, episodes, shift_of, reference, n_prompts, bootstrap, seed, metric)

    def errors(self, predictor, shift: str, *prompt_format) -> torch.Tensor:
        """``(B, K)`` normalised errors of a learner or (with its prompt format) a model under ``shift``."""
        episode = self.episodes[shift]
        prediction = prefix_query_predictions(predictor, episode, *prompt_format)
        return normalised_prompt_errors(self.task, prediction, episode.y_query, self.shifts[shift].error_scale)


def _check_attention(loaded: LoadedModel) -> None:
    """``--attention`` draws a transformer's attention: any other model fails here."""
    if not isinstance(loaded.model, GPTTransformer):
        raise ConfigError(
            f"--attention draws a transformer's attention; {loaded.name!r} is a {type(loaded.model).__name__}"
        )


def _curves(plan: _Plan, source, checkpoints: list, latest: LoadedModel, device, over_seeds: bool):
    """Every learner's and checkpoint's error curve under every shift, as metric rows and as the curves the
    figures draw (keyed by shift, name and step; over seeds, the seeds' mean with a band over seeds and
    prompts); returns ``(rows, curves, the last model)``."""
    rows, curves, by_seed = [], {}, {}
    band = lambda values: mean_band(values, plan.bootstrap, seed=plan.seed)  # noqa: E731
    for name in plan.episodes:
        for ref in plan.reference:
            curves[name, ref.name, None] = band(plan.errors(ref, name))
            rows += _curve_rows(curves[name, ref.name, None], name, ref.name, None, None, plan.metric)
    for checkpoint in checkpoints:
        loaded = latest if checkpoint is checkpoints[-1] else source.load(checkpoint)
        network = loaded.model.to(device)
        for name in plan.episodes:
            by_seed.setdefault(name, []).append(plan.errors(network, name, latest.prompt_format))
            curve = band(by_seed[name][-1])
            if not over_seeds:  # the figures draw each step's model, or (over seeds) their mean below
                curves[name, loaded.name, checkpoint.step] = curve
            rows += _curve_rows(curve, name, loaded.name, loaded.seed, checkpoint.step, plan.metric)
    if over_seeds:
        step = checkpoints[-1].step
        for name, per_seed in by_seed.items():
            curves[name, latest.name, step] = seed_band(torch.stack(per_seed), plan.bootstrap, seed=plan.seed)
            rows += _curve_rows(curves[name, latest.name, step], name, latest.name, None, step, plan.metric)
    return rows, curves, network


def _attention_maps(network, episode, fmt, device) -> torch.Tensor:
    """``(L, 2, H, T, T)`` attention weights of ``network`` on the first two prompts of ``episode``, on the CPU."""
    prompt = fmt.encode(episode[:2].to(device, next(network.parameters()).dtype))
    return attention_patterns(network, prompt.tokens, prompt.n_context).cpu()


def _spec(request: _Request, source, checkpoints: list, latest: LoadedModel, plan: _Plan) -> dict:
    """What ``evaluation.yaml`` records: the command, the model and checkpoints read, and what they were
    evaluated on."""
    return {
        "command": request.command or request.call(),
        "source": str(source.path),
        "source_kind": source.kind,
        "model": latest.name,
        "seed": "all" if request.seed == "all" else latest.seed,
        "seeds": sorted({c.seed for c in checkpoints}),
        "steps": sorted({c.step for c in checkpoints}),
        "task": plan.description,
        "trained_task": latest.metadata.get("task"),
        "prompt_format": describe_format(latest.prompt_format),
        "shifts": request.shifts,
        "learners": [r.name for r in plan.reference],
        "prompts": plan.prompts,
        "bootstrap": request.bootstrap,
        "eval_seed": source.seed,
        "metric": plan.metric,
        "iclab": __version__,
    }


def _write(spec: dict, out, source, rows: list[dict], draw) -> EvaluationFolder:
    """Write the evaluation folder (its metrics, the figures ``draw(folder)`` makes, its report) beside an export or
    inside the source's folder, and relink the source run's report
    (:func:`iclab.report.evaluation.write_evaluation_folder`)."""

    def fill(folder: EvaluationFolder) -> None:
        folder.write_metrics(rows)
        draw(folder)
        write_evaluation_report(folder)

    return write_evaluation_folder(spec, out, source, "eval", fill)


def _figures(folder: EvaluationFolder, curves: dict, spec: dict, loaded: LoadedModel, maps) -> None:
    """``by_prefix`` (each shift: the model at its last step and the learners, by k), ``by_step`` (the
    error at the largest k against the training step, with ``--step all``) and ``attention``."""
    shifts, last, name = spec["shifts"], spec["steps"][-1], loaded.name
    columns = min(len(shifts), 4)
    fig, axes = new_figure(columns, width=4.2, height=3.3, rows=math.ceil(len(shifts) / columns))
    for ax, shift in zip(axes, shifts):
        for (setting, who, step), curve in curves.items():
            if setting != shift or (step is not None and step != last):
                continue
            k = range(len(curve["mean"]))
            label = f"{who} (step {step})" if step is not None else who
            band_line(
                ax, k, curve["mean"], curve["low"], curve["high"], lw=2.4 if step is not None else 1.2, label=label
            )
        ax.set_title(shift, fontsize=10)
        ax.set_xlabel("in-context examples k")
        ax.set_ylabel(spec["metric"].replace("_", " "))
        ax.set_yscale("symlog", linthresh=1e-2)  # a learner's error may be 0 (OLS past d) or far above 1
        ax.set_ylim(bottom=0)
    for ax in axes[len(shifts) :]:
        ax.axis("off")
    axes[0].legend(fontsize=7)
    save(fig, folder.figure("by_prefix"))

    if len(spec["steps"]) > 1:
        fig, axes = new_figure(columns, width=4.2, height=3.3, rows=math.ceil(len(shifts) / columns))
        for ax, shift in zip(axes, shifts):
            steps = spec["steps"]
            at = [curves[shift, name, s] for s in steps]
            final = {stat: [c[stat][-1].item() for c in at] for stat in ("mean", "low", "high")}
            band_line(ax, steps, final["mean"], final["low"], final["high"], marker="o", lw=2, label=name)
            references = [
                (who, curve) for (setting, who, step), curve in curves.items() if setting == shift and step is None
            ]
            for i, (who, curve) in enumerate(references, start=1):  # colour C0 is the model's
                ax.axhline(curve["mean"][-1].item(), ls="--", lw=1, color=f"C{i}", label=who)
            ax.set_xscale("log")  # kept steps are often log-spaced
            ax.set_title(f"{shift}: k = {len(at[0]['mean']) - 1}", fontsize=10)
            ax.set_xlabel("training step")
            ax.set_ylabel(spec["metric"].replace("_", " "))
        for ax in axes[len(shifts) :]:
            ax.axis("off")
        axes[0].legend(fontsize=7)
        save(fig, folder.figure("by_step"))

    if maps is not None:
        layers, n_prompts, heads = maps.shape[:3]
        fig, axes = new_figure(heads, width=2.4, height=2.4, rows=layers * n_prompts)
        for index, ax in enumerate(axes):
            row, head = divmod(index, heads)
            prompt, layer = divmod(row, layers)
            ax.imshow(maps[layer, prompt, head].numpy(), cmap="viridis", vmin=0, vmax=1)
            ax.set_title(f"prompt {prompt + 1}, layer {layer + 1}, head {head + 1}", fontsize=7)
            ax.set_xticks([])
            ax.set_yticks([])
        fig.suptitle("attention weights (rows: query tokens, columns: key tokens; 0 to 1)", fontsize=9)
        save(fig, folder.figure("attention"))
