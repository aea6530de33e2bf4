"""OLS on every prefix, loss by prefix length, the curriculum, and a short transformer run."""

import pytest
import torch

from iclab.config import ConfigError
from iclab.curriculum import Curriculum, CurriculumPrompts
from iclab.learners import Averaging, LeastSquares
from iclab.losses import batch_loss, prompt_losses
from iclab.metrics import loss_by_prefix
from iclab.models.transformer import GPTConfig, GPTTransformer
from iclab.prompts import InterleavedFormat
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression, linear_regression_from_config
from iclab.train import TrainConfig, data_source, train

# Every learner's prefix predictions against a per-prefix loop: tests/test_learner_contract.py.


def test_ols_prefixes_are_exact_once_k_reaches_d():
    episode = LinearRegression(GaussianInputs(4), n_context=8).sample(32, generator(0), dtype=torch.float64)
    pred = LeastSquares().predict_prefixes_episode(episode)
    torch.testing.assert_close(pred[:, 4:], episode.ys[:, 4:], rtol=0, atol=1e-9)
    assert (pred[:, 1:4] - episode.ys[:, 1:4]).abs().mean() > 0.1


def test_mse_over_d_and_bootstrap_band():
    pred, target = torch.zeros(4000, 3), torch.randn(4000, 3) * torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(prompt_losses(pred, target, "mse_over_d", d=5), prompt_losses(pred, target) / 5)
    with pytest.raises(ConfigError):
        prompt_losses(pred, target, "mse_over_d")
    out = loss_by_prefix(pred, target, "mse_over_d", d=5, n_boot=400)
    torch.testing.assert_close(out["mean"], target.double().pow(2).mean(0) / 5)
    # (y²/d) has standard deviation √2·σ²/d, so the 5–95% band of its mean is ±1.645·√2·σ²/(d·√B).
    half_width = 1.645 * 2**0.5 * torch.tensor([1.0, 4.0, 9.0], dtype=torch.float64) / (5 * 4000**0.5)
    torch.testing.assert_close((out["high"] - out["low"]) / 2, half_width, rtol=0.2, atol=0)
    assert (out["low"] < out["mean"]).all() and (out["mean"] < out["high"]).all()


def test_curriculum_schedule_and_truncated_prompts():
    c = Curriculum(d_start=2, d_end=4, n_start=3, n_end=6, d_step=1, n_step=2, every=10)
    assert [c.at(s) for s in (0, 9, 10, 25, 1000)] == [(2, 3), (2, 3), (3, 5), (4, 6), (4, 6)]
    make = lambda d, n: linear_regression_from_config({"d": d, "n_context": n})
    prompt = CurriculumPrompts(make, InterleavedFormat(), c).batch(0, 0, "cpu", 8)
    assert prompt.tokens.shape == (8, 6, 5) and prompt.targets.shape == (8, 3)
    assert not prompt.tokens[:, :, 2:4].any()  # coordinates beyond d = 2 are zero
    with pytest.raises(ConfigError):
        Curriculum(d_start=5, d_end=4, n_start=1, n_end=2)


def test_a_curriculum_block_runs_towards_the_tasks_own_size():
    block = {"d_start": 3, "d_step": 1, "every": 200}
    assert Curriculum.towards(block, 5, 11) == Curriculum(3, 5, 11, 11, 1, 2, 200)  # N fixed unless n_start is set
    assert Curriculum.towards({**block, "n_start": 5, "n_step": 3}, 5, 11) == Curriculum(3, 5, 5, 11, 1, 3, 200)
    assert Curriculum.towards({**block, "n_start": 15}, 2, 11) == Curriculum(2, 2, 11, 11, 1, 2, 200)  # starts clipped
    with pytest.raises(ConfigError, match="d_end"):
        Curriculum.towards({**block, "d_end": 20, "n_end": 11}, 5, 11)


def test_short_training_on_d3_beats_averaging():
    task = LinearRegression(GaussianInputs(3), n_context=8)
    fmt = InterleavedFormat()
    cfg = TrainConfig(steps=600, batch_size=64, lr=2e-3, schedule="cosine", warmup=20, log_every=100)
    make = lambda g: GPTTransformer(GPTConfig(4, n_layers=2, n_heads=2, width=32, max_tokens=16), g)
    model = train(make, data_source(task, fmt), cfg, seeds=[0], progress=False).models[0]
    episode = task.sample(4000, generator(0, "test"))
    with torch.no_grad():
        gpt = model(fmt.encode(episode).tokens, 8).double()
    averaging = Averaging().predict_prefixes_episode(episode)
    target = episode.ys.double()
    # Mean over the prefixes k = 1…7 (k = 0 is 0 for every predictor). Averaging's 1/k·Σyx is far
    # off at small k; 600 steps do not yet get past the transformer's early plateau at large k.
    assert (gpt - target)[:, 1:].pow(2).mean() < 0.8 * (averaging - target)[:, 1:].pow(2).mean()


def test_gpt_linear_smoke(tmp_path):
    from iclab import api

    result = api.run("gpt-linear", "smoke", seeds=2, out=tmp_path / "run", progress=False)
    assert [c["id"] for c in result.claims] == ["tracks-ols", "beats-averaging-and-3nn", "min-norm-below-d"]
    assert {"mse_over_d", "mse_over_d_p05", "mse_over_d_p95", "spd_ols"} <= set(result.metrics.metric)
    figures = {"loss_by_prefix.png", "training_curve.png"}
    assert {p.name for p in (tmp_path / "run" / "figures").iterdir()} == figures | {"seed1"}  # seed 1's apart


def test_gpt_linear_paper_scale_keeps_gpt2_mlp():
    """The quick recipe's narrower MLP (a cheaper step) must not leak into Garg et al.'s architecture."""
    from iclab.experiments.gpt_linear import EXPERIMENT

    quick, paper = EXPERIMENT.resolve("quick"), EXPERIMENT.resolve("paper")
    assert quick["model"]["mlp_ratio"] == 2.0
    shape = {k: paper["model"][k] for k in ("n_layers", "n_heads", "width", "mlp_ratio")}
    assert shape == {"n_layers": 12, "n_heads": 8, "width": 256, "mlp_ratio": 4.0}


@pytest.mark.parametrize("loss", ["mse", "half_mse", "mse_over_d", "half_sse"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_batch_loss_is_the_mean_prompt_loss(loss, dtype):
    g = torch.Generator().manual_seed(3)
    prediction, target = (torch.randn(7, 4, 3, generator=g, dtype=dtype) for _ in range(2))
    d = 5 if loss == "mse_over_d" else None
    torch.testing.assert_close(
        batch_loss(prediction, target, loss, d), prompt_losses(prediction, target, loss, d).mean()
    )


def test_prefix_queries_of_a_paired_model_are_its_predictions_from_each_prefix():
    from dataclasses import replace

    from iclab.metrics import prefix_query_predictions
    from iclab.models import LinearSelfAttention
    from iclab.prompts import PairedFormat
    from iclab.shifts import shift
    from iclab.tasks import GaussianInputs, LinearRegression

    task = LinearRegression(GaussianInputs(3), n_context=6)
    model = LinearSelfAttention(4, init_scale=0.3, generator=generator(0)).double()
    episode = shift("orthogonal")(task.sample(5, generator(1), torch.float64), task, None)  # queries ≠ inputs
    got = prefix_query_predictions(model, episode, PairedFormat())
    assert got.shape == (5, 3) and not got[:, 0].any()  # K = min(N, d); no example: 0
    for k in (1, 2):
        prompt = PairedFormat().encode(
            replace(
                episode,
                xs=episode.xs[:, :k],
                ys=episode.ys[:, :k],
                x_query=episode.x_query[:, k : k + 1],
                y_query=episode.y_query[:, k : k + 1],
            )
        )
        torch.testing.assert_close(got[:, k], model(prompt.tokens, k)[:, 0])


def _gpt_curves(d: int, n: int, at_2d: dict, half_band: float) -> dict:
    """gpt-linear's curves by prefix: OLS exact from k = d, each seed's transformer 0.01 above it at every k but k = 2d,
    where it is ``at_2d[seed]`` with a 90% band reaching ``half_band`` above it (and 0.001 below), averaging and 3-NN
    far above."""
    ols = torch.cat([torch.linspace(1.0, 0.2, d), torch.zeros(n - d)])
    curves = {name: {"mean": ols + 1.0} for name in ("averaging", "3-nn")} | {"ols": {"mean": ols}}
    for seed, error in at_2d.items():
        gpt = ols + 0.01
        if n > 2 * d:
            gpt[2 * d] = error
        curves["gpt", seed] = {"mean": gpt, "low": gpt - 0.001, "high": gpt + half_band}
    return curves


def test_tracks_ols_reads_the_papers_number_at_2d_where_the_prompts_reach_it():
    """Garg et al. Fig 2: 0.02 at k = d and 0.0006 at k = 2d. Prompts that reach k = 2d add the second number, with
    0.03 and the run's upper half-band, on every seed; shorter prompts judge the gap alone."""
    from iclab.experiments.gpt_linear import DEFAULTS, _tracks_ols_claim

    config, d, seeds = {**DEFAULTS, "eval_prompts": 100}, 4, (0, 1)
    short = _tracks_ols_claim(config, seeds, _gpt_curves(d, 2 * d, {0: 0.0, 1: 0.0}, 0.0), d, 2 * d)
    assert short.holds and short.clauses is None and short.measured == pytest.approx(0.01)
    n = 2 * d + 3  # k = 2d is not the last prefix
    for errors, half_band, holds in (
        ({0: 0.03, 1: 0.0}, 0.001, True),
        ({0: 0.0320, 1: 0.0}, 0.0, False),  # above 0.0006 + 0.03 on seed 0 alone
        ({0: 0.0320, 1: 0.0}, 0.002, True),  # within the run's upper half-band
    ):
        claim = _tracks_ols_claim(config, seeds, _gpt_curves(d, n, errors, half_band), d, n)
        assert claim.holds is holds and claim.clauses == {"every k": True, "k = 2d": holds}
        assert claim.measured["k = 2d"][0] == {
            "error": pytest.approx(errors[0]),
            "allowed": pytest.approx(0.0306 + half_band),
        }
    # 0.045 past OLS at k = 2d passes the gap of every k (0.05) but not the paper's number there.
    claim = _tracks_ols_claim(config, seeds, _gpt_curves(d, n, {0: 0.045, 1: 0.0}, 0.001), d, n)
    assert claim.clauses == {"every k": True, "k = 2d": False}
    # A gap above 0.05 at some k fails the first clause, whatever k = 2d does.
    curves = _gpt_curves(d, n, {0: 0.0, 1: 0.0}, 0.001)
    curves["gpt", 1]["mean"][1] += 0.1
    assert _tracks_ols_claim(config, seeds, curves, d, n).clauses == {"every k": False, "k = 2d": True}
