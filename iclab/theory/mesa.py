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
A model with per-coordinate diagonals (a_j, b_j) fits a finite set better still: its exact
optimum is :func:`best_diagonal`.
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


def _scaled_steps(xs: torch.Tensor, block: int = 1024):
    """Blocks of G_t/(t − 1) = (1/(t − 1)) Σ_{i<t} x_{i+1}x_iᴴ, ``(b, T − 2, d, d)`` for t = 2..T−1, with
    their sequences ``(b, T, d)``: the one-step GD matrices at lr = 1. Blocks bound the memory."""
    t_minus_1 = torch.arange(1, xs.shape[1] - 1, device=xs.device, dtype=xs.real.dtype)
    for s in range(0, xs.shape[0], block):
        x = xs[s: s + block]
        steps = torch.cumsum(x[:, 1:-1, :, None] * x[:, :-2, None, :].conj(), dim=1)  # Σ_{i<t} x_{i+1}x_iᴴ
        yield steps / t_minus_1[:, None, None], x


def one_step_predictions(xs: torch.Tensor, lr: float = 1.0, block: int = 1024) -> torch.Tensor:
    """ŷ_t = W_t x_t for t = 2..T−1, ``(B, T − 2, d)``, W_t one GD step of size lr/(t − 1) from 0
    on ½Σ_{i<t}‖x_{i+1} − W x_i‖² (in the dtype of ``xs``; use float64/complex128)."""
    return lr * torch.cat([torch.einsum("btjk,btk->btj", g, x[:, 1:-1]) for g, x in _scaled_steps(xs, block)])


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


def best_diagonal(xs: torch.Tensor) -> torch.Tensor:
    """The products a_j·b_j ``(d,)`` (complex128) of the diagonal model's optimum on these sequences.

    The diagonal model (W^{KQ} bottom-left block diag(a), W^{PV} = [diag(b), 0]) predicts
    ŷ_{t,j} = b_j (V_t a)_j with V_t[j, k] = G_t[j, k] x_{t,k}/(t − 1) (G_t as in
    :func:`one_step_predictions`): per-coordinate a_j, b_j, a richer family than the scalar ab of
    :func:`best_product` (which is a = 1, b = ab·1). With Q_j = Σ V[j, :]ᴴV[j, :] and
    r_j = Σ V[j, :]ᴴx_{t+1,j} over sequences and t, the training loss is, up to a constant,
    Σ_j |b_j|² aᴴQ_j a − 2 Re(b̄_j aᴴr_j); its minimiser in b given a is b_j = aᴴr_j / aᴴQ_j a, which
    leaves −Σ_j |aᴴr_j|² / aᴴQ_j a to minimise over a (L-BFGS on its 2d real coordinates, from the
    scalar model a = 1). The products are invariant to the gauge a → ca, b → b/c.
    """
    xs = xs.to(torch.complex128)
    d = xs.shape[-1]
    q = torch.zeros(d, d, d, dtype=xs.dtype, device=xs.device)
    r = torch.zeros(d, d, dtype=xs.dtype, device=xs.device)
    for g, x in _scaled_steps(xs):
        v = g * x[:, 1:-1, None, :]  # (b, T − 2, d, d): V_t[j, k]
        q += torch.einsum("btjk,btjl->jkl", v.conj(), v)
        r += torch.einsum("btjk,btj->jk", v.conj(), x[:, 2:])
    scale = r.abs().max()  # keeps the reduced loss O(1) for L-BFGS's tolerances

    def fit(a):  # numerators aᴴr_j and denominators aᴴQ_j a
        return torch.einsum("k,jk->j", a.conj(), r / scale), torch.einsum("k,jkl,l->j", a.conj(), q / scale, a).real

    coords = torch.cat([torch.ones(d), torch.zeros(d)]).double().to(xs.device).requires_grad_(True)
    optimizer = torch.optim.LBFGS([coords], max_iter=1000, tolerance_grad=1e-14, tolerance_change=0.0,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        numerator, denominator = fit(torch.complex(coords[:d], coords[d:]))
        loss = -(numerator.abs() ** 2 / denominator).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        a = torch.complex(coords[:d], coords[d:])
        numerator, denominator = fit(a)
        return a * numerator / denominator
