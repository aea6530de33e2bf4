"""Mesa-optimisation in autoregressive linear attention (Zheng et al., NeurIPS 2024; PAPERS.md §5).

With the diagonal initialisation the causal linear attention predicts

    ŷ_t = (ab/(t − 1)) Σ_{i=2}^{t} x_i x_{i−1}ᴴ x_t = W_t x_t,   W_t = (ab/(t − 1)) Σ_{i=1}^{t−1} x_{i+1} x_iᴴ,

i.e. W_t is one gradient step, of size ab/(t − 1), from W = 0 on the in-context OLS loss
½ Σ_{i<t} ‖x_{i+1} − W x_i‖² (:func:`one_step_predictions`). Gradient descent on the product
p = ab minimises ½ E Σ_{t=2}^{T−1} ‖p u_t − x_{t+1}‖² with u_t the prediction at p = 1, so it
converges to p* = E Σ_t Re⟨u_t, x_{t+1}⟩ / E Σ_t ‖u_t‖². For W = diag(e^{iθ_j}) with θ uniform,

    u_{t,j} = x_{t+1,j} (|x_{1j}|² + (1/(t − 1)) Σ_{k≠j} |x_{1k}|² Σ_{m=1}^{t−1} e^{im(θ_k − θ_j)}),

and averaging over θ (the phase sums have mean 0 and mean square t − 1) gives (ours)

    p* = (T − 2) Σ_j E|x_j|⁴ / [(T − 2) Σ_j E|x_j|⁶ + H_{T−2} Σ_{j≠k} E|x_j|²|x_k|⁴],

with x = x_1 and H_n the n-th harmonic number: 0.192/σ² for Gaussian starts at d = 5, T = 100,
1/c² for sparse ones. On a finite set of sequences the best p is the same ratio of sample
sums (:func:`best_product`); its scatter around p* shrinks like 1/√m (:func:`product_scatter`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..config import ConfigError
from ..tasks.autoregressive import AutoregressiveSequences


@dataclass(frozen=True)
class ProductOptimum:
    """p* = numerator/denominator, both per-sequence expectations (see the module docstring)."""

    numerator: float  # E Σ_t Re⟨u_t, x_{t+1}⟩
    denominator: float  # E Σ_t ‖u_t‖²

    @property
    def product(self) -> float:
        return self.numerator / self.denominator


def _check(task: AutoregressiveSequences):
    if task.rotation != "complex":
        raise ConfigError("the closed form for ab* assumes the complex diagonal rotation")


def product_optimum(task: AutoregressiveSequences) -> ProductOptimum:
    """The population optimum ab* of the diagonal model, from the moments of x_1."""
    _check(task)
    d, n, start = task.d, task.length - 2, task.start
    harmonic = sum(1.0 / k for k in range(1, n + 1))
    numerator = n * d * start.abs_moment(4, d)
    denominator = n * d * start.abs_moment(6, d) + harmonic * d * (d - 1) * start.cross_moment(2, 4, d)
    return ProductOptimum(numerator, denominator)


def one_step_predictions(xs: torch.Tensor, lr: float = 1.0, block: int = 1024) -> torch.Tensor:
    """ŷ_t = W_t x_t for t = 2..T−1, ``(B, T − 2, d)``, W_t one GD step of size lr/(t − 1) from 0
    on ½Σ_{i<t}‖x_{i+1} − W x_i‖² (in the dtype of ``xs``; use float64/complex128)."""
    out = []
    for s in range(0, xs.shape[0], block):  # blocks of sequences bound the (b, T, d, d) memory
        x = xs[s: s + block]
        steps = torch.cumsum(x[:, 1:-1, :, None] * x[:, :-2, None, :].conj(), dim=1)  # Σ_{i<t} x_{i+1}x_iᴴ
        out.append(torch.einsum("btjk,btk->btj", steps, x[:, 1:-1]))
    t_minus_1 = torch.arange(1, xs.shape[1] - 1, device=xs.device, dtype=torch.float64)
    return lr * torch.cat(out) / t_minus_1[:, None].to(xs.real.dtype)


def per_sequence_sums(xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(Σ_t ⟨u_t, x_{t+1}⟩, Σ_t ‖u_t‖²) per sequence, with u_t the one-step prediction at lr = 1."""
    u = one_step_predictions(xs)
    target = xs[:, 2:]
    return (u.conj() * target).sum((1, 2)), (u.abs() ** 2).sum((1, 2))


def best_product(xs: torch.Tensor) -> complex:
    """The best ab for these sequences: Σ⟨u_t, x_{t+1}⟩ / Σ‖u_t‖² (complex; real on average)."""
    numerator, denominator = per_sequence_sums(xs.to(torch.complex128))
    return complex(numerator.sum() / denominator.sum())


def product_scatter(task: AutoregressiveSequences, m: int, generator: torch.Generator, n_draws: int = 20000) -> float:
    """Relative standard deviation of :func:`best_product` over training sets of ``m`` sequences.

    Delta method on the ratio of sums, with the per-sequence moments estimated from
    ``n_draws`` Monte Carlo sequences: sd(n_s − p*·d_s) / (√m · E n_s). Zero for sparse starts
    (every sequence gives exactly p*).
    """
    numerator, denominator = per_sequence_sums(task.sample(n_draws, generator, torch.float64).xs)
    p = product_optimum(task).product
    residual = numerator.real - p * denominator
    return (residual.std() / (math.sqrt(m) * numerator.real.mean())).item()
