"""Loss conventions: the squared errors every paper reports, named by their normalisation.

The training loop and the evaluations share these, so this module sits below both (it imports
no model, learner or task).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import ConfigError

LOSS_SCALES = {"mse": 1.0, "half_mse": 0.5, "mse_over_d": 1.0, "half_sse": 0.5, "logistic": 1.0}
"""Loss conventions: ``mse`` is E(ŷ − y)²; ``half_mse`` is ½E(ŷ − y)² (von Oswald et al.);
``mse_over_d`` is E(ŷ − y)²/d (Garg et al.; Akyürek et al.), which also divides by the input
dimension (see :data:`PER_DIMENSION`); ``half_sse`` is ½Σ|ŷ − y|², summed over all of a
prompt's targets (every step and coordinate) and averaged over prompts (Zheng et al.'s
½Σ_t‖ŷ_t − x_{t+1}‖²). ``logistic`` is E log(1 + e^{−yŷ}) for ±1 labels, the binary cross-entropy
of sigmoid(ŷ) (Garg et al.'s training loss for linear classification); it is not a squared error."""

PER_DIMENSION = frozenset({"mse_over_d"})
"""Conventions that are further divided by the input dimension d (callers pass ``d``)."""

SUMMED_LOSSES = frozenset({"half_sse"})
"""The conventions that sum, rather than average, over a prompt's targets."""


TOKEN_LOSSES = frozenset({"cross_entropy", "error"})
"""Conventions for token targets ``(B, Q)`` (long) and logits ``(B, Q, V)`` (symbolic labels):
``cross_entropy`` is −log softmax(logits)[target], ``error`` is 1[argmax logits ≠ target] (the
0–1 error; not differentiable, for evaluation); both averaged over each prompt's Q targets."""


def loss_scale(loss: str, d: int | None = None) -> float:
    """The factor that turns a mean (or, for :data:`SUMMED_LOSSES`, summed) squared error into
    the named convention."""
    if loss not in LOSS_SCALES:
        raise ConfigError(f"unknown loss {loss!r}; choose from {', '.join([*LOSS_SCALES, *sorted(TOKEN_LOSSES)])}")
    if loss in PER_DIMENSION:
        if d is None or d < 1:
            raise ConfigError(f"loss {loss!r} needs the input dimension d")
        return LOSS_SCALES[loss] / d
    return LOSS_SCALES[loss]


def prompt_losses(
    prediction: torch.Tensor, target: torch.Tensor, loss: str = "mse", d: int | None = None
) -> torch.Tensor:
    """Per-prompt loss ``(B,)`` in the named convention, averaged (or, for :data:`SUMMED_LOSSES`,
    summed) over each prompt's targets (``d`` is needed for ``mse_over_d``). Complex
    predictions use the squared modulus |ŷ − y|². Token targets take a :data:`TOKEN_LOSSES`
    convention on logits."""
    if loss in TOKEN_LOSSES:
        return token_losses(prediction, target, loss)
    scale = loss_scale(loss, d)
    if loss == "logistic":
        return F.softplus(-target * prediction).flatten(1).mean(1)
    error = prediction - target
    squared = (torch.view_as_real(error) if error.is_complex() else error).pow(2).flatten(1)
    per_prompt = squared.sum(1) if loss in SUMMED_LOSSES else squared.mean(1)
    if error.is_complex() and loss not in SUMMED_LOSSES:
        per_prompt = 2 * per_prompt  # the mean ran over real and imaginary parts separately
    return scale * per_prompt


def batch_loss(prediction: torch.Tensor, target: torch.Tensor, loss: str = "mse", d: int | None = None) -> torch.Tensor:
    """The scalar training loss: :func:`prompt_losses` averaged over the batch.

    Computed as one fused sum of squares (``mse_loss``, forward and backward in one pass each, faster
    than the per-prompt path, e.g. on mesa-ar's complex predictions), divided by the number of
    prompts (summed conventions) or of targets (averaged ones; a complex target counts once).
    Token conventions average over every target of the batch (each prompt has the same Q).
    """
    if loss in TOKEN_LOSSES:
        return token_losses(prediction, target, loss).mean()
    scale = loss_scale(loss, d)
    if loss == "logistic":
        return F.softplus(-target * prediction).mean()
    if prediction.is_complex():
        prediction, target = torch.view_as_real(prediction), torch.view_as_real(target)
        entries = prediction.numel() // 2
    else:
        entries = prediction.numel()
    total = F.mse_loss(prediction, target, reduction="sum")
    return scale * total / (prediction.shape[0] if loss in SUMMED_LOSSES else entries)


def token_losses(logits: torch.Tensor, target: torch.Tensor, loss: str = "cross_entropy") -> torch.Tensor:
    """Per-prompt loss ``(B,)`` of logits ``(B, Q, V)`` on token targets ``(B, Q)``."""
    if loss == "cross_entropy":
        per_target = F.cross_entropy(logits.flatten(0, -2), target.flatten(), reduction="none")  # (B·Q,)
    elif loss == "error":
        per_target = (logits.argmax(-1) != target).to(logits.dtype).flatten()  # (B·Q,)
    else:
        raise ConfigError(f"unknown token loss {loss!r}; choose from {', '.join(sorted(TOKEN_LOSSES))}")
    return per_target.view(target.shape[0], -1).mean(1)
