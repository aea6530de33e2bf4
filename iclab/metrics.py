"""Losses, weight alignment, and the evaluation of models and learners on shared prompts."""

from __future__ import annotations

from typing import Callable, Mapping

import torch

from .config import ConfigError
from .prompts import PairedFormat
from .rng import generator
from .tasks.base import Episode


LOSS_SCALES = {"mse": 1.0, "half_mse": 0.5, "mse_over_d": 1.0}
"""Loss conventions: ``mse`` is E(ŷ − y)²; ``half_mse`` is ½E(ŷ − y)² (von Oswald et al.);
``mse_over_d`` is E(ŷ − y)²/d (Garg et al.; Akyürek et al.), which also divides by the input
dimension (see :data:`PER_DIMENSION`)."""

PER_DIMENSION = {"mse_over_d"}
"""Conventions that are further divided by the input dimension d (callers pass ``d``)."""


def loss_scale(loss: str, d: int | None = None) -> float:
    """The factor that turns a mean squared error into the named convention."""
    if loss not in LOSS_SCALES:
        raise ConfigError(f"unknown loss {loss!r}; choose from {', '.join(LOSS_SCALES)}")
    if loss in PER_DIMENSION:
        if d is None or d < 1:
            raise ConfigError(f"loss {loss!r} needs the input dimension d")
        return LOSS_SCALES[loss] / d
    return LOSS_SCALES[loss]


def prompt_losses(prediction: torch.Tensor, target: torch.Tensor, loss: str = "mse", d: int | None = None) -> torch.Tensor:
    """Per-prompt loss ``(B,)`` in the named convention, averaged over each prompt's targets
    (``d`` is needed for ``mse_over_d``)."""
    return loss_scale(loss, d) * (prediction - target).pow(2).flatten(1).mean(1)


def batch_loss(prediction: torch.Tensor, target: torch.Tensor, loss: str = "mse", d: int | None = None) -> torch.Tensor:
    """The scalar training loss: :func:`prompt_losses` averaged over the batch."""
    return prompt_losses(prediction, target, loss, d).mean()


def loss_by_prefix(
    prediction: torch.Tensor,
    target: torch.Tensor,
    loss: str = "mse",
    d: int | None = None,
    n_boot: int = 1000,
    band: tuple[float, float] = (0.05, 0.95),
    seed: int = 0,
    chunk: int = 100,
) -> dict[str, torch.Tensor]:
    """Loss at every prefix length with a bootstrap band across prompts.

    ``prediction`` and ``target`` are ``(B, N)`` (column k: the prediction from the first k
    examples). Returns float64 ``{"mean", "low", "high"}``, each ``(N,)``: the mean loss over
    prompts and the ``band`` quantiles of that mean over ``n_boot`` resamplings of the prompts
    (with replacement; drawn from the ``(seed, "bootstrap")`` stream).
    """
    errors = loss_scale(loss, d) * (prediction.double() - target.double()).pow(2).cpu()  # (B, N)
    b = errors.shape[0]
    g = generator(seed, "bootstrap")
    means = []
    for start in range(0, n_boot, chunk):
        rows = min(chunk, n_boot - start)
        # Resampling weights (how often each prompt is drawn), so a replicate is one matrix product.
        index = torch.randint(b, (rows, b), generator=g)
        counts = torch.zeros(rows, b, dtype=torch.float64).scatter_add_(1, index, torch.ones(rows, b, dtype=torch.float64))
        means.append(counts @ errors / b)
    quantiles = torch.quantile(torch.cat(means), torch.tensor(band, dtype=torch.float64), dim=0)
    return {"mean": errors.mean(0), "low": quantiles[0], "high": quantiles[1]}


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two tensors, flattened, in float64."""
    a, b = a.double().flatten(), b.double().flatten()
    return (a @ b / (a.norm() * b.norm())).item()


def lsa_product(w_kq: torch.Tensor, w_pv: torch.Tensor) -> torch.Tensor:
    """The part of a one-layer LSA that fixes its prediction: (label row of W_PV) ⊗ W_KQ.

    ŷ = Σ_abc W_PV[D, a] S_ab W_KQ[b, c] e_c / N, so this (D, D, D) tensor determines ŷ and is
    invariant to the rescaling W_PV → cW_PV, W_KQ → W_KQ / c.
    """
    return torch.einsum("a,bc->abc", w_pv[-1].double(), w_kq.double())


def lsa_alignment(w_kq, w_pv, target_kq, target_pv) -> float:
    """Cosine between the :func:`lsa_product` of trained and target weights (rescaling-invariant)."""
    return cosine(lsa_product(w_kq, w_pv), lsa_product(target_kq, target_pv))


Predictor = Callable[[Episode], torch.Tensor]


def model_predictor(model: torch.nn.Module, prompt_format=PairedFormat()) -> Predictor:
    """Wrap a model as an episode → predictions function (no gradients, float64 output)."""
    device = next(model.parameters()).device

    @torch.no_grad()
    def predict(episode: Episode) -> torch.Tensor:
        prompt = prompt_format.encode(episode.to(device, torch.float32))
        return model(prompt.tokens, n_context=prompt.n_context).double()

    return predict


def evaluate(
    predictors: Mapping[str, Predictor],
    task,
    n_prompts: int,
    seed: int,
    loss: str = "mse",
    chunk: int = 8192,
) -> dict[str, tuple[float, float]]:
    """Loss of every predictor on the same ``n_prompts`` fresh prompts.

    Returns ``{name: (mean loss, standard error)}`` in the named convention. Prompts come from
    the ``(seed, "eval")`` stream, so every predictor and every call sees the same ones.
    """
    per_prompt: dict[str, list[torch.Tensor]] = {name: [] for name in predictors}
    for index, start in enumerate(range(0, n_prompts, chunk)):
        episode = task.sample(min(chunk, n_prompts - start), generator(seed, "eval", index))
        target = episode.y_query.double()
        for name, predict in predictors.items():
            per_prompt[name].append(prompt_losses(predict(episode).cpu(), target.cpu(), loss))
    out = {}
    for name, values in per_prompt.items():
        v = torch.cat(values)
        out[name] = (v.mean().item(), (v.std() / len(v) ** 0.5).item())
    return out
