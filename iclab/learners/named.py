"""Learners by name, for the command line (``iclab eval --learners ols ridge=0.1 3-nn``).

============  ==========================================
name          learner
============  ==========================================
``ols``       :class:`LeastSquares` (min-norm below d)
``ridge=λ``   :class:`Ridge`
``k-nn``      :class:`NearestNeighbours` with k neighbours (e.g. ``3-nn``)
``averaging`` :class:`Averaging`
``gd=η``      one step of :class:`GradientDescent` of size η
``lasso=α``   :class:`Lasso`
``tree``      :class:`GreedyTree`, unlimited depth; ``tree=k``: depth k
``xgboost``   :class:`BoostedTrees`
``net``       :class:`TwoLayerNetGD` (Garg et al.'s fitted 2-layer network)
``zero``      :class:`ZeroPredictor`
============  ==========================================
"""

from __future__ import annotations

import re

from ..config import ConfigError
from .base import Learner, ZeroPredictor
from .gradient import GradientDescent
from .linear import Averaging, LeastSquares, Ridge
from .neighbours import NearestNeighbours
from .nets import TwoLayerNetGD
from .sparse import Lasso
from .trees import BoostedTrees, GreedyTree

NAMES = (
    "ols",
    "ridge=<λ>",
    "<k>-nn",
    "averaging",
    "gd=<η>",
    "lasso=<α>",
    "tree",
    "tree=<depth>",
    "xgboost",
    "net",
    "zero",
)
"""The names :func:`learner` takes."""

_PLAIN = {
    "ols": LeastSquares,
    "averaging": Averaging,
    "tree": GreedyTree,
    "xgboost": BoostedTrees,
    "net": TwoLayerNetGD,
    "zero": ZeroPredictor,
}
_WITH_VALUE = {
    "ridge": (float, Ridge),
    "gd": (float, lambda lr: GradientDescent(1, lr)),
    "lasso": (float, Lasso),
    "tree": (int, GreedyTree),
}


def learner(name: str) -> Learner:
    """The learner called ``name`` (see the module docstring); an unknown name is a :class:`ConfigError`."""
    if name in _PLAIN:
        return _PLAIN[name]()
    neighbours = re.fullmatch(r"(\d+)-nn", name)
    if neighbours:
        return NearestNeighbours(int(neighbours[1]))
    kind, _, value = name.partition("=")
    if kind in _WITH_VALUE and value:
        parse, make = _WITH_VALUE[kind]
        try:
            return make(parse(value))
        except ValueError:
            pass
    raise ConfigError(f"unknown learner {name!r}; choose from {', '.join(NAMES)}")
