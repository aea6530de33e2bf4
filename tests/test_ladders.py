"""Ladders: the number a claim rests on, and the rule that says whether it moves toward the paper's number as one
config value grows (made-up ladders: rising, flat, falling), and a sweep's ladder read from its point folders."""

import json
import math

import pandas as pd
import pytest

from iclab.claims import Claim, over_seeds, over_seeds_test, paper
from iclab.ladders import claim_number, ladder_reach, ladder_trend, paper_number
from iclab.report import write_sweep_report
from iclab.report.sweep import ladder
from iclab.runs import RunFolder, SweepFolder
from iclab.sweeps import _write_tables, expand, point_name


def _entry(measured, paper_value=None, statistic=None) -> dict:
    entry = {"id": "x", "measured": measured, "paper_value": paper_value, "holds": False}
    return entry | ({"statistic": statistic} if statistic is not None else {})


def _ladder_sweep(tmp_path, experiment: str, grid: dict, claim: str, claims_at) -> SweepFolder:
    """A finished sweep over ``grid`` that follows ``claim``, its point folders written by hand: each point's run
    states ``claims_at(point)`` (its one seed's claims)."""
    spec = {
        "experiment": experiment,
        "scale": "quick",
        "grid": grid,
        "overrides": {},
        "metric": "train_loss",
        "claim": claim,
        "claim_target": None,
        "cpus_per_trial": 1,
        "gpus_per_trial": 0,
    }
    sweep = SweepFolder.create(spec, out=tmp_path / "sweep")
    points = expand(grid)
    key = next(k for k in grid if k != "seed")
    section, _, name = key.partition(".")
    for point in points:
        config = {"experiment": experiment, "scale": "quick", "seed": point["seed"], section: {name: point[key]}}
        run = RunFolder.create(experiment, config, out=sweep.run(point_name(point)).path)
        run.write_metrics([{"model": "m", "step": 10, "metric": "train_loss", "value": 0.1}])
        run.write_claims(over_seeds({point["seed"]: claims_at(point)}))
    _write_tables(sweep, points, {point_name(p): ("finished", None) for p in points})
    return sweep


def test_a_claims_number_is_its_measured_value_at_a_path_or_its_statistic():
    assert claim_number(_entry(0.5)) == 0.5
    assert claim_number(_entry({"256": 0.95, "1024": 0.55}), "1024") == 0.55
    assert claim_number(_entry({"k = 10": {"error": 0.2}}), "k = 10.error") == 0.2
    assert claim_number(_entry([0.1, 0.2, 0.3]), "-1") == 0.3
    assert claim_number(_entry({"a": "text"}), "a") is None and claim_number(_entry({"a": 1}), "b") is None
    assert claim_number(_entry({"plain": 60.0}, statistic=1.5)) == 1.5  # a claim judged over seeds
    assert claim_number(_entry({"plain": 60.0}, statistic=[60.0, 58.5])) == 1.5  # over seeds, a pair: a − b
    assert claim_number(_entry(True)) is None  # a yes/no is not a number
    assert paper_number(_entry(0, paper_value=0.13)) == 0.13
    assert paper_number(_entry(0, paper_value={"1024": 0.13}), "1024") == 0.13
    assert paper_number(_entry(0, paper_value="0.65 at n = 512")) is None


def test_the_trend_rule_on_rising_flat_and_falling_ladders():
    # Three seeds, four rungs, the paper's number 0.1 below: a falling number moves toward it.
    falling = {100: [0.8, 0.6, 0.45, 0.3], 101: [0.9, 0.7, 0.5, 0.35], 102: [0.75, 0.62, 0.4, 0.32]}
    trend = ladder_trend(falling, 0.1, "train.epochs")
    assert trend.verdict == "moving toward the paper's number as train.epochs grows" and trend.toward == -1
    assert trend.slope == pytest.approx((-0.165 - 0.185 - 0.151) / 3) and trend.z > 2  # each seed's own fit
    rising = {seed: [v + 0.0 for v in reversed(values)] for seed, values in falling.items()}
    assert ladder_trend(rising, 0.1, "k").verdict == "moving away from the paper's number as k grows"
    flat = {100: [0.5, 0.52, 0.49, 0.5], 101: [0.6, 0.58, 0.61, 0.6], 102: [0.55, 0.56, 0.54, 0.56]}
    assert ladder_trend(flat, 0.1, "k").verdict == "not moving as k grows"
    assert ladder_trend(falling, None, "k").verdict == "falling as k grows"  # no paper number: a direction only
    assert ladder_trend({100: [0.5, 0.4]}, 0.1, "k").verdict.startswith("too few runs")
    assert ladder_trend({100: [0.5, None], 101: [0.4, 0.3]}, 0.1, "k").verdict.startswith("too few runs")
    same = ladder_trend({100: [0.5, 0.4], 101: [0.5, 0.4]}, 0.1, "k")  # alike on every seed: no spread
    assert math.isinf(same.z) and same.verdict.startswith("moving toward")
    # every seed holding at the first rung, failing at the last: a verdict ladder that starts at the target moves away
    held = {100: [1.0, 1.0, 0.0], 101: [1.0, 0.0, 0.0], 102: [1.0, 1.0, 0.0]}
    assert ladder_trend(held, 1.0, "k", goal="holding").verdict == "moving away from holding as k grows"
    assert ladder_trend({s: v[::-1] for s, v in held.items()}, 1.0, "k", goal="holding").verdict.startswith(
        "moving toward"
    )


def test_the_reach_rule_says_not_moving_only_where_no_trend_in_the_band_reaches_the_paper_by_its_recipe():
    """Rungs 1000, 2000, 4000 steps on a log line (a doubling is 0.69); the paper's number 0.1 below."""
    rungs = [1000, 2000, 4000]
    # Falling 0.1 a doubling on every seed: beyond 2 standard errors, 0.35 → 0.1 in 2.5 more doublings (≈ 2.3e4).
    falling = {0: [0.6, 0.5, 0.4], 1: [0.55, 0.45, 0.35], 2: [0.5, 0.4, 0.3]}
    found = ladder_reach(falling, rungs, 0.1, 500000, "train.steps")
    assert found == (
        "moving toward the paper's number as train.steps grows; at its mean slope it reaches it at train.steps ≈ "
        "2.26e+04 (the paper's: 500000)"
    )
    # No trend beyond noise (slopes −0.05, +0.05, −0.05 a doubling): the band's steepest falls 0.083 a doubling,
    # 0.48 → 0.1 in 4.6 doublings (≈ 9.7e4), before 500000 (7 doublings away) but not the paper's 16000 (2).
    noisy = {0: [0.5, 0.45, 0.4], 1: [0.5, 0.55, 0.6], 2: [0.55, 0.5, 0.45]}
    assert ladder_reach(noisy, rungs, 0.1, 500000, "train.steps").startswith("too few runs to tell: a trend within")
    assert ladder_reach(noisy, rungs, 0.1, 16000, "train.steps").startswith(
        "not moving: no trend within its band (mean slope + 2 standard errors) reaches the paper's number by the "
        "paper's train.steps = 16000; the steepest would at ≈"
    )
    same = {0: [0.5, 0.5, 0.5], 1: [0.5, 0.5, 0.5]}  # identical and flat: no trend reaches it at any recipe
    assert ladder_reach(same, rungs, 0.1, 500000, "k") == (
        "not moving: no trend within its band (mean slope + 2 standard errors) reaches the paper's number by the "
        "paper's k = 500000"
    )
    rising = {seed: values[::-1] for seed, values in falling.items()}
    assert ladder_reach(rising, rungs, 0.1, 500000, "k") == "moving away from the paper's number as k grows"
    held = {0: [0.0, 1.0, 1.0], 1: [0.0, 0.0, 1.0]}  # a share of seeds holding: every seed at the last rung
    assert ladder_reach(held, rungs, 1.0, 8000, "k", goal="holding") == "reaches holding at its last rung (k = 4000)"
    effect = {0: [-0.2, -0.1, 0.05], 1: [-0.3, -0.1, 0.02]}  # an effect already above 0 on its way up
    assert ladder_reach(effect, rungs, 0.0, 8000, "k", goal="an effect above 0", toward=1).startswith("reaches")
    # a line through the rungs and the paper's value: a number beyond the last rung, linear where one is not > 0
    assert ladder_reach(falling, rungs, 0.1, 500, "k").startswith("too few runs to tell: the paper's k (500) is not")
    # a ladder that ran the paper's value reads its number there: 0.35 ± 0.058 (2 standard errors) at 4000
    assert ladder_reach(falling, rungs, 0.1, 4000, "k") == (
        "does not reach the paper's number at the paper's k = 4000 (mean 0.35, 2 standard errors 0.058)"
    )
    assert ladder_reach(falling, rungs, 0.32, 3000, "k").startswith("too few runs to tell: at the paper's k = 3000")
    assert (
        ladder_reach(falling, rungs, 0.5, 2000, "k")
        == "reaches the paper's number at the paper's k = 2000 (mean 0.45 over 3 seeds)"
    )
    assert ladder_reach(falling, rungs, 0.1, "adamw", "k").startswith("too few runs to tell: the paper's k ('adamw')")
    assert ladder_reach(falling, [-1, 0, 1], 0.1, 3.5, "k").startswith("moving toward the paper's number")
    assert ladder_reach({0: falling[0]}, rungs, 0.1, 500000, "k") == "too few runs to tell (two seeds of two rungs)"


def test_a_sweep_follows_a_claim_along_its_key_and_writes_its_ladder(tmp_path):
    """A ladder of two rungs on two seeds, its point folders written by hand: the report reads each seed's number at
    the claim's path, draws it and writes ladder.json with the trend."""
    grid = {"train.epochs": [150, 300], "seed": [100, 101]}

    def claims_at(point):
        epochs, seed = point["train.epochs"], point["seed"]
        measured = {"256": 0.9, "1024": (0.6 if epochs == 150 else 0.3) + (seed - 100) * 0.05}
        holds = epochs == 300  # the verdicts a ladder without a path follows
        return [Claim("aba-abb-plain-needs-1024", "P", "s", measured, "< 0.2", holds, "paper", "trained", "F")]

    sweep = _ladder_sweep(tmp_path, "abstract-symbols", grid, "aba-abb-plain-needs-1024:1024", claims_at)
    for name in map(point_name, expand(grid)):
        run = sweep.run(name)
        (run.path / "claims.json").write_text(
            json.dumps([{**c, "paper_value": {"1024": 0.13}} for c in run.read_claims()])
        )
    steps = ladder(sweep)
    assert steps.rungs == [150, 300] and steps.numbers == {100: [0.6, 0.3], 101: [0.65, 0.35]}
    assert steps.target == 0.13 and steps.trend.verdict == "moving toward the paper's number as train.epochs grows"
    page = write_sweep_report(sweep).read_text()
    assert "Ladder: aba-abb-plain-needs-1024 against train.epochs" in page
    record = json.loads((sweep.path / "ladder.json").read_text())
    assert record["numbers"] == {"100": [0.6, 0.3], "101": [0.65, 0.35]} and record["target"] == 0.13
    assert (sweep.path / "figures" / "ladder_aba-abb-plain-needs-1024.png").exists()
    assert ladder(SweepFolder.create({**sweep.read_spec(), "claim": None}, out=tmp_path / "plain")) is None
    verdicts = ladder(sweep, "aba-abb-plain-needs-1024")  # no path into its measured mapping: its verdicts
    assert verdicts.verdicts and verdicts.numbers == {100: [0.0, 1.0], 101: [0.0, 1.0]} and verdicts.target == 1.0
    assert verdicts.trend.verdict == "moving toward holding as train.epochs grows"
    assert ladder(sweep, "not-judged-here").numbers == {}
    assert isinstance(pd.read_parquet(sweep.claims_file), pd.DataFrame)


def test_a_ladder_follows_a_claim_judged_over_seeds_by_its_effect(tmp_path):
    """A point of a sweep runs one seed, so a claim judged over seeds (symbols-lm's kq-gain) is measured there and
    judged nowhere: with no paper number, the ladder follows each seed's effect (a − b of its pair) toward holding."""
    grid = {"train.steps": [600, 2000], "seed": [100, 101, 102]}

    def claims_at(point):
        gain = (0.1 if point["train.steps"] == 600 else 1.0) + (point["seed"] - 100) * 0.1  # plain − kq perplexity
        return [over_seeds_test("kq-gain", "P", "s", {}, (60.0, 60.0 - gain), 2.0, about=paper("§5", "no number"))]

    sweep = _ladder_sweep(tmp_path, "symbols-lm", grid, "kq-gain", claims_at)
    steps = ladder(sweep)
    assert steps.effect and not steps.verdicts and steps.target is None
    assert steps.numbers == {
        100: [pytest.approx(0.1), pytest.approx(1.0)],
        101: [pytest.approx(0.2), pytest.approx(1.1)],
        102: [pytest.approx(0.3), pytest.approx(1.2)],
    }
    assert steps.trend.verdict == "moving toward holding as train.steps grows"
    page = write_sweep_report(sweep).read_text()
    assert "its number is each seed's effect" in page and json.loads((sweep.path / "ladder.json").read_text())["effect"]


def test_a_ladder_of_verdicts_keeps_the_claims_own_number_beside_them(tmp_path):
    """A claim with a measured number but no paper number to move toward (gpt-linear's tracks-ols) is diagnosed by
    its verdicts; its number is kept beside them with its own direction, a lead that is never the diagnosis."""
    grid = {"train.steps": [1000, 2000, 4000], "seed": [100, 101, 102]}
    rung = {1000: 0, 2000: 1, 4000: 2}

    def claims_at(point):
        gap = 0.09 - 0.01 * rung[point["train.steps"]] + (point["seed"] - 100) * 0.002
        return [Claim("tracks-ols", "P", "s", gap, "0.02 at k = d", False, "paper", "trained", "F")]

    sweep = _ladder_sweep(tmp_path, "gpt-linear", grid, "tracks-ols", claims_at)
    steps = ladder(sweep)
    assert steps.verdicts and steps.target == 1.0 and steps.trend.verdict == "not moving as train.steps grows"
    assert steps.measured[101] == [pytest.approx(0.092), pytest.approx(0.082), pytest.approx(0.072)]
    assert steps.measured_trend.verdict == "falling as train.steps grows"
    page = write_sweep_report(sweep).read_text()
    assert "drawn beside: falling as train.steps grows (a lead, not the diagnosis)" in page
    record = json.loads((sweep.path / "ladder.json").read_text())
    assert record["measured_trend"]["verdict"] == "falling as train.steps grows" and len(record["measured"]) == 3
    held = _ladder_sweep(
        tmp_path / "held",
        "gpt-linear",
        grid,
        "aba",
        lambda point: [Claim("aba", "P", "s", {"k=1": 0.1}, "0.02", False, "paper", "trained", "F")],
    )
    assert ladder(held).measured is None  # no number at all: the verdicts alone
