"""Task descriptors: one-layer LSA optima when inputs have a task-varying mean (Huang & Ge, ICLR 2025).

Setting (Huang & Ge, docs/papers.md §4): given the prompt's mean μ, x_i, x_q ~ N(μ, Λ); w ~ N(0, τ²I);
y = wᵀx + ε, ε ~ N(0, σ²). μ ~ N(0, s²I) per prompt, or uniform over a fixed set of K means.
Every token carries a descriptor c (μ itself, the one-hot index of μ, or nothing):
z_i = [x_i; c; y_i], query [x_q; c; 0] (:class:`iclab.prompts.PairedFormat`).

With the label row of W_PV fixed to read y (W_PV[D] = e_Dᵀ), a one-layer merged LSA predicts

    ŷ = gᵀ M q,   g = (1/N) Σ_i y_i u_i,   u_i = [x_i; c],   q = [x_q; c],

where M = W_KQ[:D', :D'] (rows: key side, columns: query side, D' = d + p). ŷ is linear in M,
so the optimum is a least-squares problem. It is also the optimum over all (W_KQ, W_PV): any
other parametrisation adds terms even in (w, ε), which are uncorrelated with y_q and only
add variance.

Moments. Integrating w (and ε) exactly, E(ŷ − y_q)² = τ² E‖AᵀMq − x_q‖² + σ²/N · E(uᵀMq)² + σ²
with A = (1/N) Σ_i u_i x_iᵀ. Given μ, A is independent of q and its moments are closed-form
Gaussian moments (:func:`_conditional_moments`). The remaining average over μ is exact for a
fixed set of K means (a finite average) and, for μ ~ N(0, s²I), a float64 Monte Carlo average
over antithetic draws ±μ (odd terms cancel exactly; the integrand is a degree-6 polynomial in μ).

Closed forms for Λ = I, μ ~ N(0, s²I), τ = 1, σ = 0 (derived here, checked by Monte Carlo in
the tests), with r = ‖μ‖² ~ s²χ²_d:
- the infinite-N solution ŷ = (1/N) Σ y_i (x_i − μ)ᵀΛ⁻¹x_q, used at finite N, has loss
  [s⁴d(d+2) + s²d(2d+1) + d(d+1)] / N;
- without descriptors, as N → ∞ g → (I + μμᵀ)w and the best fixed M = m·I gives the loss
  E tr S − (E tr S²)² / E tr S³ with S = I + μμᵀ, E tr S^k = d − 1 + E(1 + r)^k.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import ConfigError
from ..rng import generator
from ..tasks.linear import GaussianInputs, LinearRegression

DESCRIPTORS = (None, "mu", "mean_index_onehot")


def _check(task: LinearRegression, descriptor: str | None) -> GaussianInputs:
    inputs = task.inputs
    if not isinstance(inputs, GaussianInputs) or inputs.mean is not None or task.w_sparsity is not None:
        raise ConfigError("descriptor theory needs Gaussian inputs with a per-prompt mean and dense w")
    if descriptor not in DESCRIPTORS:
        raise ConfigError(f"descriptor must be one of {DESCRIPTORS}, got {descriptor!r}")
    if descriptor == "mean_index_onehot" and inputs.means is None:
        raise ConfigError("the one-hot descriptor needs a fixed set of means (task.n_means)")
    return inputs


def descriptor_dim(task: LinearRegression, descriptor: str | None) -> int:
    """p, the number of descriptor rows in a token."""
    if descriptor is None:
        return 0
    return task.d if descriptor == "mu" else len(task.inputs.means)


def _mean_draws(task: LinearRegression, descriptor: str | None, draws: int, seed: int):
    """(μ (S, d), c (S, p), method): all K fixed means, or antithetic Gaussian draws ±μ."""
    inputs = task.inputs
    if inputs.means is not None:
        mus = inputs.means.clone()
        method = f"exact (average over the {len(mus)} fixed means)"
    elif not inputs.mean_scale:  # no per-prompt mean: μ = 0 for every prompt
        mus = torch.zeros(1, task.d, dtype=torch.float64)
        method = "exact (inputs of mean 0)"
    else:
        half = inputs.mean_scale * torch.randn(
            (draws + 1) // 2, task.d, generator=generator(seed, "descriptor-means"), dtype=torch.float64
        )
        mus = torch.cat([half, -half])
        method = f"exact given μ; Monte Carlo over {len(mus)} antithetic draws of μ"
    if descriptor is None:
        cs = mus[:, :0]
    elif descriptor == "mu":
        cs = mus
    else:
        cs = torch.eye(len(mus), dtype=torch.float64)
    return mus, cs, method


def _conditional_moments(task: LinearRegression, mus: torch.Tensor, cs: torch.Tensor):
    """Average over the given means of the exact moments given μ (see the module docstring).

    Returns (Q, b, e_y2): loss(M) = vec(M)ᵀ Q vec(M) − 2 vec(M)ᵀ b + e_y2 with row-major vec.
    """
    lam = task.inputs.cov
    tr = torch.trace(lam)
    n, tau2, sigma2 = task.n_context, task.w_scale**2, task.noise**2
    mm = torch.einsum("si,sj->sij", mus, mus)  # μμᵀ
    r = mus.pow(2).sum(1)[:, None, None]  # ‖μ‖²
    lam_mu = mus @ lam  # (Λμ)ᵀ, Λ symmetric
    s_mat = lam + mm  # E[x xᵀ | μ]
    # E[u xᵀ | μ] = [Λ + μμᵀ; c μᵀ]  and  E[u uᵀ | μ] = E[q qᵀ | μ] = [[S, μcᵀ], [cμᵀ, ccᵀ]].
    u_x = torch.cat([s_mat, torch.einsum("sp,sj->spj", cs, mus)], dim=1)
    u_u = torch.cat(
        [
            torch.cat([s_mat, torch.einsum("si,sp->sip", mus, cs)], 2),
            torch.cat([torch.einsum("sp,sj->spj", cs, mus), torch.einsum("sp,sq->spq", cs, cs)], 2),
        ],
        1,
    )
    # E[u ‖x‖² uᵀ | μ]: fourth moments of x = μ + ξ, ξ ~ N(0, Λ).
    lm = torch.einsum("si,sj->sij", lam_mu, mus)  # Λμμᵀ
    f_xx = (r + tr) * mm + 2 * lm + 2 * lm.transpose(1, 2) + r * lam + 2 * lam @ lam + tr * lam
    x_norm = mus * (r[:, :, 0] + tr) + 2 * lam_mu  # E[x ‖x‖² | μ]
    f_xc = torch.einsum("si,sp->sip", x_norm, cs)
    f_cc = (r + tr) * torch.einsum("sp,sq->spq", cs, cs)
    fourth = torch.cat([torch.cat([f_xx, f_xc], 2), torch.cat([f_xc.transpose(1, 2), f_cc], 2)], 1)
    a_a = fourth / n + (1 - 1 / n) * u_x @ u_x.transpose(1, 2)  # E[A Aᵀ | μ]
    dim = u_u.shape[1]
    # vec(M) row-major: Q = E[(AAᵀ) ⊗ (qqᵀ)], b = vec(E[A | μ] E[x_q qᵀ | μ]).
    signal = tau2 * a_a + sigma2 / n * u_u
    q = torch.einsum("sab,scd->acbd", signal, u_u).reshape(dim * dim, dim * dim) / len(mus)
    x_q = u_x.transpose(1, 2)  # E[x_q qᵀ | μ] = E[x uᵀ | μ]
    b = tau2 * (u_x @ x_q).mean(0).reshape(-1)
    e_y2 = tau2 * torch.einsum("sii->", s_mat).item() / len(mus) + sigma2
    return q, b, e_y2


@dataclass(frozen=True)
class DescriptorOptimum:
    """The one-layer LSA optimum ŷ = gᵀMq for a task and descriptor, and the loss of any M.

    Attributes:
        matrix: M* (D' × D'), rows the key side [x; c], columns the query side [x_q; c]; the
            minimum-norm optimum (directions that do not change ŷ are zero).
        loss: its expected squared error at the query (``mse``).
        method: how the moments were averaged over μ.
    """

    matrix: torch.Tensor
    loss: float
    method: str
    d: int
    quadratic: torch.Tensor
    linear: torch.Tensor
    label_second: float

    def loss_of(self, matrix: torch.Tensor) -> float:
        """The exact (same moments) loss of another M of the same shape."""
        m = torch.as_tensor(matrix, dtype=torch.float64).reshape(-1)
        return (m @ self.quadratic @ m - 2 * m @ self.linear).item() + self.label_second

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W_KQ, W_PV) of a one-layer LSA (token size D' + 1) that predicts with M*."""
        return embed(self.matrix)


def embed(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_KQ, W_PV) with W_KQ[:D', :D'] = M, W_PV = e_D e_Dᵀ (the value reads y)."""
    dim = matrix.shape[0] + 1
    w_kq = torch.zeros(dim, dim, dtype=torch.float64)
    w_kq[:-1, :-1] = matrix
    w_pv = torch.zeros(dim, dim, dtype=torch.float64)
    w_pv[-1, -1] = 1.0
    return w_kq, w_pv


def descriptor_optimum(
    task: LinearRegression, descriptor: str | None, mean_draws: int = 200_000, seed: int = 0
) -> DescriptorOptimum:
    """The finite-N one-layer optimum with (``"mu"``, ``"mean_index_onehot"``) or without (None) descriptors.

    Moments are exact given μ; the average over μ is exact for a fixed set of means and a
    Monte Carlo average over ``mean_draws`` antithetic draws otherwise (``method`` says which).
    """
    _check(task, descriptor)
    if mean_draws < 2:
        raise ConfigError("mean_draws must be >= 2")
    mus, cs, method = _mean_draws(task, descriptor, mean_draws, seed)
    dim = task.d + cs.shape[1]
    q = torch.zeros(dim**2, dim**2, dtype=torch.float64)
    b = torch.zeros(dim**2, dtype=torch.float64)
    e_y2 = 0.0
    chunks = list(range(0, len(mus), 8192))
    for start in chunks:  # bounded memory: (chunk, D'², D'²) is never built
        part = slice(start, start + 8192)
        q_k, b_k, e_k = _conditional_moments(task, mus[part], cs[part])
        weight = len(mus[part]) / len(mus)
        q, b, e_y2 = q + weight * q_k, b + weight * b_k, e_y2 + weight * e_k
    # Q is singular (e.g. M's c-c block acts only through its symmetric part): the
    # minimum-norm solution of the normal equations.
    m = torch.linalg.pinv(q, hermitian=True, rtol=1e-10) @ b
    loss = e_y2 - (m @ b).item()
    return DescriptorOptimum(m.reshape(dim, dim), loss, method, task.d, q, b, e_y2)


def infinite_n_solution(task: LinearRegression, descriptor: str = "mu") -> torch.Tensor:
    """M for ŷ = (1/N) Σ y_i (x_i − μ)ᵀΛ⁻¹x_q: key x-block Λ⁻¹, key c-block −EΛ⁻¹ (E maps c to μ).

    E = I for c = μ and the (K, d) matrix of means for the one-hot descriptor. Zero loss as
    N → ∞ (noiseless); its query-side descriptor columns are zero.
    """
    inputs = _check(task, descriptor)
    if descriptor is None:
        raise ConfigError("the infinite-N solution needs a descriptor")
    lam_inv = torch.linalg.inv(inputs.cov)
    to_mu = torch.eye(task.d, dtype=torch.float64) if descriptor == "mu" else inputs.means
    p = to_mu.shape[0]
    m = torch.zeros(task.d + p, task.d + p, dtype=torch.float64)
    m[: task.d, : task.d] = lam_inv
    m[task.d :, : task.d] = -to_mu @ lam_inv
    return m


def _isotropic(task: LinearRegression) -> tuple[int, float]:
    _check(task, None)
    if task.noise or task.w_scale != 1 or not torch.equal(task.inputs.cov, torch.eye(task.d, dtype=torch.float64)):
        raise ConfigError("this closed form assumes Λ = I, τ = 1 and no noise")
    if task.inputs.means is not None:
        raise ConfigError("this closed form assumes Gaussian means μ ~ N(0, s²I)")
    return task.d, task.inputs.mean_scale**2


def infinite_n_solution_loss(task: LinearRegression) -> float:
    """Loss of :func:`infinite_n_solution` at the task's N: [s⁴d(d+2) + s²d(2d+1) + d(d+1)]/N (Λ = I)."""
    d, s2 = _isotropic(task)
    return (s2**2 * d * (d + 2) + s2 * d * (2 * d + 1) + d * (d + 1)) / task.n_context


def no_descriptor_limit_loss(task: LinearRegression) -> float:
    """The best one-layer loss without descriptors as N → ∞: E tr S − (E tr S²)²/E tr S³ (Λ = I)."""
    d, s2 = _isotropic(task)
    r1, r2, r3 = s2 * d, s2**2 * d * (d + 2), s2**3 * d * (d + 2) * (d + 4)  # E r, E r², E r³
    tr1 = d + r1
    tr2 = d + 2 * r1 + r2
    tr3 = d + 3 * r1 + 3 * r2 + r3
    return tr1 - tr2**2 / tr3


@dataclass(frozen=True)
class GradientFlow:
    """A gradient-descent trajectory with a small step (float64) of a one-layer LSA.

    Attributes:
        steps: the recorded step numbers.
        loss: the loss at each recorded step.
        distance: ‖W_PV[D,D]·M − M*‖_F / ‖M*‖_F, the rescaling-invariant distance of the
            product to the optimum (M = W_KQ[:D', :D']).
        balance: ‖W_PV‖²_F − ‖W_KQ‖²_F, conserved by gradient flow (0 at the balanced init).
        lr: the step used.
        w_kq, w_pv: the final weights.
    """

    steps: list[int]
    loss: list[float]
    distance: list[float]
    balance: list[float]
    lr: float
    w_kq: torch.Tensor
    w_pv: torch.Tensor


def gradient_flow(
    optimum: DescriptorOptimum,
    start: tuple[torch.Tensor, torch.Tensor],
    steps: int = 40000,
    lr_fraction: float = 0.25,
    record_every: int = 100,
) -> GradientFlow:
    """Gradient descent with a small step on (W_KQ, W_PV) of a one-layer LSA from ``start``, a
    balanced initialisation (e.g. the weights of ``LinearSelfAttention(init="balanced")``).

    The loss is the one :func:`descriptor_optimum` minimised (moments exact given μ, averaged
    over its fixed sample of means), so its minimiser is exactly M*. From the balanced init
    (W_PV = σ e_D e_Dᵀ, W_KQ = σ[[ΘΘᵀ, 0], [0, 0]]) only W_PV[D, D] = v and M = W_KQ[:D', :D']
    move: every other entry multiplies a term even in w, whose gradient vanishes while those
    terms are zero, so they stay zero. The loss is then v² mᵀQm − 2v mᵀb + E y_q², and because
    it depends on (v, M) only through vM, gradient flow conserves v² − ‖M‖²_F = ‖W_PV‖² − ‖W_KQ‖².
    The step is ``lr_fraction`` / (λ_max(Q)·‖M*‖_F). Near a balanced optimum (v² = ‖M‖_F = ‖M*‖_F) the
    loss's largest curvature in (v, M) together is about 4 λ_max(Q)·‖M*‖_F (M's own 2v²λ_max(Q), as much again
    along the rescaling v → αv, M → M/α), so gradient descent is stable below ``lr_fraction`` = 0.5 and the
    default 0.25 is half that limit: the discrete trajectory tracks the flow (at 0.5 itself it oscillates
    about the optimum and closes in only slowly).
    """
    dim = optimum.matrix.shape[0] + 1
    w_kq0, w_pv0 = (torch.as_tensor(w).detach().double() for w in start)
    m, v = w_kq0[:-1, :-1].reshape(-1).clone(), w_pv0[-1, -1].item()
    kq_form, pv_form = embed(w_kq0[:-1, :-1])
    if w_kq0.shape != (dim, dim) or not (torch.equal(w_kq0, kq_form) and torch.equal(w_pv0, v * pv_form)):
        raise ConfigError(
            f"the flow starts from a {dim}×{dim} balanced form: W_KQ = [[M, 0], [0, 0]], W_PV = v·e_D e_Dᵀ"
        )
    q, b, target = optimum.quadratic, optimum.linear, optimum.matrix.reshape(-1)
    lr = lr_fraction / (torch.linalg.eigvalsh(q)[-1].item() * target.norm().item())
    record = {"steps": [], "loss": [], "distance": [], "balance": []}
    for step in range(steps + 1):
        qm, mb = q @ m, (m @ b).item()
        mqm = (m @ qm).item()
        if step % record_every == 0 or step == steps:
            record["steps"].append(step)
            record["loss"].append(v * v * mqm - 2 * v * mb + optimum.label_second)
            record["distance"].append(((v * m - target).norm() / target.norm()).item())
            record["balance"].append(v * v - (m @ m).item())
        grad_m = 2 * v * (v * qm - b)
        grad_v = 2 * (v * mqm - mb)
        m, v = m - lr * grad_m, v - lr * grad_v
    w_kq, w_pv = embed(m.reshape(dim - 1, dim - 1))
    return GradientFlow(**record, lr=lr, w_kq=w_kq, w_pv=w_pv * v)
