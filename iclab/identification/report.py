"""An identification folder: ``evaluation.yaml`` (what was asked), ``summary.json`` (the answers),
``metrics.parquet`` (SPD/d and ILWD to every learner by prefix), the figures and ``report.html``.

Figures: ``spd_by_prefix`` (SPD/d to each learner against k, ε dashed), ``probes_by_layer`` (each target's probe R²
by hidden state, the control probes dashed), over kept checkpoints ``timeline`` (the closest learner at each
(step, k) as colours, then the best layer's probe R², the LLC and the training loss against the step) and, with the
LLC, ``llc_traces`` (each chain's loss at every draw, per checkpoint: devinterp's diagnostic).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from ..config import dump
from ..metrics import band_rows
from ..report.evaluation import write_evaluation_folder
from ..report.figures import band_line, new_figure, panel_grid, save
from ..report.html import figure_section, page
from ..runs import EvaluationFolder, read_file, write_atomic

SUMMARY = "summary.json"
IDENTIFICATION = "identification"
"""The ``kind`` an identification's ``evaluation.yaml`` records (``iclab report DIR`` tells it from an evaluation)."""
NONE = "none within ε"
CONTROL = "zero (control)"
"""The zero predictor's name in ``metrics.parquet``: the control every learner must beat (see
:mod:`iclab.identification.panel`)."""


def write(spec: dict, summary: dict, spds: dict, ilwds: dict, out, source) -> EvaluationFolder:
    """Write the folder (inside a run or a Garg et al. run; beside an export; for a model of one's own, in the
    current folder) and relink the run's report; on any failure the folder is removed."""

    def fill(folder: EvaluationFolder) -> None:
        write_atomic(folder.path / SUMMARY, json.dumps(summary, indent=1, ensure_ascii=False, default=_plain) + "\n")
        rows = [
            {"setting": "identify", "model": learner, "seed": spec["seed"], **row}
            for distances, metric in ((spds, "spd"), (ilwds, "ilwd"))
            for learner, band in distances.items()
            for row in band_rows(band, metric)
        ]
        folder.write_metrics(rows)
        draw(folder, summary)
        write_identification_report(folder)

    return write_evaluation_folder(spec, out, source, "identify", fill)


def _plain(value):
    return value.item() if hasattr(value, "item") else str(value)


def read_summary(folder: EvaluationFolder) -> dict:
    """An identification folder's ``summary.json``."""
    return read_file(folder.path / SUMMARY, lambda p: json.loads(p.read_text(encoding="utf-8")), dict)


def draw(folder: EvaluationFolder, summary: dict) -> None:
    """The figures of the module docstring, from ``summary.json`` and ``metrics.parquet``."""
    _spd_figure(folder, summary)
    if summary.get("by_layer"):
        _probe_figure(folder, summary["by_layer"])
    if summary.get("by_step"):
        _timeline_figure(folder, summary)
    estimates = [(f"step {s['step']}", s["llc"]) for s in summary.get("by_step", []) if s.get("llc")]
    if not estimates and summary.get("llc"):
        estimates = [(summary["model"], summary["llc"])]
    if estimates:
        _llc_traces(folder, estimates)


def _spd_figure(folder: EvaluationFolder, summary: dict) -> None:
    metrics = folder.read_metrics()
    rows = metrics[metrics["metric"].str.startswith("spd")]
    closest = {answer["closest"] for answer in summary["by_prefix"]} | {summary["closest_overall"]}
    fig, (ax,) = new_figure(1, width=7, height=4.2)
    for learner, own in rows.groupby("model", sort=False):
        table = own.pivot_table(index="n", columns="metric", values="value").iloc[1:]  # k = 0: every learner's 0
        highlighted = learner in closest
        style = {"lw": 2.2 if highlighted else 0.8, "alpha": 1.0 if highlighted else 0.5, "label": learner}
        if highlighted:
            band_line(ax, table.index, table["spd"], table["spd_p05"], table["spd_p95"], **style)
        elif learner == CONTROL:
            ax.plot(table.index, table["spd"], ls=":", color="grey", lw=1.5, label=learner)
            top = table["spd"].max()
        else:
            ax.plot(table.index, table["spd"], **style)
    ax.axhline(summary["epsilon"], ls="--", color="black", lw=1, label=f"ε = {summary['epsilon']:.3g}")
    ax.set_yscale("log")
    ax.set_ylim(top=100 * max(top, summary["epsilon"]))  # a diverging learner (k-step GD, large η) would flatten it
    ax.set_xlabel("in-context examples k")
    ax.set_ylabel("SPD/d to the model")
    ax.set_title(f"{summary['model']}: SPD/d to each learner (closest learners bold, with 5–95% bands)", fontsize=9)
    ax.legend(fontsize=6, ncol=2, loc="center left", bbox_to_anchor=(1.0, 0.5))
    save(fig, folder.figure("spd_by_prefix"))


def _probe_figure(folder: EvaluationFolder, records: list[dict]) -> None:
    fig, (ax,) = new_figure(1, width=6, height=3.8)
    layers = [record["layer"] for record in records]
    for i, target in enumerate(records[0]["targets"]):
        for key, style in (("r2", {"lw": 2, "marker": "o", "label": target}), ("control_r2", {"lw": 1, "ls": "--"})):
            bands = [record["targets"][target][key] for record in records]
            band_line(
                ax, layers, *([b[stat] for b in bands] for stat in ("mean", "low", "high")), color=f"C{i}", **style
            )
    ax.set_xticks(layers, [record["state"].replace("blocks.", "").replace("hook_", "") for record in records])
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.set_ylim(-0.2, 1.05)
    ax.set_xlabel("hidden state")
    ax.set_ylabel("held-out R² (controls dashed)")
    ax.legend(fontsize=7)
    save(fig, folder.figure("probes_by_layer"))


def _timeline_figure(folder: EvaluationFolder, summary: dict) -> None:
    steps = summary["by_step"]
    names = sorted({a["answer"] or NONE for s in steps for a in s["by_prefix"]})
    colours = {name: i for i, name in enumerate(names)}
    grid = np.array([[colours[a["answer"] or NONE] for a in s["by_prefix"]] for s in steps]).T  # (K, steps)
    has_llc = steps[-1].get("llc") is not None
    has_loss = any(s.get("train_loss") is not None for s in steps)
    fig, axes = new_figure(1, width=7, height=2.6, rows=2 + has_llc + has_loss)
    cmap = _categorical(names)
    axes[0].imshow(grid, aspect="auto", origin="lower", cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5)
    axes[0].set_xticks(range(len(steps)), [str(s["step"]) for s in steps], fontsize=7)
    axes[0].set_ylabel("k")
    axes[0].set_yticks(range(grid.shape[0]), [str(a["k"]) for a in steps[0]["by_prefix"]], fontsize=6)
    handles = [axes[0].scatter([], [], color=cmap(colours[n]), marker="s", label=n) for n in names]
    axes[0].legend(handles=handles, fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    axes[0].set_title("closest learner at each k (grey: none within ε) by kept step", fontsize=9)
    x = [s["step"] for s in steps]
    if steps[-1].get("where"):
        for i, target in enumerate(steps[-1]["where"]):
            best = [s["where"][target]["r2"] for s in steps]
            stats = ([b[stat] for b in best] for stat in ("mean", "low", "high"))
            band_line(axes[1], x, *stats, marker="o", color=f"C{i}", label=target)
        axes[1].legend(fontsize=6)
    axes[1].set_ylabel("best layer's probe R²")
    below = iter(axes[2:])
    if has_llc:
        ax = next(below)
        mean, spread = np.array([s["llc"]["mean"] for s in steps]), np.array([s["llc"]["std"] for s in steps])
        band_line(ax, x, mean, mean - spread, mean + spread, marker="o", color="C3")
        ax.set_ylabel("LLC λ̂ (± chains' std)")
    if has_loss:
        ax = next(below)
        ax.plot(x, [s["train_loss"] for s in steps], marker="o", color="black")
        ax.set_ylabel("training loss")
    for ax in axes[1:]:
        ax.set_xscale("log")
        ax.set_xlabel("training step")
    save(fig, folder.figure("timeline"))


def _llc_traces(folder: EvaluationFolder, estimates: list[tuple[str, dict]]) -> None:
    """devinterp's diagnostic: every chain's loss at every draw (thin), its mean over each pass through the prompts
    (bold: the chains share their minibatches, whose own spread the raw trace shows), and the loss at the checkpoint's
    own weights."""
    fig, axes = panel_grid(len(estimates), width=3.6, height=2.8)
    for ax, (label, llc) in zip(axes, estimates):
        window = llc["settings"]["samples"] // llc["settings"]["batch_size"]
        for chain, trace in enumerate(llc["loss_trace"]):
            line = ax.plot(trace, lw=0.5, alpha=0.4)[0]
            if len(trace) >= window:
                smooth = np.convolve(trace, np.ones(window) / window, mode="valid")
                ax.plot(range(window - 1, len(trace)), smooth, lw=1.8, color=line.get_color(), label=f"chain {chain}")
        ax.axhline(llc["init_loss"], ls="--", color="black", lw=1, label="L(w*)")
        ax.set_title(f"{label}: λ̂ = {llc['mean']:.3g} ± {llc['std']:.2g}", fontsize=8)
        ax.set_xlabel("draw")
        ax.set_ylabel("loss")
    axes[0].legend(fontsize=6)
    save(fig, folder.figure("llc_traces"))


def _categorical(names: list[str]):
    from matplotlib.colors import ListedColormap

    palette = [f"C{i}" for i in range(10)]
    colours, i = [], 0
    for name in names:
        if name == NONE:
            colours.append("lightgrey")
        else:
            colours.append(palette[i % len(palette)])
            i += 1
    return ListedColormap(colours)


def _band(b: dict | None) -> str:
    return "–" if b is None else f"{b['mean']:.3g} [{b['low']:.3g}, {b['high']:.3g}]"


def _prefix_table(answers: list[dict]) -> str:
    head = "<tr><th>k</th><th>answer</th><th>closest: SPD/d [5–95%]</th><th>ILWD</th><th>runner-up: SPD/d</th>"
    head += "<th>runner-up − closest</th><th>separated</th></tr>"
    body = "".join(
        f"<tr><td>{a['k']}</td><td>{html.escape(a['answer'] or NONE)}</td>"
        f"<td>{html.escape(a['closest'])}: {_band(a['spd'])}</td><td>{_band(a['ilwd'])}</td>"
        f"<td>{html.escape(a['runner_up'])}: {_band(a['runner_up_spd'])}</td><td>{_band(a['margin'])}</td>"
        f"<td>{'yes' if a['separated'] else 'no'}</td></tr>"
        for a in answers
    )
    return f"<div class='scroll'><table>{head}{body}</table></div>"


def _layer_table(records: list[dict], where: dict) -> str:
    targets = list(records[0]["targets"])
    head = "<tr><th>state</th>" + "".join(f"<th>{html.escape(t)}: R² (control)</th>" for t in targets) + "</tr>"
    body = "".join(
        f"<tr><td>{html.escape(r['state'])}</td>"
        + "".join(
            f"<td>{_band(r['targets'][t]['r2'])} ({r['targets'][t]['control_r2']['mean']:.2g})</td>" for t in targets
        )
        + "</tr>"
        for r in records
    )
    first = "; ".join(f"{html.escape(t)}: {html.escape(str(w['first_decodable']))}" for t, w in where.items())
    return f"<p>First state with R² ≥ 0.8 — {first}.</p><div class='scroll'><table>{head}{body}</table></div>"


def _step_row(step: dict) -> str:
    loss = "–" if step["train_loss"] is None else f"{step['train_loss']:.4g}"
    llc = "–" if step.get("llc") is None else f"{step['llc']['mean']:.4g} ± {step['llc']['std']:.2g}"
    answers = ", ".join(f"{a['k']}: {a['answer'] or NONE}" for a in step["by_prefix"])
    return (
        f"<tr><td>{step['step']}</td><td>{loss}</td><td>{llc}</td><td>{html.escape(step['closest_overall'])}</td>"
        f"<td>{html.escape(answers)}</td></tr>"
    )


def write_identification_report(folder: EvaluationFolder) -> Path:
    """Write ``report.html`` from the folder's ``summary.json`` and figures (``iclab report DIR`` redoes it)."""
    summary = read_summary(folder)
    title = f"Identification of {summary['model']}" + (f" from {summary['source']}" if summary["source"] else "")
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>Command: <code>{html.escape(summary['command'])}</code></p>",
        f"<p>{summary['prompts']} prompts; a learner is the model's at k when its SPD/d ≤ ε = {summary['epsilon']:.3g} "
        f"({html.escape(summary['epsilon_rule'])}); bands are 5–95% bootstrap bands over prompts "
        f"({summary['bootstrap']} resamplings); 'separated' when the band of the runner-up's SPD/d minus the "
        f"closest's excludes 0. Closest over all k ≥ 1: <b>{html.escape(summary['closest_overall'])}</b>.</p>",
        "<h2 id='by-prefix'>Per prefix: the closest learner</h2>" + _prefix_table(summary["by_prefix"]),
    ]
    if summary.get("llc"):
        llc = summary["llc"]
        settings = ", ".join(f"{k} {v}" for k, v in llc["settings"].items())
        parts.append(
            f"<h2 id='llc'>Local learning coefficient</h2><p>λ̂ = {llc['mean']:.4g} ± {llc['std']:.2g} (the chains' "
            f"standard deviation), devinterp's SGLD with nβ = {llc['nbeta']:.4g} and {html.escape(settings)}; the "
            "chains' loss traces are in llc_traces.</p>"
        )
    if summary.get("by_layer"):
        parts.append("<h2 id='by-layer'>Per layer: probes</h2>" + _layer_table(summary["by_layer"], summary["where"]))
    for name, ablation in summary.get("ablations", {}).items():
        parts.append(f"<h2 id='ablate-{html.escape(name)}'>{html.escape(name)} mean-ablated</h2>")
        loss = "; ".join(
            f"k={a['k']}: {a['mean']:.3g} (was {b['mean']:.3g})" for a, b in zip(ablation["loss"], summary["loss"])
        )
        parts.append(f"<p>Normalised loss by k: {html.escape(loss)}.</p>" + _prefix_table(ablation["by_prefix"]))
    if summary.get("by_step"):
        rows = "".join(_step_row(s) for s in summary["by_step"])
        parts.append(
            "<h2 id='by-step'>Over training</h2><div class='scroll'><table><tr><th>step</th><th>training loss</th>"
            f"<th>LLC</th><th>closest over k</th><th>answer by k</th></tr>{rows}</table></div>"
        )
    figures = folder.figures()
    if figures:
        parts.append("<h2 id='figures'>Figures</h2>" + "".join(figure_section(f, []) for f in figures))
    parts.append(f"<h2 id='identification'>Identification</h2><pre>{html.escape(dump(folder.read_spec()))}</pre>")
    write_atomic(folder.report_file, page(title, "".join(parts)))
    return folder.report_file
