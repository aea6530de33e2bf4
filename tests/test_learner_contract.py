"""The learner contract, checked on every learner in the style of scikit-learn's ``parametrize_with_checks``:
one test id per (learner, check), so a failure names both.

Every learner of :mod:`iclab.learners` (see its docstring for the interface) must

* predict every prefix at once (``predict_prefixes``) as it predicts each prefix alone: column k equals
  ``predict_episode`` on the first k examples with x_{k+1} as the query, k = 0 included;
* answer in float64, whatever the input's precision, with the documented shapes;
* treat the prompts of a batch independently: a prompt alone, or in a permuted batch, gets the same
  predictions;
* predict 0, the documented prior prediction, from an empty context (k = 0).

A new learner class is added to ``LEARNERS`` with a representative construction (small, for the slow
ones); ``test_every_learner_class_is_checked`` fails until it is.
"""

import dataclasses
import importlib
import pkgutil

import pytest
import torch

import iclab.learners
from iclab.learners import (
    Averaging,
    BayesLinear,
    BoostedTrees,
    GDPlusPlus,
    GradientDescent,
    GreedyTree,
    Lasso,
    Learner,
    LeastSquares,
    LinearLearner,
    NearestNeighbours,
    OnePassSGD,
    OnFeatures,
    Ridge,
    TwoLayerNetGD,
    ZeroPredictor,
)
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression

LEARNERS = [
    LeastSquares(),
    Ridge(0.3),
    BayesLinear(1.0, 0.5),
    BayesLinear(),
    Averaging(),
    ZeroPredictor(),
    GradientDescent(2, 0.3),
    GradientDescent(1, 0.04, lam=0.3, average=False),
    GradientDescent(2, 0.2, preconditioner=torch.tensor([[1.0, 0.2, 0.0], [0.2, 0.5, 0.0], [0.0, 0.0, 2.0]])),
    OnePassSGD(0.06, lam=0.1),
    GDPlusPlus([0.5, 0.4], [0.1, 0.0]),
    NearestNeighbours(3),
    NearestNeighbours(2, "distance"),
    NearestNeighbours(3, "distance2"),
    Lasso(0.05),
    GreedyTree(2),
    GreedyTree(None),
    BoostedTrees(rounds=5),
    TwoLayerNetGD(hidden=8, steps=10),
    OnFeatures(LeastSquares(), torch.square, "ols on x⊙x"),
]
D = 3  # the preconditioned GD above is 3 × 3
SHAPES = [(7, D), (2, D)]  # (N, d): past d (OLS's second regime) and below it
TOLERANCE = {TwoLayerNetGD: {"rtol": 1e-5, "atol": 1e-5}}  # fitted in float32: ~100 ulps at O(1) predictions


def _episode(n: int, d: int = D, batch: int = 5, dtype=torch.float64):
    task = LinearRegression(GaussianInputs(d), n_context=n, n_query=2, noise=0.3)
    return task.sample(batch, generator(n, d), dtype)


def _close(learner, got, expected):
    torch.testing.assert_close(got, expected, **TOLERANCE.get(type(learner), {"rtol": 1e-8, "atol": 1e-9}))


def check_prefixes_equal_a_per_prefix_loop(learner: Learner):
    for n, d in SHAPES:
        episode = _episode(n, d)
        loop = [
            learner.predict_episode(
                dataclasses.replace(
                    episode,
                    xs=episode.xs[:, :k],
                    ys=episode.ys[:, :k],
                    x_query=episode.xs[:, k : k + 1],
                    y_query=episode.ys[:, k : k + 1],
                )
            )[:, 0]
            for k in range(n)
        ]
        _close(learner, learner.predict_prefixes_episode(episode), torch.stack(loop, dim=1))


def check_float64_and_shapes(learner: Learner):
    episode = _episode(7, dtype=torch.float32)
    for got, shape in ((learner.predict_episode(episode), (5, 2)), (learner.predict_prefixes_episode(episode), (5, 7))):
        assert got.dtype == torch.float64 and got.shape == shape


def check_batch_independence(learner: Learner):
    episode = _episode(6)
    order = torch.tensor([3, 0, 4, 1, 2])
    for predict in (learner.predict_episode, learner.predict_prefixes_episode):
        batch = predict(episode)
        alone = torch.cat([predict(episode[b : b + 1]) for b in range(5)])
        _close(learner, alone, batch)
        _close(learner, predict(episode[order]), batch[order])


def check_empty_context_predicts_zero(learner: Learner):
    episode = _episode(4)
    empty = dataclasses.replace(episode, xs=episode.xs[:, :0], ys=episode.ys[:, :0])
    prediction = learner.predict_episode(empty)
    assert prediction.dtype == torch.float64 and prediction.shape == (5, 2)
    assert (prediction == 0).all()
    assert (learner.predict_prefixes_episode(episode)[:, 0] == 0).all()


CHECKS = [
    check_prefixes_equal_a_per_prefix_loop,
    check_float64_and_shapes,
    check_batch_independence,
    check_empty_context_predicts_zero,
]


def _ids() -> list[str]:
    """``<class>[#<i>]`` per learner (the i-th of its class), ASCII for readable test ids."""
    seen: dict[type, int] = {}
    ids = []
    for learner in LEARNERS:
        seen[type(learner)] = seen.get(type(learner), 0) + 1
        ids.append(type(learner).__name__ + (f"#{seen[type(learner)]}" if seen[type(learner)] > 1 else ""))
    return ids


@pytest.mark.parametrize(
    "learner, check",
    [(learner, check) for learner in LEARNERS for check in CHECKS],
    ids=[f"{name}-{check.__name__}" for name in _ids() for check in CHECKS],
)
def test_learner_contract(learner, check):
    check(learner)


def _learner_classes() -> set[type]:
    """Every concrete Learner subclass defined in the iclab.learners package (each module imported)."""
    for module in pkgutil.iter_modules(iclab.learners.__path__):
        importlib.import_module(f"iclab.learners.{module.name}")
    found, todo = set(), [Learner]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("iclab.learners."):
                found.add(sub)
            todo.append(sub)
    return found - {LinearLearner}


def test_every_learner_class_is_checked():
    classes = _learner_classes()
    assert classes >= {LeastSquares, TwoLayerNetGD, OnFeatures}  # the walk finds them
    missing = classes - {type(learner) for learner in LEARNERS}
    assert not missing, f"add a representative construction of {sorted(c.__name__ for c in missing)} to LEARNERS"
