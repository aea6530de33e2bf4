"""Nearest-neighbour regression over the context."""

from __future__ import annotations

import torch

from ..config import ConfigError
from .base import Learner


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

    def predict_prefixes(self, xs, ys):
        """All prefixes from one masked distance matrix: x_{k+1}'s neighbours are among x_1…x_k."""
        xs, ys = xs.double(), ys.double()
        n = xs.shape[1]
        later = torch.ones(n, n, dtype=torch.bool, device=xs.device).triu()  # example i ≥ k is not in prefix k
        # Rank by squared distances from one matmul (cdist is several times slower on small batched
        # inputs), then measure the chosen neighbours' distances exactly.
        norms = xs.pow(2).sum(-1)
        squared = norms[:, :, None] + norms[:, None, :] - 2 * xs @ xs.transpose(1, 2)
        near, index = squared.masked_fill(later, float("inf")).topk(min(self.k, n), dim=-1, largest=False)
        valid = near.isfinite()
        labels = torch.gather(ys[:, None, :].expand(-1, n, -1), 2, index)
        if self.weighting == "uniform":
            weight = valid.to(ys.dtype)
        else:
            neighbours = torch.gather(xs[:, None].expand(-1, n, -1, -1), 2, index[..., None].expand(-1, -1, -1, xs.shape[2]))
            distance = (neighbours - xs[:, :, None]).norm(dim=-1)
            weight = torch.where(valid, 1.0 / distance.clamp_min(1e-12), 0.0)
        return (weight * labels).sum(-1) / weight.sum(-1).clamp_min(1e-300)
