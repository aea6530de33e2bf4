"""Why a claim does not reproduce: the non-reproductions page from hand-written runs and a ladder (no training)."""

import dataclasses
import html
import json
import shutil

import pytest
from test_scoreboard import _claim, _gain_runs, _run

from iclab import api
from iclab.api import sweep_changes
from iclab.claims import Claim
from iclab.config import ConfigError
from iclab.report.diagnosis import diagnose, non_reproductions, write_non_reproductions
from iclab.report.index import aggregate
from iclab.runs import RunFolder, SweepFolder, archive
from iclab.sweeps import _write_tables, expand, point_name


def _ladder(
    root,
    claim_id: str,
    numbers: dict[int, list[float]],
    also: dict[str, dict[int, list]] | None = None,
    claims_version: int | None = None,
    name: str | None = None,
):
    """A sweep of lsa-linear over train.steps following ``claim_id``, each seed's number at each rung given;
    ``also``: other claims its runs judged, each seed's measured value at each rung (fails at the first rung, holds
    at the others). Its points are of their current recipe, judged by ``claims_version`` (default the current)."""
    grid = {"train.steps": [2000, 4000], "seed": list(numbers)}
    spec = {
        "experiment": "lsa-linear",
        "scale": "quick",
        "grid": grid,
        "overrides": {},
        "metric": "train_loss",
        "claim": claim_id,
        "claim_target": 0.05,
        "cpus_per_trial": 1,
        "gpus_per_trial": 0,
    }
    sweep = SweepFolder.create(spec, out=root / (name or f"ladder-{claim_id}"))
    points = expand(grid)
    for point in points:
        steps, seed = point["train.steps"], point["seed"]
        config = api.resolved_config("lsa-linear", "quick", point)
        run = RunFolder.create("lsa-linear", config, out=sweep.run(point_name(point)).path)
        run.write_metrics([{"model": "lsa", "step": 10, "metric": "train_loss", "value": 0.1}])
        fingerprint = api.recipe("lsa-linear", "quick", point).fingerprint
        run.write_info({"fingerprint": {**fingerprint, "claims": claims_version or fingerprint["claims"]}})
        rung = grid["train.steps"].index(steps)
        claims = [Claim(claim_id, "P", "s", numbers[seed][rung], "< 0.1", False, "paper", "trained", "F")]
        for other, measured in (also or {}).items():
            claims.append(Claim(other, "P", "s", measured[seed][rung], "x", rung > 0, "paper", "trained", "F"))
        run.write_claims(claims)
    _write_tables(sweep, points, {point_name(p): ("finished", None) for p in points})


def test_each_non_reproducing_claim_gets_its_distance_cost_runs_and_diagnosis(tmp_path):
    root = tmp_path / "runs"
    for k, seed in enumerate(range(100, 105)):
        claims = [
            _claim("fine", True),
            _claim("small-recipe", False, measured=0.3 + k / 100, paper_value=0.05),
            _claim("laddered", False, measured=0.4),
            _claim("unexplained", False, measured=0.5),
            _claim("by-the-way", False, measured=0.6),
            _claim("no-number", False, measured={"a": 1}),
        ]
        run = _run(root, f"lsa-linear-seed{seed}", seed, claims, minute=k)
        if seed == 100:  # one run recorded where its time went (iclab.ledger)
            spent = {"wall_seconds": 30.0, "claims": {"unexplained": {"seconds": 12.0, "share": 0.4, "parts": ["iso"]}}}
            run.write_info({**run.read_info(), "time": spent})
    for k, seed in enumerate(range(100, 103)):  # the paper's recipe, where the first holds and the third does not
        claims = [_claim("small-recipe", True, measured=0.04), _claim("unexplained", False, measured=0.5)]
        _run(root, f"lsa-linear-paper-seed{seed}", seed, claims, minute=20 + k, scale="paper")
    also = {  # judged by the same runs: one gives a number, one only its verdicts
        "by-the-way": {100: [0.6, 0.6], 101: [0.61, 0.6], 102: [0.6, 0.61]},
        "no-number": {seed: [{"a": 1}, {"a": 2}] for seed in (100, 101, 102)},
    }
    _ladder(root, "laddered", {100: [0.4, 0.2], 101: [0.42, 0.25], 102: [0.38, 0.21]}, also)
    cost = {"seconds": 7200.0, "estimated": True, "threads": 2, "device": "cpu", "date": "2026-11-27"}
    board = aggregate(root, api.recipe)
    found = {d.row.id: d for d in diagnose(board, api.recipe_distance, lambda experiment: cost, sweep_changes)}
    assert set(found) == {"small-recipe", "laddered", "unexplained", "by-the-way", "no-number"}  # quick only
    # no paper number: followed by verdicts, every seed holding at 4000 steps
    assert found["by-the-way"].verdict.startswith("reaches holding at its last rung (train.steps = 4000)")
    assert found["no-number"].verdict.startswith(
        "reaches holding at its last rung (train.steps = 4000) (ladder-laddered)"
    )
    assert found["small-recipe"].verdict == (
        "reproduces at the paper's recipe (paper, holds on 3 of 3 seeds): the quick recipe is the cause"
    )
    assert found["unexplained"].verdict == "does not reproduce at the paper's recipe (paper, holds on 0 of 3 seeds)"
    # 0.4 → 0.22 over one doubling of 2000 steps, toward the sweep's own target 0.05: 0.17 more takes 0.65 of a
    # log unit at the mean slope (0.18 a doubling), before 20000
    assert found["laddered"].verdict.startswith(
        "moving toward its target as train.steps grows; at its mean slope it reaches it at train.steps ≈ 7.7e+03 "
        "(the paper's: 20000) (ladder-"
    )
    assert "the paper's recipe takes about 2 h 00 min a seed on 2 thread(s) of cpu (estimated from a timed run" in (
        found["laddered"].verdict
    )
    stand_in = dataclasses.replace(found["laddered"], cost={**cost, "overrides": {"data.path": "generated"}})
    assert "(estimated from a timed run with data.path changed, 2026-11-27)" in stand_in.verdict
    assert found["laddered"].distance == api.recipe_distance("lsa-linear", "quick")
    (_, followed), (_, by_verdicts) = found["laddered"].ladders[0], found["no-number"].ladders[0]
    assert followed.own_target and followed.target == 0.05  # the sweep's --claim-target, drawn as "the target"
    assert not by_verdicts.own_target and by_verdicts.verdicts
    diagnosed = diagnose(aggregate(root, api.recipe), api.recipe_distance, lambda experiment: None, sweep_changes)
    page = non_reproductions(diagnosed)
    assert "## `laddered` (lsa-linear, quick)" in page and "`train.steps`: 2000 → 20000" in page
    assert "- `ladder-laddered`: train.steps = 2000: 0.4, 4000: 0.22" in page
    assert "the paper recipe's cost on this machine is not measured" in page
    beside = "its measured number, with no paper number to move toward, beside the verdicts: train.steps = "
    assert f"{beside}2000: 0.6033, 4000: 0.6033 (mean over seeds): not moving as train.steps grows (a lead" in page
    assert page.count(beside) == 1  # no-number measures no number: its verdicts alone
    assert "**Its cost at this scale:** 12 s of `lsa-linear-seed100`'s 30 s (40%; parts iso)." in page
    assert page.count("**Its cost at this scale:**") == 1  # the runs that recorded none say nothing
    assert "## `fine`" not in page and json.dumps(page)  # a claim that reproduces has no section
    written = write_non_reproductions(diagnosed, tmp_path / "docs" / "page.md")
    figure = "non-reproductions/ladder-laddered_laddered.png"
    assert f"]({figure})" in written.read_text() and (tmp_path / "docs" / figure).stat().st_size > 0


def test_a_ladder_of_another_claim_that_measured_this_one_identically_does_not_diagnose_it(tmp_path):
    """A sweep of one model's steps also judges claims of another model it trains the same at every rung (e.g. the
    sparse model's steps and the linear model's shift claims): identical measurements at every rung say the swept
    key does not reach the claim, so it is no ladder of it, while its own claim keeps the ladder."""
    root = tmp_path / "runs"
    for k, seed in enumerate(range(100, 105)):
        claims = [_claim("laddered", False, measured=0.4), _claim("untouched", False, measured={"a": 0.7})]
        _run(root, f"lsa-linear-seed{seed}", seed, claims, minute=k)
    same = {seed: [{"a": 0.7}, {"a": 0.7}] for seed in (100, 101, 102)}
    _ladder(root, "laddered", {100: [0.4, 0.4], 101: [0.4, 0.4], 102: [0.4, 0.4]}, {"untouched": same})
    found = {
        d.row.id: d for d in diagnose(aggregate(root, api.recipe), api.recipe_distance, lambda e: None, sweep_changes)
    }
    assert [path.name for path, _ in found["laddered"].ladders] == ["ladder-laddered"]  # followed, even when flat
    assert not found["untouched"].ladders and found["untouched"].verdict.startswith("not diagnosed yet")


def test_a_claim_judged_over_seeds_says_its_test_where_it_does_not_reproduce(tmp_path):
    """Its seeds measure, the test over them judges: the page gives the test's numbers, not "0 of 0 seeds"."""
    _gain_runs(tmp_path, [(61.95, 61.26), (61.39, 62.6), (60.14, 60.13), (59.45, 58.92), (59.31, 59.31)])
    page = non_reproductions(diagnose(aggregate(tmp_path), api.recipe_distance, lambda experiment: None, sweep_changes))
    assert "Does not reproduce: mean 0.004 at 0.0" in page and "standard errors over 5 seeds (needs > 2)" in page
    assert "of 0 seeds" not in page


def test_a_ladder_judged_by_older_claims_is_set_apart_and_diagnoses_nothing(tmp_path):
    """A sweep whose points were judged before their experiment's claims changed says nothing of the current
    claims: its section lists it apart with what changed, and the claim stays undiagnosed until it is rejudged."""
    root = tmp_path / "runs"
    for k, seed in enumerate(range(100, 105)):
        _run(root, f"lsa-linear-seed{seed}", seed, [_claim("laddered", False, measured=0.4)], minute=k)
    version = api.recipe("lsa-linear", "quick").claims_version
    _ladder(root, "laddered", {100: [0.4, 0.1], 101: [0.4, 0.1], 102: [0.4, 0.1]}, claims_version=version - 1)
    assert sweep_changes(SweepFolder(root / "ladder-laddered")) == [f"claims version {version - 1} (now {version})"]
    (found,) = diagnose(aggregate(root, api.recipe), api.recipe_distance, lambda experiment: None, sweep_changes)
    assert not found.ladders and [path.name for path, _ in found.set_apart] == ["ladder-laddered"]
    assert found.verdict.startswith("not diagnosed yet: no run at the paper's recipe and no ladder of the current")
    page = non_reproductions([found])
    assert f"- `ladder-laddered`: claims version {version - 1} (now {version})" in page
    _ladder(root, "laddered", {100: [0.4, 0.1], 101: [0.4, 0.1], 102: [0.4, 0.1]}, name="ladder-laddered-claims9")
    (found,) = diagnose(aggregate(root, api.recipe), api.recipe_distance, lambda experiment: None, sweep_changes)
    assert [path.name for path, _ in found.ladders] == ["ladder-laddered-claims9"] and len(found.set_apart) == 1
    assert found.verdict.startswith("moving toward its target as train.steps grows; at its mean slope it reaches it at")
    assert "(the paper's: 20000) (ladder-laddered-claims9)" in found.verdict
    rejudged = SweepFolder(root / "ladder-laddered-claims9")  # made from the old one by `iclab rejudge`: replaces it
    rejudged.write_spec({**rejudged.read_spec(), "rejudged_from": "ladder-laddered"})
    (found,) = diagnose(aggregate(root, api.recipe), api.recipe_distance, lambda experiment: None, sweep_changes)
    assert [path.name for path, _ in found.ladders] == ["ladder-laddered-claims9"] and not found.set_apart
    shutil.rmtree(root / "ladder-laddered")  # the judged-again sweep moved to its source's name still diagnoses
    (root / "ladder-laddered-claims9").rename(root / "ladder-laddered")
    (found,) = diagnose(aggregate(root, api.recipe), api.recipe_distance, lambda experiment: None, sweep_changes)
    assert [path.name for path, _ in found.ladders] == ["ladder-laddered"] and not found.set_apart


def test_the_seed_table_and_the_scoreboard_give_a_non_reproduction_its_diagnosis(tmp_path):
    root = tmp_path / "runs"
    for k, seed in enumerate(range(100, 105)):
        claims = [
            _claim("fine", True),
            _claim("small-recipe", False, measured=0.3),
            _claim("open", False, measured=0.5),
        ]
        _run(root, f"abstract-symbols-seed{seed}", seed, claims, minute=k, experiment="abstract-symbols")
    for k, seed in enumerate(range(100, 103)):  # the part of the paper's recipe a CPU affords: never counted in quick
        claims = [_claim("small-recipe", True, measured=0.04)]
        _run(
            root, f"paper-cpu-seed{seed}", seed, claims, minute=20 + k, experiment="abstract-symbols", scale="paper-cpu"
        )
    api.report(root, seed_table=tmp_path / "table.md")
    cause = "reproduces at the paper's recipe (paper-cpu, holds on 3 of 3 seeds): the quick recipe is the cause"
    table = (tmp_path / "table.md").read_text()
    assert "| `small-recipe` | ✗ | ✗ | ✗ | ✗ | ✗ | 0/5 ✗ does not reproduce |" in table  # quick's verdict stands
    assert "| `small-recipe` | ✓ | ✓ | ✓ | 3/3 |" in table  # its own section
    assert "- `small-recipe`: seed 100: 0.3; seed 101: 0.3;" in table
    assert f"seed 104: 0.3. Diagnosis: {cause}" in table
    assert "seed 104: 0.5. Diagnosis: not diagnosed yet: no run at the paper's recipe and no ladder" in table
    page = (root / "index.html").read_text()
    assert f"diagnosis: {html.escape(cause)}" in page and page.count("class='diagnosis'") == 2


def test_every_step_of_the_diagnosis_plan_is_a_valid_command_of_a_valid_recipe(tmp_path, tool):
    """Each step's costliest run resolves and passes its experiment's checks, its command parses, and a ladder
    follows one of the claims it diagnoses along its one key, from its scale's recipe."""
    from iclab import experiments
    from iclab.cli import _parser

    plan = tool("diagnosis_plan")
    assert len({step.name for step in plan.PLAN}) == len(plan.PLAN)
    for step in plan.PLAN:
        experiments.get(step.experiment).configure(step.scale, step.costliest(), seeds=1)
        args = _parser().parse_args(step.command(tmp_path))
        assert args.command in ("reproduce", "sweep")
        if step.key is not None:
            assert step.follow.partition(":")[0] in step.claims and len(step.rungs) >= 3, step.name
            assert list(step.rungs) == sorted(step.rungs), step.name
    text = plan.show(tmp_path)
    assert all(f"{step.name} ({step.experiment})" in text for step in plan.PLAN)
    ladder = next(step for step in plan.PLAN if step.key is not None)
    (tmp_path / f"ladder-{ladder.name}").mkdir()
    (tmp_path / f"ladder-{ladder.name}" / "sweep.yaml").write_text("experiment: x\n")  # begun, then stopped
    assert ladder.command(tmp_path) == ["sweep", "--resume", str(tmp_path / f"ladder-{ladder.name}")]
    assert _parser().parse_args(ladder.command(tmp_path)).resume


def test_an_estimate_of_a_run_that_trains_nothing_says_so_rather_than_zero_seconds(tool):
    """The kernel's draws train no model: its timed run has no step rate, which is not a cost of 0 s."""
    plan = tool("diagnosis_plan")
    assert "cannot measure" in plan.cost_line({"models": {}, "seconds": 0.0, "threads": 2, "device": "cpu"})
    trained = {"models": {"gpt": {}}, "seconds": 125.0, "threads": 2, "device": "cpu"}
    assert plan.cost_line(trained) == "about 2 min 05 s a seed on 2 thread(s) of cpu"


def test_an_archive_of_the_runs_writes_the_same_pages_without_their_checkpoints(tmp_path):
    """``iclab archive``: the records of the finished runs and sweeps (no checkpoints) give the seed table and the
    non-reproductions page the runs themselves give; a second archive replaces the first's files."""
    root, records = tmp_path / "runs", tmp_path / "results"
    for k, seed in enumerate(range(100, 105)):
        run = _run(root, f"lsa-linear-seed{seed}", seed, [_claim("laddered", False, measured=0.4)], minute=k)
        run.checkpoints.mkdir()
        (run.checkpoints / "lsa.safetensors").write_bytes(b"weights")
    _run(root, "lsa-linear-unfinished", 100, None, minute=9)
    _ladder(root, "laddered", {100: [0.4, 0.2], 101: [0.42, 0.25], 102: [0.38, 0.21]})
    written = archive(root, records)
    assert [p.name for p in written] == ["ladder-laddered", *(f"lsa-linear-seed{s}" for s in range(100, 105))]
    assert not list(records.rglob("*.safetensors")) and not (records / "lsa-linear-unfinished").exists()
    pages = {}
    for folder in (root, records):
        api.report(folder, tmp_path / f"{folder.name}-table.md", tmp_path / f"{folder.name}-page.md")
        pages[folder.name] = [(tmp_path / f"{folder.name}-{page}.md").read_text() for page in ("table", "page")]
    assert pages["runs"] == pages["results"] and "moving toward its target" in pages["results"][1]
    (records / "lsa-linear-seed100" / "claims.json").write_text("[]")  # replaced by the next archive
    (root / "lsa-linear-seed101" / "metrics.parquet").unlink()  # gone from the run: gone from its record
    archive(root, records)
    assert json.loads((records / "lsa-linear-seed100" / "claims.json").read_text())
    assert not (records / "lsa-linear-seed101" / "metrics.parquet").exists()
    shutil.rmtree(root / "ladder-laddered")  # the ladder made again, one seed so far: its old points go
    _ladder(root, "laddered", {100: [0.4, 0.2]})
    archive(root, records)
    assert sorted(p.name for p in (records / "ladder-laddered").iterdir() if p.is_dir()) == [
        "train.steps=2000__seed=100",
        "train.steps=4000__seed=100",
    ]
    with pytest.raises(ConfigError, match="is a run or sweep folder"):
        archive(root / "lsa-linear-seed100", records)
