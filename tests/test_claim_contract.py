"""The claim contract: every claim says what it is, and every paper claim about a trained model can fail.

In the spirit of the learner contract (tests/test_learner_contract.py): each experiment runs at its smoke scale
with its models left untrained (learning rate 0 in every training block of the models its claims judge;
probes, which read a model, still train), nothing deferred to another scale. Every claim must say its kind
and subject, and a paper claim its source; every paper claim about a trained model must then fail
(``holds: false``): an untrained model lacks every property the papers claim of a trained one. A claim that
an untrained model satisfies by its nature (a model that does *not* learn something) is listed in
:data:`NEGATIVE` and fails instead on the input given there, a record with the effect put back in.
"""

import pytest

import iclab
from iclab import claims as C

FUNCTIONS = ("linear", "sparse-linear", "linear-classification", "noisy-linear")

UNTRAINED = {
    "lsa-linear": {"train.lr": 0.0},
    "gd-mechanism": {"train.lr": 0.0, "depth_lr": 0.0, "sine.train.lr": 0.0, "depths": [2, 4]},  # c-depth-4 too
    "algorithm-selection": {
        "train.lr": 0.0,
        "noise_finetune.lr": 0.0,
        "probe.train_prompts": 512,  # probes read a model: they train as they would on a trained one
        "probe.test_prompts": 128,
        "probe.train.steps": 400,
        "probe.hidden_units": 16,
    },
    "task-descriptors": {"train.lr": 0.0, "deep_train.lr": 0.0, "d_sweep_deep": [2, 3]},  # the 3-layer d sweep too
    "mesa-ar": {
        "lr_scale": 0.0,
        "starts": {"gaussian": [0.5, 1.0, 2.0], "sparse": [0.5, 1.0, 2.0], "ones": [1.0]},  # ab* at σ, c ≠ 1 too
        "inits": [[0.1, 0.1], [0.5, 1.5]],  # (0.5, 1.5) starts within the test of ab* at σ = 0.5: judged by worst run
    },
    "symbols-lm": {"train.lr": 0.0, "seeds": 2},  # its claims are judged over seeds together: two at least
    "function-classes": {
        "train.lr": 0.0,
        "baselines.net_steps": 100,  # a net that learns (the recipe's steps)
        "eval_prompts": 256,  # at d = 3, 16 prompts leave the zero predictor within the noisy labels' band of OLS
        "slow_prompts": 64,  # quick's: on the smoke scale's 2 the untrained error's band reaches the fitted network's
        **{
            f"functions.{name}.train": {"steps": 4 if name == "linear" else 2, "warmup": 0, "lr": 0.0}
            for name in FUNCTIONS
        },
    },
    "abstract-symbols": {"train.lr": 0.0},
    "gpt-linear": {"train.lr": 0.0},
}
"""Per experiment: the overrides to its smoke scale that leave the judged models untrained (every such model's
learning rate 0)."""

EXPECTED = {
    "abstract-symbols": {
        f"{spec}-{claim}"
        for spec, modified in (("aba-abb", "kq"), ("same-different", "kq-vo"))
        for claim in (f"{modified}-by-64", "plain-needs-1024", "mlp-at-chance")
    }
    | {"copy-plain-inverse-scaling", "copy-modified-width-free", "aba-abb-vo-alone-no-gain-by-64"}
    | {"aabb-abab-plain-needs-1024", "majority-2-kq-vo-by-128", "majority-4-kq-vo-by-2048"}
    | {"aba-abb-mlp-equality-learns-by-8192", "aba-abb-ntk-needs-more-data"}
    | {f"{spec}-kq-vo-learns-between-32-and-64" for spec in ("aba-abb", "same-different")}
    | {"aba-abb-rnn-learns-slowly", "aba-abb-lstm-learns-slowly"},
    "gd-mechanism": {
        "a-loss-equals-gd",
        "a-sensitivity-cosine",
        "a-prediction-difference",
        "a-weights-match-construction",
        "a-interpolation",
        "b-beats-2-step-gd",
        "b-matches-gd-plus-plus",
        "b-curvature-in-weights",
        "c-loss-falls-with-depth",
        "c-depth-2-near-gd-plus-plus",
        "c-depth-4-near-gd-plus-plus",
        "d-trained-matches-gd-features",
    },
    "mesa-ar": {
        *(f"ab-star-{kind}-{scale}" for kind in ("gaussian", "sparse") for scale in ("0.5", "1", "2")),
        "full-ab-star-gaussian-1",
        "full-ab-star-sparse-1",
        "ones-not-one-step-gd-ones-1",
        "stays-diagonal-sparse-1",
        "recovered-sparse-1",
        "not-recovered-gaussian-1",
    },
    "function-classes": {"sparse-beats-ols", "sparse-approaches-lasso", "tree-beats-greedy-and-boosted"}
    | {"relu-matches-net-gd", "ood-fails-scale-x=0.333", "ood-fails-scale-x=3"}
    | {f"beats-knn-and-averaging-{name}" for name in ("linear", "sparse-linear", "decision-tree", "relu-net")}
    | {
        f"ood-robust-{shift}"
        for shift in ("skewed", "subspace", "noisy", "random-orthants", "orthogonal", "overlapping")
        + tuple(f"scale-{scaled}" for scaled in ("x=0.5", "x=2", "y=0.333", "y=0.5", "y=2", "y=3"))
    },
    "lsa-linear": {
        f"{claim}-{covariance}"
        for claim in ("loss-at-optimum", "preconditioner")
        for covariance in ("isotropic", "anisotropic")
    },
    "task-descriptors": {
        "trained-loss-falls-with-n",
        "one-layer-reaches-optimum",
        "one-layer-matches-optimum-weights",
        "trained-query-descriptor-blocks-shrink",
        "descriptors-help-every-depth",
        "deeper-beats-one-layer",
        "gap-narrows-with-depth",
        "gap-grows-with-d",
        "gap-grows-with-d-2-layers",
        "gap-grows-with-d-3-layers",
        "one-hot-descriptors-help",
    },
    "algorithm-selection": {
        "a-matches-ols",
        "a-knn-least-similar",
        "b-bayes-ridge-closest",
        "c-one-layer-gd",
        "c-two-to-four-layers-ridge",
        "c-eight-plus-layers-ols",
        "d-xty-decodable-before-w-ols",
        "d-w-ols-decodability-rises",
        "d-xty-decodability-rises",
        "d-control-probes-worse",
    },
    "symbols-lm": {"kq-gain", "kq-nodiag-gain"},
    "gpt-linear": {"tracks-ols", "beats-averaging-and-3nn", "min-norm-below-d"},
}
"""Every experiment's paper claims about trained models: the contract runs must produce them all (the untrained
overrides add what the smoke scale alone does not cover, a grid point or a depth)."""

NEGATIVE = {
    "aba-abb-vo-alone-no-gain-by-64",
    "aba-abb-mlp-at-chance",
    "same-different-mlp-at-chance",
    "stays-diagonal-sparse-1",
    "ood-robust-orthogonal",  # the optimum there predicts 0, as an untrained model nearly does
}
"""Paper claims that a model holds by not learning something: an untrained model holds them too, so each is
shown to fail on a record with the effect (the model learns it) in the tests below."""


class _Untrained:
    """Each experiment's claims at its smoke scale with untrained models, run on first use (so that a test of one
    experiment runs that experiment alone)."""

    def __init__(self, root):
        self.root, self.claims, self.times = root, {}, {}

    def __getitem__(self, name: str) -> list[dict]:
        if name not in self.claims:
            result = iclab.run(name, "smoke", overrides=UNTRAINED[name], out=self.root / name, progress=False)
            self.claims[name], self.times[name] = result.claims, result.folder.read_info()["time"]
        return self.claims[name]

    def time(self, name: str) -> dict:
        """The run's ``run.json`` ``time`` (where its wall time went, :mod:`iclab.ledger`)."""
        self[name]
        return self.times[name]


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    """Every experiment's claims at its smoke scale with untrained models (:class:`_Untrained`)."""
    return _Untrained(tmp_path_factory.mktemp("untrained"))


def test_every_experiment_is_checked():
    assert set(UNTRAINED) == set(EXPECTED) == {name for name, _ in iclab.list_experiments()}


@pytest.mark.parametrize("experiment", list(UNTRAINED))
def test_every_claim_says_what_it_is(untrained, experiment):
    for claim in untrained[experiment]:
        assert claim["kind"] in C.KINDS and claim["subject"] in C.SUBJECTS, claim["id"]
        assert (claim["kind"] == "paper") == bool(claim["source"]), claim["id"]
        assert claim["paper"] and claim["statement"] and claim["expected"], claim["id"]


@pytest.mark.parametrize("experiment", list(UNTRAINED))
def test_no_paper_claim_about_a_trained_model_holds_on_an_untrained_one(untrained, experiment):
    trained = [c for c in untrained[experiment] if c["kind"] == "paper" and c["subject"] == "trained"]
    assert trained, "an experiment checks at least one paper claim about a trained model"
    assert EXPECTED[experiment] == {c["id"] for c in trained}, "the contract run produces exactly these claims"
    held = sorted(c["id"] for c in trained if c["holds"] is not False and c["id"] not in NEGATIVE)
    assert not held, f"these paper claims hold (or are not judged) on untrained models: {held}"
    # The clause that carries the paper's statement (a claim's first) fails, not only a side condition.
    side = {
        c["id"]: C.failed_clauses(c)
        for c in trained
        if c["id"] not in NEGATIVE and c.get("clauses") and next(iter(c["clauses"])) not in C.failed_clauses(c)
    }
    assert not side, f"these fail on untrained models only by a side clause (failed clauses): {side}"
    listed = {c["id"] for c in trained} & NEGATIVE
    assert all(c["holds"] for c in trained if c["id"] in listed), "a negative claim must hold on untrained models"


@pytest.mark.parametrize("experiment", list(UNTRAINED))
def test_every_claim_has_a_cost(untrained, experiment):
    """Each claim is served by a part of its run (its cost counts the training and evaluation it needs), and each
    part serves a claim: the parts' claim patterns fit the experiment's claims."""
    time = untrained.time(experiment)
    ids = {c["id"] for c in untrained[experiment]}
    assert set(time["claims"]) == ids
    assert not sorted(i for i, entry in time["claims"].items() if not entry["parts"]), "claims no part serves"
    assert not sorted(name for name, part in time["parts"].items() if not part["claims"]), "parts serving no claim"
    assert all(0 <= entry["share"] <= 1 for entry in time["claims"].values())


EXTENSIONS = {"function-classes": {f"tracks-{name}" for name in ("noisy-linear", "linear-classification", "quadratic")}}
"""Diagnostics about a trained model that extend a paper's finding to a setting it does not train: they must fail
on untrained models too."""


@pytest.mark.parametrize("experiment", list(EXTENSIONS))
def test_no_extension_of_a_paper_finding_holds_on_an_untrained_model(untrained, experiment):
    verdicts = {c["id"]: c["holds"] for c in untrained[experiment]}
    assert {claim: verdicts.get(claim) for claim in EXTENSIONS[experiment]} == dict.fromkeys(
        EXTENSIONS[experiment], False
    )


def test_the_claims_of_what_a_model_does_not_learn_fail_where_it_learns():
    from iclab.experiments.abstract_symbols import DEFAULTS, _sweep_claims

    losses = {
        spec: {
            "transformer": {64: [1.0], 1024: [0.1]},
            "transformer+vo": {64: [0.3]},  # the b·AX term alone brings the gain
            "mlp": {64: [0.95], 1024: [0.3]},  # the MLP learns at 1024
        }
        for spec in ("aba-abb", "same-different")
    }
    verdicts = {c.id: c.holds for c in _sweep_claims(DEFAULTS, losses, {})}
    assert verdicts["aba-abb-mlp-at-chance"] is False and verdicts["same-different-mlp-at-chance"] is False
    assert verdicts["aba-abb-vo-alone-no-gain-by-64"] is False
    assert "same-different-vo-alone-no-gain-by-64" not in verdicts  # the paper draws no such curve there
    for spec in losses:
        losses[spec]["mlp"][1024] = [0.97]
        losses[spec]["transformer+vo"][64] = [0.98]
    assert all(c.holds for c in _sweep_claims(DEFAULTS, losses, {}) if c.id.endswith(("mlp-at-chance", "by-64")))


def _mesa_setting(full_offdiag: float, kind: str = "sparse"):
    """A mesa-ar setting (sparse starts unless ``kind``) whose full model left the diagonal by ``full_offdiag``, its
    diagonal model at its training set's optimum."""
    import torch

    from iclab.experiments.mesa_ar import Run, Setting
    from iclab.tasks import AutoregressiveSequences, StartDistribution
    from iclab.theory import product_optimum

    task = AutoregressiveSequences(5, 100, StartDistribution(kind, 1.0))
    optimum = product_optimum(task)
    ab = complex(optimum.product)
    ratio = torch.ones(98)
    diagonal = Run("d", "diagonal", (0.5, 1.5), 0, ab, ab, 0.0, 0.0, 1e-5, ratio, ratio, None)
    full = Run("f", "full", (0.5, 1.5), 0, ab, ab, 0.0, full_offdiag, 1e-5, ratio, ratio, None)
    return Setting(f"{kind}-1", kind, 1.0, task, optimum, 0.0, None, 1.0, 1.0, [diagonal], [full])


def test_the_mesa_claims_of_what_a_model_does_not_do_fail_where_it_does():
    from iclab.experiments.mesa_ar import DEFAULTS, _claims

    def verdicts(offdiag):
        return {c.id: c.holds for c in _claims(_mesa_setting(offdiag), DEFAULTS, None)}

    assert verdicts(0.001)["stays-diagonal-sparse-1"]
    assert verdicts(0.3)["stays-diagonal-sparse-1"] is False  # it left the diagonal


def _descriptor_flow(steps: int, start_scale: float = 1.0):
    """task-descriptors' gradient flow (d = 3, N = 10) for ``steps`` steps from the balanced initialisation, with
    W_PV scaled by ``start_scale`` (1: balanced), and its claims under the experiment's tolerances."""
    from iclab.experiments.task_descriptors import DEFAULTS, _flow_claims
    from iclab.models import LinearSelfAttention
    from iclab.rng import generator
    from iclab.tasks import GaussianInputs, LinearRegression
    from iclab.theory import descriptor_optimum, gradient_flow

    optimum = descriptor_optimum(LinearRegression(GaussianInputs(3, mean_scale=1.0), n_context=10), "mu", 2000)
    w_kq, w_pv = (
        LinearSelfAttention(7, init="balanced", init_scale=0.1, generator=generator(0, "init")).layers[0].merged()
    )
    flow = gradient_flow(optimum, (w_kq, start_scale * w_pv), steps, record_every=max(1, steps // 50))
    return {claim.id: claim.holds for claim in _flow_claims(flow, 10, DEFAULTS["tolerance"])}


def _lsa_flow_claim(steps: int, lr_fraction: float = 0.25) -> dict:
    """lsa-linear's flow claim on one seed's flow of ``steps`` steps (d = 5, N = 20, Λ = I) with a step of
    ``lr_fraction`` (:func:`iclab.theory.gradient_flow`)."""
    from iclab.experiments.lsa_linear import DEFAULTS, _flow_claim
    from iclab.models import LinearSelfAttention
    from iclab.rng import generator
    from iclab.tasks import linear_regression_from_config
    from iclab.theory import descriptor_optimum, gradient_flow

    task = linear_regression_from_config(DEFAULTS["task"])
    start = LinearSelfAttention(6, init="balanced", init_scale=0.1, generator=generator(0, "contract")).layers[0]
    loss, every = descriptor_optimum(task, None), max(1, steps // 100)
    flow = gradient_flow(loss, start.merged(), steps, lr_fraction=lr_fraction, record_every=every)
    config = {**DEFAULTS, "flow": {**DEFAULTS["flow"], "steps": steps}}
    return _flow_claim({0: flow}, "isotropic", config).to_dict()


def test_lsa_linear_flow_converges_holds_on_the_flow_and_fails_on_a_flow_stopped_early():
    assert _lsa_flow_claim(20000)["holds"]
    stopped = _lsa_flow_claim(5)
    assert stopped["holds"] is False and C.failed_clauses(stopped) == ["converges to Γ⁻¹"]


def test_lsa_linear_flow_converges_fails_on_a_step_past_the_stability_limit():
    """A step of twice the stability limit: the discrete flow's loss rises on the way."""
    claim = _lsa_flow_claim(2000, lr_fraction=1.0)
    assert claim["holds"] is False and "loss never rises" in C.failed_clauses(claim)


def test_task_descriptors_gradient_flow_converges_fails_on_a_flow_stopped_early():
    assert _descriptor_flow(15000)["gradient-flow-converges"]
    assert _descriptor_flow(500)["gradient-flow-converges"] is False


def test_task_descriptors_gradient_flow_balance_fails_on_an_unbalanced_start():
    assert _descriptor_flow(500)["gradient-flow-balance"]
    assert _descriptor_flow(500, start_scale=1.5)["gradient-flow-balance"] is False  # ‖W_PV‖² ≠ ‖W_KQ‖² from the start


def test_task_descriptors_theory_loss_to_zero_with_descriptors_fails_on_a_loss_falling_to_a_positive_limit():
    from iclab.experiments.task_descriptors import DEFAULTS, _loss_to_zero_claim

    without = {20: 4.6, 80: 4.4, 320: 4.34, 1280: 4.32}
    to_zero = {20: 2.6, 80: 1.1, 320: 0.34, 1280: 0.09}  # like 1/N: N·loss nearly flat
    to_limit = {20: 2.6, 80: 1.5, 320: 1.2, 1280: 1.1}  # falling to a positive limit: N·loss grows like N
    for with_mu, holds in ((to_zero, True), (to_limit, False)):
        table = {n: {"mu": with_mu[n], None: without[n]} for n in without}
        assert _loss_to_zero_claim(table, 4.318, DEFAULTS["tolerance"]).holds is holds


def test_task_descriptors_query_descriptor_blocks_shrink_fails_on_shares_that_grow():
    from iclab.experiments.task_descriptors import DEFAULTS, _query_share_claim

    shrinking = {5: 0.31, 10: 0.22, 20: 0.14, 40: 0.08}
    assert _query_share_claim(shrinking, DEFAULTS["tolerance"]).holds
    growing = dict(zip(shrinking, reversed(shrinking.values())))
    assert _query_share_claim(growing, DEFAULTS["tolerance"]).holds is False


def test_mesa_ar_offdiag_gradient_vanishes_fails_on_an_estimate_with_an_off_diagonal_gradient():
    """A theory claim: the Monte Carlo estimate of the population gradient at the diagonal initialisation holds for
    a Gaussian start and fails where the estimate carries a real off-diagonal gradient (the all-ones start's, which
    the run computes beside it)."""
    from iclab.experiments.mesa_ar import DEFAULTS, _gradient_vanishes_claim
    from iclab.tasks import AutoregressiveSequences, StartDistribution
    from iclab.theory import expected_gradient

    def verdict(kind: str) -> bool:
        s = _mesa_setting(0.001, "gaussian")
        estimate = expected_gradient(
            AutoregressiveSequences(3, 20, StartDistribution(kind, 1.0)), 0.5, 1.5, 4000, 10, 0
        )
        s.gradients = [estimate]
        return _gradient_vanishes_claim(s, DEFAULTS, None).holds

    assert verdict("gaussian") and not verdict("ones")


def test_the_function_classes_orthogonal_claim_fails_where_the_model_reads_the_examples():
    """Under queries orthogonal to the examples least squares predicts 0, the optimum, as an untrained model nearly
    does: a model that reads a prediction into examples that say nothing of the query lies above it by more than the
    paper's band (0.05) and the run's half-band (0.02 here)."""
    import torch

    from iclab.experiments.function_classes import ORTHOGONAL_BAND, _robust_claim

    def verdict(excess: float) -> bool:
        ols = torch.tensor([1.0, 0.98, 1.03, 0.97, 1.01], dtype=torch.float64)
        model = ols + excess
        return _robust_claim(
            "orthogonal", {"ols": {"mean": ols}, ("linear", 0): {"mean": model, "high": model + 0.02}}, [0], 5
        ).holds

    assert verdict(0.0) and verdict(ORTHOGONAL_BAND + 0.019)
    assert not verdict(ORTHOGONAL_BAND + 0.021) and not verdict(-ORTHOGONAL_BAND - 0.021)


def test_abstract_symbols_kernel_identity_conditions_fails_on_zero_perturbations():
    """With a = 0 and b = 0 the "perturbed" template matrices are the plain one (the same draws): no band lies
    below the plain band, so both clauses fail."""
    from iclab.config import resolve
    from iclab.experiments.abstract_symbols import DEFAULTS, SCALES, _kernel, _kernel_claims

    config = resolve(DEFAULTS, SCALES, "smoke", {"kernel.a": [0.0], "kernel.b": [0.0]})
    claims = {c.id: c for c in _kernel_claims(config, _kernel(config))}
    claim = claims["same-different-kernel-identity-conditions"]
    assert claim.subject == "theory" and claim.holds is False and not any(claim.clauses.values())


def test_the_construction_claims_fail_where_the_construction_runs_another_algorithm():
    """The constructions are built, not trained (subject ``theory``), so no untrained run can fail them: each
    claim is shown to fail where its transformer runs a step size or penalty a thousandth off its learner's."""
    import torch

    from iclab.experiments.algorithm_selection import DEFAULTS, _construction_claim
    from iclab.learners import OnePassSGD, Ridge
    from iclab.metrics import spd
    from iclab.models.raw import construction_prefix_predictions, ridge_transformer, sgd_transformer

    d, n, bound = 3, 7, DEFAULTS["tolerance"]["construction_match"]
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(128, n, d, generator=g, dtype=torch.float64)
    ys = torch.einsum("bnd,bd->bn", xs, torch.randn(128, d, generator=g, dtype=torch.float64))
    cases = {
        "sgd": (OnePassSGD(0.2), lambda lr: lambda k: sgd_transformer(d, k, lr), 0.2),
        "ridge": (Ridge(0.5), lambda lam: lambda k: ridge_transformer(d, k, lam), 0.5),
    }
    for family, (learner, build, right) in cases.items():
        reference = learner.predict_prefixes(xs, ys)
        verdicts = []
        for value in (right, 1.001 * right):
            curve = spd(construction_prefix_predictions(build(value), xs, ys), reference, d, n_boot=20)["mean"]
            verdicts.append(_construction_claim(family, {"built": curve}, d, n, bound).holds)
        assert verdicts == [True, False], family


DEFERRABLE: dict[str, object] = {}
"""Per claim a scale may leave to another scale (its id in some scale's ``judged_at_long`` or ``judged_at_paper``): a
function returning that claim built as a quick run would build it (the id listed), on an input where the run resolves
what the deferral measures and the claim's statement fails. A deferral must be decided by a measure of its own, never
by the claim's pass rule: then a claim at quick can fail, not only hold or defer. Each experiment registers its claims'
inputs here, above the two tests that close this module."""

# --- each experiment's failing inputs of its deferrable claims (DEFERRABLE[id] = function) ---


def _algorithm_selection_bayes_ridge_not_closest():
    """``b-bayes-ridge-closest`` at quick, resolved: the model's MSPD to each column's Bayes learner (0.01 at most) is
    below the MSPD between that learner and its nearest other (0.02), yet in the noiseless column ridge(1/4) is closer
    to the model (0.005) than OLS, the Bayes learner there."""
    from iclab.experiments.algorithm_selection import DEFAULTS, _bayes_claim

    table = {("ols", 0): 0.01, ("ridge(1/4)", 0): 0.005, ("ols", 1): 0.025, ("ridge(1/4)", 1): 0.001}
    return _bayes_claim(DEFAULTS, table, ["ols", "ridge(1/4)"], [0.0, 0.25], {0: 0.02, 1: 0.02})


DEFERRABLE["b-bayes-ridge-closest"] = _algorithm_selection_bayes_ridge_not_closest


def _algorithm_selection_figure_one_claim_with_learners_that_decide(claim_id: str):
    """A Fig 1 claim at quick (listed in ``judged_at_paper``) where the learners alone, OLS in the model's place, hold
    the statement (k-NN farthest; every descent curve falling from k = d), so it is judged: the model, whose
    distances to every learner are alike and flat, fails it."""
    import torch

    from iclab.experiments.algorithm_selection import _FIGURE_ONE, DEFAULTS, _figure_one_claim

    families = {"ols": "ols", "gd(α=0.05)": "gd", "sgd(α=0.05)": "sgd", "3-nn": "knn"}
    d, n = DEFAULTS["task"]["d"], DEFAULTS["task"]["n_context"]
    falling = torch.linspace(1.0, 0.1, n, dtype=torch.float64)
    alone = {"ols": 0 * falling, "gd(α=0.05)": falling, "sgd(α=0.05)": falling, "3-nn": 2 + 0 * falling}
    flat = {label: {"mean": torch.full((n,), 0.5, dtype=torch.float64)} for label in families}
    test = next(t for t in _FIGURE_ONE if t.id == claim_id)
    bands = {label: {"mean": curve} for label, curve in alone.items()}
    return _figure_one_claim(DEFAULTS, test, flat, bands, 0.0, families, d)


for _claim_id in ("a-knn-least-similar", "a-gd-closer-as-k-grows"):
    DEFERRABLE[_claim_id] = lambda claim_id=_claim_id: _algorithm_selection_figure_one_claim_with_learners_that_decide(
        claim_id
    )


def _function_classes_sparse_beats_ols_at_least_squares():
    """``sparse-beats-ols`` at quick (d = 5, sparsity 2, N = 11), resolved: the sparse model is exactly least squares,
    so exact where least squares is (k ≥ d: excess 0, within the Lasso's margin of 0.12 over least squares at
    k = 3, 4), yet no better than least squares below d."""
    import torch

    from iclab.experiments.function_classes import DEFAULTS, _sparse_claims

    ols = torch.tensor([1.0, 0.8, 0.6, 0.4, 0.2] + [0.0] * 6, dtype=torch.float64)
    lasso = ols - 0.12 * (torch.arange(11) < 5) * (torch.arange(11) > 0)
    model = {"mean": ols.clone(), "high": ols + 0.01}  # its 90% band: 0.01 either side
    curves = {"ols": {"mean": ols}, "lasso(α=0.01)": {"mean": lasso}, ("sparse-linear", 0): model}
    return next(claim for claim in _sparse_claims(DEFAULTS, [0], curves) if claim.id == "sparse-beats-ols")


DEFERRABLE["sparse-beats-ols"] = _function_classes_sparse_beats_ols_at_least_squares


# --- the deferrable claims' tests: keep them last (their parameters are read when the module loads) ---


def _deferrable_ids() -> set[str]:
    from iclab import experiments

    ids = set()
    for name in experiments.names():
        spec = experiments.get(name)
        for config in (spec.defaults, *spec.scales.values()):
            ids.update(config.get("judged_at_long") or [])
            ids.update(config.get("judged_at_paper") or [])
    return ids


def test_every_deferrable_claim_has_an_input_on_which_it_fails_at_quick():
    assert _deferrable_ids() <= set(DEFERRABLE), f"no failing input for {sorted(_deferrable_ids() - set(DEFERRABLE))}"


@pytest.mark.parametrize("claim_id", sorted(DEFERRABLE))
def test_a_deferrable_claim_fails_at_quick_rather_than_deferring(claim_id):
    claim = DEFERRABLE[claim_id]()
    assert claim.id == claim_id and claim.judged_at is None and claim.holds is False
