"""Parity with the authors' code: the record, the agreement rule, the shared driver harness (on a fake peer, so no
fetched code is needed) and the pages that show the records."""

import argparse
import math
import sys
from pathlib import Path

import pytest

from iclab.config import ConfigError
from iclab.parity import ParityRecord, Side, agreement, read_records
from iclab.report.parity import parity_page, summary_line

ROOT = Path(__file__).resolve().parent.parent
FAKE_PEER = Path(__file__).parent / "data" / "fake_peer"


def _record(ours, theirs, **changes) -> ParityRecord:
    fields = dict(
        experiment="abstract-symbols",
        quantity="aba-abb-plain-n1024",
        description="a test loss",
        claims=["aba-abb-plain-needs-1024"],
        recipe={"n": 1024},
        seeds=[0, 1, 2],
        iclab=Side(ours),
        authors=Side(theirs),
        peer={"repository": "someone/code", "commit": "abc1234"},
        test={"op": "<", "threshold": 0.2},
    )
    return ParityRecord(**{**fields, **changes})


def test_the_rule_agrees_within_two_pooled_standard_errors_or_ten_percent():
    spread = Side([0.2, 0.3, 0.4])  # standard error 0.0577
    found = agreement(Side([0.4, 0.5, 0.6]), spread)  # 0.2 apart: 2.45 pooled standard errors
    assert not found.agree and math.isclose(found.z, 0.2 / math.hypot(0.0577, 0.0577), rel_tol=1e-3)
    assert agreement(Side([0.35, 0.45, 0.55]), spread).agree  # 1.84 standard errors
    tight = Side([1.0, 1.0, 1.0])
    assert agreement(Side([1.09, 1.09, 1.09]), tight).agree  # no spread: 9% of the authors' mean
    assert not agreement(Side([1.11, 1.11, 1.11]), tight).agree


def test_a_record_runs_on_seeds_below_100_with_a_value_per_seed_and_reads_back(tmp_path):
    with pytest.raises(ConfigError, match="below 100"):
        _record([0.1, 0.2, 0.3], [0.1, 0.2, 0.3], seeds=[100, 101, 102])
    with pytest.raises(ConfigError, match="2 values for 3 seeds"):
        _record([0.1, 0.2], [0.1, 0.2, 0.3])
    record = _record([0.3, 0.35, 0.34], [0.28, 0.29, 0.3])
    path = record.write(tmp_path)
    assert path == tmp_path / "abstract-symbols" / "aba-abb-plain-n1024.json"
    assert read_records(tmp_path) == [record]
    assert record.holds(record.authors) is False and _record([0.1] * 3, [0.1] * 3).holds(Side([0.1])) is True
    path.write_text("{")
    with pytest.raises(ConfigError, match="not a parity record"):
        read_records(tmp_path)


def test_the_page_gives_both_sides_the_rule_and_the_claim_on_each():
    record = _record([0.3, 0.35, 0.34], [0.1, 0.12, 0.11])
    page = parity_page([record])
    row = next(line for line in page.splitlines() if line.startswith("| [aba-abb-plain-n1024]"))
    assert "0.33 ± 0.015" in row and "0.11 ± 0.0058" in row and "**no**" in row and "fails / holds" in row
    assert "disagree" in summary_line(record) and "holds in the authors' code" in summary_line(record)
    fitted = parity_page([_record([0.102] * 3, [0.105] * 3), _record([0.016] * 3, [0.053] * 3, quantity="four")])
    assert "| yes (3% of theirs, no spread) |" in fitted and "| **no** (70% of theirs, no spread) |" in fitted


def _harness(tmp_path, fail=False):
    sys.path.insert(0, str(ROOT / "benchmarks" / "parity"))
    import harness

    args = argparse.Namespace(
        peer=FAKE_PEER,
        python=sys.executable,
        threads=1,
        seeds=[0, 1, 2],
        only=None,
        again=False,
        iclab_again=False,
        records=tmp_path,
        list=False,
        peer_commit="",
    )
    script = FAKE_PEER / "train.py"
    theirs = lambda seed: harness.run_peer(args, script, ["--seed", str(seed), *(["--fail"] if fail else [])])
    comparison = harness.Comparison(
        "fake-quantity",
        "a value",
        ["some-claim"],
        {"n": 1},
        authors=lambda seed: theirs(seed)["value"],
        iclab=lambda seeds: [0.25 + 0.01 * s for s in seeds],
        test={"op": "<", "threshold": 0.2},
    )
    harness.measure(args, "abstract-symbols", {"repository": "fake/peer"}, [comparison])
    return tmp_path / "abstract-symbols" / "fake-quantity.json"


def test_the_harness_runs_a_peer_and_records_both_sides(tmp_path):
    record = ParityRecord.read(_harness(tmp_path))
    assert record.authors.values == pytest.approx([0.25, 0.26, 0.27]) and record.iclab.values == record.authors.values
    assert record.seeds == [0, 1, 2] and record.commit and agreement(record.iclab, record.authors).agree


def test_iclab_again_measures_iclab_after_a_fix_and_keeps_the_authors_side(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks" / "parity"))
    import harness

    path = _harness(tmp_path)
    before = ParityRecord.read(path)
    args = argparse.Namespace(only=None, again=False, iclab_again=True, records=tmp_path, seeds=[0, 1, 2], list=False)

    def theirs(seed):
        raise AssertionError("the authors' code must not run again")

    fixed = harness.Comparison(
        "fake-quantity", "a value", ["some-claim"], {"n": 1}, authors=theirs, iclab=lambda seeds: [0.1, 0.1, 0.1]
    )
    harness.measure(args, "abstract-symbols", {"repository": "fake/peer"}, [fixed])
    after = ParityRecord.read(path)
    assert after.authors == before.authors and after.iclab.values == [0.1, 0.1, 0.1]
    assert after.notes[-1] == f"the authors' side as measured on {before.date}"
    other = harness.Comparison("fake-quantity", "a value", [], {"n": 2}, authors=theirs, iclab=lambda seeds: [0.0])
    with pytest.raises(SystemExit, match="another recipe"):
        harness.measure(args, "abstract-symbols", {"repository": "fake/peer"}, [other])


def test_a_peer_that_fails_stops_the_driver_with_its_last_lines(tmp_path):
    with pytest.raises(SystemExit, match="the peer crashed"):
        _harness(tmp_path, fail=True)
    assert not (tmp_path / "abstract-symbols").exists()
