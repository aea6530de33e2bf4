"""Experiments registered by other packages (entry-point group ``iclab.experiments``), and the example
package ``examples/plugin`` installed for real."""

import importlib.metadata
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import iclab
from iclab import experiments
from iclab.config import ConfigError

ROOT = Path(iclab.__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "plugin"


@pytest.fixture
def registered(monkeypatch):
    """Pretend the installed packages register the given entry points: ``registered({name: value})``."""

    def register(entries: dict[str, str]):
        points = [importlib.metadata.EntryPoint(name, value, experiments.GROUP) for name, value in entries.items()]
        monkeypatch.setattr(
            importlib.metadata, "entry_points", lambda group: points if group == experiments.GROUP else []
        )
        experiments._registered.cache_clear()

    yield register
    experiments._registered.cache_clear()


def test_a_registered_experiment_is_listed_and_loaded_after_the_built_ins(registered):
    registered({"lsa-copy": "iclab.experiments.lsa_linear", "zz-gd": "iclab.experiments.gd_mechanism:EXPERIMENT"})
    assert experiments.names()[-2:] == ["lsa-copy", "zz-gd"] and experiments.names()[0] == "lsa-linear"
    assert experiments.summary("lsa-copy").startswith("``lsa-linear``: one-layer linear self-attention")
    assert experiments.origin("lsa-copy") == "an unknown package" and experiments.origin("lsa-linear") is None
    # Loaded, it must be an Experiment of its own name (both of these are named after their built-in).
    with pytest.raises(
        ConfigError, match="must be an Experiment named 'lsa-copy', found an Experiment named 'lsa-linear'"
    ):
        experiments.get("lsa-copy")
    with pytest.raises(ConfigError, match="unknown experiment 'nope'; known: .*symbols-lm, lsa-copy, zz-gd"):
        experiments.get("nope")


def test_a_name_clash_keeps_the_built_in_and_warns(registered, caplog):
    registered({"lsa-linear": "elsewhere.module:EXPERIMENT"})
    with caplog.at_level(logging.WARNING, logger="iclab.experiments"):
        assert experiments.names().count("lsa-linear") == 1
        assert experiments.get("lsa-linear").run.__module__ == "iclab.experiments.lsa_linear"
        experiments.names()
    assert len(caplog.records) == 1 and "'lsa-linear' of an unknown package is skipped" in caplog.text


def test_the_example_package_installs_lists_and_runs(tmp_path):
    source, site = tmp_path / "plugin", tmp_path / "site"
    shutil.copytree(EXAMPLE, source)  # pip builds in the source folder: keep the repository clean
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}

    def python(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path)

    listed = python(
        "-c",
        "import sys\nfrom iclab.cli import main\nassert main(['list']) == 0\n"
        "assert 'torch' not in sys.modules, 'listing imported torch'",
    )
    assert listed.returncode == 0, listed.stderr
    line = next(row for row in listed.stdout.splitlines() if row.startswith("lsa-tiny "))
    assert "beats the zero predictor" in line and line.endswith("[iclab-example-plugin]")
    done = python("-m", "iclab", "run", "lsa-tiny", "--out", "run")
    assert done.returncode == 0, done.stderr
    assert "[holds] beats-zero" in done.stdout and (tmp_path / "run" / "report.html").exists()
