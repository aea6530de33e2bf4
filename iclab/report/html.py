"""Self-contained HTML pages (no network, figures embedded): the page shell and one report per run.

A run's ``report.html`` has an anchor per claim (``#claim-<id>``) and per figure
(``#figure-<name>``), which the scoreboard and the claims' figure links point at.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from ..claims import SMOKE_NOTE, SMOKE_SCALE, kind_of, measured_text, paper_value_text, summary, verdict_text
from ..formatting import duration
from ..runs import RunFolder, write_atomic

_STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:.8em 0;font-size:14px}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#f4f4f4}
tr.paper th{background:#e4e9f2;font-size:15px}
.ok{color:#17813a;font-weight:bold}.fail{color:#b3261e;font-weight:bold}.elsewhere{color:#555;font-style:italic}
.finding{color:#8a4b00;font-weight:bold}
.changed td{background:#fff6d5}
tr:target td,figure:target{background:#fff6d5}
.summary{font-size:1.15em}
figure{margin:1em 0;padding:.3em}figcaption{font-size:14px}
img{max-width:100%;height:auto;border:1px solid #eee;margin:.5em 0}
pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:12px}code{overflow-wrap:anywhere}
.scroll{overflow-x:auto}
summary{cursor:pointer}ul.seeds{margin:.3em 0;padding-left:1.1em}
@media (max-width:700px){
 body{margin:.5em auto;padding:0 .6em}
 table.cards,table.cards tbody,table.cards tr,table.cards td{display:block;width:100%}
 table.cards thead{display:none}
 table.cards tr{border:1px solid #ccc;margin:.6em 0;padding:.3em}
 table.cards td{border:none;padding:2px 4px}
 table.cards td[data-label]::before{content:attr(data-label) ": ";color:#555;font-weight:600}
 table.cards tr.paper{border:none;margin:1.2em 0 0;padding:0}
 table.cards tr.paper th{display:block}
}
@media print{
 body{max-width:none;margin:0;padding:0;font-size:10pt}
 table{font-size:8.5pt;width:100%}td,th{padding:2px 4px}
 a{color:inherit;text-decoration:none}
 tr,figure{break-inside:avoid}
 h2,h3{break-after:avoid}
 img{max-height:60vh;border:none}
 tr:target td,figure:target,.changed td{background:none}
 details::details-content{content-visibility:visible;display:block}
 summary{list-style:none}
 .ok,.fail{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"""


def page(title: str, body: str) -> str:
    """A complete page with the shared style (narrow screens get one card per table row, print
    gets its own layout, with every details element's content shown)."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>{body}</body></html>\n"
    )


def value(x) -> str:
    """A measured value as escaped text: labelled numbers (:func:`iclab.claims.measured_text`)."""
    return html.escape(measured_text(x))


def seeds(config: dict) -> str:
    """The seeds a run trained: ``0`` or ``0–2`` (seed k of a run is ``seed + k``)."""
    first, count = config.get("seed", 0), config.get("seeds", 1)
    return str(first) if count == 1 else f"{first}–{first + count - 1}"


def claim_anchor(claim_id: str) -> str:
    return f"claim-{claim_id}"


def figure_anchor(name: str) -> str:
    return f"figure-{name}"


def figure_title(name: str) -> str:
    """A figure's name as words (``loss_by_prefix`` → ``loss by prefix``): headings and link texts."""
    return name.replace("_", " ")


def link(href: str, text: str, fragment: str | None = None) -> str:
    """An ``<a>`` to a relative path (and an anchor in it)."""
    target = quote(href) + (f"#{quote(fragment)}" if fragment else "")
    return f"<a href='{html.escape(target)}'>{html.escape(text)}</a>"


def verdict_class(holds: bool | None, kind: str) -> str:
    """The style of a verdict: ``ok`` (holds), ``finding`` (a paper claim that does not reproduce), ``fail``
    (a failed diagnostic) or ``elsewhere`` (judged at another scale)."""
    if holds is None:
        return "elsewhere"
    return "ok" if holds else "finding" if kind == "paper" else "fail"


def verdict(claim: dict) -> str:
    """A claim's verdict, coloured by :func:`verdict_class`."""
    return f"<span class='{verdict_class(claim['holds'], kind_of(claim))}'>{html.escape(verdict_text(claim))}</span>"


def paper_value(claim: dict) -> str:
    """The paper's own number for a claim, escaped (:func:`iclab.claims.paper_value_text`)."""
    return html.escape(paper_value_text(claim))


def cell(label: str, content: str, attrs: str = "") -> str:
    """A table cell labelled for the narrow-screen card layout."""
    return f"<td data-label='{html.escape(label)}'{attrs}>{content}</td>"


def table(headers: list[str], rows: list[str], cards: bool = True, bodies: bool = False) -> str:
    """A table of already rendered ``<tr>`` rows (``bodies``: of rendered ``<tbody>`` groups);
    ``cards``: one card per row on narrow screens."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(rows) if bodies else f"<tbody>{''.join(rows)}</tbody>"
    return f"<table{' class=cards' if cards else ''}><thead><tr>{head}</tr></thead>{body}</table>"


def claims_table(claims: list[dict], figures: set[str]) -> str:
    """The claims with their verdicts, one anchored row each: the paper's claims (with their source in the
    paper and the paper's number beside the measured one), then iclab's diagnostics in a table of their
    own. A claim naming one of the run's ``figures`` links to it; a claim judged at another scale says why
    under its verdict."""

    def row(c: dict, columns: list[str]) -> str:
        figure = c.get("figure")
        shown = link("", figure_title(figure), figure_anchor(figure)) if figure in figures else "—"
        reason = f"<br><small>{html.escape(c['reason'])}</small>" if c.get("reason") else ""
        cells = {
            "verdict": verdict(c) + reason,
            "id": html.escape(c["id"]),
            "statement": html.escape(c["statement"]),
            "source": html.escape(c.get("source") or "—"),
            "measured": value(c["measured"]),
            "the paper's number": paper_value(c),
            "expected": html.escape(str(c["expected"])),
            "figure": shown,
        }
        return f"<tr id='{html.escape(claim_anchor(c['id']))}'>" + "".join(cell(k, cells[k]) for k in columns) + "</tr>"

    paper = ["verdict", "id", "statement", "source", "measured", "the paper's number", "expected", "figure"]
    own = ["verdict", "id", "statement", "measured", "expected", "figure"]
    parts = [table(paper, [row(c, paper) for c in claims if kind_of(c) == "paper"])]
    diagnostics = [row(c, own) for c in claims if kind_of(c) == "diagnostic"]
    if diagnostics:
        parts.append(
            "<h3 id='diagnostics'>Diagnostics</h3><p>iclab's own checks (an optimiser converged, the theory is "
            "consistent, a sanity bound): not statements of the paper, and not counted among its claims.</p>"
            + table(own, diagnostics)
        )
    return "".join(parts)


def environment_table(config: dict, info: dict) -> str:
    """Seeds, timing and environment of a run (from ``run.json``), as name/value rows."""
    commit = info.get("commit")
    if commit:
        commit = f"<code>{commit}</code>" + (" (with uncommitted changes)" if info.get("dirty") else "")

    def escaped(v) -> str | None:
        return None if v is None else html.escape(str(v))

    items = [
        ("seeds", seeds(config)),
        ("wall time", duration(info.get("wall_seconds"))),
        ("CPU time", duration(info.get("cpu_seconds"))),
        ("started", escaped(info.get("started"))),
        ("finished by a resume", "yes" if info.get("resumed") else None),
        ("device", escaped(info.get("device"))),
        ("threads", escaped(info.get("threads"))),
        ("iclab", escaped(info.get("iclab"))),
        ("commit", commit),
        ("torch", escaped(info.get("torch"))),
        ("python", escaped(info.get("python"))),
    ]
    return (
        "<table>" + "".join(f"<tr><th>{name}</th><td>{v}</td></tr>" for name, v in items if v is not None) + "</table>"
    )


def time_rows(spent: dict) -> tuple[list[tuple], list[tuple]]:
    """The rows of a run's ``time`` (``run.json``, :mod:`iclab.ledger`) as the reports show them: per part its name,
    time, share, models (those it trained, then those it reused, marked) and the ids of the claims it serves, the time
    outside every part last; per claim its id, cost, share, parts and reused models. Lists of names stay lists, for
    the page or the markdown to format."""
    parts = [
        (
            name,
            duration(part["seconds"]),
            f"{part['share']:.0%}",
            [*part["training"], *(f"{m} (reused)" for m in part["reused"])],
            part["claims"],
        )
        for name, part in spent["parts"].items()
    ]
    outside = list(spent.get("outside_parts_training", {}))
    parts.append(("outside parts", duration(spent["outside_parts_seconds"]), "", outside, []))
    claims = [
        (claim, duration(cost["seconds"]), f"{cost['share']:.0%}", cost["parts"], cost["reused"])
        for claim, cost in spent["claims"].items()
    ]
    return parts, claims


def time_table(info: dict) -> str:
    """Where the run's wall time went (:func:`time_rows`): each part's time and share, the models it trained or
    reused and the claims it serves, then the time outside every part, and each claim's cost; empty for a run that
    recorded none."""
    spent = info.get("time")
    if not spent:
        return ""
    parts, claims = time_rows(spent)

    def table(head: tuple[str, ...], rows: list[tuple]) -> str:
        text = lambda v: ", ".join(v) if isinstance(v, list) else v
        cells = lambda row, tag: "".join(f"<{tag}>{html.escape(text(v))}</{tag}>" for v in row)
        body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in rows)
        return f"<div class='scroll'><table><tr>{cells(head, 'th')}</tr>{body}</table></div>"

    return (
        "<h3 id='time'>Where the time went</h3><p>Each part's training and evaluation; a claim's cost is the parts it "
        "needs and the models they reuse (claims of one part share it). Outside parts: shared set-up, figures drawn "
        "outside a part, claims judged over seeds, writing the metrics.</p>"
        + table(("part", "time", "share", "models trained (reused)", "claims it serves"), parts)
        + table(("claim", "cost", "share", "parts", "reused models"), claims)
    )


def summary_table(metrics: pd.DataFrame) -> str:
    """Final evaluation metrics (rows without a step), averaged over seeds, as a table."""
    final = metrics[metrics["step"].isna()]
    if final.empty:
        return ""
    pivot = final.pivot_table(
        index=["setting", "model"], columns="metric", values="value", aggfunc="mean", dropna=False
    )
    return f"<div class='scroll'>{pivot.to_html(float_format=lambda v: f'{v:.4g}', na_rep='')}</div>"


def figure_section(path: Path, claims: list[dict]) -> str:
    """A figure, embedded, with the claims it shows."""
    name = path.stem
    data = base64.b64encode(path.read_bytes()).decode()
    shown = [link("", c["id"], claim_anchor(c["id"])) for c in claims if c.get("figure") == name]
    caption = f"<figcaption>Shows: {', '.join(shown)}</figcaption>" if shown else ""
    return (
        f"<figure id='{html.escape(figure_anchor(name))}'><h3>{html.escape(figure_title(name))}</h3>"
        f"<img src='data:image/png;base64,{data}' alt='figure {html.escape(name)}'>{caption}</figure>"
    )


def write_report(run: RunFolder) -> Path:
    """Write ``report.html`` from the run folder's files (so ``iclab report`` can redo it)."""
    config = run.read_config()
    claims = run.read_claims()
    figures = run.figures()
    title = config.get("experiment", run.path.name)
    parts = [f"<h1>{html.escape(title)}</h1>"]
    parts.append(
        f"<p>Run folder <code>{html.escape(str(run.path))}</code>, scale "
        f"<b>{html.escape(str(config.get('scale')))}</b>"
        + (f" ({SMOKE_NOTE})" if config.get("scale") == SMOKE_SCALE else "")
        + ".</p>"
    )
    info = run.read_info()
    parts.append(f"<h2 id='run'>Run</h2>{environment_table(config, info)}{time_table(info)}")
    if claims:
        parts.append(
            f"<h2 id='claims'>Claims</h2><p class='summary'>{html.escape(summary(claims))}.</p>"
            f"{claims_table(claims, {f.stem for f in figures})}"
        )
    else:
        parts.append("<h2 id='claims'>Claims</h2><p>None yet: the run has not finished.</p>")
    if figures:
        parts.append("<h2 id='figures'>Figures</h2>" + "".join(figure_section(f, claims) for f in figures))
    if run.finished or run.metrics_file.exists():  # a finished run's metrics are part of it: missing, it fails
        parts.append(f"<h2 id='metrics'>Final metrics (mean over seeds)</h2>{summary_table(run.read_metrics())}")
    evaluations = run.evaluations()
    if evaluations:
        command = lambda e: html.escape(e.read_spec()["command"])
        items = "".join(
            f"<li>{link(f'{e.path.name}/report.html', e.path.name)}: <code>{command(e)}</code></li>"
            for e in evaluations
        )
        parts.append(f"<h2 id='evaluations'>Evaluations</h2><ul>{items}</ul>")
    parts.append(f"<h2 id='config'>Config</h2><pre>{html.escape(run.config_file.read_text())}</pre>")
    write_atomic(run.report_file, page(title, "".join(parts)))
    return run.report_file
