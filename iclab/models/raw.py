"""Transformers built by hand to run learning algorithms: Akyürek et al.'s constructions (docs/papers.md §3).

Akyürek et al. (ICLR 2023, §3) prove that a transformer can run one-pass SGD on linear regression with O(d)
hidden size and a constant number of layers per example, and ridge regression, updated one example at a time
by the Sherman–Morrison formula, with O(d²) hidden size and a constant number of layers per example. Their
proof composes four read-arithmetic-write operations, each one transformer sublayer: ``mov`` (copy entries of
one token to another: attention), ``mul`` (products of entries: a GELU feed-forward layer), ``div`` (divide by
an entry: a layer normalisation) and ``aff`` (affine maps). This module builds such transformers with our own
weights, in float64:

- **state**: each token is a vector of named slots (:class:`Layout`): a constant 1, its position p and p², its
  input x and label y (0 for the query), and the algorithm's working memory;
- **mov**, :func:`move`: one attention head whose query is fixed and whose key is (p, p²), so that the score
  −β(p − i)² + const picks token i; every token reads example i's (x, y);
- **mul** and **aff**, :func:`feed_forward`: GELU(u) = u/2 + u²/√(2π) + O(u⁴), so
  GELU(c(a + b)) − GELU(ca) − GELU(cb) = 2c²ab/√(2π) + O(c⁴): three hidden units give a·b to a relative
  error of order c²(a² + b²) (c = 1e-6 by default), plus float64 rounding of order 1e-16·|a|/c;
  GELU(u) − GELU(−u) = u in exact arithmetic, so two units give a linear term (and clear a slot for reuse,
  to rounding);
- **div**, :func:`divide`: the layer normalisation of [εa, b, −εa, −b] (mean 0) is
  [εa, b, −εa, −b]·√(k + 1)/√(ε²‖a‖² + b²), so its first block, scaled, is a/|b| to a relative error of
  order ε²‖a‖²/b² (here b = 1 + xᵀAx ≥ 1). The normalisation reads a linear map of the state, as inside a
  feed-forward sublayer, not the whole residual stream.

Every sublayer is residual (h ← h + sublayer(h)), and the prediction is read from the query token (the last)'s
``pred`` slot. :func:`sgd_transformer` and :func:`ridge_transformer` are the two programs;
``iclab.learners.OnePassSGD`` and ``iclab.learners.Ridge`` compute what they should.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ConfigError

PRODUCT_SCALE = 1e-6  # c of the GELU products: small for the Taylor error, large enough for float64 rounding
DIVISION_SCALE = 1e-6  # ε of the layer-norm division
SHARPNESS = 60.0  # β of the position-picking attention: weight e^-60 on the neighbours of the picked token
_GELU_CURVATURE = 2.0 / math.sqrt(2.0 * math.pi)  # GELU''(0)


class Layout:
    """Named slots of a token's state, in order; ``width`` is their total size."""

    def __init__(self, **sizes: int):
        self.slots: dict[str, range] = {}
        offset = 0
        for name, size in sizes.items():
            self.slots[name] = range(offset, offset + size)
            offset += size
        self.width = offset

    def index(self, name: str, i: int = 0) -> int:
        """The state coordinate of entry ``i`` of slot ``name``."""
        return self.slots[name][i]

    def read(self, name: str, i: int = 0) -> torch.Tensor:
        """The linear functional (a row of the state's width) that reads entry ``i`` of slot ``name``."""
        row = torch.zeros(self.width, dtype=torch.float64)
        row[self.index(name, i)] = 1.0
        return row


class Attention(nn.Module):
    """One residual softmax attention head: h ← h + softmax(QKᵀ)V over every token of the prompt."""

    def __init__(self, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor):
        super().__init__()
        self.w_q, self.w_k, self.w_v = nn.Parameter(w_q), nn.Parameter(w_k), nn.Parameter(w_v)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        scores = (h @ self.w_q.T) @ (h @ self.w_k.T).transpose(1, 2)
        return h + torch.softmax(scores, dim=-1) @ (h @ self.w_v.T)


class FeedForward(nn.Module):
    """A residual feed-forward sublayer without biases (the state's constant slot gives them):
    h ← h + W_out σ(W_in h), with σ = GELU, or with ``normalise`` the layer normalisation of the read
    (no gain, bias or ε)."""

    def __init__(self, w_in: torch.Tensor, w_out: torch.Tensor, normalise: bool = False):
        super().__init__()
        self.w_in, self.w_out, self.normalise = nn.Parameter(w_in), nn.Parameter(w_out), normalise

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        read = h @ self.w_in.T
        hidden = F.layer_norm(read, read.shape[-1:], eps=0.0) if self.normalise else F.gelu(read)
        return h + hidden @ self.w_out.T


def move(layout: Layout, source: list[str], target: list[str], position: int) -> Attention:
    """``mov``: every token adds token ``position``'s slots ``source`` into its slots ``target`` (same sizes).

    Query (2βi, −β) from the constant slot, key (p, p²): the score 2βip − βp² = −β(p − i)² + βi² peaks at
    p = i, with weight e^{−β} on each neighbour."""
    w_q = torch.zeros(2, layout.width, dtype=torch.float64)
    w_q[0, layout.index("one")] = 2.0 * SHARPNESS * position
    w_q[1, layout.index("one")] = -SHARPNESS
    w_k = torch.zeros(2, layout.width, dtype=torch.float64)
    w_k[0, layout.index("position", 0)] = 1.0
    w_k[1, layout.index("position", 1)] = 1.0
    w_v = torch.zeros(layout.width, layout.width, dtype=torch.float64)
    for src, dst in zip(source, target, strict=True):
        for a, b in zip(layout.slots[src], layout.slots[dst], strict=True):
            w_v[b, a] = 1.0
    return Attention(w_q, w_k, w_v)


def feed_forward(
    layout: Layout,
    products: Sequence[tuple[float, torch.Tensor, torch.Tensor, int]] = (),
    linear: Sequence[tuple[float, torch.Tensor, int]] = (),
    scale: float = PRODUCT_SCALE,
) -> FeedForward:
    """``mul`` and ``aff`` in one sublayer: adds coef·(aᵀh)(bᵀh) for each ``(coef, a, b, out)`` of ``products``
    and coef·(aᵀh) for each ``(coef, a, out)`` of ``linear`` to coordinate ``out`` of the state."""
    rows, columns = [], []

    def unit(row: torch.Tensor, out: int, weight: float) -> None:
        column = torch.zeros(layout.width, dtype=torch.float64)
        column[out] = weight
        rows.append(row)
        columns.append(column)

    for coef, a, b, out in products:
        weight = coef / (_GELU_CURVATURE * scale**2)
        unit(scale * (a + b), out, weight)
        unit(scale * a, out, -weight)
        unit(scale * b, out, -weight)
    for coef, a, out in linear:
        unit(a, out, coef)  # GELU(u) − GELU(−u) = u
        unit(-a, out, -coef)
    return FeedForward(torch.stack(rows), torch.stack(columns, dim=1))


def clear(layout: Layout, names: list[str]) -> list[tuple[float, torch.Tensor, int]]:
    """The linear terms that zero the slots ``names`` (working memory reused by the next example)."""
    return [
        (-1.0, layout.read(name, i), layout.index(name, i)) for name in names for i in range(len(layout.slots[name]))
    ]


def divide(layout: Layout, numerator: str, denominator: torch.Tensor, out: str, scale: float = DIVISION_SCALE):
    """``div``: adds slot ``numerator`` / (``denominator``ᵀh) into slot ``out``, for a positive denominator."""
    k = len(layout.slots[numerator])
    w_in = torch.zeros(2 * k + 2, layout.width, dtype=torch.float64)
    for i in range(k):
        w_in[i, layout.index(numerator, i)] = scale
        w_in[k + 1 + i, layout.index(numerator, i)] = -scale
    w_in[k], w_in[2 * k + 1] = denominator, -denominator
    w_out = torch.zeros(layout.width, 2 * k + 2, dtype=torch.float64)
    for i in range(k):
        w_out[layout.index(out, i), i] = 1.0 / (scale * math.sqrt(k + 1))
    return FeedForward(w_in, w_out, normalise=True)


class RawTransformer(nn.Module):
    """A hand-built transformer over tokens [x; y] (the query's y = 0), float64, no training.

    ``forward(tokens)`` with ``tokens`` ``(B, T, d + 1)`` returns ``(B,)``: the last token's ``pred`` slot after
    every sublayer. ``per_example`` is the number of sublayers each context example costs."""

    def __init__(self, layout: Layout, d: int, layers: list[nn.Module], per_example: int):
        super().__init__()
        self.layout, self.d, self.per_example = layout, d, per_example
        self.layers = nn.ModuleList(layers)

    @property
    def width(self) -> int:
        """The hidden size: the number of slots of a token's state."""
        return self.layout.width

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The initial state: the constant 1, the position p and p², and the token's x and y."""
        b, t, _ = tokens.shape
        state = tokens.new_zeros(b, t, self.width, dtype=torch.float64)
        position = torch.arange(t, dtype=torch.float64, device=tokens.device)
        state[..., self.layout.index("one")] = 1.0
        state[..., self.layout.index("position", 0)] = position
        state[..., self.layout.index("position", 1)] = position**2
        x, y = self.layout.slots["x"], self.layout.index("y")
        state[..., x.start : x.stop] = tokens[..., : self.d].double()
        state[..., y] = tokens[..., self.d].double()
        return state

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.shape[-1] != self.d + 1:
            raise ConfigError(f"tokens must have d + 1 = {self.d + 1} features, got {tokens.shape[-1]}")
        state = self.embed(tokens)
        for layer in self.layers:
            state = layer(state)
        return state[:, -1, self.layout.index("pred")]


def _dot(layout: Layout, a: str, b: str, out: str, coef: float = 1.0) -> list:
    """The products coef·Σ_j a_j b_j added into slot ``out``."""
    return [(coef, layout.read(a, j), layout.read(b, j), layout.index(out)) for j in range(len(layout.slots[a]))]


def _check(d: int, n_examples: int) -> None:
    if d < 1 or n_examples < 0:
        raise ConfigError(f"a construction needs d >= 1 and n_examples >= 0, got {d}, {n_examples}")


def sgd_transformer(d: int, n_examples: int, lr: float, lam: float = 0.0) -> RawTransformer:
    """One pass of SGD from w = 0 over the first ``n_examples`` tokens, w ← w − lr·(x(xᵀw − y) + λw), then
    the prediction wᵀx of the last token (the query): ``OnePassSGD(lr, lam)``. Hidden size 3d + 7, three
    sublayers per example: mov (x_i, y_i), mul (s = x_iᵀw), mul and aff (the step; the memory cleared)."""
    _check(d, n_examples)
    lay = Layout(one=1, position=2, x=d, y=1, w=d, xr=d, yr=1, s=1, pred=1)
    layers: list[nn.Module] = []
    for i in range(n_examples):
        layers.append(move(lay, ["x", "y"], ["xr", "yr"], i))
        layers.append(feed_forward(lay, _dot(lay, "xr", "w", "s")))
        residual = lay.read("s") - lay.read("yr")
        step = [(-lr, lay.read("xr", j), residual, lay.index("w", j)) for j in range(d)]
        decay = [(-lr * lam, lay.read("w", j), lay.index("w", j)) for j in range(d)] if lam else []
        layers.append(feed_forward(lay, step, decay + clear(lay, ["xr", "yr", "s"])))
    layers.append(feed_forward(lay, _dot(lay, "w", "x", "pred")))
    return RawTransformer(lay, d, layers, per_example=3)


def _matvec(layout: Layout, d: int, vector: str, out: str) -> list:
    """The products A·``vector`` (A the d × d slot ``a``, row-major) added into slot ``out``."""
    return [
        (1.0, layout.read("a", r * d + s), layout.read(vector, s), layout.index(out, r))
        for r in range(d)
        for s in range(d)
    ]


def ridge_transformer(d: int, n_examples: int, lam: float) -> RawTransformer:
    """Ridge regression w = (XᵀX + λI)⁻¹Xᵀy on the first ``n_examples`` tokens, then wᵀx of the last token:
    ``Ridge(lam)``. A = (Σ x_i x_iᵀ + λI)⁻¹ starts at I/λ and takes one Sherman–Morrison update per example,
    A ← A − (Ax)(Ax)ᵀ/(1 + xᵀAx), while b = Σ y_i x_i accumulates; hidden size d² + 5d + 7, five sublayers per
    example: mov (x_i, y_i), mul (u = Ax_i), mul (c = x_iᵀu; b += y_i x_i), div (v = u/(1 + c)),
    mul and aff (A −= vuᵀ; the memory cleared)."""
    if lam <= 0:
        raise ConfigError(f"the ridge construction needs lam > 0, got {lam}")
    _check(d, n_examples)
    lay = Layout(one=1, position=2, x=d, y=1, a=d * d, b=d, xr=d, yr=1, u=d, c=1, v=d, pred=1)
    start = [(1.0 / lam, lay.read("one"), lay.index("a", r * d + r)) for r in range(d)]
    layers: list[nn.Module] = [feed_forward(lay, linear=start)]
    for i in range(n_examples):
        layers.append(move(lay, ["x", "y"], ["xr", "yr"], i))
        layers.append(feed_forward(lay, _matvec(lay, d, "xr", "u")))
        moment = [(1.0, lay.read("yr"), lay.read("xr", r), lay.index("b", r)) for r in range(d)]
        layers.append(feed_forward(lay, _dot(lay, "xr", "u", "c") + moment))
        layers.append(divide(lay, "u", lay.read("one") + lay.read("c"), "v"))
        update = [
            (-1.0, lay.read("v", r), lay.read("u", s), lay.index("a", r * d + s)) for r in range(d) for s in range(d)
        ]
        layers.append(feed_forward(lay, update, clear(lay, ["xr", "yr", "u", "c", "v"])))
    # The prediction xᵀAb: first Ab into the (now free) u slot, then its product with the query's x.
    layers.append(feed_forward(lay, _matvec(lay, d, "b", "u")))
    layers.append(feed_forward(lay, _dot(lay, "u", "x", "pred")))
    return RawTransformer(lay, d, layers, per_example=5)


def construction_prefix_predictions(build, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """``(B, N)``: column k is the prediction at x_{k+1} of the construction ``build(k)`` (a
    :class:`RawTransformer` for k context examples) given the first k examples, as a learner's
    ``predict_prefixes``; column 0 is 0, as for every learner from w = 0."""
    xs, ys = xs.double(), ys.double()
    columns = [torch.zeros_like(ys[:, 0])]
    for k in range(1, xs.shape[1]):
        context = torch.cat([xs[:, :k], ys[:, :k, None]], dim=-1)
        query = torch.cat([xs[:, k : k + 1], torch.zeros_like(ys[:, :1, None])], dim=-1)
        with torch.no_grad():
            columns.append(build(k)(torch.cat([context, query], dim=1)))
    return torch.stack(columns, dim=1)
