"""``iclab identify``: which learner a model matches per prefix, where its layers hold that learner's quantities,
how ablating an activation changes both, and (over kept checkpoints) from which training step.

Every prompt comes from the source's base seed: the ``(seed, "eval")`` stream, as ``iclab eval`` (so a run's own
evaluation prompts), ``(seed, "ilwd-probes")`` for the probe inputs of ILWD, ``(seed, "probe-train")`` /
``(seed, "probe-test")`` for the per-layer probes and ``(seed, "llc")`` for the LLC's prompts. Everything is checked
before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import ConfigError
from ..devices import pick_device
from ..learners import Learner
from ..loading import open_source
from ..metrics import implicit_weights, mean_band, normalised_prompt_errors
from ..models.interventions import ablated, check_names
from ..prompts import InterleavedFormat, describe_format
from ..rng import generator
from ..runs import EvaluationFolder, RunFolder
from ..tasks import task_from_description
from ..tasks.descriptions import describe_task
from ..version import __version__
from . import layers
from . import llc as llc_estimate
from .panel import (
    PanelResult,
    bayes_name,
    check_epsilon,
    closest_by_prefix,
    learner_weights,
    linear_learners,
    panel,
    weight_distances,
)
from .report import CONTROL, IDENTIFICATION, read_summary, write
from .subject import Subject

PROBE_PROMPTS = (1024, 512)
"""Training and held-out prompts of the per-layer probes."""

ILWD_CONTEXTS = 64
"""Contexts whose implicit weights ILWD compares (each read with P = 2d + 2 probe inputs after every prefix)."""

TASK_KINDS = ("linear-regression", "function-class")


@dataclass
class Analysis:
    """One model's answers: the panel's by prefix (with the R² of the linear fit that gives the model's implicit
    weights, by k: 1 for a linear predictor), its loss by prefix, the probes by layer (for a model with named states)
    and its LLC (when asked for)."""

    panel: PanelResult
    loss: dict
    layers: list[dict] | None = None
    where: dict | None = None
    llc: dict | None = None

    def record(self) -> dict:
        """The part of ``summary.json`` this model gives."""
        return {
            "closest_overall": self.panel.overall_closest(),
            "by_prefix": self.panel.records(),
            "linear_fit_r2": self.panel.linear_fit_r2.tolist(),
            "loss": _curve(self.loss),
            "by_layer": self.layers,
            "where": self.where,
            "llc": self.llc,
        }


def _curve(band: Mapping[str, torch.Tensor]) -> list[dict]:
    return [
        {stat: band[stat][k].item() for stat in ("mean", "low", "high")} | {"k": k} for k in range(len(band["mean"]))
    ]


@dataclass
class Plan:
    """What every analysed model is compared on (one plan serves every checkpoint and ablation): the task, its
    prompts, the panel and its predictions on them, the contexts and probe inputs of ILWD with the learners' weights
    there, the probes' training and held-out prompts (None without probes) and the LLC's settings (None without)."""

    task: Any
    learners: dict[str, Learner]
    epsilon: float
    seed: int
    bootstrap: int
    episode: Any
    predictions: dict
    contexts: Any
    probe_inputs: torch.Tensor
    learner_weights: torch.Tensor
    splits: dict | None
    llc: llc_estimate.Settings | None
    _targets: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls, task, learners: Iterable[str], epsilon, prompts: int, bootstrap: int, seed: int, probes: bool, llc=None
    ):
        """The plan for ``task``: ``prompts`` prompts of ``(seed, "eval")``, the panel with ``learners`` added, ε
        (None: its default), probes or not, the LLC's settings."""
        if prompts < 2 or bootstrap < 1:
            raise ConfigError(f"need at least 2 prompts and 1 bootstrap resampling, got {prompts} and {bootstrap}")
        if task.n_context < 2:
            raise ConfigError(f"identification compares predictions after k >= 1 examples: n_context {task.n_context}")
        panel_learners = panel(task, learners)
        episode = task.sample(prompts, generator(seed, "eval")).to(dtype=torch.float64)
        contexts = episode[: min(ILWD_CONTEXTS, prompts)]
        shape = (len(contexts.xs), 2 * task.d + 2, task.d)
        probe_inputs = torch.randn(shape, generator=generator(seed, "ilwd-probes"), dtype=torch.float64)
        splits = None
        if probes:
            draw = lambda name, size: task.sample(size, generator(seed, f"probe-{name}")).to(dtype=torch.float64)  # noqa: E731
            splits = {name: draw(name, size) for name, size in zip(("train", "test"), PROBE_PROMPTS)}
        return cls(
            task,
            panel_learners,
            check_epsilon(epsilon, task),
            seed,
            bootstrap,
            episode,
            {name: learner.predict_prefixes_episode(episode) for name, learner in panel_learners.items()},
            contexts,
            probe_inputs,
            learner_weights(panel_learners, contexts, probe_inputs),
            splits,
            llc,
        )

    def targets(self, learners: Mapping[str, Any]) -> dict:
        """Each split's probe targets (:func:`iclab.identification.layers.targets`), computed once per set of
        learners."""
        key = tuple(learners)
        if key not in self._targets:
            self._targets[key] = {name: layers.targets(e, learners) for name, e in self.splits.items()}
        return self._targets[key]


def compare(subject: Subject, plan: Plan) -> Analysis:
    """The panel's answers for ``subject`` by prefix (SPD/d and ILWD to every learner) and its loss by prefix."""
    boot = {"n_boot": plan.bootstrap, "seed": plan.seed}
    predictions = subject.predictions(plan.episode)
    labels = subject.probe_predictions(plan.contexts, plan.probe_inputs)
    model_weights, fit = implicit_weights(plan.probe_inputs, labels)
    ilwds = weight_distances(model_weights, plan.learner_weights, list(plan.learners), **boot)
    result = closest_by_prefix(predictions, plan.predictions, plan.task.d, plan.epsilon, ilwds=ilwds, **boot)
    result.linear_fit_r2 = fit.mean(0)
    errors = normalised_prompt_errors(plan.task, predictions, plan.episode.ys)
    return Analysis(result, mean_band(errors, **boot))


def probe_layers(subject: Subject, plan: Plan, analysis: Analysis, targets: Mapping[str, Any]) -> None:
    """Fill ``analysis`` with ``subject``'s probes by layer of Xᵀy, w_OLS and the ``targets`` learners' weights
    (nothing for a model that names no states, or when the plan leaves probes out)."""
    if plan.splits is None or not subject.has_states:
        return
    boot = {"n_boot": plan.bootstrap, "seed": plan.seed}
    states = {name: subject.states(e) for name, e in plan.splits.items()}
    wanted = plan.targets(targets)
    analysis.layers = layers.probe(states["train"], states["test"], wanted["train"], wanted["test"], **boot)
    analysis.where = layers.where(analysis.layers)


def learning_coefficient(subject: Subject, plan: Plan, analysis: Analysis) -> None:
    """Fill ``analysis`` with ``subject``'s LLC (:mod:`iclab.identification.llc`) when the plan asks for it, on
    ``plan.llc.samples`` prompts of the ``(seed, "llc")`` stream."""
    if plan.llc is None:
        return
    episode = plan.task.sample(plan.llc.samples, generator(plan.seed, "llc"))
    loss = llc_estimate.prompt_loss(subject.prompt_format, episode)
    analysis.llc = llc_estimate.estimate(subject.model, loss, plan.llc)


def probe_learners(plan: Plan, analysis: Analysis) -> dict:
    """The linear learners whose weights the probes target: ridge at λ* (the ridge of the panel closest to the model,
    by SPD/d averaged over k ≥ 1) and the closest learner, when it is linear."""
    linear = linear_learners(plan.learners)
    average = lambda name: analysis.panel.spds[name]["mean"][1:].mean().item()  # noqa: E731
    ridges = [name for name in linear if name.startswith(("ridge", "bayes"))]
    chosen = {}
    if ridges:
        best = min(ridges, key=average)
        chosen[best] = linear[best]
    closest = analysis.panel.overall_closest()
    if closest in linear:
        chosen[closest] = linear[closest]
    return chosen


@dataclass
class IdentificationResult:
    """A written identification: its folder and its ``summary.json``."""

    folder: EvaluationFolder

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def summary(self) -> dict:
        return read_summary(self.folder)


def identify(
    run: str | Path | nn.Module,
    model: str | None = None,
    seed: int | None = None,
    step: int | None = None,
    timeline: bool = False,
    task=None,
    prompt_format=None,
    learners: Iterable[str] = (),
    epsilon: float | None = None,
    prompts: int = 1000,
    bootstrap: int = 1000,
    probes: bool = True,
    ablate: Iterable[str] = (),
    llc: bool | Mapping | llc_estimate.Settings = False,
    out: str | Path | None = None,
    device: str | None = None,
    command: str | None = None,
) -> IdentificationResult:
    """Identify the learner a model implements and write an identification folder (see the package docstring).

    Args:
        run: a finished run folder, an export or a Garg et al. run; or a model of one's own (an ``nn.Module``
            following the protocol of :mod:`iclab.identification.subject`).
        model, seed: which of the source's models and seeds (each may be left out where there is one); for a model
            of one's own, ``seed`` is the base seed of the prompts (default 0).
        step: a kept checkpoint's step (default: the latest).
        timeline: identify every kept checkpoint (``train.keep``) beside the training loss.
        task: for a model of one's own, the task it reads (a task or its description, e.g.
            ``{"kind": "linear-regression", "d": 5, "n_context": 10}``).
        prompt_format: for a model of one's own, the format it reads (default: its ``prompt_format`` attribute,
            else interleaved).
        learners: learners to add to the panel, named as ``iclab eval --learners`` names them.
        epsilon: the largest SPD/d at which a learner counts as the model's (default: from the task's noise,
            :func:`iclab.identification.panel.default_epsilon`).
        prompts: prompts the panel is compared on; bootstrap: resamplings of the 5–95% bands.
        probes: probe every layer (the models that name hidden states).
        ablate: activation names (:mod:`iclab.models.activations`) to mean-ablate, one at a time, and identify again.
        llc: also estimate the local learning coefficient at every checkpoint read (needs devinterp,
            ``iclab[devinterp]``): True for :class:`iclab.identification.llc.Settings`' defaults, or settings (a
            ``Settings`` or a mapping of its fields).
        out: the folder to write (default ``<run>/identify-<timestamp>``; beside an export or for a model of one's
            own, ``<name>-identify-<timestamp>`` / ``identify-<timestamp>`` in the current folder).
        device: where the model runs (default: CUDA if available).
        command: the command to record (the CLI passes its own).
    """
    if out is not None:
        EvaluationFolder.refuse_taken(out)
    ablate, learners = list(ablate), list(learners)
    source, checkpoints, subject, task = _open(run, model, seed, step, timeline, task, prompt_format)
    base_seed = source.seed if source is not None else (seed or 0)
    plan = Plan.build(task, learners, epsilon, prompts, bootstrap, base_seed, probes, _llc_settings(llc, base_seed))
    subject.model.to(pick_device(device))
    subject.check(plan.episode)
    check_names(subject.model, ablate)
    final = compare(subject, plan)
    targets = probe_learners(plan, final)
    probe_layers(subject, plan, final, targets)
    learning_coefficient(subject, plan, final)
    ablations = {name: _ablated(subject, plan, name) for name in ablate}
    steps = _timeline(source, checkpoints, subject, plan, targets, final) if timeline else []
    spec = {
        "kind": IDENTIFICATION,
        "command": command or _call(run, model, seed, step, timeline, learners, epsilon, prompts, ablate, out),
        "source": None if source is None else str(source.path),
        "source_kind": "model" if source is None else source.kind,
        "model": subject.name,
        "seed": None if source is None else checkpoints[-1].seed,
        "steps": [c.step for c in checkpoints] if checkpoints else [],
        "task": describe_task(plan.task),
        "prompt_format": describe_format(subject.prompt_format),
        "learners": list(plan.learners),
        "bayes": bayes_name(plan.task),
        "epsilon": plan.epsilon,
        "epsilon_rule": EPSILON_RULE if epsilon is None else "given",
        "prompts": prompts,
        "bootstrap": bootstrap,
        "eval_seed": base_seed,
        "probes": plan.splits is not None and subject.has_states,
        "ablate": ablate,
        "llc": None if plan.llc is None else asdict(plan.llc),
        "iclab": __version__,
    }
    summary = {**spec, **final.record(), "probe_targets": list(targets), "ablations": ablations, "by_step": steps}
    spds = {**final.panel.spds, CONTROL: final.panel.zero}
    return IdentificationResult(write(spec, summary, spds, final.panel.ilwds, out, source))


EPSILON_RULE = "max(σ², E[y²]/100)/d: the label noise's variance, or 1% of the zero predictor's error"


def _llc_settings(llc, seed: int) -> llc_estimate.Settings | None:
    """The LLC's settings (None: no LLC), seeded by the prompts' seed unless they name their own."""
    if llc is False or llc is None:
        return None
    llc_estimate.require()  # before any work
    if isinstance(llc, llc_estimate.Settings):
        return llc
    fields = {"seed": seed, **(dict(llc) if isinstance(llc, Mapping) else {})}
    known = llc_estimate.Settings.__dataclass_fields__
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise ConfigError(f"unknown LLC setting(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    return llc_estimate.Settings(**fields)


def _open(run, model, seed, step, timeline, task, prompt_format):
    """(source or None, its checkpoints read (by step), the subject at the last, the task)."""
    if isinstance(run, nn.Module):
        if task is None:
            raise ConfigError("a model of one's own needs its task: identify(model, task=<a task or its description>)")
        task = task_from_description(task) if isinstance(task, Mapping) else task
        fmt = prompt_format or getattr(run, "prompt_format", None) or InterleavedFormat()
        return None, [], Subject(run, fmt, type(run).__name__), task
    source = open_source(run)
    checkpoints = source.pick(model, seed)
    if timeline:
        if step is not None:
            raise ConfigError("--timeline reads every kept checkpoint: give no --step")
        if len(checkpoints) < 2:
            raise ConfigError(
                f"{source.path} keeps no checkpoint of {checkpoints[0].model!r} seed {checkpoints[0].seed} before its "
                "last: --timeline needs kept steps; train with --set train.keep=8 (or a list of steps)"
            )
    else:
        checkpoints = [source.checkpoint(checkpoints[0].model, checkpoints[0].seed, step)]
    latest = source.load(checkpoints[-1])
    kind = (latest.metadata.get("task") or {}).get("kind")
    if kind not in TASK_KINDS or latest.prompt_format is None:
        raise ConfigError(
            f"iclab identify reads regression models on interleaved or paired prompts; {latest.name!r} was trained on "
            f"{'no recorded task' if kind is None else f'a {kind} task'}"
        )
    return source, checkpoints, Subject(latest.model, latest.prompt_format, latest.name), latest.task


def _ablated(subject: Subject, plan: Plan, name: str) -> dict:
    """The panel's answers and the loss with ``name`` mean-ablated (over the prompts of the pass)."""
    with ablated(subject.model, [name], "mean"):
        analysis = compare(subject, plan)
    return {"how": "mean", **analysis.record()}


def _timeline(source, checkpoints, subject: Subject, plan: Plan, targets, final: Analysis) -> list[dict]:
    """Every kept checkpoint's answers (the last one's are ``final``'s), beside the training loss logged nearest its
    step (and that step)."""
    loss = _training_loss(source, subject.name, checkpoints[-1].seed)
    device = next(subject.model.parameters()).device
    steps = []
    for checkpoint in checkpoints:
        analysis = final
        if checkpoint is not checkpoints[-1]:
            at = Subject(source.load(checkpoint).model.to(device), subject.prompt_format, subject.name)
            analysis = compare(at, plan)
            probe_layers(at, plan, analysis, targets)
            learning_coefficient(at, plan, analysis)
        logged = min(loss, key=lambda step: abs(step - checkpoint.step), default=None)
        train = {"train_loss": None if logged is None else loss[logged], "train_loss_step": logged}
        steps.append({"step": checkpoint.step, **train, **analysis.record()})
    return steps


def _training_loss(source, name: str, seed: int) -> dict[int, float]:
    """The run's logged training loss of model ``name`` and ``seed`` by step (empty for other sources)."""
    if source.kind != "run":
        return {}
    metrics = RunFolder(source.path).read_metrics()
    rows = metrics[(metrics["metric"] == "train_loss") & (metrics["model"] == name) & (metrics["seed"] == seed)]
    return {int(step): float(value) for step, value in zip(rows["step"], rows["value"])}


def _call(run, model, seed, step, timeline, learners, epsilon, prompts, ablate, out) -> str:
    """This identification as the Python call that repeats it."""
    arguments = {
        "model": model,
        "seed": seed,
        "step": step,
        "timeline": timeline or None,
        "learners": learners or None,
        "epsilon": epsilon,
        "prompts": prompts,
        "ablate": ablate or None,
        "out": None if out is None else str(out),
    }
    shown = "".join(f", {k}={v!r}" for k, v in arguments.items() if v is not None)
    what = repr(str(run)) if not isinstance(run, nn.Module) else f"<{type(run).__name__}>"
    return f"iclab.identify({what}{shown})"
