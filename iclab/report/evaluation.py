"""The report of an evaluation folder (``iclab eval``): the command, the model's and the learners'
errors at the largest prefix, the figures and the evaluation's record."""

from __future__ import annotations

import html
from pathlib import Path

from ..config import dump
from ..runs import EvaluationFolder
from .html import figure_section, page


def final_errors(metrics):
    """The error at the largest prefix of every setting (its k, which a shift may change), model, seed and
    step (bands as columns); a model's seed ``all`` is the mean over its seeds."""
    last = metrics[metrics["n"] == metrics.groupby("setting")["n"].transform("max")]
    trained = last["step"].notna()  # learners are not trained: no step, no seed
    last = last.assign(
        k=last["n"].astype(int),
        seed=last["seed"].astype("string").fillna("all").where(trained, "–"),
        step=last["step"].astype("string").fillna("–"),
    )
    index = ["setting", "k", "model", "seed", "step"]
    return last.pivot_table(index=index, columns="metric", values="value", sort=False)


def write_evaluation_report(folder: EvaluationFolder) -> Path:
    """Write ``report.html`` from the evaluation folder's files (``iclab report DIR`` redoes it)."""
    spec = folder.read_spec()
    seeds = f"seeds {', '.join(map(str, spec['seeds']))}" if spec["seed"] == "all" else f"seed {spec['seed']}"
    title = f"Evaluation of {spec['model']} ({seeds}) from {spec['source']}"
    steps = ", ".join(map(str, spec["steps"]))
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>Evaluation folder <code>{html.escape(str(folder.path))}</code>: checkpoint step {html.escape(steps)}, "
        f"{spec['prompts']} prompts, {html.escape(spec['metric'])} by prefix with a 5–95% bootstrap band"
        + (" (over seeds and prompts for the mean over seeds, seed all)" if spec["seed"] == "all" else "")
        + ".</p>",
        f"<p>Command: <code>{html.escape(spec['command'])}</code></p>",
    ]
    if folder.metrics_file.exists():
        table = final_errors(folder.read_metrics())
        parts.append(
            "<h2 id='errors'>At the largest prefix</h2><div class='scroll'>"
            f"{table.to_html(float_format=lambda v: f'{v:.4g}', na_rep='')}</div>"
        )
    figures = folder.figures()
    if figures:
        parts.append("<h2 id='figures'>Figures</h2>" + "".join(figure_section(f, []) for f in figures))
    parts.append(f"<h2 id='evaluation'>Evaluation</h2><pre>{html.escape(dump(spec))}</pre>")
    folder.report_file.write_text(page(title, "".join(parts)))
    return folder.report_file
