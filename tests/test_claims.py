"""What a claim is (kind, subject, source), how a failed one reads, and measured deferral."""

import math

import pytest

from iclab import claims as C
from iclab.claims import Claim, detectable_effect, judged_at, judged_at_if_unresolved, summary, verdict_text


def _claim(holds: bool, about: C.About) -> Claim:
    return C.holds_if("x", "P", "the paper says x", 0.3, "< 0.2", holds, about=about)


def test_every_claim_says_what_it_is_and_a_paper_claim_names_its_source():
    entry = _claim(True, C.paper("§4.3, Fig 1", 0.01)).to_dict()
    assert (entry["kind"], entry["subject"], entry["source"], entry["paper_value"]) == (
        "paper",
        "trained",
        "§4.3, Fig 1",
        0.01,
    )
    assert "judged_at" not in entry and "needed" not in entry
    assert _claim(True, C.diagnostic()).to_dict()["subject"] == "theory"
    with pytest.raises(ValueError, match="source"):
        C.paper("")
    with pytest.raises(ValueError, match="kind"):
        Claim("x", "P", "s", 1, "e", True, "conjecture", "trained")
    with pytest.raises(ValueError, match="subject"):
        C.About("paper", "model", "Fig 1")
    with pytest.raises(TypeError):  # no constructor makes a claim without saying what it is
        C.at_most("x", "P", "s", 1.0, 2.0)


def test_a_failed_paper_claim_does_not_reproduce_and_a_failed_diagnostic_fails():
    assert verdict_text(_claim(False, C.paper("Fig 1")).to_dict()) == "does not reproduce here"
    assert verdict_text(_claim(False, C.diagnostic()).to_dict()) == "FAILS"
    assert verdict_text(_claim(True, C.paper("Fig 1")).to_dict()) == "holds"
    found = [_claim(v, C.paper("Fig 1")).to_dict() for v in (True, False)] + [_claim(True, C.diagnostic()).to_dict()]
    assert summary(found) == "paper claims: 1 of 2 hold, 1 does not reproduce here; diagnostics: 1 of 1 hold"


def test_a_deferral_carries_the_runs_numbers_or_is_refused():
    claim = _claim(False, C.paper("Fig 1"))
    deferred = judged_at(claim, "long", "the model's SPD to OLS", needed=0.01, reached=0.093)
    assert deferred.holds is None and deferred.judged_at == "long"
    assert deferred.reason == "the model's SPD to OLS: the claim needs 0.01, this run reaches 0.093"
    assert verdict_text(deferred.to_dict()) == "measured, judged at long scale"
    for needed, reached in ((None, 0.1), (0.01, math.nan), (0.01, "far"), (True, 0.1)):
        with pytest.raises(ValueError, match="needs the run's numbers"):
            judged_at(claim, "long", "too small a model", needed=needed, reached=reached)


def test_a_listed_claim_is_deferred_only_when_the_run_misses_the_accuracy_it_needs():
    claim = _claim(False, C.paper("Fig 1"))
    reason = "the model's distance"
    assert judged_at_if_unresolved(claim, ["x"], "long", reason, needed=0.01, reached=0.05).holds is None
    assert judged_at_if_unresolved(claim, ["x"], "long", reason, needed=0.01, reached=0.005) is claim  # judged here
    assert judged_at_if_unresolved(claim, [], "long", reason, needed=0.01, reached=0.05) is claim  # not listed
    higher = judged_at_if_unresolved(claim, ["x"], "long", reason, needed=0.8, reached=0.5, higher_is_better=True)
    assert higher.holds is None and higher.reached == 0.5


def test_the_power_of_a_test_that_holds_by_failing_to_reject():
    # z ≤ 3 rejects a true effect of (3 + 0.84) standard errors four times in five.
    assert detectable_effect(0.1, 3.0) == pytest.approx(0.3842, abs=1e-4)
    assert detectable_effect(1.0, 2.0, power=0.5) == pytest.approx(2.0)


def test_a_claim_of_clauses_names_what_failed_and_each_clause_is_judged_over_seeds():
    def claim(statement: bool, side: bool):
        clauses = {"statement": statement, "learnt": side}
        return C.all_of("x", "P", "says", 1.0, "both", clauses, about=C.paper("§1"))

    assert claim(True, True).holds and claim(False, True).holds is False
    assert C.failed_clauses(claim(False, True).to_dict()) == ["statement"]
    assert C.failed_clauses(C.at_most("y", "P", "s", 2.0, 1.0, about=C.paper("§1")).to_dict()) == ["statement"]
    (entry,) = C.over_seeds({100: [claim(True, True)], 101: [claim(False, True)], 102: [claim(True, False)]})
    assert entry["holds"] is False and entry["clauses"] == {"statement": False, "learnt": False}


def test_the_test_over_seeds_on_one_or_two_samples_and_on_a_diverged_seed():
    assert C.seed_test([0.5], 2.0)[0] is None
    held, found = C.seed_test([1.0, 1.2, 0.9, 1.1], 2.0)
    assert held and found["t"] == pytest.approx(1.05 / (0.1290994 / 2), rel=1e-6)
    held, found = C.seed_test([(61.0, 59.0), (60.0, 58.5), (60.5, 59.4)], 2.0)
    assert held and found["mean"] == pytest.approx(1.5333333)
    assert C.seed_test([(60.0, float("nan")), (61.0, 59.0)], 2.0)[0] is False  # never a gain from a diverged seed
    assert C.seed_test([float("inf"), 1.0], 2.0)[0] is False
    assert C.seed_test([0.0, 0.0], 2.0)[0] is False and C.seed_test([0.3, 0.3], 2.0)[0] is True


def test_a_claim_with_nothing_measured_is_not_measured_never_a_pass():
    """Issue 55, item 1: an empty measured value held (`[holds] ...: measured none`)."""
    about = C.paper("§4.3, Fig 1")
    empty = C.holds_if("x", "P", "at every k < d", {}, "< 0.01 at every k < d", all([]), about=about)
    assert empty.holds is None and empty.reason == C.NOTHING_MEASURED and empty.judged_at is None
    why = C.not_measured(C.holds_if("y", "P", "s", 0.3, "< 1", True, about=about), "d = 1: no prefix below d")
    entry = why.to_dict()
    assert entry["holds"] is None and entry["reason"] == "d = 1: no prefix below d" and "judged_at" not in entry
    assert verdict_text(entry) == "not measured"
    assert summary([entry, _claim(True, about).to_dict()]) == "paper claims: 1 of 1 hold, 1 not measured"
    assert "reason" not in _claim(True, about).to_dict()  # a judged claim has none
