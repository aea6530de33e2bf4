"""Nearest-neighbour regression over the context."""

from __future__ import annotations

import torch

from ..config import ConfigError
from .base import Learner


class NearestNeighbours(Learner):
    """k-nearest-neighbour regression over the context (all of it when N < k).

    ``weights="uniform"`` averages the neighbours' labels; ``"distance"`` weights them by 1/distance,
    ``"distance2"`` by 1/distance² (Akyürek et al.'s weighted kNN); an exact match takes its own label.
    Without examples it predicts 0.
    """

    WEIGHTS = {"uniform": 0, "distance": 1, "distance2": 2}  # the power of 1/distance

    def __init__(self, k: int = 3, weights: str = "uniform"):
        if k < 1 or weights not in self.WEIGHTS:
            raise ConfigError(f"kNN needs k >= 1 and weights one of {', '.join(self.WEIGHTS)}, got {k}, {weights!r}")
        self.k, self.weighting = k, weights
        self.power = self.WEIGHTS[weights]
        self.name = f"{k}-nn" + {0: "", 1: "(1/dist)", 2: "(1/dist²)"}[self.power]

    def predict(self, xs, ys, x_query):
        xs, ys, x_query = xs.double(), ys.double(), x_query.double()
        if xs.shape[1] == 0:
            return torch.zeros(x_query.shape[:2], dtype=torch.float64, device=x_query.device)
        dist = torch.cdist(x_query, xs)  # (B, Q, N)
        k = min(self.k, xs.shape[1])
        near, index = dist.topk(k, dim=-1, largest=False)
        labels = torch.gather(ys[:, None, :].expand(-1, x_query.shape[1], -1), 2, index)
        if self.power == 0:
            return labels.mean(-1)
        inverse = near.clamp_min(1e-12) ** -self.power
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
        if self.power == 0:
            weight = valid.to(ys.dtype)
        else:
            neighbours = torch.gather(
                xs[:, None].expand(-1, n, -1, -1), 2, index[..., None].expand(-1, -1, -1, xs.shape[2])
            )
            distance = (neighbours - xs[:, :, None]).norm(dim=-1)
            weight = torch.where(valid, distance.clamp_min(1e-12) ** -self.power, 0.0)
        return (weight * labels).sum(-1) / weight.sum(-1).clamp_min(1e-300)
