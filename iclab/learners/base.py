"""The learner interface: batched, float64 predictors of query labels from the context (see
:mod:`iclab.learners`)."""

from __future__ import annotations

import torch

from ..tasks.base import Episode


def prefix_sums(xs: torch.Tensor, ys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gram matrices Σ_{i<k} x_i x_iᵀ ``(B, N, d, d)`` and moments Σ_{i<k} y_i x_i ``(B, N, d)``
    of the first k examples, k = 0…N − 1 (exclusive prefix sums)."""
    outer = torch.einsum("bni,bnj->bnij", xs, xs)
    gram = torch.cumsum(outer, dim=1) - outer
    moment = ys[..., None] * xs
    return gram, torch.cumsum(moment, dim=1) - moment


class Learner:
    """Base class: subclasses implement :meth:`predict`; ``name`` labels results."""

    name = "learner"

    def predict(self, xs: torch.Tensor, ys: torch.Tensor, x_query: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def predict_episode(self, episode: Episode) -> torch.Tensor:
        """Predict ``episode.y_query`` in float64."""
        e = episode.to(dtype=torch.float64)
        return self.predict(e.xs, e.ys, e.x_query)

    def predict_prefixes(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """``(B, N)``: column k predicts y_{k+1} at x_{k+1} from the first k examples (0 for k = 0).

        Generic fallback: one batched :meth:`predict` per prefix length; subclasses vectorise it.
        """
        xs, ys = xs.double(), ys.double()
        columns = [torch.zeros_like(ys[:, 0])]
        columns += [self.predict(xs[:, :k], ys[:, :k], xs[:, k : k + 1])[:, 0] for k in range(1, xs.shape[1])]
        return torch.stack(columns, dim=1)

    def predict_prefixes_episode(self, episode: Episode) -> torch.Tensor:
        """:meth:`predict_prefixes` on an episode's context, in float64."""
        return self.predict_prefixes(episode.xs, episode.ys)

    def __repr__(self) -> str:
        return self.name


class LinearLearner(Learner):
    """A learner that fits one weight vector per prompt and predicts x_qᵀw."""

    def weights(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def predict(self, xs, ys, x_query):
        w = self.weights(xs.double(), ys.double())
        return torch.einsum("bqd,bd->bq", x_query.double(), w)

    def prefix_weights(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor | None:
        """``(B, N, d)``: the weights fitted on the first k examples, k = 0…N − 1, or None when
        this learner has no vectorised form (then the generic per-prefix fallback is used)."""
        return None

    def predict_prefixes(self, xs, ys):
        xs, ys = xs.double(), ys.double()
        w = self.prefix_weights(xs, ys)
        if w is None:
            return super().predict_prefixes(xs, ys)
        return torch.einsum("bkd,bkd->bk", xs, w)


class ZeroPredictor(Learner):
    """Predicts 0 for every query: the trivial baseline."""

    name = "zero"

    def predict(self, xs, ys, x_query):
        return torch.zeros(x_query.shape[:2], dtype=torch.float64, device=x_query.device)

    def predict_prefixes(self, xs, ys):
        return torch.zeros(ys.shape, dtype=torch.float64, device=ys.device)


class OnFeatures(Learner):
    """``learner`` run on features φ(x) instead of x (e.g. least squares on x⊙x for quadratic functions)."""

    def __init__(self, learner: Learner, features, name: str):
        self.learner, self.features, self.name = learner, features, name

    def predict(self, xs, ys, x_query):
        return self.learner.predict(self.features(xs.double()), ys, self.features(x_query.double()))

    def predict_prefixes(self, xs, ys):
        return self.learner.predict_prefixes(self.features(xs.double()), ys)
