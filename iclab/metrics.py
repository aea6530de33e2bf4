"""Evaluation of models and learners on shared prompts: losses by prefix with bootstrap bands, weight
alignment, and comparisons of two predictors (the loss conventions are :mod:`iclab.losses`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

import torch

from .config import ConfigError
from .learners import LinearLearner
from .losses import loss_scale, prompt_losses
from .models import LinearSelfAttention
from .prompts import PairedFormat
from .rng import generator
from .tasks.base import Episode


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
    """Wrap a model as an episode → predictions function (no gradients, in the model's dtype, float64 output)."""
    parameter = next(model.parameters())

    @torch.no_grad()
    def predict(episode: Episode) -> torch.Tensor:
        prompt = prompt_format.encode(episode.to(parameter.device, parameter.dtype))
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


# Comparing two in-context learners (von Oswald et al. 2023): predictions, sensitivities ∂ŷ/∂x_q,
# and the interpolation of trained and constructed LSA weights.


def predictions(source, episode: Episode, prompt_format=PairedFormat()) -> torch.Tensor:
    """``(B, Q)`` float64 predictions of a model (``nn.Module`` reading prompt tokens) or a learner."""
    if isinstance(source, torch.nn.Module):
        return model_predictor(source, prompt_format)(episode)
    return source.predict_episode(episode)


def sensitivity(source, episode: Episode, prompt_format=PairedFormat()) -> torch.Tensor:
    """∂ŷ/∂x_q for every query, ``(B, Q, d)`` in float64.

    Exact for linear learners (their weight vector), by autograd through the query inputs for
    models (in their own dtype) and for any other learner. Queries never see each other, so the
    gradient of the summed predictions is each query's own sensitivity.
    """
    e = episode.to(dtype=torch.float64)
    if isinstance(source, LinearLearner):
        return source.weights(e.xs, e.ys)[:, None, :].expand_as(e.x_query).clone()
    if isinstance(source, torch.nn.Module):
        parameter = next(source.parameters())
        e = episode.to(parameter.device, parameter.dtype)
    x_query = e.x_query.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        if isinstance(source, torch.nn.Module):
            prompt = prompt_format.encode(replace(e, x_query=x_query))
            out = source(prompt.tokens, n_context=prompt.n_context)
        else:
            out = source.predict(e.xs, e.ys, x_query)
        (grad,) = torch.autograd.grad(out.sum(), x_query)
    return grad.double().cpu()


def compare(a, b, episode: Episode, prompt_format=PairedFormat()) -> dict[str, float]:
    """How alike two predictors (models or learners) are on ``episode``.

    Returns ``pred_diff`` = mean |ŷ_A − ŷ_B|, ``sens_cosine`` = mean over queries of the cosine of
    their sensitivities ∂ŷ/∂x_q, and ``sens_l2`` = mean ‖∂ŷ_A/∂x_q − ∂ŷ_B/∂x_q‖.
    """
    pa, pb = (predictions(s, episode, prompt_format).cpu() for s in (a, b))
    sa, sb = (sensitivity(s, episode, prompt_format) for s in (a, b))
    return {
        "pred_diff": (pa - pb).abs().mean().item(),
        "sens_cosine": torch.nn.functional.cosine_similarity(sa, sb, dim=-1).mean().item(),
        "sens_l2": (sa - sb).norm(dim=-1).mean().item(),
    }


def interpolate_lsa(trained, construction, weight: float = 0.5):
    """A merged LSA whose weights mix ``trained``'s (rescaled) with ``construction``'s, layer by layer.

    Each layer's prediction-relevant product is unchanged by W_KQ → cW_KQ, W_PV → W_PV/c; c is
    chosen (least squares, sign included) to bring the trained W_KQ to the construction's, then
    W = (1 − weight)·W_trained + weight·W_construction for both merged matrices. Both models must
    share depth, weight sharing, normalisation and readout.
    """
    if (trained.n_layers, trained.shared, trained.normalize, trained.readout_sign, trained.dim) != (
        construction.n_layers, construction.shared, construction.normalize, construction.readout_sign, construction.dim
    ):
        raise ConfigError("interpolation needs two LSAs of the same shape and options")
    mixed = LinearSelfAttention(trained.dim, trained.n_layers, "merged", trained.normalize, trained.causal,
                                trained.shared, trained.readout_sign, init="zero")
    mixed = mixed.to(next(trained.parameters()))  # same dtype and device
    with torch.no_grad():
        for out, a, b in zip(mixed.layers, trained.layers, construction.layers):
            (kq_a, pv_a), (kq_b, pv_b) = a.merged(), b.merged()
            kq_b, pv_b = kq_b.to(kq_a), pv_b.to(pv_a)  # the construction may live elsewhere
            c = (kq_a * kq_b).sum() / kq_a.pow(2).sum()
            out.w_kq.copy_((1 - weight) * c * kq_a + weight * kq_b)
            out.w_pv.copy_((1 - weight) * pv_a / c + weight * pv_b)
    return mixed
