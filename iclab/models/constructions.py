"""Hand-built weights for linear self-attention: GD and GD++ as model initialisations, a model set
to given weights, and the interpolation of a trained model with a construction.

von Oswald et al. (ICML 2023), docs/papers.md §2. For token rows [x; y] (x first, the label row
last) and an LSA with ``readout_sign = −1``, a layer with

    W_KQ = [[I, 0], [0, 0]],   W_PV = [[−γ I, 0], [0, −η/N]]

(separately: W_Q = W_K = [[I, 0], [0, 0]], W_V = [[−I, 0], [0, −1]] (x-block 0 when γ = 0),
P = [[γ I, 0], [0, η/N]]) moves every token's label slot by −(η/N) Σ_i y_i x_iᵀ x_j and its
input by −γ Σ_i x_i x_iᵀ x_j. The query's label slot, which starts at 0, then holds −η x_qᵀ
(1/N) Σ y_i x_i: minus one GD step's prediction from w = 0. The context slots hold the
residuals y_i − wᵀx_i, so stacking layers takes further GD steps (GD++ when γ ≠ 0), exactly as
:func:`iclab.learners.gd_plus_plus` computes. A model with ``normalize=True`` already divides
by N, so there P's label entry is η and its input block N·γ.
"""

from __future__ import annotations

import torch

from ..config import ConfigError
from .lsa import LinearSelfAttention


def _per_layer(values, n: int, what: str) -> list[float]:
    values = [float(v) for v in torch.as_tensor(values, dtype=torch.float64).flatten()]
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise ConfigError(f"need one {what} or {n} (one per layer), got {len(values)}")
    return values


def gd_construction(model: LinearSelfAttention, n_context: int, lrs, gammas=0.0) -> LinearSelfAttention:
    """Set ``model``'s weights so that layer l takes a GD++ step (η_l, γ_l); returns the model.

    ``lrs`` and ``gammas`` are one value for every layer or one per layer (a shared model
    needs them equal); γ = 0 gives plain GD. ``n_context`` is N, the prompts' context size. The
    input block is every row but the last (the label row).
    """
    n_layers = model.n_layers
    lrs, gammas = _per_layer(lrs, n_layers, "step size"), _per_layer(gammas, n_layers, "gamma")
    if model.shared and (len(set(lrs)) > 1 or len(set(gammas)) > 1):
        raise ConfigError("a shared (recurrent) model needs the same step size and gamma at every layer")
    if model.readout_sign != -1.0 or model.causal:
        raise ConfigError("the GD construction needs readout_sign=-1 and a non-causal model")
    if n_context < 1:
        raise ConfigError(f"n_context must be >= 1, got {n_context}")
    # The model's attention sum is Σ_i (normalize=False) or (1/N) Σ_i (normalize=True).
    y_scale, x_scale = (1.0, float(n_context)) if model.normalize else (1.0 / n_context, 1.0)
    dim = model.dim
    x_block = torch.diag(torch.cat([torch.ones(dim - 1), torch.zeros(1)])).double()
    y_entry = torch.zeros(dim, dim, dtype=torch.float64)
    y_entry[-1, -1] = 1.0
    with torch.no_grad():
        for index, layer in enumerate(model.layers):
            lr, gamma = lrs[index] * y_scale, gammas[index] * x_scale
            if layer.parametrization == "merged":
                layer.w_kq.copy_(x_block)
                layer.w_pv.copy_(-gamma * x_block - lr * y_entry)
            else:
                layer.w_q.copy_(x_block)
                layer.w_k.copy_(x_block)
                layer.w_v.copy_(-(1.0 if gamma else 0.0) * x_block - y_entry)
                layer.w_p.copy_(gamma * x_block + lr * y_entry)
    return model


def merged_lsa(w_kq: torch.Tensor, w_pv: torch.Tensor) -> LinearSelfAttention:
    """A one-layer merged LSA (float32, like trained models) with the given (W_KQ, W_PV), e.g. a
    theoretical optimum's weights (:meth:`iclab.theory.DescriptorOptimum.weights`)."""
    model = LinearSelfAttention(w_kq.shape[0])
    with torch.no_grad():
        model.layers[0].w_kq.copy_(w_kq)
        model.layers[0].w_pv.copy_(w_pv)
    return model.eval()


def match_scale(w_kq: torch.Tensor, w_pv: torch.Tensor, target_kq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(c·W_KQ, W_PV/c): merged LSA weights rescaled, with the same predictions, so that W_KQ is closest to
    ``target_kq`` (least squares in c, sign included)."""
    c = (w_kq * target_kq).sum() / w_kq.pow(2).sum()
    return c * w_kq, w_pv / c


def interpolate_lsa(trained, construction, weight: float = 0.5):
    """A merged LSA whose weights mix ``trained``'s (rescaled) with ``construction``'s, layer by layer.

    Each layer's prediction-relevant product is unchanged by W_KQ → cW_KQ, W_PV → W_PV/c; the trained
    weights are first rescaled to the construction's W_KQ (:func:`match_scale`), then
    W = (1 − weight)·W_trained + weight·W_construction for both merged matrices. Both models must
    share depth, weight sharing, normalisation and readout.
    """
    if (trained.n_layers, trained.shared, trained.normalize, trained.readout_sign, trained.dim) != (
        construction.n_layers,
        construction.shared,
        construction.normalize,
        construction.readout_sign,
        construction.dim,
    ):
        raise ConfigError("interpolation needs two LSAs of the same shape and options")
    mixed = LinearSelfAttention(
        trained.dim,
        trained.n_layers,
        "merged",
        trained.normalize,
        trained.causal,
        trained.shared,
        trained.readout_sign,
        init="zero",
    )
    mixed = mixed.to(next(trained.parameters()))  # same dtype and device
    with torch.no_grad():
        for out, a, b in zip(mixed.layers, trained.layers, construction.layers):
            (kq_a, pv_a), (kq_b, pv_b) = a.merged(), b.merged()
            kq_b, pv_b = kq_b.to(kq_a), pv_b.to(pv_a)  # the construction may live elsewhere
            kq_a, pv_a = match_scale(kq_a, pv_a, kq_b)
            out.w_kq.copy_((1 - weight) * kq_a + weight * kq_b)
            out.w_pv.copy_((1 - weight) * pv_a + weight * pv_b)
    return mixed
