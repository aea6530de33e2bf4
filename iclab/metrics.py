"""Losses, weight alignment, and the evaluation of models and learners on shared prompts."""

from __future__ import annotations

from typing import Callable, Mapping

import torch

from .config import ConfigError
from .prompts import PairedFormat
from .rng import generator
from .tasks.base import Episode


LOSS_SCALES = {"mse": 1.0, "half_mse": 0.5, "half_sse": 0.5}
"""Loss conventions: ``mse`` is E(ŷ − y)²; ``half_mse`` is ½E(ŷ − y)² (von Oswald et al.);
``half_sse`` is ½Σ|ŷ − y|², summed over all of a prompt's targets (every step and coordinate)
and averaged over prompts (Zheng et al.'s ½Σ_t‖ŷ_t − x_{t+1}‖²)."""

SUMMED_LOSSES = frozenset({"half_sse"})
"""The conventions that sum, rather than average, over a prompt's targets."""


def prompt_losses(prediction: torch.Tensor, target: torch.Tensor, loss: str = "mse") -> torch.Tensor:
    """Per-prompt loss ``(B,)`` in the named convention, averaged (or, for :data:`SUMMED_LOSSES`,
    summed) over each prompt's targets. Complex predictions use the squared modulus |ŷ − y|²."""
    if loss not in LOSS_SCALES:
        raise ConfigError(f"unknown loss {loss!r}; choose from {', '.join(LOSS_SCALES)}")
    error = prediction - target
    squared = (torch.view_as_real(error) if error.is_complex() else error).pow(2).flatten(1)
    per_prompt = squared.sum(1) if loss in SUMMED_LOSSES else squared.mean(1)
    if error.is_complex() and loss not in SUMMED_LOSSES:
        per_prompt = 2 * per_prompt  # the mean ran over real and imaginary parts separately
    return LOSS_SCALES[loss] * per_prompt


def batch_loss(prediction: torch.Tensor, target: torch.Tensor, loss: str = "mse") -> torch.Tensor:
    """The scalar training loss: :func:`prompt_losses` averaged over the batch."""
    return prompt_losses(prediction, target, loss).mean()


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
