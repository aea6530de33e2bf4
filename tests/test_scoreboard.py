"""The scoreboard's aggregation over seeds, the markdown seed table, and claims judged at another
scale in every place claims are shown (report, scoreboard, seed table, compare, the CLI, the API).

The run folders here are written by hand (config, claims, run.json): the aggregation reads only
those files, so its cases (differing verdicts, a superseded and an unfinished run) need no training.
"""

import datetime as dt
import json
import re
import shutil

import pytest

from iclab import api
from iclab.claims import Claim, holds_over_seeds, judged_at, measured_text, tally
from iclab.cli import _print_result, main
from iclab.report import aggregate, write_index
from iclab.report.index import seed_table
from iclab.runs import RunFolder

PAPER = "A. Author (2024)"
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _claim(id: str, holds, measured=1.0, **extra) -> dict:
    claim = Claim(id, PAPER, f"the paper says {id}", measured, "< 2", holds, **extra)
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
    """A run folder as iclab writes it; ``claims`` None leaves it unfinished (no run.json, no claims.json)."""
    run = RunFolder.create(
        experiment, {"experiment": experiment, "scale": scale, "seed": seed, "seeds": seeds}, out=root / name
    )
    if claims is not None:
        run.write_info(
            {
                "started": (START + dt.timedelta(minutes=minute)).isoformat(),
                "wall_seconds": 30.0,
                "cpu_seconds": 50.0,
                "device": "cpu",
            }
        )
        run.claims_file.write_text(json.dumps(claims))
    return run


def _elsewhere(id: str, measured=0.5) -> dict:
    claim = Claim(id, PAPER, f"the paper says {id}", measured, "< 0.1", False)
    return judged_at(claim, "paper", "needs 10x the steps").to_dict()


@pytest.fixture
def five_seeds(tmp_path):
    """lsa-linear quick on seeds 0-4: ``four`` holds on 4 of 5, ``three`` on 3 of 5, ``far`` is judged at
    paper scale everywhere, ``mixed`` judged here on seeds 1-4 (all hold) and at paper scale on seed 0.
    Seed 0 also has an older run where everything failed (superseded), and seed 5 an unfinished run."""
    root = tmp_path / "runs"
    _run(
        root,
        "lsa-linear-seed0-old",
        0,
        [_claim("four", False), _claim("three", False), _elsewhere("far"), _claim("mixed", False)],
        minute=0,
    )
    for seed in range(5):
        claims = [
            _claim("four", seed != 2, measured={"5": [4.6246 + seed, 5.1874], "20": [2.6488, 4.5585]}),
            _claim("three", seed < 3, measured=0.1 * (seed + 1)),
            _elsewhere("far", measured=0.5 + seed),
            _elsewhere("mixed") if seed == 0 else _claim("mixed", True),
        ]
        _run(root, f"lsa-linear-seed{seed}-new", seed, claims, minute=10 + seed)
    _run(root, "lsa-linear-seed5-unfinished", 5, None, minute=20)
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
        **{f"lsa-linear-seed{s}-new": "counted" for s in range(5)},
        "lsa-linear-seed0-old": "superseded",
        "lsa-linear-seed5-unfinished": "not finished",
    }
    rows = {row.id: row for row in board.rows}
    assert list(rows) == ["four", "three", "far", "mixed"]
    assert [r.seed for r in rows["four"].runs()] == [0, 1, 2, 3, 4]
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
    # four and mixed hold by the rule, three fails, far is counted apart.
    assert (
        "2 of 3 claims hold over seeds (1 more measured, judged at another scale); seeds 0–4 of 1 experiment in 5 runs"
        in text
    )
    assert "wall time 2 min 30 s (sum over those runs)" in text
    assert "also 1 superseded, 1 not finished (not counted)" in text
    assert "at least 4 of 5 seeds (80%" in text
    rows = {re.search(r"<b>([a-z]+)</b>", row).group(1): row for row in page.split("<tr>")[1:] if "<b>" in row}
    assert "holds</span><br><small>on 4 of 5 seeds" in rows["four"]
    assert "FAILS</span><br><small>on 3 of 5 seeds" in rows["three"]
    assert "measured, judged at paper scale" in rows["far"] and "needs 10x the steps" in rows["far"]
    assert "FAILS" not in rows["far"] and "holds<" not in rows["far"]
    assert "on 4 of 4 seeds; 1 more judged at paper scale" in rows["mixed"]
    # Each seed's value on demand, as text, with its run's claim link (no figure here: the claim's row).
    assert rows["four"].count("<details>") == 1 and "{" not in _text(rows["four"])
    assert "seed 2: ✗ 5: 6.625, 5.187; 20: 2.649, 4.559" in _text(rows["four"])
    for seed in range(5):
        assert f"lsa-linear-seed{seed}-new/report.html#claim-four" in rows["four"]
    assert "lsa-linear-seed0-old/report.html#claim" not in page  # superseded: not counted, not linked as evidence
    assert "0.1 – 0.5 (5 seeds)" in _text(rows["three"])
    assert "superseded by lsa-linear-seed0-new" in text and "not finished" in text


def test_markdown_seed_table(five_seeds):
    table = seed_table(five_seeds)
    assert "| lsa-linear (quick) claim | seed 0 | seed 1 | seed 2 | seed 3 | seed 4 | holds |" in table
    assert "| `four` | ✓ | ✓ | ✗ | ✓ | ✓ | 4/5 |" in table
    assert "| `three` | ✓ | ✓ | ✓ | ✗ | ✗ | 3/5 ⚠ |" in table
    assert "| `far` | ○ | ○ | ○ | ○ | ○ | judged at paper scale |" in table  # neither ✓ nor ✗
    assert "| `mixed` | ○ | ✓ | ✓ | ✓ | ✓ | 4/4 (+1 judged at paper scale) |" in table
    assert "lsa-linear seed 0: 30 s" in table and "seed 5" not in table


def test_report_seed_table_command(five_seeds, tmp_path, capsys):
    out = tmp_path / "docs" / "seed-table.md"
    assert main(["report", str(five_seeds), "--seed-table", str(out)]) == 0
    assert out.read_text() == seed_table(five_seeds) and (five_seeds / "index.html").exists()
    assert f"seed table: {out}" in capsys.readouterr().out
    run = five_seeds / "lsa-linear-seed1-new"
    assert main(["report", str(run), "--seed-table", str(tmp_path / "x.md")]) == 2
    assert "tables a folder of runs" in capsys.readouterr().err and not (tmp_path / "x.md").exists()


def test_runs_of_several_seeds_count_once_and_show_their_seeds(tmp_path):
    root = tmp_path / "runs"
    for seed in (0, 3):
        _run(
            root,
            f"symbols-lm-seed{seed}",
            seed,
            [_claim("gain", seed == 0)],
            minute=seed,
            experiment="symbols-lm",
            seeds=3,
        )
    _run(root, "symbols-lm-paper", 0, [_claim("gain", True)], minute=9, experiment="symbols-lm", scale="paper")
    board = aggregate(root)
    quick, paper = board.rows
    assert (quick.scale, quick.held, quick.judged, paper.scale, paper.judged) == ("quick", 1, 2, "paper", 1)
    assert "| symbols-lm (quick) claim | seeds 0–2 | seeds 3–5 | holds |" in seed_table(root)
    text = _text(write_index(root).read_text())
    assert "FAILS on 1 of 2 runs" in text and "0–5" in text


def _judged_copy(run, tmp_path) -> RunFolder:
    """A copy of a finished run whose first claim is measured but judged at paper scale."""
    copy = tmp_path / "judged"
    shutil.copytree(run.path, copy)
    claims = json.loads((copy / "claims.json").read_text())
    claims[0].update(holds=None, judged_at="paper", reason="the quick scale trains 20 steps")
    (copy / "claims.json").write_text(json.dumps(claims))
    return RunFolder(copy)


def test_claims_judged_elsewhere_in_report_cli_compare_and_api(tiny_runs, tmp_path, capsys):
    _, runs = tiny_runs
    judged = _judged_copy(runs["a"].folder, tmp_path)
    claims = judged.read_claims()
    page = api.report(judged.path).read_text()
    first = claims[0]["id"]
    row = _text(re.search(f"<tr id='claim-{first}'>.*?</tr>", page).group(0))
    assert "measured, judged at paper scale" in row and "the quick scale trains 20 steps" in row
    assert "FAILS" not in row and "holds" not in row
    held = tally(claims).held
    assert f"{held} of {len(claims) - 1} claims hold (1 more measured, judged at another scale)" in _text(page)

    result = api.RunResult(judged, claims)
    _print_result(result)
    out = capsys.readouterr().out
    assert f"[measured, judged at paper scale] {first}: measured" in out and "(the quick scale trains 20 steps)" in out
    assert result.all_hold == all(c["holds"] for c in claims[1:])
    assert api.RunResult(judged, [claims[0]]).all_hold  # nothing judged here fails

    assert main(["compare", str(runs["a"].path), str(judged.path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith(first))
    assert line.rstrip().endswith("measured, judged at paper scale")
