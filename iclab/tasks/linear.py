"""Linear regression in context: y = wᵀx + ε with configurable priors on x and w.

Input priors know their own moments, so the theory can evaluate closed forms exactly
(:mod:`iclab.theory.linear`) and fall back to Monte Carlo only when no closed form exists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..config import ConfigError
from ..rng import generator as make_generator
from .base import Episode


def _covariance(cov: Sequence | torch.Tensor | None, d: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """A covariance from ``None`` (identity), a vector of eigenvalues (diagonal) or a matrix, as ``(variances,
    matrix)``: the diagonal's variances ``(d,)`` and no matrix for the first two (so a large d stores d numbers,
    not d²), or no variances and the checked ``(d, d)`` matrix for the third."""
    if cov is None:
        return torch.ones(d, dtype=torch.float64), None
    cov = torch.as_tensor(cov, dtype=torch.float64)
    if cov.ndim == 1:
        if cov.shape != (d,):
            raise ConfigError(
                f"covariance eigenvalues (task.cov) must have length d={d}, got {cov.shape[0]}: "
                "change task.cov with task.d, or set task.cov=null (identity)"
            )
        if (cov <= 0).any():
            raise ConfigError("covariance eigenvalues must be positive")
        return cov, None
    if cov.shape != (d, d):
        raise ConfigError(f"covariance must be {d}x{d}, got {tuple(cov.shape)}")
    if not torch.allclose(cov, cov.T) or torch.linalg.eigvalsh(cov).min() <= 0:
        raise ConfigError("covariance must be symmetric positive definite")
    return None, cov


class GaussianInputs:
    """x ~ N(μ, Λ). μ is fixed (``mean``), or drawn per prompt as N(0, s²I) when ``mean_scale`` s > 0.

    With ``n_means`` = K, the per-prompt mean is instead drawn uniformly from a fixed set of K
    means (each N(0, s²I), drawn once from the ``(means_seed, "means")`` stream), and the
    mean's one-hot index is returned as ``truth["mean_index_onehot"]`` (B, K).
    The per-prompt mean is returned as ``truth["mu"]``; all points of a prompt share it.
    """

    def __init__(
        self, d: int, cov=None, mean=None, mean_scale: float = 0.0, n_means: int | None = None, means_seed: int = 0
    ):
        self.d = d
        self.variances, self._cov = _covariance(cov, d)  # (d,) or None, None or (d, d)
        self.mean = None if mean is None else torch.as_tensor(mean, dtype=torch.float64)
        if self.mean is not None and self.mean.shape != (d,):
            raise ConfigError(f"mean must have length d={d}, got {tuple(self.mean.shape)}")
        if mean_scale < 0:
            raise ConfigError("mean_scale must be >= 0")
        self.mean_scale = mean_scale
        self._chol = None if self._cov is None else torch.linalg.cholesky(self._cov)
        self.means = None  # (K, d) fixed set of means, float64
        if n_means is not None:
            if not isinstance(n_means, int) or n_means < 1:
                raise ConfigError(f"n_means must be a positive integer or null, got {n_means!r}")
            g = make_generator(means_seed, "means")
            self.means = mean_scale * torch.randn(n_means, d, generator=g, dtype=torch.float64)

    @property
    def zero_mean(self) -> bool:
        """True when every x has mean zero (the closed forms of the theory assume it)."""
        return self.mean_scale == 0 and (self.mean is None or not self.mean.any())

    def sample(self, batch: int, n_points: int, generator: torch.Generator, dtype=torch.float32):
        device = generator.device
        z = torch.randn(batch, n_points, self.d, generator=generator, device=device, dtype=dtype)
        x = z * self.variances.sqrt().to(device, dtype) if self._chol is None else z @ self._chol.to(device, dtype).T
        mu = torch.zeros(batch, self.d, device=device, dtype=dtype)
        if self.mean is not None:
            mu = mu + self.mean.to(device, dtype)
        truth = {}
        if self.means is not None:
            index = torch.randint(len(self.means), (batch,), generator=generator, device=device)
            mu = mu + self.means.to(device, dtype)[index]
            truth["mean_index_onehot"] = torch.nn.functional.one_hot(index, len(self.means)).to(dtype)
        elif self.mean_scale > 0:
            mu = mu + self.mean_scale * torch.randn(batch, self.d, generator=generator, device=device, dtype=dtype)
        return x + mu[:, None, :], {"mu": mu, **truth}

    @property
    def cov(self) -> torch.Tensor:
        """Λ as a dense ``(d, d)`` float64 matrix (made on use when it is diagonal)."""
        return torch.diag(self.variances) if self._cov is None else self._cov

    def second_moment(self) -> torch.Tensor:
        """Λ = E[x xᵀ] (zero-mean case), float64."""
        return self.cov.clone()

    def mean_square(self) -> float:
        """E‖x‖² = tr(Λ) + E‖μ‖² (the per-prompt mean included)."""
        fixed = torch.zeros(self.d, dtype=torch.float64) if self.mean is None else self.mean
        if self.means is not None:
            mu_square = (fixed + self.means).pow(2).sum(1).mean()
        else:
            mu_square = fixed.pow(2).sum() + self.d * self.mean_scale**2
        trace = self.variances.sum() if self._cov is None else torch.trace(self._cov)
        return (trace + mu_square).item()

    def fourth_moment(self, a: torch.Tensor) -> torch.Tensor:
        """E[x xᵀ A x xᵀ] = ΛAΛ + ΛAᵀΛ + tr(AΛ)Λ for zero-mean Gaussian x (Isserlis)."""
        lam = self.cov
        return lam @ a @ lam + lam @ a.T @ lam + torch.trace(a @ lam) * lam


class UniformInputs:
    """x ~ U(low, high)^d with independent coordinates (von Oswald et al. use U(−0.5, 0.5))."""

    def __init__(self, d: int, low: float = -1.0, high: float = 1.0):
        if not high > low:
            raise ConfigError(f"uniform inputs need high > low, got [{low}, {high}]")
        self.d, self.low, self.high = d, low, high

    @property
    def zero_mean(self) -> bool:
        return self.low == -self.high

    def sample(self, batch: int, n_points: int, generator: torch.Generator, dtype=torch.float32):
        device = generator.device
        u = torch.rand(batch, n_points, self.d, generator=generator, device=device, dtype=dtype)
        return self.low + (self.high - self.low) * u, {}

    def mean_square(self) -> float:
        """E‖x‖² = d·E[u²] = d·(low² + low·high + high²)/3."""
        return self.d * (self.low**2 + self.low * self.high + self.high**2) / 3

    def second_moment(self) -> torch.Tensor:
        """Λ = v·I with v = (high − low)²/12 (symmetric case)."""
        return (self.high - self.low) ** 2 / 12 * torch.eye(self.d, dtype=torch.float64)

    def fourth_moment(self, a: torch.Tensor) -> torch.Tensor:
        """E[x xᵀ A x xᵀ] = v²(A + Aᵀ + tr(A)I) + (m₄ − 3v²)·diag(A) for i.i.d. zero-mean coordinates."""
        half = (self.high - self.low) / 2
        v, m4 = half**2 / 3, half**4 / 5
        eye = torch.eye(self.d, dtype=torch.float64)
        return v**2 * (a + a.T + torch.trace(a) * eye) + (m4 - 3 * v**2) * torch.diag(torch.diag(a))


@dataclass
class LinearRegression:
    """Prompts of a random linear function: y = wᵀx + ε, ε ~ N(0, σ²).

    Args:
        inputs: the prior on x (:class:`GaussianInputs` or :class:`UniformInputs`).
        n_context: N, in-context examples per prompt.
        n_query: Q, queries per prompt (they never see each other).
        w_scale: τ, w ~ N(0, τ²I) (restricted to ``w_sparsity`` random coordinates if set).
        w_sparsity: k for a k-sparse w, or None for dense.
        noise: σ, the label-noise standard deviation (queries are noisy too).
        w: one weight vector that every prompt shares (a control task, whose prompts teach nothing about
            w), or None to draw w per prompt (``w_scale`` and ``w_sparsity`` then apply).
        config: the config block it was built from by :func:`linear_regression_from_config` (None
            when built directly): what a checkpoint records to rebuild the task.
    """

    inputs: GaussianInputs | UniformInputs
    n_context: int
    n_query: int = 1
    w_scale: float = 1.0
    w_sparsity: int | None = None
    noise: float = 0.0
    w: tuple[float, ...] | None = None
    config: dict | None = field(default=None, repr=False, compare=False)

    metric = "mse"
    """How predictions are judged (as :class:`iclab.tasks.functions.FunctionClass`): squared error."""

    def __post_init__(self):
        for name in ("n_context", "n_query"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"task.{name} must be an integer, got {value!r}")
        for name in ("noise", "w_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"task.{name} must be a finite number, got {value!r}")
        if self.n_context < 1 or self.n_query < 1:
            raise ConfigError(f"need n_context >= 1 and n_query >= 1, got {self.n_context}, {self.n_query}")
        if self.w_sparsity is not None and not 1 <= self.w_sparsity <= self.d:
            raise ConfigError(f"w_sparsity must be in 1..d={self.d}, got {self.w_sparsity}")
        if self.noise < 0 or self.w_scale <= 0:
            raise ConfigError("need noise >= 0 and w_scale > 0")
        if self.w is not None:
            if len(self.w) != self.d:
                raise ConfigError(f"a fixed w needs d = {self.d} entries, got {len(self.w)}")
            if not self.inputs.zero_mean:
                raise ConfigError("a fixed w needs zero-mean inputs")
            self.w = tuple(float(v) for v in self.w)

    @property
    def d(self) -> int:
        return self.inputs.d

    @property
    def zero_error(self) -> float:
        """E[y²], the error of predicting 0: τ²·E‖x‖² (times k/d for a k-sparse w) + σ², or
        wᵀE[xxᵀ]w + σ² for a fixed w."""
        if self.w is not None:
            w = torch.tensor(self.w, dtype=torch.float64)
            return (w @ self.inputs.second_moment() @ w).item() + self.noise**2
        share = 1.0 if self.w_sparsity is None else self.w_sparsity / self.d
        return self.w_scale**2 * share * self.inputs.mean_square() + self.noise**2

    def function(self, x: torch.Tensor, truth) -> torch.Tensor:
        """wᵀx without label noise: x ``(B, T, d)`` → ``(B, T)`` under each prompt's ``truth["w"]``."""
        return torch.einsum("btd,bd->bt", x, truth["w"].to(x))

    def labels(self, x: torch.Tensor, truth, generator: torch.Generator) -> torch.Tensor:
        """The labels a prompt shows: wᵀx plus N(0, σ²) noise drawn from ``generator`` (what
        :mod:`iclab.shifts` labels moved inputs with, so a shifted prompt keeps the task's noise)."""
        y = self.function(x, truth)
        if self.noise > 0:
            y = y + self.noise * torch.randn(y.shape, generator=generator, device=generator.device, dtype=y.dtype).to(y)
        return y

    def sample_w(self, batch: int, generator: torch.Generator, dtype=torch.float32) -> torch.Tensor:
        if self.w is not None:
            return torch.tensor(self.w, dtype=dtype, device=generator.device).expand(batch, -1).clone()
        w = self.w_scale * torch.randn(batch, self.d, generator=generator, device=generator.device, dtype=dtype)
        if self.w_sparsity is not None:
            scores = torch.rand(batch, self.d, generator=generator, device=generator.device)
            keep = scores.argsort(dim=1)[:, : self.w_sparsity]
            w = w * torch.zeros_like(w).scatter_(1, keep, 1.0)
        return w

    def sample(self, batch: int, generator: torch.Generator, dtype=torch.float32) -> Episode:
        """Draw ``batch`` prompts; pure given the generator (same state, same episode)."""
        n = self.n_context
        x, truth = self.inputs.sample(batch, n + self.n_query, generator, dtype)
        w = self.sample_w(batch, generator, dtype)
        y = self.labels(x, {"w": w}, generator)
        return Episode(x[:, :n], y[:, :n], x[:, n:], y[:, n:], truth={"w": w, **truth})


CONFIG_KEYS = (
    "d",
    "n_context",
    "n_query",
    "inputs",
    "cov",
    "mean",
    "mean_scale",
    "n_means",
    "means_seed",
    "low",
    "high",
    "w_scale",
    "w_sparsity",
    "noise",
    "w",
)
"""The keys of a linear-regression config block (see :func:`linear_regression_from_config`)."""


def linear_regression_from_config(cfg: Mapping[str, Any]) -> LinearRegression:
    """Build a task from a config section (keys as in the experiments' ``task:`` blocks: :data:`CONFIG_KEYS`)."""
    unknown = set(cfg) - set(CONFIG_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown linear-regression task keys: {', '.join(sorted(unknown))}; choose from {', '.join(CONFIG_KEYS)}"
        )
    d = cfg["d"]
    if not isinstance(d, int) or d < 1:
        raise ConfigError(f"task.d must be a positive integer, got {d!r}")
    kind = cfg.get("inputs", "gaussian")
    if kind == "gaussian":
        inputs = GaussianInputs(
            d, cfg.get("cov"), cfg.get("mean"), cfg.get("mean_scale", 0.0), cfg.get("n_means"), cfg.get("means_seed", 0)
        )
    elif kind == "uniform":
        inputs = UniformInputs(d, cfg.get("low", -1.0), cfg.get("high", 1.0))
    else:
        raise ConfigError(f"task.inputs must be 'gaussian' or 'uniform', got {kind!r}")
    return LinearRegression(
        inputs,
        n_context=cfg["n_context"],
        n_query=cfg.get("n_query", 1),
        w_scale=cfg.get("w_scale", 1.0),
        w_sparsity=cfg.get("w_sparsity"),
        noise=cfg.get("noise", 0.0),
        w=cfg.get("w"),
        config=dict(cfg),
    )
