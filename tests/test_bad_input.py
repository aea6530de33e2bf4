"""Every case of tools/bad_input.py (docs/bad-input.md) through ``iclab.cli.main``: the exit status it should end
with and, for a refusal, one line. The signals and the full disk have tests of their own (tests/test_cli.py,
tests/test_reproduce.py), in processes of their own."""

import importlib.util
import sys
from pathlib import Path

import pytest

from iclab.cli import main

SPEC = importlib.util.spec_from_file_location("bad_input", Path(__file__).parents[1] / "tools" / "bad_input.py")
bad_input = sys.modules["bad_input"] = importlib.util.module_from_spec(SPEC)  # its dataclasses look it up
SPEC.loader.exec_module(bad_input)
CASES = [c for c in bad_input.CASES if c.signal_when is None and not c.env]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke") / "run"
    assert main(["run", "lsa-linear", "--scale", "smoke", "--out", str(out)]) == 0
    return out


def test_the_table_has_at_least_forty_kinds_of_bad_input():
    assert len(bad_input.CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c.what for c in CASES])
def test_each_kind_of_bad_input_ends_as_the_table_says(case, smoke_run, tmp_path, capsys, caplog):
    argv = case.set_up(tmp_path, smoke_run)
    capsys.readouterr()
    assert main(argv) == case.status
    err = capsys.readouterr().err + caplog.text  # a warning goes through logging
    said = [line for line in err.splitlines() if "iclab:" in line]
    assert len(said) == 1, said
    if case.status == 2:
        assert said[0].startswith("iclab: error:")
