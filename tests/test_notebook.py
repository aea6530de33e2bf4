"""The example notebook runs from top to bottom on a tiny finished run, found by its default path (skipped without
nbclient and ipykernel)."""

from pathlib import Path

import pytest
from conftest import THREADS

import iclab

NOTEBOOK = Path(__file__).parent.parent / "examples" / "after_training.ipynb"


def test_after_training_notebook_runs_on_a_tiny_run(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    overrides = [
        "train.steps=10",
        "train.compile=false",
        "train.warmup=2",
        "model.n_layers=1",
        "model.width=16",
        "model.n_heads=2",
        "eval_prompts=100",
        "bootstrap=20",
    ]
    runs = tmp_path / "runs"  # as `make reproduce` leaves them, in the kernel's working directory
    run = iclab.run(
        "gpt-linear", seeds=1, overrides=overrides, out=runs / "gpt-linear-seed0-20261125-120000", progress=False
    ).path
    monkeypatch.delenv("ICLAB_RUN", raising=False)  # the notebook's default: the newest finished gpt-linear run
    monkeypatch.setenv("OMP_NUM_THREADS", str(THREADS))  # the kernel's torch threads
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "gpt, seed 0, step 10: GPTTransformer" in text and "ols" in text
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plot
    (evaluation,) = run.glob("eval-*")
    assert {"evaluation.yaml", "metrics.parquet", "report.html"} <= {p.name for p in evaluation.iterdir()}
