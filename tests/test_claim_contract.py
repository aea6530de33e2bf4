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
    "lsa-linear": {"train.lr": 0.0, "flow.lr": 0.0},
    "gd-mechanism": {"train.lr": 0.0, "depth_lr": 0.0, "sine.train.lr": 0.0},
    "algorithm-selection": {
        "train.lr": 0.0,
        "noise_finetune.lr": 0.0,
        "probe.train_prompts": 512,  # probes read a model: they train as they would on a trained one
        "probe.test_prompts": 128,
        "probe.train.steps": 400,
        "probe.hidden_units": 16,
    },
    "task-descriptors": {"train.lr": 0.0, "deep_train.lr": 0.0},
    "mesa-ar": {"lr_scale": 0.0},
    "symbols-lm": {"train.lr": 0.0, "seeds": 2},  # its claims are judged over seeds together: two at least
    "function-classes": {
        "train.lr": 0.0,
        "baselines.net_steps": 100,  # a net that learns (the recipe's steps)
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
    | {"aba-abb-mlp-equality-learns-by-8192", "aba-abb-ntk-needs-more-data"},
    "algorithm-selection": {
        "a-matches-ols",
        "b-bayes-ridge-closest",
        "c-one-layer-gd",
        "c-two-to-four-layers-ridge",
        "c-eight-plus-layers-ols",
        "d-xty-decodable-before-w-ols",
        "d-w-ols-decodability-rises",
        "d-xty-decodability-rises",
        "d-control-probes-worse",
    },
}
"""Paper claims about trained models that the smoke scale produces only when it covers them (a grid point, a depth):
the contract runs must produce them all."""

NEGATIVE = {
    "aba-abb-vo-alone-no-gain-by-64",
    "aba-abb-mlp-at-chance",
    "same-different-mlp-at-chance",
    "stays-diagonal-sparse-1",
    "not-recovered-gaussian-1",
}
"""Paper claims that a model holds by not learning something: an untrained model holds them too, so each is
shown to fail on a record with the effect (the model learns it) in the tests below."""


class _Untrained:
    """Each experiment's claims at its smoke scale with untrained models, run on first use (so that a test of one
    experiment runs that experiment alone)."""

    def __init__(self, root):
        self.root, self.claims = root, {}

    def __getitem__(self, name: str) -> list[dict]:
        if name not in self.claims:
            out = self.root / name
            self.claims[name] = iclab.run(name, "smoke", overrides=UNTRAINED[name], out=out, progress=False).claims
        return self.claims[name]


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    """Every experiment's claims at its smoke scale with untrained models (:class:`_Untrained`)."""
    return _Untrained(tmp_path_factory.mktemp("untrained"))


def test_every_experiment_is_checked():
    assert set(UNTRAINED) == {name for name, _ in iclab.list_experiments()}


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
    assert EXPECTED.get(experiment, set()) <= {c["id"] for c in trained}, "the smoke scale must produce these claims"
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
    verdicts = {c.id: c.holds for c in _sweep_claims(DEFAULTS, losses)}
    assert verdicts["aba-abb-mlp-at-chance"] is False and verdicts["same-different-mlp-at-chance"] is False
    assert verdicts["aba-abb-vo-alone-no-gain-by-64"] is False
    assert "same-different-vo-alone-no-gain-by-64" not in verdicts  # the paper draws no such curve there
    for spec in losses:
        losses[spec]["mlp"][1024] = [0.97]
        losses[spec]["transformer+vo"][64] = [0.98]
    assert all(c.holds for c in _sweep_claims(DEFAULTS, losses) if c.id.endswith(("mlp-at-chance", "by-64")))


def _mesa_setting(kind: str, full_offdiag: float, full_loss: float):
    """A mesa-ar setting whose full model left the diagonal by ``full_offdiag`` and ends at ``full_loss``
    (relative to predicting 0), its diagonal model at its training set's optimum."""
    import torch

    from iclab.experiments.mesa_ar import Run, Setting
    from iclab.tasks import AutoregressiveSequences, StartDistribution
    from iclab.theory import product_optimum

    task = AutoregressiveSequences(5, 100, StartDistribution(kind, 1.0))
    optimum = product_optimum(task)
    ab = complex(optimum.product)
    ratio = torch.full((98,), optimum.product * task.start.abs_moment(2, task.d))
    diagonal = Run("d", "diagonal", (0.5, 1.5), 0, ab, ab, 0.0, 0.0, 0.5, ratio, None)
    full = Run("f", "full", (0.5, 1.5), 0, ab, ab, 0.0, full_offdiag, full_loss, ratio, None)
    return Setting(f"{kind}-1", kind, 1.0, task, optimum, 0.01, [diagonal], [full])


def test_the_mesa_claims_of_what_a_model_does_not_do_fail_where_it_does():
    from iclab.experiments.mesa_ar import DEFAULTS, _claims

    def verdicts(kind, offdiag, loss):
        return {c.id: c.holds for c in _claims(_mesa_setting(kind, offdiag, loss), DEFAULTS, None)}

    assert verdicts("sparse", 0.001, 1e-5)["stays-diagonal-sparse-1"]
    assert verdicts("sparse", 0.3, 1e-5)["stays-diagonal-sparse-1"] is False  # it left the diagonal
    assert verdicts("gaussian", 0.001, 0.6)["not-recovered-gaussian-1"]
    assert verdicts("gaussian", 0.001, 1e-4)["not-recovered-gaussian-1"] is False  # it recovered the sequence


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
