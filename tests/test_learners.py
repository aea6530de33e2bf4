import numpy as np
import pytest
import torch

from iclab.config import ConfigError
from iclab.learners import (
    Averaging,
    BayesLinear,
    GradientDescent,
    LeastSquares,
    NearestNeighbours,
    Ridge,
    ZeroPredictor,
)
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression


def _episode(n=6, d=3, batch=4, noise=0.3):
    return LinearRegression(GaussianInputs(d), n_context=n, n_query=2, noise=noise).sample(
        batch, generator(0), torch.float64
    )


def _numpy(e):
    return e.xs.numpy(), e.ys.numpy(), e.x_query.numpy()


def test_ols_and_min_norm():
    for n in (8, 2):  # over- and under-determined
        e = _episode(n=n)
        xs, ys, xq = _numpy(e)
        expected = np.stack([xq[b] @ np.linalg.pinv(xs[b]) @ ys[b] for b in range(len(xs))])
        np.testing.assert_allclose(LeastSquares().predict_episode(e).numpy(), expected, rtol=1e-9, atol=1e-10)


def test_ridge_and_bayes():
    e = _episode()
    xs, ys, xq = _numpy(e)
    lam = 0.7
    w = np.stack([np.linalg.solve(xs[b].T @ xs[b] + lam * np.eye(3), xs[b].T @ ys[b]) for b in range(len(xs))])
    np.testing.assert_allclose(Ridge(lam).predict_episode(e).numpy(), np.einsum("bqd,bd->bq", xq, w), rtol=1e-9)
    # Bayes with w ~ N(0, τ²I), noise σ: ridge with λ = σ²/τ²; kernel form as an independent check.
    tau, sigma = 2.0, 0.5
    kernel = np.stack(
        [
            xq[b] @ xs[b].T @ np.linalg.solve(xs[b] @ xs[b].T + sigma**2 / tau**2 * np.eye(6), ys[b])
            for b in range(len(xs))
        ]
    )
    np.testing.assert_allclose(BayesLinear(tau, sigma).predict_episode(e).numpy(), kernel, rtol=1e-8)
    with pytest.raises(ConfigError):
        Ridge(0.0)


def test_gradient_descent_steps_and_preconditioner():
    e = _episode()
    xs, ys, xq = _numpy(e)
    p = np.array([[1.0, 0.2, 0.0], [0.2, 0.5, 0.0], [0.0, 0.0, 2.0]])
    w = np.zeros((len(xs), 3))
    for _ in range(3):
        grad = np.einsum("bnd,bn->bd", xs, np.einsum("bnd,bd->bn", xs, w) - ys) / xs.shape[1]
        w = w - 0.3 * grad @ p.T
    got = GradientDescent(3, 0.3, torch.tensor(p)).predict_episode(e).numpy()
    np.testing.assert_allclose(got, np.einsum("bqd,bd->bq", xq, w), rtol=1e-10)


def test_averaging_and_zero():
    e = _episode()
    xs, ys, xq = _numpy(e)
    w = np.einsum("bnd,bn->bd", xs, ys) / xs.shape[1]
    np.testing.assert_allclose(Averaging().predict_episode(e).numpy(), np.einsum("bqd,bd->bq", xq, w))
    assert (ZeroPredictor().predict_episode(e) == 0).all()


def test_nearest_neighbours():
    e = _episode(n=7)
    xs, ys, xq = _numpy(e)
    uniform, weighted = [], []
    for b in range(len(xs)):
        for q in range(xq.shape[1]):
            dist = np.linalg.norm(xs[b] - xq[b, q], axis=1)
            near = np.argsort(dist)[:3]
            uniform.append(ys[b, near].mean())
            weighted.append((ys[b, near] / dist[near]).sum() / (1 / dist[near]).sum())
    np.testing.assert_allclose(NearestNeighbours(3).predict_episode(e).numpy().ravel(), uniform, rtol=1e-10)
    np.testing.assert_allclose(
        NearestNeighbours(3, "distance").predict_episode(e).numpy().ravel(), weighted, rtol=1e-10
    )
    # Fewer examples than k: average all of them.
    short = _episode(n=2)
    torch.testing.assert_close(
        NearestNeighbours(3).predict_episode(short), short.ys.mean(1, keepdim=True).expand(-1, 2)
    )


def test_learners_by_name():
    from iclab.learners import learner

    names = {
        "ols": "ols",
        "ridge=0.1": "ridge(0.1)",
        "3-nn": "3-nn",
        "averaging": "averaging",
        "gd=0.5": "gd1(η=0.5)",
        "lasso=0.01": "lasso(α=0.01)",
        "tree": "tree",
        "tree=4": "tree(depth 4)",
        "xgboost": "xgboost",
        "net": "2-layer net GD (100 units)",
        "zero": "zero",
    }
    assert {name: learner(name).name for name in names} == names
    for bad in ("oracle", "ridge=", "ridge=big", "tree=1.5", "nn"):
        with pytest.raises(ConfigError, match="unknown learner"):
            learner(bad)
