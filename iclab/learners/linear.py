"""Closed-form linear learners: least squares (min-norm below d), ridge, the Bayes posterior mean,
averaging; all prefix lengths at once from kernel Cholesky innovations or prefix sums."""

from __future__ import annotations

import torch

from ..config import ConfigError
from .base import LinearLearner


def _sequential_kernel_predict(cov: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """For y ~ N(0, C), the conditional means E[y_{k+1} | y_1…y_k] for every k at once, ``(B, N)``.

    With C = LLᵀ (Cholesky) and innovations e = L⁻¹y, y_{k+1} = Σ_{j≤k+1} L_{k+1,j} e_j and
    e_{k+1} is independent of y_1…y_k, so the conditional mean is Σ_{j≤k} L_{k+1,j} e_j: the
    strictly lower part of L applied to e. With C = XXᵀ + λI this is ridge(λ) on every prefix
    (the kernel form of x_{k+1}ᵀ(X_kᵀX_k + λI)⁻¹X_kᵀy_k); with λ = 0 and k < d, min-norm OLS.
    """
    chol = torch.linalg.cholesky(cov)
    innovations = torch.linalg.solve_triangular(chol, ys[..., None], upper=False)
    return (chol.tril(-1) @ innovations)[..., 0]


class LeastSquares(LinearLearner):
    """Ordinary least squares; the minimum-norm solution when N < d (via the pseudo-inverse)."""

    name = "ols"

    def weights(self, xs, ys):
        return (torch.linalg.pinv(xs) @ ys[..., None])[..., 0]

    def predict_prefixes(self, xs, ys):
        """Every prefix without a loop over k, from two small Cholesky factors per prompt.

        k < d (under-determined): the minimum-norm solution is the noiseless kernel predictor,
        read off one Cholesky factor of the first points' kernel (:func:`_sequential_kernel_predict`).
        k ≥ d: after the first d points w_d = G_d⁻¹X_dᵀy_d (G_d = X_dᵀX_d), and adding the later
        points is a conjugate Gaussian update: their residuals r = y − Uw_d (U = the later inputs)
        behave as N(0, I + U G_d⁻¹ Uᵀ), and OLS on prefix k predicts x_{k+1}ᵀw_d plus the
        conditional mean of r_{k+1} given the earlier residuals, the kernel predictor again.
        """
        xs, ys = xs.double(), ys.double()
        n, d = xs.shape[1:]
        m = min(n, d)
        small = _sequential_kernel_predict(xs[:, :m] @ xs[:, :m].transpose(1, 2), ys[:, :m])
        if n <= d:
            return small
        head, later = xs[:, :d], xs[:, d:]
        chol = torch.linalg.cholesky(head.transpose(1, 2) @ head)
        w = torch.cholesky_solve(head.transpose(1, 2) @ ys[:, :d, None], chol)
        whitened = torch.linalg.solve_triangular(chol, later.transpose(1, 2), upper=False)  # L⁻¹Uᵀ
        kernel = whitened.transpose(1, 2) @ whitened + torch.eye(n - d, dtype=xs.dtype, device=xs.device)
        base = (later @ w)[..., 0]
        return torch.cat([small, base + _sequential_kernel_predict(kernel, ys[:, d:] - base)], dim=1)


class Ridge(LinearLearner):
    """Ridge regression w = (XᵀX + λI)⁻¹Xᵀy (λ unscaled by N; λ = σ²/τ² is the Bayes choice)."""

    def __init__(self, lam: float):
        if lam <= 0:
            raise ConfigError(f"ridge needs lam > 0, got {lam}")
        self.lam = lam
        self.name = f"ridge({lam:g})"

    def weights(self, xs, ys):
        d = xs.shape[-1]
        gram = xs.transpose(1, 2) @ xs + self.lam * torch.eye(d, dtype=xs.dtype, device=xs.device)
        return torch.linalg.solve(gram, xs.transpose(1, 2) @ ys[..., None])[..., 0]

    def predict_prefixes(self, xs, ys):
        """Every prefix from one Cholesky factor of the N×N kernel XXᵀ + λI (see
        :func:`_sequential_kernel_predict`): ridge's x_{k+1}ᵀw_k is k_{k+1}ᵀ(K_k + λI)⁻¹y_k."""
        xs, ys = xs.double(), ys.double()
        kernel = xs @ xs.transpose(1, 2) + self.lam * torch.eye(xs.shape[1], dtype=xs.dtype, device=xs.device)
        return _sequential_kernel_predict(kernel, ys)


class BayesLinear(LinearLearner):
    """Posterior mean of w under w ~ N(0, τ²I) and label noise N(0, σ²).

    It is ridge with λ = σ²/τ², and the minimum-norm least-squares solution when σ = 0.
    Optimal for Gaussian (dense) priors only.
    """

    name = "bayes"

    def __init__(self, w_scale: float = 1.0, noise: float = 0.0):
        self.inner = Ridge(noise**2 / w_scale**2) if noise > 0 else LeastSquares()

    def weights(self, xs, ys):
        return self.inner.weights(xs, ys)

    def predict_prefixes(self, xs, ys):
        return self.inner.predict_prefixes(xs, ys)


class Averaging(LinearLearner):
    """w = (1/N) Σ y_i x_i, the 'averaging' estimator of Garg et al. (w = 0 without examples)."""

    name = "averaging"

    def weights(self, xs, ys):
        return torch.einsum("bnd,bn->bd", xs, ys) / max(xs.shape[1], 1)

    def prefix_weights(self, xs, ys):
        moment = ys[..., None] * xs
        count = torch.arange(xs.shape[1], dtype=xs.dtype, device=xs.device).clamp(min=1)[None, :, None]
        return (torch.cumsum(moment, dim=1) - moment) / count
