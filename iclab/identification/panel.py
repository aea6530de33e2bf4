"""Per prefix: which learner of a panel a model is closest to (Akyürek et al. 2023, docs/papers.md §3).

The panel (:func:`panel`) holds OLS, ridge over a λ grid, the Bayes-optimal predictor of the task's prior and
noise (ridge with λ = σ²/τ², OLS without noise; only for a task whose w is Gaussian; :func:`bayes_name` says which
learner of the panel it is), one-step and k-step GD and
one-pass SGD over a step-size grid, k-NN, averaging, and the learners a user names. At every prefix k ≥ 1 (at
k = 0 every learner predicts 0, so none is closer than another) :func:`closest_by_prefix` names the learner of
least SPD/d to the model, with its 5–95% bootstrap band over prompts, the runner-up with its band, and the band of
their difference: ``separated`` when that band excludes 0. A learner counts as the model's only when its SPD/d is
at most ε and below the zero predictor's (a control, as in Akyürek et al.'s Fig 3: a model nearer to predicting 0
than to every learner has learnt nothing, however close a learner of small steps, which predicts little, may be);
otherwise the answer at k is "none within ε".

ε (:func:`default_epsilon`) is max(σ², E[y²]/100)/d in SPD/d's units: the label noise's variance (two predictors
closer than the noise cannot be told apart by the loss), or for a noiseless task 1% of the zero predictor's error.
For x ~ N(0, I) and w ~ N(0, I) without noise that is Akyürek et al.'s 0.01 ("squared error less than 0.01").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch

from ..config import ConfigError
from ..learners import (
    Averaging,
    BayesLinear,
    GradientDescent,
    Learner,
    LeastSquares,
    LinearLearner,
    NearestNeighbours,
    OnePassSGD,
    Ridge,
)
from ..learners import learner as named_learner
from ..metrics import ilwd, mean_band, prefix_weights, spd
from ..tasks.base import Episode

RIDGE_LAMBDAS = (0.01, 0.1, 1.0)
"""The ridge λ grid of the default panel (the Bayes λ of a noisy task joins it)."""

STEP_SIZES = (0.1, 0.2, 0.4, 0.8)
"""GD's step sizes η on the mean squared error (1/2k)Σ(wᵀx − y)² of the panel; one-pass SGD takes η/d per example,
the same step relative to ‖x‖² ≈ d."""

GD_STEPS = (1, 4)
"""One-step and k-step GD."""


def gaussian_prior(task) -> tuple[float, float] | None:
    """(τ, σ) of a task whose w ~ N(0, τ²I) and label noise ~ N(0, σ²) (linear regression with a dense, drawn w;
    Garg et al.'s linear and noisy-linear classes), or None for any other task (no Bayes learner in the panel)."""
    if type(task).__name__ == "LinearRegression":
        dense = task.w_sparsity is None and task.w is None
        return (task.w_scale, task.noise) if dense else None
    if getattr(task, "name", None) == "linear":
        return 1.0, 0.0
    if getattr(task, "name", None) == "noisy-linear":
        return task.scale, task.scale * task.noise
    return None


def default_epsilon(task) -> float:
    """ε = max(σ², E[y²]/100)/d (see the module docstring); σ = 0 for a task without a Gaussian prior."""
    prior = gaussian_prior(task)
    noise = 0.0 if prior is None else prior[1] ** 2
    return max(noise, task.zero_error / 100) / task.d


def panel(task, extra: Iterable[str] = ()) -> dict[str, Learner]:
    """The default learners for ``task`` by name (see the module docstring), then the ``extra`` ones named as
    ``iclab eval --learners`` names them (:func:`iclab.learners.learner`)."""
    d = task.d
    learners: list[Learner] = [LeastSquares(), *(Ridge(lam) for lam in RIDGE_LAMBDAS)]
    if bayes_name(task) not in (None, "ols", *(f"ridge({lam:g})" for lam in RIDGE_LAMBDAS)):
        tau, sigma = gaussian_prior(task)
        bayes = BayesLinear(tau, sigma)
        bayes.name = bayes_name(task)
        learners.append(bayes)
    learners += [GradientDescent(steps, lr) for steps in GD_STEPS for lr in STEP_SIZES]
    learners += [OnePassSGD(lr / d) for lr in STEP_SIZES]
    learners += [NearestNeighbours(3), Averaging()]
    learners += [named_learner(name) for name in extra]
    by_name = {}
    for learner in learners:
        by_name.setdefault(learner.name, learner)  # a learner named twice is compared once
    return by_name


def bayes_name(task) -> str | None:
    """The name of the panel's Bayes-optimal learner for ``task``: ``ols`` without noise, ``ridge(λ)`` when λ = σ²/τ²
    is on the grid, else ``bayes(λ=…)`` (a learner of its own); None for a task without a Gaussian prior."""
    prior = gaussian_prior(task)
    if prior is None:
        return None
    tau, sigma = prior
    lam = sigma**2 / tau**2
    if lam == 0:
        return "ols"
    return f"ridge({lam:g})" if lam in RIDGE_LAMBDAS else f"bayes(λ={lam:.3g})"


def check_epsilon(epsilon: float | None, task) -> float:
    """ε as given (> 0) or :func:`default_epsilon`."""
    if epsilon is None:
        return default_epsilon(task)
    if not epsilon > 0:
        raise ConfigError(f"epsilon must be > 0 (an SPD/d), got {epsilon}")
    return float(epsilon)


def _band(curve: Mapping[str, torch.Tensor], k: int) -> dict[str, float]:
    return {stat: curve[stat][k].item() for stat in ("mean", "low", "high")}


@dataclass
class PrefixAnswer:
    """The answer at one prefix k: the closest learner (or None when none is within ε) and the evidence."""

    k: int
    closest: str
    spd: dict
    runner_up: str
    runner_up_spd: dict
    margin: dict
    separated: bool
    within: bool
    ilwd: dict | None
    zero_spd: dict

    @property
    def answer(self) -> str | None:
        """The closest learner's name, or None ("none within ε")."""
        return self.closest if self.within else None

    def record(self) -> dict:
        """What ``summary.json`` holds for this k."""
        return {
            "k": self.k,
            "answer": self.answer,
            "closest": self.closest,
            "spd": self.spd,
            "runner_up": self.runner_up,
            "runner_up_spd": self.runner_up_spd,
            "margin": self.margin,
            "separated": self.separated,
            "within_epsilon": self.within,
            "ilwd": self.ilwd,
            "zero_spd": self.zero_spd,
        }


@dataclass
class PanelResult:
    """SPD/d (and ILWD) of a model to every learner of a panel, by prefix, and the answer at each k ≥ 1."""

    spds: dict[str, dict[str, torch.Tensor]]
    ilwds: dict[str, dict[str, torch.Tensor]]
    answers: list[PrefixAnswer]
    epsilon: float
    linear_fit_r2: torch.Tensor | None
    zero: dict[str, torch.Tensor] | None = None

    def overall_closest(self) -> str:
        """The learner of least SPD/d averaged over k ≥ 1."""
        return min(self.spds, key=lambda name: self.spds[name]["mean"][1:].mean().item())

    def records(self) -> list[dict]:
        return [answer.record() for answer in self.answers]


def _by_name(band: Mapping[str, torch.Tensor], names: list[str]) -> dict[str, dict[str, torch.Tensor]]:
    """``{name: {"mean", "low", "high"}}`` from a band whose first dimension runs over ``names``."""
    return {name: {stat: values[i] for stat, values in band.items()} for i, name in enumerate(names)}


def closest_by_prefix(
    model_predictions: torch.Tensor,
    learner_predictions: Mapping[str, torch.Tensor],
    d: int,
    epsilon: float,
    n_boot: int = 1000,
    seed: int = 0,
    ilwds: Mapping[str, Mapping[str, torch.Tensor]] | None = None,
) -> PanelResult:
    """The answer at every prefix k ≥ 1 from ``(B, N)`` predictions of the model and of each learner on the same
    prompts (see the module docstring); ``ilwds`` (by learner) are reported beside the closest learner's SPD. Every
    band comes from the same resamplings of the prompts (one :func:`iclab.metrics.spd` of all learners at once)."""
    if len(learner_predictions) < 2:
        raise ConfigError("identification needs at least two learners to compare with")
    names = list(learner_predictions)
    model = model_predictions.double().cpu()
    stacked = torch.stack([learner_predictions[name].double().cpu() for name in names] + [torch.zeros_like(model)], 1)
    model = model[:, None].expand_as(stacked)  # (B, L + 1, N); the last row: the zero predictor, the control
    bands = spd(model, stacked, d, n_boot, seed)  # each (L + 1, N)
    spds = _by_name(bands, [*names, "zero"])
    zero = spds.pop("zero")
    order = bands["mean"][:-1].argsort(0)  # (L, N): learners by SPD/d at each k
    ks = torch.arange(1, stacked.shape[-1])
    first, second = order[0, 1:], order[1, 1:]
    squared = (model - stacked).pow(2) / d
    margin = mean_band(squared[:, second, ks] - squared[:, first, ks], n_boot, seed=seed)  # (K,): runner-up − closest
    answers = []
    for i, k in enumerate(ks.tolist()):
        closest, runner_up = names[first[i]], names[second[i]]
        distance = spds[closest]["mean"][k].item()
        answers.append(
            PrefixAnswer(
                k,
                closest,
                _band(spds[closest], k),
                runner_up,
                _band(spds[runner_up], k),
                _band(margin, i),
                margin["low"][i].item() > 0,
                distance <= epsilon and distance < zero["mean"][k].item(),
                None if ilwds is None or closest not in ilwds else _band(ilwds[closest], k),
                _band(zero, k),
            )
        )
    return PanelResult(spds, dict(ilwds or {}), answers, epsilon, None, zero)


def learner_weights(learners: Mapping[str, Learner], episode: Episode, probes: torch.Tensor) -> torch.Tensor:
    """``(B, L, N, d)``: every learner's weights after each prefix (:func:`iclab.metrics.prefix_weights`: a linear
    learner's own, k-NN's implicit fit on the probe inputs ``probes (B, P, d)``)."""
    return torch.stack([prefix_weights(learner, episode, probes)[0] for learner in learners.values()], 1)


def weight_distances(model_weights: torch.Tensor, weights: torch.Tensor, names: list[str], **boot) -> dict:
    """ILWD of the model's implicit weights ``(B, N, d)`` to each learner's (``weights (B, L, N, d)``, named by
    ``names``), by learner, from one :func:`iclab.metrics.ilwd`."""
    return _by_name(ilwd(model_weights[:, None].expand_as(weights), weights, **boot), names)


def linear_learners(learners: Mapping[str, Learner]) -> dict[str, LinearLearner]:
    """The learners of the panel that predict with one weight vector (whose weights a probe can target)."""
    return {name: learner for name, learner in learners.items() if isinstance(learner, LinearLearner)}
