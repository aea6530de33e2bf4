import pytest
import torch

from iclab import claims
from iclab.config import ConfigError
from iclab.metrics import evaluate, model_predictor
from iclab.models import LinearSelfAttention, merged_lsa
from iclab.prompts import PairedFormat
from iclab.rng import generator
from iclab.tasks import GaussianInputs, LinearRegression
from iclab.theory import (
    descriptor_optimum,
    gradient_flow,
    infinite_n_solution,
    infinite_n_solution_loss,
    no_descriptor_limit_loss,
)
from iclab.theory.descriptors import embed


def _task(n, **kw):
    return LinearRegression(GaussianInputs(3, mean_scale=1.0, **kw), n_context=n)


def _lsa_loss(model, task, descriptor, n=100_000):
    return evaluate({"m": model_predictor(model, PairedFormat(descriptor))}, task, n, seed=11)["m"]


def test_descriptor_format_row_layout():
    task = _task(4, n_means=3)
    e = task.sample(2, generator(0))
    tokens = PairedFormat("mu").encode(e).tokens
    assert tokens.shape == (2, 5, 3 + 3 + 1)
    torch.testing.assert_close(tokens[:, :4, :3], e.xs)
    torch.testing.assert_close(tokens[:, :, 3:6], e.truth["mu"][:, None].expand(-1, 5, -1))
    torch.testing.assert_close(tokens[:, :4, -1], e.ys)
    assert (tokens[:, 4, -1] == 0).all()
    hot = PairedFormat("mean_index_onehot").encode(e).tokens
    assert hot.shape[-1] == 3 + 3 + 1 and (hot[:, :, 3:6].sum(-1) == 1).all()
    # The one-hot index points at the prompt's mean in the fixed set.
    index = e.truth["mean_index_onehot"].argmax(1)
    torch.testing.assert_close(task.inputs.means[index].float(), e.truth["mu"])


def test_fixed_means_come_from_the_seed():
    a, b, c = (GaussianInputs(3, mean_scale=1.0, n_means=4, means_seed=s).means for s in (0, 0, 1))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("descriptor", [None, "mu"])
def test_optimum_loss_matches_monte_carlo_of_the_lsa_set_to_it(descriptor):
    task = _task(6)
    opt = descriptor_optimum(task, descriptor, mean_draws=100_000)
    mean, stderr = _lsa_loss(merged_lsa(*opt.weights()), task, descriptor)
    # Moments are Monte Carlo over μ only (1e5 draws): allow that error on top of 4 stderr.
    assert abs(mean - opt.loss) < 4 * stderr + 0.005 * opt.loss
    # It is a minimum: perturbing M raises the (same-moment) loss.
    bumped = opt.matrix + 0.05 * torch.randn(opt.matrix.shape, generator=generator(1), dtype=torch.float64)
    assert opt.loss_of(bumped) > opt.loss


def test_one_hot_optimum_is_exact_and_descriptors_help():
    task = _task(8, n_means=4)
    with_hot = descriptor_optimum(task, "mean_index_onehot")
    without = descriptor_optimum(task, None)
    assert "exact" in with_hot.method and with_hot.loss < without.loss
    mean, stderr = _lsa_loss(merged_lsa(*embed(with_hot.matrix)), task, "mean_index_onehot")
    assert abs(mean - with_hot.loss) < 4 * stderr


def test_infinite_n_solution_loss_closed_form_and_one_over_n():
    losses = []
    for n in (10, 40):
        task = _task(n)
        closed = infinite_n_solution_loss(task)
        mean, stderr = _lsa_loss(merged_lsa(*embed(infinite_n_solution(task))), task, "mu")
        assert abs(mean - closed) < 4 * stderr
        losses.append(closed)
    assert losses[0] / losses[1] == pytest.approx(4.0)
    # The one-hot version uses the means matrix to recover μ from the index.
    hot = _task(40, n_means=3)
    matrix = infinite_n_solution(hot, "mean_index_onehot")
    mean, stderr = _lsa_loss(merged_lsa(*embed(matrix)), hot, "mean_index_onehot")
    assert abs(descriptor_optimum(hot, "mean_index_onehot").loss_of(matrix) - mean) < 4 * stderr


def test_no_descriptor_limit_is_approached_from_above():
    limit = no_descriptor_limit_loss(_task(1000))
    finite = descriptor_optimum(_task(1000), None, mean_draws=100_000).loss
    assert limit > 0.1 and finite == pytest.approx(limit, rel=0.02)


def _balanced_start(opt, scale=0.1):
    dim = opt.matrix.shape[0] + 1
    return (
        LinearSelfAttention(dim, init="balanced", init_scale=scale, generator=generator(0, "init")).layers[0].merged()
    )


def test_gradient_flow_converges_and_keeps_the_balance():
    opt = descriptor_optimum(_task(10), "mu", mean_draws=20_000)
    start = _balanced_start(opt)
    flow = gradient_flow(opt, start, steps=15000, record_every=500)
    assert flow.distance[-1] < 1e-3 and flow.loss[-1] == pytest.approx(opt.loss, rel=1e-6)
    assert abs(flow.balance[0]) < 1e-9
    drift = abs(flow.balance[-1] - flow.balance[0])
    # The drift is a discretisation effect: halving the step halves it.
    half = gradient_flow(opt, start, steps=3000, lr_fraction=0.25, record_every=3000)
    early = gradient_flow(opt, start, steps=1500, lr_fraction=0.5, record_every=1500)
    assert abs(half.balance[-1]) == pytest.approx(abs(early.balance[-1]) / 2, rel=0.2)
    assert drift < 0.01 * flow.w_kq.pow(2).sum()


def test_gradient_flow_needs_a_balanced_start():
    opt = descriptor_optimum(_task(10), "mu", mean_draws=2_000)
    w_kq, w_pv = _balanced_start(opt)
    w_pv = w_pv.clone()
    w_pv[0, -1] = 0.5  # the value row would read x too
    with pytest.raises(ConfigError, match="balanced form"):
        gradient_flow(opt, (w_kq, w_pv), steps=10)


def test_depth_claims_on_a_tiny_size_with_two_seeds(tmp_path):
    import iclab

    tiny = {
        "task.d": 3,
        "seeds": 2,
        "n_contexts": [10],
        "deep_n_context": 10,
        "deep_layers": [2],
        "d_sweep": [3],
        "d_sweep_n_context": 10,
        "one_hot.n_context": 10,
        "train.steps": 1000,
        "train.batch_size": 256,
        "eval_prompts": 8192,
        "eval_batch": 1024,
        "theory.mean_draws": 2000,
        "theory.flow_steps": 200,
    }
    result = iclab.run("task-descriptors", overrides=tiny, out=tmp_path / "run", progress=False)
    # Each seed judged apart (seed 0's entry here): both depths' gaps on the same prompts, the relative gap of
    # the mean squared errors and the paired difference in standard errors; the one-layer gap is clear even here.
    depth = {
        c["id"]: claims.seed_entries(c, 0)[0]
        for c in result.claims
        if c["id"] in ("descriptors-help-every-depth", "gap-narrows-with-depth")
    }
    helps = depth["descriptors-help-every-depth"]["measured"]
    assert set(helps) == {"1", "2"} and set(helps["1"]) == {"relative gap", "z"} and helps["1"]["z"] > 2
    assert depth["gap-narrows-with-depth"]["holds"] == (helps["2"]["relative gap"] < helps["1"]["relative gap"])
    gains = claims.seed_entries(next(c for c in result.claims if c["id"] == "deeper-beats-one-layer"), 0)[0]
    by = gains["measured"]["2"]  # 2 layers against 1, with μ and without, on the same prompts
    assert set(by) == {"with μ", "without"} and all(set(v) == {"relative gain", "z"} for v in by.values())
    assert gains["holds"] == all(v["z"] > 2 and v["relative gain"] >= 0.01 for v in by.values())
    rows = result.metrics.query("setting == 'depth' and metric == 'typical_mse'")
    assert set(rows.seed) == {0, 1} and len(set(rows.model)) == 4  # 1 and 2 layers, with and without μ


def test_typical_drop_is_checked_before_training(tmp_path):
    import iclab

    with pytest.raises(ConfigError, match="typical_drop"):
        iclab.run("task-descriptors", overrides={"typical_drop": 1.0}, out=tmp_path / "run", progress=False)


def _trained(mse: float, seeds: int = 2, prompts: int = 4000, spread: float = 1.0):
    """A stand-in for a trained model: per seed, prompt errors of mean ``mse``."""
    from iclab.experiments.task_descriptors import Trained

    g = torch.Generator().manual_seed(int(mse * 1000))
    errors = [mse + spread * (torch.rand(prompts, generator=g, dtype=torch.float64) - 0.5) for _ in range(seeds)]
    return Trained("lsa", {}, errors, [e.mean().item() for e in errors], [])


@pytest.mark.parametrize(
    "with_mu, without, trained, holds",
    [
        ({20: 2.6, 80: 1.1, 320: 0.34, 1280: 0.09}, 4.33, {5: (4.6, 5.2), 20: (2.7, 4.6)}, (True, True)),
        # with μ levelling off at a positive loss (N·loss grows like N), the trained one not falling
        ({20: 2.6, 80: 1.5, 320: 1.2, 1280: 1.1}, 4.33, {5: (4.6, 5.2), 20: (4.7, 4.6)}, (False, False)),
        # without descriptors the trained loss far below the limit no model without them goes below
        ({20: 2.6, 80: 1.1, 320: 0.34, 1280: 0.09}, 4.33, {5: (4.6, 5.2), 20: (2.7, 4.0)}, (True, False)),
    ],
)
def test_the_limit_claims_tell_a_loss_falling_to_zero_from_one_falling_to_a_limit(with_mu, without, trained, holds):
    from iclab.experiments import get
    from iclab.experiments.task_descriptors import ByN, _limit_claims

    config = get("task-descriptors").resolve("quick", {"n_contexts": list(trained)})
    theory = {n: {"mu": v, None: without + 1 / n} for n, v in with_mu.items()}
    by_n = ByN(theory, {n: {"mu": _trained(a), None: _trained(b)} for n, (a, b) in trained.items()}, {}, 4.318)
    verdicts = {c.id: c.holds for c in _limit_claims(by_n, config)}
    assert (verdicts["theory-loss-to-zero-with-descriptors"], verdicts["trained-loss-falls-with-n"]) == holds
