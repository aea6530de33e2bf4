"""Reference in-context learners: algorithms that predict query labels from the context.

Every learner follows one batched interface, in float64 and without a Python loop over
prompts::

    learner.predict(xs, ys, x_query) -> (B, Q)    # xs (B, N, d), ys (B, N), x_query (B, Q, d)
    learner.predict_episode(episode) -> (B, Q)

Linear learners also expose ``weights(xs, ys) -> (B, d)``, the w they predict with.

Every learner also predicts each context label from the examples before it, for all prefix
lengths at once (what a causal transformer on interleaved prompts is compared with)::

    learner.predict_prefixes(xs, ys) -> (B, N)    # [:, k] predicts y_{k+1} from the first k examples

With no example (k = 0, an empty context) every learner predicts 0. The base class answers with one
batched ``predict`` call per prefix length; the learners below override it with a computation
vectorised over prefixes too (prefix sums, masked batched solves, masked distances). Every learner
keeps one contract, checked for each by ``tests/test_learner_contract.py``: ``predict_prefixes``
equals ``predict`` on each prefix, outputs are float64, a prompt's predictions do not depend on the
rest of its batch, and an empty context predicts 0.

Families beyond linear regression (Garg et al.'s baselines): ``sparse`` (the Lasso, exact along its
homotopy path), ``trees`` (a batched greedy regression tree; XGBoost per prompt), ``nets`` (a
2-layer ReLU network fitted by Adam, every prompt's network at once). :func:`learner` builds one
from a name such as ``ridge=0.1`` (the command line's).
"""

from .base import Learner, LinearLearner, OnFeatures, ZeroPredictor
from .gradient import GDPlusPlus, GradientDescent, OnePassSGD, gd_plus_plus
from .linear import Averaging, BayesLinear, LeastSquares, Ridge
from .named import learner
from .neighbours import NearestNeighbours
from .nets import TwoLayerNetGD
from .sparse import LASSO_ALPHAS, Lasso
from .trees import BoostedTrees, GreedyTree

__all__ = [
    "Averaging",
    "BayesLinear",
    "GDPlusPlus",
    "GradientDescent",
    "LeastSquares",
    "Learner",
    "LinearLearner",
    "NearestNeighbours",
    "OnePassSGD",
    "Ridge",
    "ZeroPredictor",
    "gd_plus_plus",
    "learner",
    # Garg et al.'s baselines for other function classes
    "BoostedTrees",
    "GreedyTree",
    "LASSO_ALPHAS",
    "Lasso",
    "OnFeatures",
    "TwoLayerNetGD",
]
