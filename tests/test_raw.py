"""Akyürek et al.'s constructions (iclab.models.raw): each operation, and the SGD and ridge transformers against
the learners and the closed forms, three ways where the maths allows."""

import numpy as np
import pytest
import torch

from iclab.config import ConfigError
from iclab.learners import OnePassSGD, Ridge
from iclab.models.raw import (
    Layout,
    construction_prefix_predictions,
    divide,
    feed_forward,
    move,
    ridge_transformer,
    sgd_transformer,
)
from iclab.rng import generator


def _prompts(batch=64, n=7, d=3, seed=0):
    g = generator(seed, "raw")
    xs = torch.randn(batch, n, d, generator=g, dtype=torch.float64)
    w = torch.randn(batch, d, generator=g, dtype=torch.float64)
    return xs, torch.einsum("bnd,bd->bn", xs, w) + 0.3 * torch.randn(batch, n, generator=g, dtype=torch.float64)


def _state(layout, batch=32, seed=1):
    g = generator(seed, "state")
    state = torch.randn(batch, 5, layout.width, generator=g, dtype=torch.float64) * 3
    state[..., layout.index("one")] = 1.0
    state[..., layout.index("position", 0)] = torch.arange(5, dtype=torch.float64)
    state[..., layout.index("position", 1)] = torch.arange(5, dtype=torch.float64) ** 2
    return state


def test_each_operation_computes_what_it_should():
    lay = Layout(one=1, position=2, a=2, b=1, out=2)
    state = _state(lay)
    state[..., lay.index("b")] = state[..., lay.index("b")].abs() + 0.5  # a positive denominator
    a, b = state[..., lay.slots["a"].start : lay.slots["a"].stop], state[..., lay.index("b")]
    out = lay.slots["out"]
    # mul and aff: out_0 += 2·a_0·a_1 − 3·b, out_1 += a_1·b
    ff = feed_forward(
        lay,
        [(2.0, lay.read("a", 0), lay.read("a", 1), out[0]), (1.0, lay.read("a", 1), lay.read("b"), out[1])],
        [(-3.0, lay.read("b"), out[0])],
    )
    with torch.no_grad():
        got = ff(state) - state
    expected = torch.stack([2 * a[..., 0] * a[..., 1] - 3 * b, a[..., 1] * b], dim=-1)
    assert torch.allclose(got[..., out.start : out.stop], expected, rtol=1e-7, atol=1e-7)
    assert torch.equal(got[..., : out.start], torch.zeros_like(got[..., : out.start]))  # nothing else written
    # div: out += a / b
    with torch.no_grad():
        got = divide(lay, "a", lay.read("b"), "out")(state) - state
    assert torch.allclose(got[..., out.start : out.stop], a / b[..., None], rtol=1e-9)
    # mov: every token adds token 3's a into its out
    with torch.no_grad():
        got = move(lay, ["a"], ["out"], 3)(state) - state
    assert torch.allclose(got[..., out.start : out.stop], a[:, 3:4].expand(-1, 5, -1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lr, lam", [(0.1, 0.0), (0.3, 0.2)])
def test_sgd_transformer_runs_one_pass_sgd(lr, lam):
    xs, ys = _prompts()
    built = construction_prefix_predictions(lambda k: sgd_transformer(3, k, lr, lam), xs, ys)
    assert torch.allclose(built, OnePassSGD(lr, lam).predict_prefixes(xs, ys), rtol=1e-8, atol=1e-9)
    # The same steps written out in numpy, on the whole context.
    x, y, w = xs.numpy(), ys.numpy(), np.zeros((xs.shape[0], 3))
    for i in range(6):
        w = w - lr * (x[:, i] * ((x[:, i] * w).sum(1) - y[:, i])[:, None] + lam * w)
    assert np.allclose(built[:, 6].numpy(), (x[:, 6] * w).sum(1), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("lam", [0.1, 1.0])
def test_ridge_transformer_runs_ridge(lam):
    xs, ys = _prompts()
    built = construction_prefix_predictions(lambda k: ridge_transformer(3, k, lam), xs, ys)
    # The GELU products are good to ~1e-8 of their operands' scale, and A's entries reach 1/λ: 1e-6 absolute.
    assert torch.allclose(built, Ridge(lam).predict_prefixes(xs, ys), rtol=0, atol=1e-6)
    # The closed form (XᵀX + λI)⁻¹Xᵀy on the first 6 examples.
    x, y = xs[:, :6].numpy(), ys[:, :6].numpy()
    w = np.linalg.solve(np.einsum("bni,bnj->bij", x, x) + lam * np.eye(3), np.einsum("bni,bn->bi", x, y)[..., None])
    assert np.allclose(built[:, 6].numpy(), (xs[:, 6].numpy() * w[..., 0]).sum(1), rtol=0, atol=1e-6)


def test_sizes_grow_as_the_paper_states():
    for d in (1, 4, 9):
        for k in (0, 3):
            sgd, ridge = sgd_transformer(d, k, 0.1), ridge_transformer(d, k, 0.5)
            assert sgd.width == 3 * d + 7 and ridge.width == d * d + 5 * d + 7  # O(d) and O(d²)
            assert len(sgd.layers) == sgd.per_example * k + 1  # a constant number of sublayers per example
            assert len(ridge.layers) == ridge.per_example * k + 3


def test_a_construction_refuses_bad_input():
    with pytest.raises(ConfigError, match="lam > 0"):
        ridge_transformer(3, 2, 0.0)
    with pytest.raises(ConfigError, match="d >= 1"):
        sgd_transformer(0, 2, 0.1)
    with pytest.raises(ConfigError, match="d \\+ 1 = 4"):
        sgd_transformer(3, 2, 0.1)(torch.zeros(1, 3, 3))
