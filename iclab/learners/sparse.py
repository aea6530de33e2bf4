"""Sparse linear learners: the Lasso, solved exactly along its homotopy path for every prompt (and prefix) at once."""

from __future__ import annotations

import torch

from ..config import ConfigError
from .base import LinearLearner, prefix_sums

LASSO_ALPHAS = (1.0, 0.1, 0.01, 0.001, 0.0001)
"""The α grid of Garg et al.'s Lasso baselines (their figures show α = 0.01)."""


def lasso_homotopy(
    gram: torch.Tensor, moment: torch.Tensor, alpha: float, max_steps: int | None = None
) -> torch.Tensor:
    """argmin_w ½wᵀGw − cᵀw + α‖w‖₁ for a batch of problems, exactly, by the Lasso homotopy (LARS).

    With G = XᵀX/n and c = Xᵀy/n this is the Lasso (1/2n)‖y − Xw‖² + α‖w‖₁ (scikit-learn's scaling,
    no intercept). The solution is piecewise linear in the penalty λ: it is 0 for λ ≥ max|c_j|, and
    between events the active coordinates A (those with |c_j − (Gw)_j| = λ) move along
    dw_A/dλ = −G_AA⁻¹ sign_A. Each step follows every problem to its next event (a coordinate joins A
    when its correlation reaches ±λ, or leaves when its weight reaches 0) or to λ = α, whichever
    comes first; a coordinate that no example touches (G_jj = 0) never joins. For inputs in general
    position the path is unique and A never outgrows the rank of G (Tibshirani 2013).
    Shapes: gram ``(M, d, d)``, moment ``(M, d)``; returns ``(M, d)``.
    """
    m, d = moment.shape
    rows = torch.arange(m, device=moment.device)
    eye = torch.eye(d, dtype=moment.dtype, device=moment.device)
    w = torch.zeros_like(moment)
    residual = moment.clone()  # correlations c − Gw
    lam = moment.abs().amax(-1)  # (M,): the current penalty
    first = moment.abs().argmax(-1)
    active = torch.zeros_like(moment, dtype=torch.bool)
    active[rows, first] = lam > alpha
    sign = torch.where(active, torch.sign(residual), 0.0)
    for _ in range(max_steps or 20 * d):
        running = lam > alpha
        if not running.any():
            break
        both = active[:, :, None] & active[:, None, :]
        direction = torch.linalg.solve(torch.where(both, gram, eye), sign)  # −dw/dλ, 0 off A
        slope = (gram @ direction[..., None])[..., 0]  # −d(Gw)/dλ; equals sign on A
        # λ at which each inactive correlation reaches +λ or −λ, and each active weight reaches 0.
        start = residual - lam[:, None] * slope
        below = lambda v: torch.where(v.isfinite() & (v < lam[:, None] * (1 - 1e-12)), v, -torch.inf)
        joins = torch.maximum(below(start / (1 - slope)), below(-start / (1 + slope)))
        joins = torch.where(active, -torch.inf, joins)
        drops = torch.where(active, below(lam[:, None] + w / direction), -torch.inf)
        event_join, join_at = joins.max(-1)
        event_drop, drop_at = drops.max(-1)
        target = torch.maximum(torch.maximum(event_join, event_drop), torch.full_like(lam, alpha))
        target = torch.where(running, target, lam)
        step = (lam - target)[:, None]
        w = w + step * direction
        residual = residual - step * slope
        lam = target
        joined = running & (lam > alpha) & (event_join >= event_drop)
        dropped = running & (lam > alpha) & ~joined
        active[rows[joined], join_at[joined]] = True
        sign[rows[joined], join_at[joined]] = torch.sign(residual[rows[joined], join_at[joined]])
        active[rows[dropped], drop_at[dropped]] = False
        sign[rows[dropped], drop_at[dropped]] = 0.0
        w[rows[dropped], drop_at[dropped]] = 0.0
    return w


class Lasso(LinearLearner):
    """The Lasso, argmin_w (1/2n)‖y − Xw‖² + α‖w‖₁ (no intercept), as Garg et al.'s baseline for
    sparse linear functions; solved by :func:`lasso_homotopy` for every prompt at once."""

    def __init__(self, alpha: float):
        if alpha <= 0:
            raise ConfigError(f"lasso needs alpha > 0, got {alpha}")
        self.alpha = alpha
        self.name = f"lasso(α={alpha:g})"

    def weights(self, xs, ys):
        n = xs.shape[1]
        gram = xs.transpose(1, 2) @ xs / n  # (B, d, d)
        moment = torch.einsum("bnd,bn->bd", xs, ys) / n
        return lasso_homotopy(gram, moment, self.alpha)

    def prefix_weights(self, xs, ys):
        """Every prefix's Lasso at once: the prefix-summed Gram matrices are B·N problems (w = 0 at k = 0)."""
        batch, n, d = xs.shape
        gram, moment = prefix_sums(xs, ys)  # (B, N, d, d), (B, N, d)
        count = torch.arange(n, dtype=xs.dtype, device=xs.device).clamp(min=1)[None, :, None]
        w = lasso_homotopy((gram / count[..., None]).flatten(0, 1), (moment / count).flatten(0, 1), self.alpha)
        return w.view(batch, n, d)
