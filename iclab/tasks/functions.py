"""Garg et al.'s function classes (NeurIPS 2022; docs/papers.md §7, Garg et al.).

Every class draws inputs x ~ N(0, I_d) and a function f from its prior, fresh for each prompt,
and labels y = f(x). The classes and their scalings follow Garg et al.'s code (their
``tasks.py``); each has a ``zero_error`` = E[y²], the error of predicting 0, which is what their
plots divide by, so that a normalised error of 1 is the trivial predictor's:

================================  =====================================================  ==========
class                             f                                                      zero_error
================================  =====================================================  ==========
``linear``                        wᵀx, w ~ N(0, I_d)                                      d
``sparse-linear``                 wᵀx, w with ``sparsity`` = k random non-zero N(0, 1)   k
                                  coordinates (their k = 3), no rescaling
``linear-classification``         sign(wᵀx), w ~ N(0, I_d) (judged by its error rate)    1
``noisy-linear``                  c·(wᵀx + σε), ε ~ N(0, 1), c = √(d / (d + σ²))          d
``quadratic``                     (x⊙x)ᵀw / √3, w ~ N(0, I_d) (E[x⁴] = 3)                 d
``relu-net``                      √(2/h) Σ_j v_j relu(u_jᵀx), u_j ~ N(0, I_d),            d
                                  v_j ~ N(0, 1), h = ``hidden`` = 100
``decision-tree``                 a full binary tree of ``depth`` 4: internal node i      1
                                  tests x_{c_i} > 0 (true: right child) with c_i
                                  uniform over the d coordinates; leaves ~ N(0, 1)
================================  =====================================================  ==========

Our reading where their code differs in form, not in distribution: they rescale noisy labels by
the batch's empirical standard deviation, we by its expectation (c above), so a prompt's labels
do not depend on the other prompts of its batch; their trees store a coordinate and a value at
every node of the array and read only the internal nodes' coordinates and the leaves' values, we
draw only those. Under the d/N curriculum (:mod:`iclab.curriculum`) a class is drawn at the
current d' and its inputs zero-padded; for trees this means nodes test only the d' active
coordinates, where theirs may also test a padded one (always false, so always left).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..config import ConfigError
from .base import Episode
from .linear import GaussianInputs, LinearRegression


@dataclass
class FunctionClass:
    """Base class: x ~ N(0, I_d), f drawn by :meth:`sample_function`, labels by :meth:`labels`.

    Args:
        d: input dimension.
        n_context: N, in-context examples per prompt.
        n_query: Q, queries per prompt.
    """

    d: int
    n_context: int
    n_query: int = 1

    name = "function"
    metric = "mse"
    """How predictions are judged: ``mse`` (divided by :attr:`zero_error`) or ``error_rate`` (sign labels)."""

    def __post_init__(self):
        if min(self.d, self.n_context, self.n_query) < 1:
            raise ConfigError(f"{self.name} needs d, n_context and n_query >= 1")

    @property
    def zero_error(self) -> float:
        """E[y²]: the mean squared error of predicting 0 (Garg et al.'s normalisation)."""
        raise NotImplementedError

    def sample_function(self, batch: int, generator: torch.Generator, dtype=torch.float32) -> dict[str, torch.Tensor]:
        """Draw ``batch`` functions; their parameters become the episode's ``truth``."""
        raise NotImplementedError

    def function(self, x: torch.Tensor, truth: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """f(x) without label noise: x ``(B, T, d)`` → ``(B, T)``, prompt b under function b."""
        raise NotImplementedError

    def labels(self, x: torch.Tensor, truth: Mapping[str, torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        """The labels a prompt shows (f(x), plus noise for noisy classes)."""
        return self.function(x, truth)

    def sample(self, batch: int, generator: torch.Generator, dtype=torch.float32) -> Episode:
        """Draw ``batch`` prompts (inputs, then functions, then labels from ``generator``)."""
        n = self.n_context
        x = torch.randn(batch, n + self.n_query, self.d, generator=generator, device=generator.device, dtype=dtype)
        truth = self.sample_function(batch, generator, dtype)
        y = self.labels(x, truth, generator)
        return Episode(x[:, :n], y[:, :n], x[:, n:], y[:, n:], truth=truth)


@dataclass
class LinearFunctions(FunctionClass):
    """f(x) = wᵀx with w ~ N(0, I_d), or k-sparse w (``sparsity`` = k non-zero coordinates)."""

    sparsity: int | None = None

    def __post_init__(self):
        super().__post_init__()
        # w is drawn by LinearRegression's prior (the same k-sparse rule as Garg et al.'s).
        self._prior = LinearRegression(GaussianInputs(self.d), self.n_context, w_sparsity=self.sparsity)

    @property
    def name(self) -> str:
        return "linear" if self.sparsity is None else "sparse-linear"

    @property
    def zero_error(self) -> float:
        return float(self.d if self.sparsity is None else self.sparsity)

    def sample_function(self, batch, generator, dtype=torch.float32):
        return {"w": self._prior.sample_w(batch, generator, dtype)}

    def function(self, x, truth):
        return torch.einsum("btd,bd->bt", x, truth["w"])


@dataclass
class LinearClassification(LinearFunctions):
    """y = sign(wᵀx), w ~ N(0, I_d); judged by the error rate of sign(ŷ)."""

    name = "linear-classification"
    metric = "error_rate"

    @property
    def zero_error(self) -> float:
        return 1.0

    def function(self, x, truth):
        return torch.sign(super().function(x, truth))


@dataclass
class NoisyLinear(LinearFunctions):
    """y = c·(wᵀx + σε), c = √(d/(d + σ²)) so that E[y²] = d (Garg et al.'s renormalised noisy labels)."""

    noise: float = 1.0
    name = "noisy-linear"

    def __post_init__(self):
        super().__post_init__()
        if self.noise < 0:
            raise ConfigError(f"noisy-linear needs noise >= 0, got {self.noise}")

    @property
    def scale(self) -> float:
        """c, the factor that brings E[y²] back to d."""
        return math.sqrt(self.d / (self.d + self.noise**2))

    @property
    def zero_error(self) -> float:
        return float(self.d)

    def function(self, x, truth):
        return self.scale * super().function(x, truth)

    def labels(self, x, truth, generator):
        noise = torch.randn(x.shape[:2], generator=generator, device=generator.device, dtype=x.dtype).to(x)
        return self.function(x, truth) + self.scale * self.noise * noise


@dataclass
class Quadratic(FunctionClass):
    """y = (x⊙x)ᵀw / √3, w ~ N(0, I_d): E[y²] = Σ_i E[x_i⁴]/3 = d."""

    name = "quadratic"

    @property
    def zero_error(self) -> float:
        return float(self.d)

    def sample_function(self, batch, generator, dtype=torch.float32):
        return {"w": torch.randn(batch, self.d, generator=generator, device=generator.device, dtype=dtype)}

    def function(self, x, truth):
        return torch.einsum("btd,bd->bt", x * x, truth["w"]) / math.sqrt(3)


@dataclass
class ReluNetwork(FunctionClass):
    """y = √(2/h) Σ_j v_j relu(u_jᵀx) with u_j ~ N(0, I_d), v_j ~ N(0, 1), j = 1…h.

    E[relu(u_jᵀx)²] = E‖x‖²/2 = d/2, so the √(2/h) factor gives E[y²] = d.
    """

    hidden: int = 100
    name = "relu-net"

    def __post_init__(self):
        super().__post_init__()
        if self.hidden < 1:
            raise ConfigError(f"relu-net needs hidden >= 1, got {self.hidden}")

    @property
    def zero_error(self) -> float:
        return float(self.d)

    def sample_function(self, batch, generator, dtype=torch.float32):
        u = torch.randn(batch, self.hidden, self.d, generator=generator, device=generator.device, dtype=dtype)
        v = torch.randn(batch, self.hidden, generator=generator, device=generator.device, dtype=dtype)
        return {"u": u, "v": v}

    def function(self, x, truth):
        hidden = torch.relu(torch.einsum("btd,bhd->bth", x, truth["u"]))  # (B, T, h)
        return math.sqrt(2 / self.hidden) * torch.einsum("bth,bh->bt", hidden, truth["v"])


@dataclass
class DecisionTree(FunctionClass):
    """A full binary tree of ``depth`` levels on the signs of coordinates (Garg et al.).

    Nodes are numbered as in a heap (root 0, children of i are 2i + 1 and 2i + 2). Internal
    node i tests x_{c_i} > 0 and goes to its right child when true; ``truth["coordinates"]``
    ``(B, 2^depth − 1)`` holds c_i, ``truth["leaves"]`` ``(B, 2^depth)`` the leaf values, N(0, 1).
    """

    depth: int = 4
    name = "decision-tree"

    def __post_init__(self):
        super().__post_init__()
        if self.depth < 1:
            raise ConfigError(f"decision-tree needs depth >= 1, got {self.depth}")

    @property
    def zero_error(self) -> float:
        return 1.0

    def sample_function(self, batch, generator, dtype=torch.float32):
        internal, leaves = 2**self.depth - 1, 2**self.depth
        device = generator.device
        coordinates = torch.randint(self.d, (batch, internal), generator=generator, device=device)
        values = torch.randn(batch, leaves, generator=generator, device=device, dtype=dtype)
        return {"coordinates": coordinates, "leaves": values}

    def function(self, x, truth):
        batch, t, _ = x.shape
        node = torch.zeros(batch, t, dtype=torch.long, device=x.device)
        for _ in range(self.depth):
            coordinate = truth["coordinates"].gather(1, node)  # (B, T): the coordinate each point tests
            right = x.gather(2, coordinate[..., None])[..., 0] > 0
            node = 2 * node + 1 + right.long()
        return truth["leaves"].gather(1, node - (2**self.depth - 1))


CLASSES = {
    "linear": lambda d, n, **kw: LinearFunctions(d, n, **kw),
    "sparse-linear": lambda d, n, sparsity=3, **kw: LinearFunctions(d, n, sparsity=min(sparsity, d), **kw),
    "linear-classification": LinearClassification,
    "noisy-linear": NoisyLinear,
    "quadratic": Quadratic,
    "relu-net": ReluNetwork,
    "decision-tree": DecisionTree,
}
"""Constructors by name: ``CLASSES[name](d, n_context, **parameters)``. A sparse class drawn at
d < k (an early curriculum stage) keeps all d coordinates."""


def function_class(name: str, d: int, n_context: int, **parameters: Any) -> FunctionClass:
    """Build the class ``name`` (a key of :data:`CLASSES`) with its own ``parameters`` (e.g.
    ``sparsity=3``, ``noise=1.0``, ``hidden=100``, ``depth=4``); bad names or keys raise
    :class:`ConfigError`."""
    if name not in CLASSES:
        raise ConfigError(f"unknown function class {name!r}; choose from {', '.join(CLASSES)}")
    try:
        return CLASSES[name](d, n_context, **parameters)
    except TypeError as err:
        raise ConfigError(f"bad parameters for {name}: {err}") from None
