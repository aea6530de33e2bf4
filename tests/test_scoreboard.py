"""The scoreboard's aggregation over seeds, the markdown seed table, and claims judged at another
scale in every place claims are shown (report, scoreboard, seed table, compare, the CLI, the API).

The run folders here are written by hand (config, claims, run.json): the aggregation reads only
those files, so its cases (differing verdicts, a superseded and an unfinished run) need no training.
"""

import datetime as dt
import html
import json
import re
import shutil

import pytest

from iclab import api
from iclab.claims import Claim, holds_over_seeds, judged_at, measured_text, over_seeds, summary
from iclab.cli import _print_result, main
from iclab.report import aggregate, write_index
from iclab.report.index import seed_table
from iclab.runs import RunFolder

PAPER = "A. Author (2024)"
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _claim(id: str, holds, measured=1.0, kind="paper", **extra) -> dict:
    source = "Fig 1" if kind == "paper" else None
    claim = Claim(id, PAPER, f"the paper says {id}", measured, "< 2", holds, kind, "trained", source, **extra)
    return claim.to_dict()


def _run(
    root,
    name: str,
    seed: int,
    claims: list[dict] | None,
    minute: int,
    experiment: str = "lsa-linear",
    scale: str = "quick",
    seeds: int = 1,
) -> RunFolder:
    """A run folder as iclab writes it, of its scale's current recipe (its fingerprint); ``claims`` None leaves it
    unfinished (no run.json, no claims.json). Its metrics.parquet holds no row."""
    run = RunFolder.create(
        experiment, {"experiment": experiment, "scale": scale, "seed": seed, "seeds": seeds}, out=root / name
    )
    if claims is not None:
        run.write_metrics([])
        run.write_info(
            {
                "started": (START + dt.timedelta(minutes=minute)).isoformat(),
                "wall_seconds": 30.0,
                "cpu_seconds": 50.0,
                "device": "cpu",
                "fingerprint": api.recipe(experiment, scale).fingerprint,
            }
        )
        run.claims_file.write_text(json.dumps(claims))
    return run


def _elsewhere(id: str, measured=0.5) -> dict:
    claim = Claim(id, PAPER, f"the paper says {id}", measured, "< 0.1", False, "paper", "trained", "Fig 2")
    return judged_at(claim, "long", "the model's distance to OLS", needed=0.01, reached=0.1).to_dict()


@pytest.fixture
def five_seeds(tmp_path):
    """lsa-linear quick on the evaluation seeds 100-104: ``four`` holds on 4 of 5, ``three`` (with the paper's
    number 0.2) on 3 of 5, ``far`` is judged at long scale everywhere, ``mixed`` judged here on seeds 101-104
    (all hold) and at long scale on seed 100; the diagnostic ``sane`` fails on 2 of 5. Seed 100 also has an
    older run where everything failed (superseded), seed 103 a newer unfinished run and seed 7 (a tuning seed)
    a finished run that is listed apart and never counted."""
    root = tmp_path / "runs"
    _run(
        root,
        "lsa-linear-seed100-old",
        100,
        [_claim("four", False), _claim("three", False), _elsewhere("far"), _claim("mixed", False)],
        minute=0,
    )
    for k, seed in enumerate(range(100, 105)):
        claims = [
            _claim("four", seed != 102, measured={"5": [4.6246 + k, 5.1874], "20": [2.6488, 4.5585]}),
            _claim("three", k < 3, measured=0.1 * (k + 1), paper_value=0.2),
            _elsewhere("far", measured=0.5 + k),
            _elsewhere("mixed") if k == 0 else _claim("mixed", True),
            _claim("sane", k < 3, kind="diagnostic"),
        ]
        _run(root, f"lsa-linear-seed{seed}-new", seed, claims, minute=10 + k)
    _run(root, "lsa-linear-seed103-unfinished", 103, None, minute=20)
    _run(root, "lsa-linear-seed7", 7, [_claim("four", True), _claim("three", True)], minute=30)
    return root


def test_seed_rule_at_its_boundary():
    assert holds_over_seeds(4, 5) and not holds_over_seeds(3, 5)
    assert holds_over_seeds(8, 10) and not holds_over_seeds(7, 10)
    assert holds_over_seeds(1, 1) and not holds_over_seeds(0, 1)  # one seed: holds iff it holds on it
    assert holds_over_seeds(2, 2) and not holds_over_seeds(1, 2)
    assert holds_over_seeds(0, 0) is None  # judged on no seed here


def test_measured_values_read_as_labelled_numbers():
    assert measured_text({"5": [4.6246, 5.1874], "20": [2.6488, 4.5585]}) == "5: 4.625, 5.187; 20: 2.649, 4.559"
    assert measured_text(0.123456) == "0.1235" and measured_text(3) == "3" and measured_text("a < b") == "a < b"
    assert measured_text([["ols", 0.1234567], ["ridge", 2]]) == "ols: 0.1235; ridge: 2"  # (label, value) pairs
    assert (
        measured_text({"a": {"x": [1, 2.5], "y": None}, "b": [[1, 2], [3, 4]]})
        == "a: (x: 1, 2.5; y: none); b: (1, 2), (3, 4)"
    )
    assert measured_text(float("inf")) == "inf" and measured_text([]) == "none" and measured_text(True) == "yes"


def test_aggregation_counts_the_newest_finished_run_per_seed(five_seeds):
    board = aggregate(five_seeds)
    status = {r.folder.path.name: r.status for r in board.runs}
    assert status == {
        **{f"lsa-linear-seed{s}-new": "counted" for s in range(100, 105)},
        "lsa-linear-seed100-old": "superseded",
        "lsa-linear-seed103-unfinished": "not finished",
        "lsa-linear-seed7": "not evaluation seeds",
    }
    rows = {row.id: row for row in board.rows}
    assert list(rows) == ["four", "three", "far", "mixed", "sane"]
    assert [row.kind for row in rows.values()] == ["paper"] * 4 + ["diagnostic"]
    assert [r.seed for r in rows["four"].runs()] == [100, 101, 102, 103, 104]  # seed 7's run is not among them
    assert (rows["four"].held, rows["four"].judged, rows["four"].holds) == (4, 5, True)
    assert (rows["three"].held, rows["three"].judged, rows["three"].holds) == (3, 5, False)
    assert (rows["far"].judged, len(rows["far"].elsewhere), rows["far"].holds) == (0, 5, None)
    assert (rows["mixed"].held, rows["mixed"].judged, len(rows["mixed"].elsewhere), rows["mixed"].holds) == (
        4,
        4,
        1,
        True,
    )


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def test_scoreboard_page_tallies_over_seeds(five_seeds):
    page = write_index(five_seeds).read_text()
    text = _text(page)
    # four and mixed hold by the rule, three does not reproduce, far is counted apart; the diagnostic apart.
    assert (
        "Paper claims: 2 of 3 hold, 1 does not reproduce here, 1 judged at another scale over seeds; diagnostics: 0 "
        "of 1 hold, 1 fails; seeds 100–104 of 1 experiment in 5 runs" in text
    )
    assert "wall time 2 min 30 s (sum over those runs)" in text
    assert "also 1 superseded, 1 not finished, 1 not evaluation seeds (not counted)" in text
    assert "at least 4 of 5 seeds (80%" in text and "only runs on the evaluation seeds 100–104 count" in text
    claims, diagnostics = page.split("<h2 id='diagnostics'>")[0], page.split("<h2 id='diagnostics'>")[1]
    rows = {re.search(r"<b>([a-z]+)</b>", row).group(1): row for row in claims.split("<tr>")[1:] if "<b>" in row}
    assert set(rows) == {"four", "three", "far", "mixed"}  # the paper's claims; the diagnostic has its own table
    assert "holds</span><br><small>on 4 of 5 seeds" in rows["four"]
    assert "does not reproduce here</span><br><small>on 3 of 5 seeds" in rows["three"]
    assert "<td data-label='the paper&#x27;s number'>0.2</td>" in rows["three"] and "Fig 1" in rows["three"]
    assert (
        "measured, judged at long scale" in rows["far"] and "the claim needs 0.01, this run reaches 0.1" in rows["far"]
    )
    assert "does not reproduce" not in rows["far"] and "holds<" not in rows["far"]
    assert "on 4 of 4 seeds; 1 more judged at long scale" in rows["mixed"]
    sane = diagnostics.split("<h2")[0]
    assert "<b>sane</b>" in sane and "FAILS</span><br><small>on 3 of 5 seeds" in sane
    # Each seed's value on demand, as text, with its run's claim link (no figure here: the claim's row).
    assert rows["four"].count("<details>") == 1 and "{" not in _text(rows["four"])
    assert "seed 102: ✗ 5: 6.625, 5.187; 20: 2.649, 4.559" in _text(rows["four"])
    for seed in range(100, 105):
        assert f"lsa-linear-seed{seed}-new/report.html#claim-four" in rows["four"]
    assert "lsa-linear-seed100-old/report.html#claim" not in page  # superseded: not counted, not linked as evidence
    assert "0.1 – 0.5 (5 seeds)" in _text(rows["three"])
    assert "superseded by lsa-linear-seed100-new" in text and "not finished" in text
    # The tuning seed's run is listed apart, with its own verdicts, after the evaluation seeds' runs.
    others = page.split("<h2 id='other-runs'>")[1]
    assert "lsa-linear-seed7" in others and "lsa-linear-seed7" not in page.split("<h2 id='other-runs'>")[0]


def test_markdown_seed_table(five_seeds):
    table = seed_table(five_seeds)
    seeds = "seed 100 | seed 101 | seed 102 | seed 103 | seed 104"
    assert f"| lsa-linear (quick) paper claim | {seeds} | holds | the paper's number |" in table
    assert "| `four` | ✓ | ✓ | ✗ | ✓ | ✓ | 4/5 | – |" in table
    assert "| `three` | ✓ | ✓ | ✓ | ✗ | ✗ | 3/5 ✗ does not reproduce | 0.2 |" in table
    assert "| `far` | ○ | ○ | ○ | ○ | ○ | judged at long scale | – |" in table  # neither ✓ nor ✗
    assert "| `mixed` | ○ | ✓ | ✓ | ✓ | ✓ | 4/4 (+1 judged at long scale) | – |" in table
    assert f"| lsa-linear (quick) diagnostic | {seeds} | holds |" in table
    assert "| `sane` | ✓ | ✓ | ✓ | ✗ | ✗ | 3/5 ⚠ |" in table
    # A claim that does not reproduce lists its measured values beside the paper's number.
    assert (
        "- `three`: seed 100: 0.1; seed 101: 0.2; seed 102: 0.3; seed 103: 0.4; seed 104: 0.5 (the paper: 0.2)" in table
    )
    assert "lsa-linear seed 100: 30 s" in table and "seed 105" not in table and "seed 7" not in table


def test_a_variant_is_shown_apart_and_never_counted(five_seeds):
    """A run whose config differs from its scale's recipe (a newer 50-step run of seed 101 that fails
    everything) neither counts nor supersedes the recipe's run of that seed."""
    variant = _run(five_seeds, "lsa-linear-seed101-short", 101, [_claim("four", False), _claim("three", False)], 40)
    variant.write_info({**variant.read_info(), "recipe_changes": {"train.steps": 50}})
    board = aggregate(five_seeds)
    status = {r.folder.path.name: r.status_text() for r in board.runs}
    assert status["lsa-linear-seed101-short"] == "variant: train.steps=50"
    assert status["lsa-linear-seed101-new"] == "counted"
    four = next(row for row in board.rows if row.id == "four")
    assert (four.held, four.judged) == (4, 5) and variant.path not in [r.folder.path for r in four.runs()]
    page = write_index(five_seeds).read_text()
    counted, others = page.split("<h2 id='other-runs'>")
    assert "lsa-linear-seed101-short" in others and "lsa-linear-seed101-short" not in counted
    assert "variant: train.steps=50" in _text(others)
    assert "1 not evaluation seeds, 1 variant (not counted)" in _text(page)
    table = seed_table(five_seeds)
    assert "- lsa-linear-seed101-short (lsa-linear, quick, seed 101): variant: train.steps=50" in table
    assert "| `four` | ✓ | ✓ | ✗ | ✓ | ✓ | 4/5 | – |" in table


def test_report_seed_table_command(five_seeds, tmp_path, capsys):
    out = tmp_path / "docs" / "seed-table.md"
    assert main(["report", str(five_seeds), "--seed-table", str(out)]) == 0
    assert (
        out.read_text() == seed_table(five_seeds, api.recipe, api.diagnose(five_seeds))
        and (five_seeds / "index.html").exists()
    )
    assert "| `four` | ✓ | ✓ | ✗ | ✓ | ✓ | 4/5 | – |" in out.read_text()  # runs of the current recipe count
    assert f"seed table: {out}" in capsys.readouterr().out
    run = five_seeds / "lsa-linear-seed101-new"
    assert main(["report", str(run), "--seed-table", str(tmp_path / "x.md")]) == 2
    assert "read a folder of runs" in capsys.readouterr().err and not (tmp_path / "x.md").exists()


def _seeds_claims(verdicts: dict[int, bool]) -> list[dict]:
    """``claims.json`` of a run of several seeds whose claim ``gain`` holds on each seed as given."""
    claim = lambda seed, ok: Claim(
        "gain", PAPER, "the paper says gain", float(seed), "< 2", ok, "paper", "trained", "F"
    )
    return over_seeds({seed: [claim(seed, ok)] for seed, ok in verdicts.items()})


def test_a_run_of_several_seeds_counts_each_seed_as_runs_of_one_seed_do(tmp_path):
    root = tmp_path / "runs"
    lm = {"experiment": "symbols-lm"}
    _run(root, "lm-seeds100-101", 100, _seeds_claims({100: True, 101: False}), minute=0, seeds=2, **lm)
    _run(root, "lm-seed102-old", 102, [_claim("gain", False)], minute=1, **lm)
    _run(root, "lm-seed102", 102, [_claim("gain", True)], minute=2, **lm)
    _run(root, "lm-seeds103-104", 103, _seeds_claims({103: True, 104: False}), minute=3, seeds=2, **lm)
    _run(root, "lm-seed104", 104, [_claim("gain", True)], minute=4, **lm)  # newer: seed 104 counts from here
    _run(root, "lm-beyond", 103, _seeds_claims({103: True, 104: True, 105: True}), minute=5, seeds=3, **lm)
    board = aggregate(root)
    (row,) = board.rows
    assert row.seeds() == [100, 101, 102, 103, 104] and (row.held, row.judged, row.holds) == (4, 5, True)
    assert {r.folder.path.name: r.status for r in board.runs} == {
        "lm-seeds100-101": "counted",
        "lm-seed102-old": "superseded",
        "lm-seed102": "counted",
        "lm-seeds103-104": "counted",  # for its seed 103
        "lm-seed104": "counted",
        "lm-beyond": "not evaluation seeds",  # its seeds reach beyond 100–104
    }
    table = seed_table(root)
    assert "| symbols-lm (quick) paper claim | seed 100 | seed 101 | seed 102 | seed 103 | seed 104 | holds |" in table
    assert "| `gain` | ✓ | ✗ | ✓ | ✓ | ✓ | 4/5 |" in table
    assert "holds on 4 of 5 seeds" in _text(write_index(root).read_text())


def _judged_copy(run, tmp_path) -> RunFolder:
    """A copy of a finished run whose first claim is measured but judged at paper scale."""
    copy = tmp_path / "judged"
    shutil.copytree(run.path, copy)
    claims = json.loads((copy / "claims.json").read_text())
    claims[0].update(holds=None, judged_at="long", reason="the quick scale trains 20 steps")
    (copy / "claims.json").write_text(json.dumps(claims))
    return RunFolder(copy)


def test_claims_judged_elsewhere_in_report_cli_compare_and_api(tiny_runs, tmp_path, capsys):
    _, runs = tiny_runs
    judged = _judged_copy(runs["a"].folder, tmp_path)
    claims = judged.read_claims()
    page = api.report(judged.path).read_text()
    first = claims[0]["id"]
    row = _text(re.search(f"<tr id='claim-{first}'>.*?</tr>", page).group(0))
    assert "measured, judged at long scale" in row and "the quick scale trains 20 steps" in row
    assert "does not reproduce" not in row and "holds" not in row
    assert summary(claims) in _text(page) and "1 judged at another scale" in summary(claims)

    result = api.RunResult(judged, claims)
    _print_result(result)
    out = capsys.readouterr().out
    assert f"[measured, judged at long scale] {first}: measured" in out and "(the quick scale trains 20 steps)" in out
    assert result.all_hold == all(c["holds"] for c in claims[1:])
    assert api.RunResult(judged, [claims[0]]).all_hold  # nothing judged here fails

    assert main(["compare", str(runs["a"].path), str(judged.path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith(first))
    assert line.rstrip().endswith("measured, judged at long scale")


def test_runs_of_an_older_recipe_or_older_claims_are_listed_apart(five_seeds):
    """With the current recipes given, a run counts only when its run.json fingerprint is its recipe's: one of an
    older claims version, one of an older recipe and one with no fingerprint are listed apart with what changed."""
    from iclab.runs import Recipe

    now = Recipe({"experiment": "lsa-linear", "scale": "quick", "train": {"steps": 2000}}, claims_version=2)
    older_recipe = Recipe({**now.config, "train": {"steps": 1000}}, claims_version=2)
    fingerprints = {100: now.fingerprint, 101: {**now.fingerprint, "claims": 1}, 102: older_recipe.fingerprint}
    fingerprints |= {103: now.fingerprint, 104: None}  # seed 104: a run from before fingerprints
    for seed, fingerprint in fingerprints.items():
        run = RunFolder(five_seeds / f"lsa-linear-seed{seed}-new")
        run.write_config({**run.read_config(), "train": {"steps": 1000 if seed == 102 else 2000}})
        info = {key: value for key, value in run.read_info().items() if key != "fingerprint"}
        run.write_info(info | ({"fingerprint": fingerprint} if fingerprint else {}))
    board = aggregate(five_seeds, lambda experiment, scale: now)
    status = {r.folder.path.name: r.status_text() for r in board.runs}
    assert status["lsa-linear-seed100-new"] == status["lsa-linear-seed103-new"] == "counted"
    assert status["lsa-linear-seed101-new"] == "older: claims version 1 (now 2)"
    assert status["lsa-linear-seed102-new"] == "older: recipe changed since: train.steps 1000 → 2000"
    assert status["lsa-linear-seed104-new"].startswith("older: run by an iclab that recorded no fingerprint")
    four = next(row for row in board.rows if row.id == "four")
    assert four.seeds() == [100, 103]  # seeds 101, 102 and 104 have no run of the current recipe
    table = seed_table(five_seeds, lambda experiment, scale: now)
    assert "- lsa-linear-seed101-new (lsa-linear, quick, seed 101): older: claims version 1 (now 2)" in table
    assert aggregate(five_seeds).rows[0].seeds() == [100, 101, 102, 103, 104]  # without recipes nothing is older
    gone = aggregate(five_seeds, lambda experiment, scale: None)  # a scale that no longer resolves
    assert not gone.rows and "older: its recipe no longer exists" in {r.status_text() for r in gone.runs}


def test_a_finished_run_records_the_fingerprint_of_its_recipe(tiny_runs):
    """A run's run.json fingerprint is what api.recipe gives for its config; the recipe of another claims version
    or config says what changed."""
    from iclab.runs import Recipe

    _, runs = tiny_runs
    folder = runs["a"].folder
    config, fingerprint = folder.read_config(), folder.read_info()["fingerprint"]
    assert set(fingerprint) == {"recipe", "claims"} and len(fingerprint["recipe"]) == 16
    recipe = api.recipe("lsa-linear", config["scale"])
    assert recipe.changes(config, recipe.fingerprint) == []
    assert Recipe(recipe.config, recipe.claims_version + 1).changes(config, recipe.fingerprint) == [
        f"claims version {recipe.claims_version} (now {recipe.claims_version + 1})"
    ]
    assert api.recipe("lsa-linear", "no-such-scale") is None


def test_how_a_device_runs_the_steps_is_not_part_of_a_recipe(tiny_runs):
    """train.capture (in any training block) says how a GPU runs the steps, not what they compute: a run that sets
    it is no variant, and a config written before the key existed has its recipe's fingerprint."""
    from iclab.runs import Recipe

    _, runs = tiny_runs
    config = runs["a"].folder.read_config()
    recipe = api.recipe("lsa-linear", config["scale"])
    captured = {**config, "train": {**config["train"], "capture": True}}
    assert api.recipe_changes(captured) == api.recipe_changes(config)
    before = {**config, "train": {k: v for k, v in config["train"].items() if k != "capture"}}
    assert "capture" in config["train"] and Recipe(api._normal(before), recipe.claims_version).fingerprint == (
        Recipe(api._normal(config), recipe.claims_version).fingerprint
    )
    nested = api._normal({"probe": {"train": {"capture": True, "lr": 0.1}}, "capture": 1})
    assert nested == {"probe": {"train": {"lr": 0.1}}, "capture": 1}  # a training block's key only
    stale = {**recipe.fingerprint, "recipe": "0" * 16}  # recorded by an iclab that hashed the key: named by others
    own = {**recipe.config, "train": {**recipe.config["train"], "capture": True}, "eval_prompts": 7}
    assert recipe.changes(own, stale) == [f"recipe changed since: eval_prompts 7 → {recipe.config['eval_prompts']!r}"]


def _gain_runs(root, gains: list[tuple[float, float]], name="lm"):
    """One-seed symbols-lm runs on seeds 100, 101, ... whose claim ``gain`` is judged over seeds together, each
    seed measuring the pair (plain, modified) perplexities given."""
    from iclab.claims import over_seeds_test, paper

    for k, pair in enumerate(gains):
        claim = over_seeds_test("gain", PAPER, "lower perplexity", {"pair": list(pair)}, pair, 2.0, about=paper("F"))
        _run(root, f"{name}-seed{100 + k}", 100 + k, [claim.to_dict()], minute=k, experiment="symbols-lm")


def test_a_claim_judged_over_seeds_takes_its_verdict_from_the_counted_seeds_together(tmp_path):
    """Each seed's entry is measured, not judged; the verdict is the test over the counted seeds: the difference of
    the two means against 2 standard errors of it."""
    clear = tmp_path / "clear"
    _gain_runs(clear, [(60.0, 58.0), (61.0, 59.2), (59.5, 57.4), (60.4, 58.9), (60.1, 58.0)])
    (row,) = aggregate(clear).rows
    assert row.holds is True and row.seed_test[1]["seeds"] == 5
    assert "| `gain` | ○ | ○ | ○ | ○ | ○ | mean 1.9 at" in seed_table(clear)
    noisy = tmp_path / "noisy"
    _gain_runs(noisy, [(61.95, 61.26), (61.39, 62.6), (60.14, 60.13), (59.45, 58.92), (59.31, 59.31)])
    (row,) = aggregate(noisy).rows
    assert row.holds is False and abs(row.seed_test[1]["mean"] - 0.004) < 1e-9
    assert "✗ does not reproduce" in seed_table(noisy) and "over seeds: mean 0.004 at" in seed_table(noisy)
    one = tmp_path / "one"
    _gain_runs(one, [(60.0, 58.0)])
    (row,) = aggregate(one).rows
    assert row.holds is None and "the test needs 2" in row.seed_test_text()
    page = _text(write_index(noisy).read_text())
    assert "does not reproduce here" in page and "standard errors over 5 seeds" in page


def test_a_report_of_a_folder_reads_each_run_once_for_all_its_pages(tmp_path, monkeypatch):
    """The index, the seed table and the non-reproductions page are written from one reading of the runs."""
    from iclab.report import index

    root = tmp_path / "runs"
    for k, seed in enumerate(range(100, 103)):
        _run(root, f"lsa-linear-seed{seed}", seed, [_claim("four", k > 0)], minute=k)
    read = []
    original = index.Run.__init__

    def counted(self, run, *args):
        read.append(run.path)
        original(self, run, *args)

    monkeypatch.setattr(index.Run, "__init__", counted)
    api.report(root, seed_table=tmp_path / "table.md", non_reproductions=tmp_path / "why.md")
    assert sorted(read) == sorted(p for p in root.iterdir() if p.is_dir())
    assert "`four`" in (tmp_path / "why.md").read_text() and "`four`" in (tmp_path / "table.md").read_text()


def test_a_rejudged_runs_wall_is_shown_as_its_evaluation_alone(tmp_path):
    root = tmp_path / "runs"
    run = _run(root, "lsa-linear-seed100-claims9", 100, [_claim("four", True)], minute=0)
    run.write_info({**run.read_info(), "wall_seconds": 90.0, "rejudged_from": "lsa-linear-seed100"})
    table = seed_table(root)
    assert "lsa-linear seed 100: 1 min 30 s (evaluation only: the models of lsa-linear-seed100, judged again)" in table


def test_a_theory_claim_is_marked_as_a_check_of_iclabs_derivation(tmp_path):
    """A paper claim about the theory (a closed form iclab computes) is shown apart from the claims about trained
    models in the seed table and on the scoreboard: only a defect of iclab's can fail it."""
    from iclab.claims import THEORY_NOTE

    root = tmp_path / "runs"
    derived = Claim("flow", PAPER, "the flow converges", 0.0, "< 1", True, "paper", "theory", "Thm 1").to_dict()
    for minute, seed in enumerate(range(100, 105)):
        _run(root, f"lsa-linear-seed{seed}", seed, [derived, _claim("four", True)], minute=minute)
    table = seed_table(root)
    assert "| `flow` (theory) | ✓ | ✓ | ✓ | ✓ | ✓ | 5/5 | – |" in table and "| `four` | ✓" in table
    assert THEORY_NOTE in table and THEORY_NOTE in html.unescape(write_index(root).read_text())
