"""The bootstrap of a mean, band rows, attention patterns and the language-model metrics of iclab.metrics."""

import math

import pytest
import torch
from torch import nn

from iclab.data import pack_blocks
from iclab.metrics import (
    attention_patterns,
    band_rows,
    diagonal_mass,
    ilwd,
    loss_by_prefix,
    mean_band,
    next_token_loss,
    normalised_errors,
    seed_band,
    uniform_diagonal_mass,
)
from iclab.models import GPTConfig, GPTTransformer
from iclab.rng import generator
from iclab.tasks import function_class


def test_mean_band_is_the_mean_with_the_spread_of_its_bootstrap():
    values = torch.randn(4000, 3, generator=generator(1)) * torch.tensor([1.0, 2.0, 3.0])
    out = mean_band(values, n_boot=400, seed=2)
    torch.testing.assert_close(out["mean"], values.double().mean(0))
    # the 5–95% band of a mean of B draws of spread σ is ±1.645·σ/√B
    half_width = 1.645 * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64) / 4000**0.5
    torch.testing.assert_close((out["high"] - out["low"]) / 2, half_width, rtol=0.2, atol=0)
    assert (out["low"] < out["mean"]).all() and (out["mean"] < out["high"]).all()
    # any trailing shape; the same resamplings as the loss by prefix of the same errors
    grid = mean_band(values.view(4000, 3, 1), n_boot=50)
    assert grid["low"].shape == (3, 1)
    errors = loss_by_prefix(values, torch.zeros_like(values), n_boot=50)
    torch.testing.assert_close(mean_band(values.double().pow(2), n_boot=50)["high"], errors["high"], rtol=0, atol=0)


def test_seed_band_holds_the_spread_between_seeds_as_well_as_the_prompts():
    g = generator(3)
    offsets = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0])[:, None, None]  # five seeds that differ, on 2000 prompts
    values = offsets + 0.01 * torch.randn(5, 2000, 2, generator=g)
    out = seed_band(values, n_boot=2000, seed=1)
    torch.testing.assert_close(out["mean"], values.double().mean((0, 1)))
    # the prompts' noise is tiny: the band is the bootstrap of the mean of five offsets, whose spread is
    # σ/√5 with σ = √2 (the offsets' population spread): ±1.645·√(2/5) ≈ ±1.04 around 2
    torch.testing.assert_close(
        (out["high"] - out["low"]) / 2, torch.full((2,), 1.645 * (2 / 5) ** 0.5, dtype=torch.float64), rtol=0.1, atol=0
    )
    alike = values[:1].expand(5, -1, -1)  # five identical seeds: only the prompts' band is left
    torch.testing.assert_close(
        seed_band(alike, n_boot=2000)["high"], mean_band(values[0], n_boot=2000)["high"], rtol=0, atol=2e-4
    )


def test_error_rate_band_is_the_bootstrap_of_the_share_of_wrong_signs():
    task = function_class("linear-classification", 3, 6)
    target = torch.tensor([[1.0, -1.0, 1.0], [1.0, 1.0, -1.0]]).repeat(50, 1)  # (100, 3)
    prediction = torch.tensor([[0.5, 0.0, -2.0], [1.0, -1.0, -3.0]]).repeat(
        50, 1
    )  # right, tie, wrong / right, wrong, right
    out = normalised_errors(task, prediction, target, n_boot=30)
    torch.testing.assert_close(out["mean"], torch.tensor([0.0, 0.75, 0.5], dtype=torch.float64))
    assert out["low"][0] == out["high"][0] == 0


def test_ilwd_is_the_mean_squared_weight_distance_over_d():
    w_a, w_b = torch.randn(50, 4, 3, generator=generator(0)), torch.randn(50, 4, 3, generator=generator(1))
    out = ilwd(w_a, w_b, n_boot=20)
    torch.testing.assert_close(out["mean"], (w_a.double() - w_b.double()).pow(2).sum(-1).mean(0) / 3)


def test_band_rows_name_the_curve_and_its_5_and_95_percent_band():
    band = {"mean": torch.tensor([1.0, 2.0]), "low": torch.tensor([0.5, 1.5]), "high": torch.tensor([1.5, 2.5])}
    assert band_rows(band, "mse") == [
        {"n": 0, "metric": "mse", "value": 1.0},
        {"n": 0, "metric": "mse_p05", "value": 0.5},
        {"n": 0, "metric": "mse_p95", "value": 1.5},
        {"n": 1, "metric": "mse", "value": 2.0},
        {"n": 1, "metric": "mse_p05", "value": 1.5},
        {"n": 1, "metric": "mse_p95", "value": 2.5},
    ]


def _lm(vocab=30, block=12):
    return GPTTransformer(
        GPTConfig(None, 2, 2, 16, max_tokens=block, stride=1, attention="math", vocab_size=vocab, tied_output=True),
        generator(0),
    )


class _Unigram(nn.Module):
    """Predicts the same next-token distribution p at every position."""

    def __init__(self, p: torch.Tensor):
        super().__init__()
        self.log_p = nn.Parameter(p.log())

    def forward(self, tokens, n_context):
        return self.log_p.expand(*tokens.shape, -1)  # (B, T, V)


def test_next_token_loss_of_a_unigram_model_is_the_unigram_entropy_by_hand():
    stream = torch.randint(0, 7, (1001,), generator=generator(3)) ** 2 % 7  # a skewed distribution over 7 ids
    blocks = pack_blocks(stream, 10)  # (100, 11): targets are stream[1:1001]
    targets = stream[1:1001].tolist()
    counts = [targets.count(v) for v in range(7)]
    p = torch.tensor([c / len(targets) for c in counts], dtype=torch.float64)
    by_hand = -sum(c * math.log(c / len(targets)) for c in counts if c) / len(targets)
    assert next_token_loss(_Unigram(p.clamp(min=1e-300)), blocks, batch_size=7) == pytest.approx(by_hand, rel=1e-9)
    # any other fixed distribution does worse on the same targets (cross-entropy ≥ entropy)
    assert next_token_loss(_Unigram(torch.full((7,), 1 / 7, dtype=torch.float64)), blocks, 100) > by_hand


def test_diagonal_mass_of_uniform_attention_is_the_mean_of_one_over_i_plus_one():
    model = _lm()
    with torch.no_grad():
        for layer in model.layers:  # zero queries and keys: every causal row is uniform
            layer.attn.qkv.weight[:32].zero_()
            layer.attn.qkv.bias[:32].zero_()
    blocks = torch.randint(0, 30, (5, 13), generator=generator(4))
    mass = diagonal_mass(model, blocks)  # (L, H)
    torch.testing.assert_close(mass, torch.full((2, 2), uniform_diagonal_mass(12)))
    assert uniform_diagonal_mass(12) == pytest.approx(sum(1 / n for n in range(2, 13)) / 11)


def test_diagonal_mass_reads_the_patterns_of_the_forward_pass():
    model = _lm()
    tokens = torch.randint(0, 30, (3, 12), generator=generator(5))
    patterns = attention_patterns(model, tokens, 12)  # (L, B, H, T, T)
    assert patterns.shape == (2, 3, 2, 12, 12) and not patterns.requires_grad
    torch.testing.assert_close(patterns.sum(-1), torch.ones(2, 3, 2, 12))
    blocks = torch.cat([tokens, tokens[:, :1]], 1)  # (3, 13): the inputs are the tokens
    expected = torch.stack([patterns[layer].diagonal(dim1=-2, dim2=-1)[..., 1:].mean((0, 2)) for layer in range(2)])
    torch.testing.assert_close(diagonal_mass(model, blocks), expected)


def test_prompt_errors_are_what_evaluate_averages_and_chunks_are_streams_of_their_own():
    from iclab.learners import LeastSquares, ZeroPredictor
    from iclab.metrics import evaluate, prompt_errors
    from iclab.tasks import linear_regression_from_config

    task = linear_regression_from_config({"d": 3, "n_context": 5})
    sources = {"ols": LeastSquares(), "zero": ZeroPredictor()}
    errors = prompt_errors(sources, task, 300, seed=1, chunk=100)
    assert errors["zero"].shape == (300,) and errors["zero"].dtype == torch.float64
    means = evaluate(sources, task, 300, seed=1, chunk=100)
    assert means["zero"] == (errors["zero"].mean().item(), (errors["zero"].std() / 300**0.5).item())
    second = task.sample(100, generator(1, "eval", 1))  # chunk 1: the zero predictor's error is y²
    torch.testing.assert_close(errors["zero"][100:200], second.y_query.double().pow(2).mean(1))


def test_trimmed_mean_leaves_out_the_largest_values():
    from iclab.metrics import trimmed_mean

    values = torch.cat([torch.ones(999), torch.tensor([1e12])])
    assert trimmed_mean(values, 0.001) == 1.0  # the one exploding value is the 0.1% left out
    assert trimmed_mean(values, 0.0) == pytest.approx(values.mean().item())
    with pytest.raises(ValueError, match="drop"):
        trimmed_mean(values, 1.0)
