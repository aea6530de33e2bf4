"""Closed forms for linear regression in context with one-step (preconditioned) predictors.

Both the one-layer LSA optimum and the best single GD step predict

    ŷ = x_qᵀ B g,   g = (1/N) Σ_i y_i x_i,

for a matrix B (B = η·I for GD). For zero-mean inputs independent across points, with
E[wwᵀ] = s·I (s = τ², times k/d for k-sparse w) and label noise σ², the loss is quadratic in B:

    E(ŷ − y_q)² = tr(Λ B C Bᵀ) − 2 s tr(Λ B Λ) + s tr Λ + σ²,
    C = E[g gᵀ] = (1/N)(s F + σ² Λ) + ((N − 1)/N) s Λ²,   F = E[x xᵀ x xᵀ],

so B* = s Λ C⁻¹ and the optimal loss is s tr Λ + σ² − s tr(Λ B* Λ). For Gaussian x, F = 2Λ² +
tr(Λ)Λ and B* = Γ⁻¹ with Γ = (1 + 1/N)Λ + (tr Λ + σ²/τ²)/N · I: Zhang, Frei & Bartlett (2024),
Theorem 4.1 (stated there for σ = 0, τ = 1, where the loss is tr Λ − tr(ΛΓ⁻¹Λ)).
The best GD step is η* = s tr(Λ²)/tr(ΛC) (von Oswald et al. 2023 tune it numerically).
Tasks whose inputs are not zero-mean get a float64 Monte Carlo estimate instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import ConfigError
from ..rng import generator
from ..tasks.linear import LinearRegression


@dataclass(frozen=True)
class Moments:
    """Exact second moments of the one-step statistic (see the module docstring)."""

    input_cov: torch.Tensor  # Λ
    g_cov: torch.Tensor  # C = E[g gᵀ]
    w_second: float  # s, with E[wwᵀ] = s I
    label_second: float  # E[y_q²]


def moments(task: LinearRegression) -> Moments:
    """Exact moments for a task with zero-mean inputs; raises ValueError otherwise."""
    if not task.inputs.zero_mean:
        raise ValueError("closed forms need zero-mean inputs; use the Monte Carlo estimates")
    n, d = task.n_context, task.d
    s = task.w_scale**2 * (1.0 if task.w_sparsity is None else task.w_sparsity / d)
    lam = task.inputs.second_moment()
    f = task.inputs.fourth_moment(torch.eye(d, dtype=torch.float64))
    c = (s * f + task.noise**2 * lam) / n + (n - 1) / n * s * lam @ lam
    return Moments(lam, c, s, s * torch.trace(lam).item() + task.noise**2)


@dataclass(frozen=True)
class OneStepOptimum:
    """An optimal one-step predictor ŷ = x_qᵀ B g and its expected squared error at the query."""

    preconditioner: torch.Tensor  # B (= Γ⁻¹ for the LSA optimum, η·I for GD)
    loss: float  # E(ŷ − y_q)², the `mse` convention
    method: str  # "exact" or "monte-carlo (n prompts)"

    @property
    def gamma(self) -> torch.Tensor:
        """Γ = B⁻¹, the matrix Zhang et al. name."""
        return torch.linalg.inv(self.preconditioner)

    @property
    def lr(self) -> float:
        """η for a scalar (GD) step: the mean diagonal of B."""
        return torch.diagonal(self.preconditioner).mean().item()


def lsa_optimum(task: LinearRegression) -> OneStepOptimum:
    """The global optimum of one-layer LSA (merged, 1/N-normalised) on a zero-mean task, exactly."""
    m = moments(task)
    b = m.w_second * m.input_cov @ torch.linalg.inv(m.g_cov)
    loss = m.label_second - m.w_second * torch.trace(m.input_cov @ b @ m.input_cov).item()
    return OneStepOptimum(b, loss, "exact")


def gamma_matrix(cov: torch.Tensor, n_context: int) -> torch.Tensor:
    """Γ = (1 + 1/N)Λ + tr(Λ)/N · I, the paper's formula (Gaussian x, τ = 1, no noise)."""
    cov = torch.as_tensor(cov, dtype=torch.float64)
    eye = torch.eye(cov.shape[0], dtype=torch.float64)
    return (1 + 1 / n_context) * cov + torch.trace(cov) / n_context * eye


def _one_step_statistics(task: LinearRegression, n_prompts: int, seed: int):
    """Monte Carlo samples of (u = x_qᵀg, y_q) in float64, drawn in chunks to bound memory."""
    us, ys = [], []
    for index, start in enumerate(range(0, n_prompts, 65536)):
        e = task.sample(min(65536, n_prompts - start), generator(seed, "theory-mc", index), torch.float64)
        g = torch.einsum("bnd,bn->bd", e.xs, e.ys) / task.n_context
        us.append(torch.einsum("bqd,bd->bq", e.x_query, g).flatten())
        ys.append(e.y_query.flatten())
    return torch.cat(us), torch.cat(ys)


def gd_step_optimum(task: LinearRegression, mc_prompts: int = 1_000_000, seed: int = 0) -> OneStepOptimum:
    """The best single GD step from w = 0 (step η on L(w) = (1/2N)Σ(wᵀx_i − y_i)²) and its loss.

    Exact for zero-mean inputs; otherwise a float64 Monte Carlo estimate over ``mc_prompts``
    prompts (η = E[u y]/E[u²], loss = E[y²] − E[u y]²/E[u²] with u = x_qᵀ g), whose relative
    error is of order 1/√mc_prompts.
    """
    d = task.d
    eye = torch.eye(d, dtype=torch.float64)
    if task.inputs.zero_mean:
        m = moments(task)
        lam2 = torch.trace(m.input_cov @ m.input_cov).item()
        lam_c = torch.trace(m.input_cov @ m.g_cov).item()
        lr = m.w_second * lam2 / lam_c
        return OneStepOptimum(lr * eye, m.label_second - (m.w_second * lam2) ** 2 / lam_c, "exact")
    if mc_prompts < 1000:
        raise ConfigError("the Monte Carlo estimate needs at least 1000 prompts")
    u, y = _one_step_statistics(task, mc_prompts, seed)
    uy, uu = (u * y).mean().item(), (u * u).mean().item()
    return OneStepOptimum(uy / uu * eye, (y * y).mean().item() - uy**2 / uu, f"monte-carlo ({mc_prompts} prompts)")


def lsa_weights(preconditioner: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_KQ, W_PV) of a one-layer LSA that predicts x_qᵀ B g: the x-block of W_KQ is B, W_PV reads y.

    ``dim`` is the token size D ≥ d + 1 (rows between x and y, e.g. descriptors, stay zero).
    """
    d = preconditioner.shape[0]
    w_kq = torch.zeros(dim, dim, dtype=torch.float64)
    w_kq[:d, :d] = preconditioner
    w_pv = torch.zeros(dim, dim, dtype=torch.float64)
    w_pv[-1, -1] = 1.0
    return w_kq, w_pv
