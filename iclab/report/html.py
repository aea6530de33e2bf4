"""Self-contained HTML reports: one page per run (figures embedded), one index across runs."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from ..runs import RunFolder

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f4f4f4}.ok{color:#17813a;font-weight:bold}.fail{color:#b3261e;font-weight:bold}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:12px}
"""


def page(title: str, body: str) -> str:
    """A self-contained HTML page with the house style."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{body}</body></html>\n"
    )


def _value(x) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    return html.escape(str(x))


def claims_table(claims: list[dict]) -> str:
    """The claims as an HTML table with a verdict column."""
    rows = "".join(
        f"<tr><td class='{'ok' if c['holds'] else 'fail'}'>{'holds' if c['holds'] else 'FAILS'}</td>"
        f"<td>{html.escape(c['id'])}</td><td>{html.escape(c['statement'])}</td>"
        f"<td>{_value(c['measured'])}</td><td>{html.escape(str(c['expected']))}</td></tr>"
        for c in claims
    )
    return f"<table><tr><th>verdict</th><th>id</th><th>statement</th><th>measured</th><th>expected</th></tr>{rows}</table>"


def summary_table(metrics: pd.DataFrame) -> str:
    """Final evaluation metrics (rows without a step), averaged over seeds, as a table."""
    final = metrics[metrics["step"].isna()]
    if final.empty:
        return ""
    table = final.pivot_table(index=["setting", "model"], columns="metric", values="value", aggfunc="mean", dropna=False)
    return table.to_html(float_format=lambda v: f"{v:.4g}", na_rep="")


def write_report(run: RunFolder) -> Path:
    """Write ``report.html`` from the run folder's files (so ``iclab report`` can redo it)."""
    config = run.read_config()
    claims = run.read_claims()
    held = sum(c["holds"] for c in claims)
    parts = [f"<h1>{html.escape(config.get('experiment', run.path.name))}</h1>"]
    parts.append(f"<p>Run folder <code>{html.escape(str(run.path))}</code>, scale <b>{html.escape(str(config.get('scale')))}</b>.</p>")
    if claims:
        parts.append(f"<h2>Claims: {held} of {len(claims)} hold</h2>{claims_table(claims)}")
    else:
        parts.append("<h2>Claims</h2><p>None yet: the run has not finished.</p>")
    for figure in run.figures():
        data = base64.b64encode(figure.read_bytes()).decode()
        parts.append(f"<h3>{html.escape(figure.stem.replace('_', ' '))}</h3><img src='data:image/png;base64,{data}'>")
    if run.metrics_file.exists():
        parts.append(f"<h2>Final metrics (mean over seeds)</h2>{summary_table(run.read_metrics())}")
    parts.append(f"<h2>Config</h2><pre>{html.escape(run.config_file.read_text())}</pre>")
    run.report_file.write_text(page(config.get("experiment", "run"), "".join(parts)))
    return run.report_file


def write_index(root: Path, runs: list[RunFolder]) -> Path:
    """An index page linking each run's report with its claim tally."""
    rows = []
    for run in runs:
        claims = run.read_claims()
        held = sum(c["holds"] for c in claims)
        link = run.report_file.relative_to(root)
        rows.append(
            f"<tr><td><a href='{html.escape(str(link))}'>{html.escape(run.path.name)}</a></td>"
            f"<td class='{'ok' if held == len(claims) else 'fail'}'>{held} / {len(claims)}</td></tr>"
        )
    body = "<h1>iclab runs</h1><table><tr><th>run</th><th>claims holding</th></tr>" + "".join(rows) + "</table>"
    index = Path(root) / "index.html"
    index.write_text(page("iclab runs", body))
    return index
