"""The registry of named experiments.

Each entry names the module that defines the experiment and the one-line summary ``iclab list``
prints; modules are imported only when an experiment is used, so listing them starts no torch.
"""

from __future__ import annotations

import importlib

from ..config import ConfigError

_EXPERIMENTS = {
    # name: (module defining EXPERIMENT, one-line summary), in the order `iclab reproduce` runs them
    "lsa-linear": ("iclab.experiments.lsa_linear", "One-layer linear self-attention converges to one preconditioned GD step (Γ⁻¹)."),
    "gpt-linear": ("iclab.experiments.gpt_linear", "A GPT-style transformer on interleaved prompts tracks OLS at every prefix length."),
    "gd-mechanism": ("iclab.experiments.gd_mechanism", "Trained linear self-attention matches GD (1 layer) and GD++ (deeper) on linear regression."),
    "task-descriptors": ("iclab.experiments.task_descriptors", "Task descriptors (the inputs' mean) lower the loss of LSA trained in context; exact one-layer optimum."),
    "mesa-ar": ("iclab.experiments.mesa_ar", "Autoregressive linear attention learns one GD step on in-context OLS; ab → ab* (not recovered for Gaussian starts)."),
    "function-classes": ("iclab.experiments.function_classes", "One transformer per Garg et al. function class against their baselines, and the linear one under their shifted prompts."),
    "algorithm-selection": ("iclab.experiments.algorithm_selection", "Which learner a trained transformer matches (Akyürek et al.): SPD/ILWD, the Bayes ridge under noise, depth, probes."),
    "abstract-symbols": ("iclab.experiments.abstract_symbols", "Transformers on template tasks over unseen symbols with and without the identity terms, MLP baselines, copying vs width, the template kernel matrix."),
    "symbols-lm": ("iclab.experiments.symbols_lm", "A causal language model with and without a·XXᵀ (and its diagonal-masked variant): validation perplexity over seeds, learned a, diagonal attention mass."),
}


def names() -> list[str]:
    """Every experiment's name, in the order ``iclab reproduce`` runs them."""
    return list(_EXPERIMENTS)


def summary(name: str) -> str:
    """The one-line summary of an experiment (without importing it)."""
    _check(name)
    return _EXPERIMENTS[name][1]


def get(name: str):
    """The :class:`~iclab.experiments.base.Experiment` called ``name``."""
    _check(name)
    return importlib.import_module(_EXPERIMENTS[name][0]).EXPERIMENT


def _check(name: str) -> None:
    if name not in _EXPERIMENTS:
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(_EXPERIMENTS)}")
