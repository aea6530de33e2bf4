"""Mesa-optimisation in autoregressive linear attention (Zheng et al., NeurIPS 2024; docs/papers.md §5).

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

The theorem's other half, that gradient descent from the diagonal initialisation stays diagonal,
is a statement about the population gradient: :func:`expected_gradient` estimates it at a given
(a₀, b₀) by Monte Carlo, with the standard error its test needs. :func:`diagonal_learning_rate`
is the plain-GD step that is stable along the diagonal family, from the start to ab*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..config import ConfigError
from ..rng import generator as stream
from ..tasks.autoregressive import AutoregressiveSequences

BLOCK = 64  # sequences per block of :func:`diagonal_gradients`: its (b, T, d, d) temporaries stay in cache


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
        x = xs[s : s + block]
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
    optimizer = torch.optim.LBFGS(
        [coords], max_iter=1000, tolerance_grad=1e-14, tolerance_change=0.0, line_search_fn="strong_wolfe"
    )

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


def diagonal_learning_rate(optimum: ProductOptimum, a0: float, b0: float, lr_scale: float) -> tuple[float, int]:
    """(lr, warm-up steps) of plain gradient descent on the half_sse loss from the diagonal init (a₀, b₀).

    GD is stable while the step stays below 2/curvature. Along the diagonal family the curvature in
    (a, b) is D·(|a₀| + |b₀|)² at the start and D·(a² + b²) at the optimum, with D = E Σ_t‖u_t‖²
    (``optimum.denominator``), a² − b² conserved along the flow and ab = ab* there, so
    a² + b² = √((a₀² − b₀²)² + 4ab*²). The step is lr = ``lr_scale``/(D·(a² + b²)) at the optimum,
    reached by a linear warm-up whose first step, lr/warm-up, is at most ``lr_scale``/(D·(|a₀| + |b₀|)²),
    the step of the same scale at the start (a start flatter than the optimum needs one warm-up step).
    """
    at_optimum = math.sqrt((a0**2 - b0**2) ** 2 + 4 * optimum.product**2)  # a² + b² at ab*
    return lr_scale / (optimum.denominator * at_optimum), math.ceil((abs(a0) + abs(b0)) ** 2 / at_optimum)


@dataclass(frozen=True)
class ExpectedGradient:
    """A Monte Carlo estimate of the population gradient of the half_sse loss at a diagonal init.

    ``w_kq`` ``(2d, 2d)`` and ``w_pv`` ``(d, 2d)`` are the mean gradients (complex128, in PyTorch's
    convention for complex weights: ∂L/∂Re W + i ∂L/∂Im W). ``off`` and ``on`` are the Frobenius
    norms of the mean off and on the diagonal initialisation's support (the diagonals of W^{KQ}'s
    bottom-left block and of W^{PV}'s left block), ``noise`` = √(Σ of the off-support real coordinates'
    squared standard errors), and ``z`` = ``off`` / ``noise``: ≈ 1 when the expectation off the support
    is zero, growing like √draws when it is not (0 when there is no noise to measure it against).
    """

    w_kq: torch.Tensor
    w_pv: torch.Tensor
    off: float
    on: float
    noise: float
    z: float


def diagonal_gradients(xs: torch.Tensor, a0: float, b0: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients in (W^{KQ}, W^{PV}) of the half_sse loss ½Σ_{t=2}^{T−1}‖ŷ_t − x_{t+1}‖², averaged
    over the sequences ``xs`` ``(B, T, d)``, of the causal linear attention at its diagonal
    initialisation W^{KQ} = [[0, 0], [a₀I, 0]], W^{PV} = [b₀I, 0]; ``(2d, 2d)`` and ``(d, 2d)`` complex128.

    There ŷ_t = a₀b₀u_t with u_t the one-step prediction at lr = 1 (:func:`one_step_predictions`);
    with r_t = ŷ_t − x_{t+1}, the token e_t = [x_t; x_{t−1}] and S_t = Σ_{i≤t} e_i e_iᴴ, the gradients
    ∂/∂W^{PV} = Σ_t r_t z_tᴴ/(t − 1), z_t = S_tW^{KQ}e_t, and ∂/∂W^{KQ} = Σ_t S_tW^{PV}ᴴr_t e_tᴴ/(t − 1)
    become, at this initialisation,

        ∂/∂W^{PV} = a₀ Σ_t r_t [u_t; v_t]ᴴ,           v_t = (1/(t − 1)) Σ_{i<t} x_i x_iᴴ x_t,
        ∂/∂W^{KQ} = b₀ Σ_t [P_t r_t; R_t r_t] e_tᴴ,   P_t = (1/(t − 1)) Σ_{i≤t} x_i x_iᴴ,
                                                       R_t = (1/(t − 1)) Σ_{i≤t} x_{i−1} x_iᴴ.
    """
    xs = xs.to(torch.complex128)
    batch, _, d = xs.shape
    grad_kq = torch.zeros(2 * d, 2 * d, dtype=xs.dtype, device=xs.device)
    grad_pv = torch.zeros(d, 2 * d, dtype=xs.dtype, device=xs.device)
    for g, x in _scaled_steps(xs, BLOCK):
        t_minus_1 = torch.arange(1, x.shape[1] - 1, device=x.device, dtype=torch.float64)[:, None]
        now, before, after = x[:, 1:-1], x[:, :-2], x[:, 2:]  # x_t, x_{t−1}, x_{t+1} for t = 2..T−1
        u = torch.einsum("btjk,btk->btj", g, now)  # (b, T − 2, d)
        r = a0 * b0 * u - after
        earlier = torch.cumsum(x[:, :-2, :, None] * x[:, :-2, None, :].conj(), dim=1)  # Σ_{i<t} x_i x_iᴴ
        v = torch.einsum("btjk,btk->btj", earlier, now) / t_minus_1
        # P_t r_t adds x_t's own term to the earlier ones; R_t = G_tᴴ/(t − 1) = gᴴ.
        p_r = (torch.einsum("btjk,btk->btj", earlier, r) + now * (now.conj() * r).sum(-1, keepdim=True)) / t_minus_1
        r_r = torch.einsum("btkj,btk->btj", g.conj(), r)
        token = torch.cat([now, before], -1)  # e_t, (b, T − 2, 2d)
        grad_pv += a0 * torch.einsum("btj,btk->jk", r, torch.cat([u, v], -1).conj())
        grad_kq += b0 * torch.einsum("btj,btk->jk", torch.cat([p_r, r_r], -1), token.conj())
    return grad_kq / batch, grad_pv / batch


def expected_gradient(
    task: AutoregressiveSequences, a0: float, b0: float, draws: int, batches: int, seed: int
) -> ExpectedGradient:
    """The population gradient at the diagonal init (a₀, b₀) by Monte Carlo (:class:`ExpectedGradient`).

    The theorem says it vanishes off the diagonal support for the starts it covers (Gaussian and
    sparse); all-ones starts have a clear off-diagonal expectation. ``draws`` fresh sequences are
    split into ``batches`` (batch k from the ``(seed, "gradient", k)`` stream); the spread of the
    batch means gives each coordinate's standard error.
    """
    if batches < 2 or draws < batches:
        raise ConfigError("the expected gradient needs batches >= 2 and draws >= batches")
    d = task.d
    means = []
    for k in range(batches):
        xs = task.sample(draws // batches, stream(seed, "gradient", k), torch.float64).xs
        means.append(torch.cat([torch.view_as_real(g).flatten() for g in diagonal_gradients(xs, a0, b0)]))
    means = torch.stack(means)  # (batches, real coordinates of W^{KQ} then W^{PV})
    index = torch.arange(d)
    kq = torch.zeros(2 * d, 2 * d, 2, dtype=torch.bool)
    kq[d + index, index] = True
    pv = torch.zeros(d, 2 * d, 2, dtype=torch.bool)
    pv[index, index] = True
    on = torch.cat([kq.flatten(), pv.flatten()])
    mean, stderr = means.mean(0), means.std(0) / math.sqrt(batches)
    off, noise = mean[~on].norm().item(), stderr[~on].norm().item()
    w_kq, w_pv = torch.view_as_complex(mean.view(-1, 2)).split([4 * d * d, 2 * d * d])
    return ExpectedGradient(
        w_kq.view(2 * d, 2 * d),
        w_pv.view(d, 2 * d),
        off,
        mean[on].norm().item(),
        noise,
        off / noise if noise > 0 else 0.0,
    )
