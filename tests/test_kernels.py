"""The template matrix N of a random-feature kernel (iclab.theory.kernels) on feature maps whose N is known."""

import math

import pytest
import torch

from iclab.models import OneHotMLP
from iclab.tasks.templates import template_task
from iclab.theory import condition_number, template_matrix

TASK = template_task("same-different", 20, test_size=20)  # templates αα (+1) and αβ (−1)


def _pattern(tokens: torch.Tensor) -> torch.Tensor:
    """Which positions of a same/different string hold equal symbols, one-hot: [1, 0] for αα, [0, 1] for αβ."""
    same = (tokens[:, 0] == tokens[:, 1]).double()
    return torch.stack([same, 1 - same], dim=1)


def test_a_deterministic_symbol_free_feature_map_gives_its_exact_matrix():
    # φ(x) = the template's one-hot pattern (F = 2): N_ts = e_t·e_s/F = δ_ts/2 with no Monte Carlo error.
    result = template_matrix(lambda tokens, g: _pattern(tokens), TASK, draws=5, seed=0, strings=4)
    torch.testing.assert_close(result.matrix, torch.eye(2, dtype=torch.float64) / 2)
    assert (result.stderr == 0).all() and result.smallest_stderr == 0 and result.draws == 5
    assert result.condition == pytest.approx(1.0) and result.condition_band == pytest.approx((1.0, 1.0))
    assert result.smallest == pytest.approx(0.5)


def _shifted(tokens: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """φ_θ(x) = e(x) + w_θ with w_θ ~ N(0, I_F) per initialisation: N = E(e_t + w)·(e_s + w)/F = δ_ts/F + 1."""
    return _pattern(tokens) + torch.randn(2, generator=g, dtype=torch.float64)


def test_a_random_feature_map_is_estimated_without_bias_and_its_error_shrinks_with_draws():
    exact = torch.eye(2, dtype=torch.float64) / 2 + 1
    small, large = (template_matrix(_shifted, TASK, draws=draws, seed=1, strings=4) for draws in (100, 400))
    for result in (small, large):
        assert torch.equal(result.matrix, result.matrix.T)
        assert ((result.matrix - exact).abs() <= 4 * result.stderr).all()
        assert torch.linalg.eigvalsh(result.matrix).min() > 0  # N = I/2 + 11ᵀ is positive definite
        low, high = result.condition_band
        assert low <= result.condition <= high
    # Four times the draws: standard errors about halve (the draws are independent).
    ratio = (large.stderr / small.stderr).mean().item()
    assert 0.35 < ratio < 0.7
    assert abs(large.smallest - 0.5) <= 4 * large.smallest_stderr  # the eigenvalue along 1 − 1 is 1/2


def test_the_one_hot_mlps_matrix_is_constant_hence_singular():
    # Strings over disjoint alphabets have orthogonal one-hot inputs, so the MLP's kernel is the same for
    # every pair of templates: N = c·11ᵀ, of rank 1 (the paper's theorem for MLPs).
    make = lambda g: OneHotMLP(TASK.vocab_size, 2, 64, generator=g)
    result = template_matrix(lambda tokens, g: make(g).features(tokens), TASK, draws=80, seed=2, strings=8)
    entries = result.matrix.flatten()
    assert (entries.mean() > 0) and ((entries - entries.mean()).abs() <= 4 * result.stderr.flatten()).all()
    assert abs(result.smallest) <= 3 * result.smallest_stderr  # singular within Monte Carlo error


def test_draws_are_reproducible_from_the_seed():
    a, b = (template_matrix(_shifted, TASK, draws=10, seed=3, strings=2) for _ in range(2))
    assert torch.equal(a.matrix, b.matrix) and a.condition_band == b.condition_band
    assert not torch.equal(a.matrix, template_matrix(_shifted, TASK, draws=10, seed=4, strings=2).matrix)


def test_condition_number():
    matrices = torch.stack(
        [torch.eye(3), torch.diag(torch.tensor([1.0, 2.0, 4.0])), torch.diag(torch.tensor([1.0, 1.0, 0.0]))]
    )
    torch.testing.assert_close(condition_number(matrices), torch.tensor([1.0, 4.0, math.inf]))
