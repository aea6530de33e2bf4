import pytest
import torch

from iclab import claims
from iclab.config import ConfigError
from iclab.experiments.task_descriptors import Gap, _gap_narrows
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
    assert depth["gap-narrows-with-depth"]["holds"] == (abs(helps["2"]["relative gap"]) < helps["1"]["relative gap"])
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


def _trained(mse: float, sd: float = 0.5, prompts: int = 4000):
    """A stand-in for a trained model of one seed: prompt errors of mean ``mse`` and standard deviation about ``sd``
    (alternately above and below the mean)."""
    from iclab.experiments.task_descriptors import Trained

    errors = mse + sd * torch.tensor([1.0, -1.0], dtype=torch.float64).repeat(prompts // 2)
    return Trained("lsa", {}, [errors], [errors.mean().item()], [])


OPTIMUM = {5: 4.62, 10: 3.64, 20: 2.65, 40: 1.77}
"""The exact one-layer optimum's loss with descriptors at d = 5 (rounded): N·loss grows by 1.336× from 20 to 40."""


def _falls_claim(losses: dict[int, float]):
    from iclab.experiments import get
    from iclab.experiments.task_descriptors import ByN, _trained_falls_claim

    config = get("task-descriptors").resolve("quick", {"n_contexts": list(losses)})
    theory = {n: {"mu": v, None: 5.0} for n, v in OPTIMUM.items()}
    by_n = ByN(theory, {n: {"mu": _trained(v)} for n, v in losses.items()}, {}, 4.318)
    return _trained_falls_claim(by_n, config)


def test_the_trained_loss_falls_with_n_by_standard_errors_and_like_the_optimum():
    from iclab.experiments.task_descriptors import _seed_mean_stderr

    se = _seed_mean_stderr(_trained(1.0).errors)  # the same at every N here
    bound = 40 * OPTIMUM[40] / (20 * OPTIMUM[20]) * 1.03 / 0.97  # each loss within 3% of the optimum's
    losses = {5: 4.65, 10: 3.66, 20: 2.67, 40: 1.79}
    claim = _falls_claim(losses)
    assert claim.holds and list(claim.clauses.values()) == [True, True]
    # a step that falls by 1.99 standard errors of the difference (√2·se) fails the first clause, 2.01 holds
    for z, holds in ((2.01, True), (1.99, False)):
        step = {**losses, 10: losses[5] - z * 2**0.5 * se}
        assert next(iter(_falls_claim(step).clauses.values())) is holds
    # N·loss growing just past the optimum's ratio × 1.03/0.97 between N = 20 and 40 (a loss levelling off) fails
    for factor, holds in ((0.999, True), (1.001, False)):
        level = {**losses, 40: factor * bound * 20 * losses[20] / 40}
        assert (
            _falls_claim(level).clauses["N·loss grows no faster than the optimum's between the two largest N"] is holds
        )
    assert _falls_claim({20: 2.67}).holds is False  # one N: nothing falls


def test_the_loss_to_zero_rule_of_the_optimum_fails_just_past_its_rate():
    from iclab.experiments import get
    from iclab.experiments.task_descriptors import _loss_to_zero_claim

    tol = get("task-descriptors").resolve("quick", {})["tolerance"]
    table = {320: {"mu": 0.34, None: 4.33}, 1280: {"mu": 0.34 * 1.2 / 4, None: 4.32}}
    assert _loss_to_zero_claim(table, 4.318, tol).holds
    table[1280]["mu"] *= 1.001  # N·loss 1.2012× from 320 to 1280
    assert _loss_to_zero_claim(table, 4.318, tol).holds is False


def test_the_query_descriptor_share_rules():
    from iclab.experiments import get
    from iclab.experiments.task_descriptors import (
        _query_descriptor_share,
        _query_share_claim,
        _trained_query_share_claim,
    )

    tol = get("task-descriptors").resolve("quick", {})["tolerance"]
    matrix = torch.zeros(4, 4, dtype=torch.float64)
    matrix[:, :2], matrix[:, 2:] = 3.0, 4.0  # d = 2: the query-side descriptor columns hold 4/5 of the norm
    assert _query_descriptor_share(matrix, 2) == pytest.approx(0.8)
    shrinking = {5: 0.3, 10: 0.2, 20: 0.1, 40: 0.0101}
    assert _query_share_claim(shrinking, tol).holds
    assert _query_share_claim({**shrinking, 40: 0.0099}, tol).holds is False  # below 0.01: no longer non-zero
    assert _query_share_claim({**shrinking, 20: 0.2}, tol).holds is False  # no decrease from 10 to 20
    # A trained share follows the optimum's when each step falls by at least half the optimum's fall there.
    optimum = {5: 0.32, 10: 0.22, 20: 0.12, 40: 0.02}
    assert _trained_query_share_claim({0: shrinking}, optimum, tol).holds
    claim = _trained_query_share_claim({0: shrinking, 1: {**shrinking, 40: 0.15}}, optimum, tol)
    assert claim.holds is False and claims.failed_clauses(claim.to_dict()) == [
        "shrinks with N as the optimum's share does"
    ]
    flat = {n: 0.7 for n in optimum}  # the balanced init's share, untouched at every N: no trend at all
    assert (
        _trained_query_share_claim({0: flat}, optimum, tol).clauses["shrinks with N as the optimum's share does"]
        is False
    )
    drifting = {5: 0.30, 10: 0.27, 20: 0.24, 40: 0.21}  # falls, but by far less than the optimum: noise, not its trend
    assert _trained_query_share_claim({0: drifting}, optimum, tol).holds is False


def test_a_gap_that_turns_negative_is_no_narrowing():
    tol = {"min_gap": 0.01}
    one = Gap(difference=1.0, stderr=0.1, relative=0.4)  # descriptors help clearly at one layer
    assert _gap_narrows({1: one, 2: Gap(0.2, 0.1, 0.1), 3: Gap(0.0, 0.1, 0.01)}, tol)
    # A 3-layer model that descriptors hurt by far more (seed 100's −50.8 at quick) has crossed, not narrowed.
    assert not _gap_narrows({1: one, 2: Gap(0.2, 0.1, 0.1), 3: Gap(-5.0, 10.0, -50.8)}, tol)
    assert _gap_narrows({1: one, 2: Gap(-0.1, 0.1, -0.3)}, tol)  # crossing by less than the one-layer gap
    assert not _gap_narrows({1: Gap(0.01, 0.1, 0.4), 2: Gap(0.0, 0.1, 0.0)}, tol)  # no help at one layer to narrow
