"""Every claim's value at the smoke scale is the one recorded in tests/data/smoke_claims.json (written by
tools/smoke_claims.py): code that only reorganises leaves every verdict and measured number where it was."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from smoke_claims import RECORD, same, smoke_claims  # noqa: E402

RECORDED = json.loads(RECORD.read_text())


def test_every_experiment_is_recorded_with_its_claims_version():
    import iclab
    from iclab import experiments

    assert set(RECORDED) == {name for name, _ in iclab.list_experiments()}
    versions = {name: RECORDED[name]["claims_version"] for name in RECORDED}
    assert versions == {name: experiments.get(name).claims_version for name in RECORDED}


@pytest.mark.parametrize("experiment", sorted(RECORDED))
def test_every_smoke_claim_is_as_recorded(experiment, tmp_path):
    now, record = json.loads(json.dumps(smoke_claims(experiment, tmp_path))), RECORDED[experiment]["claims"]
    assert now.keys() == record.keys()
    changed = [i for i, c in record.items() if not same(now[i], c)]
    assert not changed, f"{changed} changed (tools/smoke_claims.py records them on purpose)"


def test_the_comparison_tells_numbers_apart():
    assert same({"a": [1.0, "x"], "b": float("nan")}, {"a": [1.0 + 1e-6, "x"], "b": float("nan")})
    assert not same({"a": 1.0}, {"a": 1.001}) and not same([1.0], [1.0, 2.0]) and not same(True, 1.0)


def test_the_recorder_refuses_changed_claims_under_the_same_version(tmp_path, monkeypatch):
    import smoke_claims as tool

    from iclab import experiments

    record = tmp_path / "smoke_claims.json"
    version = experiments.get("lsa-linear").claims_version
    old = {"lsa-linear": {"claims_version": version, "claims": {"x": {"holds": True, "measured": 1.0}}}}
    record.write_text(json.dumps(old))
    monkeypatch.setattr(tool, "RECORD", record)
    monkeypatch.setattr(tool, "smoke_claims", lambda name, out: {"x": {"holds": False, "measured": 2.0}})
    assert tool.main(["lsa-linear"]) == 1 and json.loads(record.read_text()) == old
    assert tool.main(["lsa-linear", "--same-claims"]) == 0
    assert json.loads(record.read_text())["lsa-linear"]["claims"]["x"]["measured"] == 2.0
