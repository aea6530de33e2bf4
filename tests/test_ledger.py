"""Where a run's time goes (iclab.ledger): parts, the models they train and reuse, each claim's cost."""

import pytest

from iclab import ledger as L
from iclab.formatting import duration


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when told: ``clock.now += seconds``."""

    class Clock:
        now = 0.0

    monkeypatch.setattr(L.time, "perf_counter", lambda: Clock.now)
    return Clock


def test_claims_cost_their_parts_and_the_models_they_reuse(clock):
    ledger = L.Ledger()
    with ledger.part("one-layer", claims=["a-*", "c-falls"]):
        ledger.trained("lsa1", 6.0)
        clock.now += 10.0
    with ledger.part("deep", claims=["c-*"]):
        ledger.uses("lsa1")  # trained by one-layer, asked for again
        clock.now += 30.0
    with ledger.part("one-layer", claims=["a-*", "c-falls"]):  # the next seed's pass
        clock.now += 2.0
    out = ledger.summary(50.0, ["a-loss", "c-depth", "c-falls", "z-none"])
    assert out["parts"]["one-layer"] == {
        "seconds": 12.0,
        "share": 0.24,
        "training": {"lsa1": 6.0},
        "reused": [],
        "claims": ["a-loss", "c-falls"],
    }
    assert out["parts"]["deep"]["reused"] == ["lsa1"]
    assert out["outside_parts_seconds"] == 8.0
    # c-depth needs deep's 30 s and the 6 s of training it reused; c-falls both parts, each counted once
    assert out["claims"]["c-depth"] == {"parts": ["deep"], "reused": ["lsa1"], "seconds": 36.0, "share": 0.72}
    assert out["claims"]["c-falls"]["seconds"] == 42.0 and out["claims"]["c-falls"]["reused"] == []
    assert out["claims"]["a-loss"]["seconds"] == 12.0
    assert out["claims"]["z-none"] == {"parts": [], "reused": [], "seconds": 0.0, "share": 0.0}


def test_exclusions_and_training_outside_parts(clock):
    ledger = L.Ledger()
    ledger.trained("probe", 1.5)  # outside every part: booked apart, charged to a part that reuses it
    with ledger.part("sweep", claims=["*", "!copy-*"]):
        clock.now += 4.0
    with ledger.part("copy", claims=["copy-*"]):
        ledger.uses("probe")
        clock.now += 1.0
    out = ledger.summary(6.0, ["aba-plain", "copy-w16"])
    assert out["claims"]["aba-plain"]["parts"] == ["sweep"] and out["claims"]["copy-w16"]["parts"] == ["copy"]
    assert out["outside_parts_training"] == {"probe": 1.5} and out["outside_parts_seconds"] == 1.0
    assert out["claims"]["copy-w16"]["seconds"] == 2.5


def test_a_resumed_run_counts_the_training_of_its_earlier_sessions(clock):
    """What a resumed run's checkpoints say its earlier sessions spent training a model is booked to the model and
    to the part that asked for it, and to the run's time outside this session's clock (``Ledger.earlier``)."""
    ledger = L.Ledger()
    with ledger.part("sweep", claims=["*"]):
        ledger.trained("plain", 1.0, earlier=40.0)  # 40 s before the interruption, 1 s to load and finish
        clock.now += 3.0
    ledger.trained("probe", 0.5, earlier=2.0)
    assert ledger.earlier == 42.0
    out = ledger.summary(clock.now + ledger.earlier, ["gain"])
    assert out["wall_seconds"] == 45.0 and out["parts"]["sweep"]["seconds"] == 43.0
    assert out["parts"]["sweep"]["training"] == {"plain": 41.0} and out["outside_parts_training"] == {"probe": 2.5}
    assert out["claims"]["gain"]["seconds"] == 43.0
    copied = L.Ledger(inherited=True)  # a continuation's or a judging again's checkpoints: the other run's training
    copied.trained("plain", 1.0, earlier=40.0)
    assert copied.earlier == 0.0 and copied.outside == {"plain": 1.0}


def test_a_model_trained_together_and_asked_for_on_the_next_pass_is_not_charged_twice(clock):
    """A run context's passes share its ledger: the first pass trains the seeds together, the next reuses them."""
    import dataclasses

    from iclab.experiments.base import RunContext

    ctx = RunContext(folder=None, device=None, config={"seed": 100, "seeds": 2})
    for seed in ctx.seeds:
        seed_ctx = ctx.for_seed(seed) if seed == ctx.seeds[0] else dataclasses.replace(ctx, together=ctx.seeds)
        with seed_ctx.part("one-layer", claims=["a-*"]):
            if seed == ctx.seeds[0]:
                seed_ctx.ledger.trained("lsa", 3.0)
            else:
                seed_ctx.ledger.uses("lsa")
            clock.now += 5.0
    out = ctx.ledger.summary(10.0, ["a-loss"])
    assert out["parts"]["one-layer"]["seconds"] == 10.0 and out["parts"]["one-layer"]["reused"] == []
    assert out["claims"]["a-loss"]["seconds"] == 10.0
    with pytest.raises(TypeError, match="list of patterns"), ctx.part("b", claims="b-*"):
        pass


def test_parts_do_not_nest_or_change_their_claims(clock):
    ledger = L.Ledger()
    with ledger.part("a", claims=["a-*"]), pytest.raises(RuntimeError, match="do not nest"):
        with ledger.part("b", claims=["b-*"]):
            pass
    with pytest.raises(ValueError, match="other claim patterns"), ledger.part("a", claims=["x-*"]):
        pass
    with pytest.raises(TypeError, match="list of patterns"), ledger.part("c", claims="c-*"):
        pass


def test_the_run_report_shows_where_the_time_went(clock):
    from iclab.report.html import time_table

    ledger = L.Ledger()
    with ledger.part("one-layer", claims=["a-*"]):
        ledger.trained("lsa1", 6.0)
        clock.now += 90.0
    table = time_table({"time": ledger.summary(100.0, ["a-loss"])})
    assert "<td>one-layer</td><td>1 min 30 s</td><td>90%</td><td>lsa1</td><td>a-loss</td>" in table
    assert "<td>10 s</td>" in table  # outside parts
    assert time_table({}) == ""  # a run from before the ledger


def test_the_claim_costs_page_is_the_runs_records(tiny_runs, tmp_path, monkeypatch, tool):
    """tools/claim_costs.py writes a table per counted run from its run.json alone: each part, its time and share,
    the claims it serves with their verdicts."""
    costs = tool("claim_costs")
    monkeypatch.setattr(costs, "PAGE", tmp_path / "claim-costs.md")
    root, runs = tiny_runs
    costs.main(root)
    page = (tmp_path / "claim-costs.md").read_text()
    counted = runs["b"].folder  # the newer of the two lsa-linear runs counts for seed 100
    spent = counted.read_info()["time"]
    assert f"## lsa-linear (quick, seed 100)\n\n`{counted.path.name}`" in page
    isotropic = spent["parts"]["isotropic"]
    assert f"| isotropic | {duration(isotropic['seconds'])} | {isotropic['share']:.0%} |" in page
    assert "`loss-at-optimum-isotropic`" in page and "## gpt-linear (quick, seed 100)" in page


def test_a_run_judged_again_under_its_sources_name_books_its_own_time(tiny_runs, tmp_path, monkeypatch, tool):
    """A folder of ``iclab rejudge`` moved to the name of the run it judged again names itself as its source: its
    page section is its own record, not a search for a source it replaced."""
    costs = tool("claim_costs")
    monkeypatch.setattr(costs, "PAGE", tmp_path / "claim-costs.md")
    root, runs = tiny_runs
    counted = runs["b"].folder
    counted.write_info({**counted.read_info(), "rejudged_from": counted.path.name})
    costs.main(root)
    page = (tmp_path / "claim-costs.md").read_text()
    assert f"## lsa-linear (quick, seed 100)\n\n`{counted.path.name}`" in page and "judged again" not in page
