"""Reference in-context learners: algorithms that predict query labels from the context.

Every learner follows one batched interface, in float64 and without a Python loop over
prompts::

    learner.predict(xs, ys, x_query) -> (B, Q)    # xs (B, N, d), ys (B, N), x_query (B, Q, d)
    learner.predict_episode(episode) -> (B, Q)

Linear learners also expose ``weights(xs, ys) -> (B, d)``, the w they predict with.
"""

from __future__ import annotations

import torch

from .config import ConfigError
from .tasks.base import Episode


class Learner:
    """Base class: subclasses implement :meth:`predict`; ``name`` labels results."""

    name = "learner"

    def predict(self, xs: torch.Tensor, ys: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def predict_episode(self, episode: Episode) -> torch.Tensor:
        """Predict ``episode.y_query`` in float64."""
        e = episode.to(dtype=torch.float64)
        return self.predict(e.xs, e.ys, e.x_query)

    def __repr__(self) -> str:
        return self.name


class LinearLearner(Learner):
    """A learner that fits one weight vector per prompt and predicts x_qᵀw."""

    def weights(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def predict(self, xs, ys, x_query):
        w = self.weights(xs.double(), ys.double())
        return torch.einsum("bqd,bd->bq", x_query.double(), w)


class LeastSquares(LinearLearner):
    """Ordinary least squares; the minimum-norm solution when N < d (via the pseudo-inverse)."""

    name = "ols"

    def weights(self, xs, ys):
        return (torch.linalg.pinv(xs) @ ys[..., None])[..., 0]


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


class GradientDescent(LinearLearner):
    """k steps of (preconditioned) gradient descent from w₀ = 0 on L(w) = (1/2N) Σ (wᵀx_i − y_i)².

    Each step is w ← w − η P ∇L(w) with P = ``preconditioner`` (identity if None).
    """

    def __init__(self, steps: int = 1, lr: float = 1.0, preconditioner: torch.Tensor | None = None):
        if steps < 1:
            raise ConfigError(f"GD needs steps >= 1, got {steps}")
        self.steps, self.lr = steps, lr
        self.preconditioner = None if preconditioner is None else torch.as_tensor(preconditioner, dtype=torch.float64)
        self.name = f"gd{steps}(η={lr:.3g}{', P' if preconditioner is not None else ''})"

    def weights(self, xs, ys):
        n = xs.shape[1]
        w = torch.zeros(xs.shape[0], xs.shape[2], dtype=xs.dtype, device=xs.device)
        for _ in range(self.steps):
            grad = torch.einsum("bnd,bn->bd", xs, torch.einsum("bnd,bd->bn", xs, w) - ys) / n
            if self.preconditioner is not None:
                grad = grad @ self.preconditioner.to(xs.device).T
            w = w - self.lr * grad
        return w


class Averaging(LinearLearner):
    """w = (1/N) Σ y_i x_i, the 'averaging' estimator of Garg et al."""

    name = "averaging"

    def weights(self, xs, ys):
        return torch.einsum("bnd,bn->bd", xs, ys) / xs.shape[1]


class ZeroPredictor(Learner):
    """Predicts 0 for every query: the trivial baseline."""

    name = "zero"

    def predict(self, xs, ys, x_query):
        return torch.zeros(x_query.shape[:2], dtype=torch.float64, device=x_query.device)


class NearestNeighbours(Learner):
    """k-nearest-neighbour regression over the context (all of it when N < k).

    ``weights="uniform"`` averages the neighbours' labels; ``"distance"`` weights them by 1/distance
    (an exact match takes its own label).
    """

    def __init__(self, k: int = 3, weights: str = "uniform"):
        if k < 1 or weights not in ("uniform", "distance"):
            raise ConfigError(f"kNN needs k >= 1 and weights 'uniform' or 'distance', got {k}, {weights!r}")
        self.k, self.weighting = k, weights
        self.name = f"{k}-nn" + ("" if weights == "uniform" else "(1/dist)")

    def predict(self, xs, ys, x_query):
        xs, ys, x_query = xs.double(), ys.double(), x_query.double()
        dist = torch.cdist(x_query, xs)  # (B, Q, N)
        k = min(self.k, xs.shape[1])
        near, index = dist.topk(k, dim=-1, largest=False)
        labels = torch.gather(ys[:, None, :].expand(-1, x_query.shape[1], -1), 2, index)
        if self.weighting == "uniform":
            return labels.mean(-1)
        inverse = 1.0 / near.clamp_min(1e-12)
        return (inverse * labels).sum(-1) / inverse.sum(-1)
