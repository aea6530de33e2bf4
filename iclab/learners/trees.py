"""Tree learners: a greedy regression tree batched over prompts, and gradient-boosted trees (XGBoost).

Garg et al. compare their decision-tree transformer with scikit-learn's greedy
``DecisionTreeRegressor`` (depth 4 and unlimited) and with XGBoost's defaults. The greedy tree
here is the same algorithm (CART with squared error: at every node the split of largest variance
reduction over every coordinate and every midpoint between consecutive distinct values, left
when x ≤ threshold, grown level by level until the depth limit or until no node can split), run
on every prompt, and every prefix of every prompt, at once. Boosted trees call XGBoost per
prompt, a per-prompt loop that the library's work dominates.
"""

from __future__ import annotations

import torch

from ..config import ConfigError
from .base import Learner


def greedy_tree_values(x: torch.Tensor, y: torch.Tensor, active: torch.Tensor, max_depth: int | None) -> torch.Tensor:
    """Fit one greedy regression tree per problem and return, for every point, its leaf's mean label.

    Problem m fits on its ``active`` points only; the others (queries, or examples beyond a prefix)
    are routed through the same splits, so their value is the tree's prediction for them. Ties (equal
    variance reductions up to rounding, e.g. two coordinates that split the points alike) go to the
    lower coordinate, then to the lower threshold; scikit-learn breaks them by a random order of the
    coordinates, so the two agree on the points a tree is fitted to but may route other points
    differently. A problem with no active point predicts 0.
    Shapes: x ``(M, P, d)``, y ``(M, P)``, active ``(M, P)`` bool; returns ``(M, P)``.
    """
    m, p, d = x.shape
    weight = active.to(x.dtype)
    wy, wyy = weight * y, weight * y * y
    node = torch.zeros(m, p, dtype=torch.long, device=x.device)  # every node id stays < p
    position = torch.arange(p, device=x.device).expand(m, p)
    depth = 0
    while (max_depth is None or depth < max_depth) and p > 1:  # one point cannot be split
        search = torch.where(active, node, p)  # inactive points sort after every node (sentinel id p)
        totals = [
            torch.zeros(m, p + 1, dtype=x.dtype, device=x.device).scatter_add_(1, search, v) for v in (weight, wy, wyy)
        ]
        count, total, squares = totals
        # Running sums restart at each node: subtract everything in the lower node ids.
        before = [t.cumsum(1) - t for t in (count, total)]
        best_gain = torch.zeros(m, p + 1, dtype=x.dtype, device=x.device)
        best_feature = torch.zeros(m, p + 1, dtype=torch.long, device=x.device)
        best_threshold = torch.zeros(m, p + 1, dtype=x.dtype, device=x.device)
        for j in range(d):
            order = x[..., j].argsort(1)
            order = order.gather(1, search.gather(1, order).argsort(dim=1, stable=True))  # by node, then by x_j
            ids, xj = search.gather(1, order), x[..., j].gather(1, order)
            n_left = weight.gather(1, order).cumsum(1) - before[0].gather(1, ids)
            s_left = wy.gather(1, order).cumsum(1) - before[1].gather(1, ids)
            n_node, s_node = count.gather(1, ids), total.gather(1, ids)
            n_right = n_node - n_left
            # A split after sorted position i: the next point is in the same node with a larger x_j.
            valid = torch.zeros_like(active)
            valid[:, :-1] = (ids[:, 1:] == ids[:, :-1]) & (ids[:, :-1] < p) & (xj[:, 1:] > xj[:, :-1])
            gain = (
                s_left**2 / n_left.clamp(min=1)
                + (s_node - s_left) ** 2 / n_right.clamp(min=1)
                - s_node**2 / n_node.clamp(min=1)
            )
            gain = torch.where(valid, gain, -1.0)
            node_best = torch.full((m, p + 1), -1.0, dtype=x.dtype, device=x.device).scatter_reduce(
                1, ids, gain, "amax"
            )
            at_best = valid & (gain == node_best.gather(1, ids))
            first = torch.full((m, p + 1), p, device=x.device).scatter_reduce(
                1, ids, torch.where(at_best, position, p), "amin"
            )
            chosen = first.clamp(max=p - 2)
            threshold = (xj.gather(1, chosen) + xj.gather(1, chosen + 1)) / 2
            better = node_best > best_gain * (1 + 1e-9)  # equal up to rounding: the lower coordinate keeps it
            best_gain = torch.where(better, node_best, best_gain)
            best_feature = torch.where(better, j, best_feature)
            best_threshold = torch.where(better, threshold, best_threshold)
        # Split where the variance reduction is more than rounding (pure nodes gain only that).
        split = best_gain > 1e-10 * squares
        if not split.any():
            break
        feature, threshold = best_feature.gather(1, node), best_threshold.gather(1, node)
        right = x.gather(2, feature[..., None])[..., 0] > threshold
        child = 2 * node + (split.gather(1, node) & right).long()
        # Renumber each problem's nodes 0, 1, … so that ids stay below p.
        present = torch.zeros(m, 2 * p, dtype=torch.long, device=x.device).scatter_(1, child, 1)
        node = (present.cumsum(1) - 1).gather(1, child)
        depth += 1
    count = torch.zeros(m, p, dtype=x.dtype, device=x.device).scatter_add_(1, node, weight)
    total = torch.zeros(m, p, dtype=x.dtype, device=x.device).scatter_add_(1, node, wy)
    return (total / count.clamp(min=1)).gather(1, node)


class GreedyTree(Learner):
    """A greedy (CART) regression tree per prompt, depth ``max_depth`` or unlimited (None), as
    scikit-learn's ``DecisionTreeRegressor`` grows it (see :func:`greedy_tree_values`)."""

    def __init__(self, max_depth: int | None = None, chunk: int = 256):
        if max_depth is not None and max_depth < 1:
            raise ConfigError(f"greedy tree needs max_depth >= 1 or None, got {max_depth}")
        self.max_depth, self.chunk = max_depth, chunk
        self.name = "tree" + ("" if max_depth is None else f"(depth {max_depth})")

    def predict(self, xs, ys, x_query):
        xs, ys, x_query = xs.double(), ys.double(), x_query.double()
        n, q = xs.shape[1], x_query.shape[1]
        points = torch.cat([xs, x_query], 1)
        labels = torch.cat([ys, torch.zeros_like(x_query[..., 0])], 1)
        active = torch.arange(n + q, device=xs.device) < n
        return greedy_tree_values(points, labels, active.expand(len(xs), -1), self.max_depth)[:, n:]

    def predict_prefixes(self, xs, ys):
        """One tree per (prompt, prefix k): the first k examples are active, example k is the query."""
        xs, ys = xs.double(), ys.double()
        n = xs.shape[1]
        index = torch.arange(n, device=xs.device)
        prefix = index[None, :] < index[:, None]  # (k, i): example i is in prefix k
        out = []
        for start in range(0, len(xs), self.chunk):
            x, y = xs[start : start + self.chunk], ys[start : start + self.chunk]
            b = len(x)
            values = greedy_tree_values(
                x[:, None].expand(-1, n, -1, -1).flatten(0, 1),
                y[:, None].expand(-1, n, -1).flatten(0, 1),
                prefix.expand(b, -1, -1).flatten(0, 1),
                self.max_depth,
            ).view(b, n, n)  # (B, k, i)
            out.append(values.diagonal(dim1=1, dim2=2))
        return torch.cat(out)


XGBOOST_1_6 = {
    "objective": "reg:squarederror",
    "max_depth": 6,
    "eta": 0.3,
    "lambda": 1.0,
    "min_child_weight": 1.0,
    "tree_method": "exact",
    "base_score": 0.5,
}
"""The defaults of XGBoost 1.6, which Garg et al.'s ``XGBRegressor()`` ran with (100 rounds); later
versions default to histogram trees and a base score fitted to the labels, so they are spelled out."""


class BoostedTrees(Learner):
    """Gradient-boosted trees fitted by XGBoost on each prompt (``rounds`` trees, ``params`` as
    :data:`XGBOOST_1_6` unless given), one library call per prompt and prefix on ``threads`` threads."""

    name = "xgboost"

    def __init__(self, rounds: int = 100, params: dict | None = None, threads: int = 1):
        self.rounds, self.threads = rounds, threads
        self.params = {**XGBOOST_1_6, **(params or {}), "nthread": threads, "verbosity": 0}

    def _fit_predict(self, x, y, queries):
        if len(x) == 0:  # no example: the prior prediction 0 (XGBoost alone would answer its base score)
            return torch.zeros(len(queries), dtype=torch.float64)
        import xgboost

        data = xgboost.DMatrix(x.numpy(), label=y.numpy(), nthread=self.threads)
        booster = xgboost.train(self.params, data, num_boost_round=self.rounds)
        return torch.from_numpy(booster.inplace_predict(queries.numpy())).double()

    def predict(self, xs, ys, x_query):
        xs, ys, x_query = xs.double().cpu(), ys.double().cpu(), x_query.double().cpu()
        return torch.stack([self._fit_predict(xs[b], ys[b], x_query[b]) for b in range(len(xs))])

    def predict_prefixes(self, xs, ys):
        xs, ys = xs.double().cpu(), ys.double().cpu()
        out = torch.zeros(ys.shape, dtype=torch.float64)
        for b in range(len(xs)):
            for k in range(1, xs.shape[1]):
                out[b, k] = self._fit_predict(xs[b, :k], ys[b, :k], xs[b, k : k + 1])[0]
        return out
