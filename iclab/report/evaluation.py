"""The report of an evaluation folder (``iclab eval``): the command, the model's and the learners'
errors at the largest prefix, the figures and the evaluation's record."""

from __future__ import annotations

import html
import shutil
from collections.abc import Callable
from pathlib import Path

from ..config import dump
from ..runs import EvaluationFolder, RunFolder
from .html import figure_section, page, write_report


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


def write_evaluation_folder(
    spec: dict, out, source, stem: str, fill: Callable[[EvaluationFolder], None]
) -> EvaluationFolder:
    """A new evaluation folder holding ``spec``, filled by ``fill(folder)`` (its metrics, figures and report), and
    the source run's report relinked to it. Where it goes: ``out``, else ``<stem>-<stamp>`` inside ``source``'s
    folder (a run, or one of Garg et al.'s, keeps what is made of it), beside an export (which stays as it was
    written: ``<export>-<stem>-<stamp>``), or in the current folder for no source (a model of one's own). On any
    failure the folder is removed (an ``out`` that existed empty is left empty)."""
    existed = out is not None and Path(out).exists()
    if source is None:
        folder = EvaluationFolder.create(spec, out, root=".", stem=stem)
    elif source.kind == "export":
        folder = EvaluationFolder.create(spec, out, root=source.path.parent, stem=f"{source.path.name}-{stem}")
    else:
        folder = EvaluationFolder.create(spec, out, root=source.path, stem=stem)
    try:
        fill(folder)
        if source is not None and source.kind == "run" and folder.path.parent.resolve() == source.path.resolve():
            write_report(RunFolder(source.path))  # the run's report links what was made of it
    except BaseException:
        shutil.rmtree(folder.path)
        if existed:
            folder.path.mkdir()
        raise
    return folder
