"""Trained models as objects: :func:`load_model` rebuilds one from its checkpoint, with the task and
prompt format it was trained on.

It reads three kinds of folders:

* a finished run folder: ``checkpoints/<model>/seed<k>/model.safetensors`` (the latest weights) and
  ``step<N>.safetensors`` (kept by ``train.keep``), whose metadata records the model's class and
  constructor arguments, its prompt format and task (see :mod:`iclab.train`);
* an export (``iclab export``): ``config.json`` and ``model.safetensors`` (see :mod:`iclab.models.convert`);
* one of Garg et al.'s runs (their released ``models.zip``): ``config.yaml`` (model family ``gpt2``)
  and ``state.pt`` (``model_state_dict``, ``train_step``), plus ``model_<step>.pt`` state dicts, converted
  to an iclab transformer with the same predictions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from . import probes  # noqa: F401  (registers PoolingProbes, the probes algorithm-selection checkpoints)
from .config import ConfigError
from .models import GPTTransformer, describe, rebuild
from .models.convert import from_garg, from_hub, garg_config
from .prompts import InterleavedFormat, describe_format, format_from_description
from .runs import Checkpoint, RunFolder, read_file, read_weights
from .tasks import task_from_description


@dataclass
class LoadedModel:
    """A trained model, ready to predict (eval mode, on the CPU), and what it was trained on.

    Attributes:
        model: the module.
        task: the task it was trained on (its last curriculum stage), or None when its checkpoint
            records none (a language model's text, probes of hidden states).
        prompt_format: the prompt format it reads, or None likewise.
        name, seed, step: which of the source's models, its seed and its training step.
        metadata: everything the weights file records (class, arguments, task and format descriptions, ...).
        source: the folder it was read from.
    """

    model: nn.Module
    task: Any
    prompt_format: Any
    name: str
    seed: int
    step: int
    metadata: dict
    source: Path


@dataclass
class Source:
    """A folder of trained models: its checkpoints, how to read one, and where evaluations of it start."""

    path: Path
    kind: str  # "run", "export" or "garg"
    checkpoints: list[Checkpoint]
    read: Callable[[Checkpoint], tuple[dict, dict]]  # (state dict, metadata)
    seed: int = 0  # the base seed of evaluation prompts: a run's own
    config: dict | None = None  # a run's config.yaml

    def pick(self, model: str | None = None, seed: int | None = None) -> list[Checkpoint]:
        """Every checkpoint of one model and seed, by step; either may be left out where the source
        holds only one (otherwise the error lists the choices)."""
        model = _choose("model", model, [c.model for c in self.checkpoints], self.path, "--model")
        mine = [c for c in self.checkpoints if c.model == model]
        seed = _choose("seed", seed, [c.seed for c in mine], self.path, "--seed", f" of model {model!r}")
        return [c for c in mine if c.seed == seed]

    def seeds(self, model: str | None = None) -> tuple[str, list[int]]:
        """A model's name (it may be left out where the source holds one model) and its seeds."""
        model = _choose("model", model, [c.model for c in self.checkpoints], self.path, "--model")
        return model, sorted({c.seed for c in self.checkpoints if c.model == model})

    def checkpoint(self, model: str | None = None, seed: int | None = None, step: int | None = None) -> Checkpoint:
        """One checkpoint: the latest of its model and seed, or the one at ``step``."""
        found = self.pick(model, seed)
        if step is None:
            return found[-1]
        at = [c for c in found if c.step == step]
        if not at:
            steps = ", ".join(str(c.step) for c in found)
            raise ConfigError(
                f"{self.path}: model {found[0].model!r} seed {found[0].seed} has no checkpoint at step "
                f"{step}; choose from {steps} (train.keep keeps more)"
            )
        return at[0]

    def load(self, checkpoint: Checkpoint) -> LoadedModel:
        """The model of ``checkpoint``, rebuilt and loaded."""
        state, metadata = self.read(checkpoint)
        model = rebuild(metadata)
        model.load_state_dict(state)
        task, fmt = metadata.get("task"), metadata.get("prompt_format")
        return LoadedModel(
            model.eval(),
            None if task is None else task_from_description(task),
            None if fmt is None else format_from_description(fmt),
            checkpoint.model,
            checkpoint.seed,
            checkpoint.step,
            metadata,
            self.path,
        )


def _choose(what: str, value, available: list, path: Path, flag: str, where: str = ""):
    choices = sorted(set(available))
    if value is None and len(choices) == 1:
        return choices[0]
    if value is None:
        raise ConfigError(f"{path} holds several {what}s{where}; pick one with {flag}: {', '.join(map(str, choices))}")
    if value not in choices:
        raise ConfigError(f"{path} has no {what} {value!r}{where}; choose from {', '.join(map(str, choices))}")
    return value


def load_model(
    run: str | Path, model: str | None = None, seed: int | None = None, step: int | None = None
) -> LoadedModel:
    """A trained model from a finished run folder, an export or a Garg et al. run (see the module
    docstring), in eval mode, with the task and prompt format it was trained on.

    ``model`` names one of the run's models and ``seed`` one of its seeds (each may be left out when
    there is one); ``step`` picks a kept checkpoint (default: the latest). Bad choices are a
    :class:`ConfigError` that lists the possible ones.
    """
    source = open_source(run)
    return source.load(source.checkpoint(model, seed, step))


def open_source(path: str | Path) -> Source:
    """The folder of trained models at ``path`` (a :class:`ConfigError` when it is none)."""
    path = Path(getattr(path, "path", path))  # a RunResult too
    if (path / "config.json").exists():
        return _export(path)
    if (path / "config.yaml").exists():
        config = read_file(path / "config.yaml", lambda p: yaml.safe_load(p.read_text(encoding="utf-8")) or {}, dict)
        if "experiment" in config:
            return _run(path, config)
        if isinstance(config.get("model"), dict) and "family" in config["model"]:
            return _garg(path, config)
    raise ConfigError(
        f"{path} is not a run folder, an export (config.json) nor one of Garg et al.'s runs (config.yaml and state.pt)"
    )


def _run(path: Path, config: dict) -> Source:
    run = RunFolder(path)
    if not run.finished:
        raise ConfigError(f"{path} has not finished (no claims.json); finish it with `iclab resume {path}` first")
    checkpoints = run.weights()
    if not checkpoints and run.legacy_checkpoints():
        raise ConfigError(
            f"{path} was written before checkpoints recorded their models (one file per model and seed): "
            "its models cannot be rebuilt; its report and metrics still read, and rerunning it with "
            "`iclab run` gives loadable checkpoints"
        )
    if not checkpoints:
        raise ConfigError(f"{path} has no checkpoints")
    return Source(path, "run", checkpoints, lambda c: read_weights(c.path, run.manifest), config.get("seed", 0), config)


def _export(path: Path) -> Source:
    from safetensors.torch import load_file

    config = read_file(path / "config.json", lambda p: json.loads(p.read_text(encoding="utf-8")), dict)
    _, metadata = from_hub({}, config)
    checkpoint = Checkpoint(
        metadata.get("name", "model"), metadata.get("seed", 0), metadata.get("step", 0), path / "model.safetensors"
    )
    return Source(path, "export", [checkpoint], lambda c: from_hub(read_file(c.path, load_file), config))


GARG_TASKS = {
    "linear_regression": "linear",
    "sparse_linear_regression": "sparse-linear",
    "linear_classification": "linear-classification",
    "noisy_linear_regression": "noisy-linear",
    "quadratic_regression": "quadratic",
    "relu_2nn_regression": "relu-net",
    "decision_tree": "decision-tree",
}
"""Garg et al.'s task names and iclab's function classes (:mod:`iclab.tasks.functions`)."""

GARG_PARAMETERS = {"sparsity": "sparsity", "noise_std": "noise", "hidden_layer_size": "hidden", "depth": "depth"}


def garg_task(config: dict) -> dict | None:
    """The iclab task description of a Garg et al. run's ``training`` block (x ~ N(0, I_d), prompts
    of the curriculum's last length), or None for a task iclab does not have (another task, data
    other than ``gaussian``, weights scaled by ``scale``). Their noisy labels are rescaled to the
    linear scale only with ``renormalize_ys``; without it they are iclab's linear regression with noise."""
    training, d = config["training"], config["model"]["n_dims"]
    kwargs = dict(training.get("task_kwargs") or {})
    n = training["curriculum"]["points"]["end"]
    if (
        training["task"] not in GARG_TASKS
        or training.get("data", "gaussian") != "gaussian"
        or kwargs.pop("scale", 1) != 1
    ):
        return None
    if training["task"] == "noisy_linear_regression" and not kwargs.pop("renormalize_ys", False):
        return {"kind": "linear-regression", "d": d, "n_context": n, "noise": kwargs.pop("noise_std", 0.0)}
    if set(kwargs) - set(GARG_PARAMETERS):
        return None
    parameters = {GARG_PARAMETERS[k]: v for k, v in kwargs.items()}
    return {"kind": "function-class", "class": GARG_TASKS[training["task"]], "d": d, "n_context": n, **parameters}


def _garg(path: Path, config: dict) -> Source:
    m = config["model"]
    if m["family"] != "gpt2":
        raise ConfigError(f"{path}: iclab imports Garg et al.'s gpt2 models, not {m['family']!r}")
    if not (path / "state.pt").exists():
        raise ConfigError(f"{path} has no state.pt")
    gpt = garg_config(m["n_dims"], m["n_positions"], m["n_embd"], m["n_layer"], m["n_head"])
    state = read_file(path / "state.pt", lambda p: torch.load(p, map_location="cpu", weights_only=True))
    latest = Checkpoint("transformer", 0, int(state["train_step"]), path / "state.pt")
    kept = [
        Checkpoint("transformer", 0, int(match[1]), p)
        for p in path.glob("model_*.pt")
        if (match := re.fullmatch(r"model_(\d+)\.pt", p.name)) and int(match[1]) < latest.step
    ]
    facts = {
        **describe(GPTTransformer(gpt)),
        "prompt_format": describe_format(InterleavedFormat()),
        "task": garg_task(config),
        "experiment": None,
        "source": "Garg et al. (NeurIPS 2022), converted",
    }

    def read(checkpoint: Checkpoint) -> tuple[dict, dict]:
        theirs = (
            state["model_state_dict"]
            if checkpoint is latest
            else read_file(checkpoint.path, lambda p: torch.load(p, map_location="cpu", weights_only=True))
        )
        return from_garg(theirs, gpt), {**facts, "name": checkpoint.model, "seed": 0, "step": checkpoint.step}

    return Source(path, "garg", sorted(kept, key=lambda c: c.step) + [latest], read)
