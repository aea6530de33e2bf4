"""Two finished runs side by side: config keys that differ, claims and final metrics with their
differences (B − A), as a terminal table or an HTML page (``iclab compare A B [--html PATH]``, which
also overlays the two runs' training curves)."""

from __future__ import annotations

import base64
import html
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..claims import measured_text, verdict_text
from ..config import ABSENT, ConfigError, differences
from ..runs import RunFolder, write_atomic
from .html import cell, duration, link, page, seeds, table, value, verdict

_KEYS = ["setting", "model", "n", "metric"]
_CONFIG = ["key", "A", "B"]
_CLAIMS = ["id", "A measured", "B measured", "B − A", "A", "B"]
_METRICS = [*_KEYS, "A", "B", "B − A"]


@dataclass
class Comparison:
    """Runs ``a`` and ``b`` side by side.

    Attributes:
        config: ``(key, value in a, value in b)`` for every dotted config key that differs.
        claims: one row per claim id: ``{"id", "a", "b", "difference", "changed"}`` (``a``/``b``: the
            claim dicts or None; ``difference``: measured b − a when both are numbers).
        metrics: final metrics (rows with an empty step) averaged over seeds, one row per
            (setting, model, n, metric): columns ``a``, ``b``, ``difference`` (b − a), ``changed``.
    """

    a: RunFolder
    b: RunFolder
    config: list[tuple[str, Any, Any]]
    claims: list[dict]
    metrics: pd.DataFrame

    def text(self) -> str:
        """The comparison as terminal tables (metrics: only those that differ)."""
        out = [f"A: {self.a.path} ({_summary(self.a)})", f"B: {self.b.path} ({_summary(self.b)})", ""]
        if self.config:
            rows = [(k, _short(_setting(a)), _short(_setting(b))) for k, a, b in self.config]
            out += [f"Config keys that differ ({len(self.config)}):", _text_table(_CONFIG, rows), ""]
        else:
            out += ["Configs are identical.", ""]
        rows = []
        for c in self.claims:
            measured = [_short(measured_text(x["measured"])) if x else ABSENT for x in (c["a"], c["b"])]
            verdicts = [verdict_text(x) if x else "" for x in (c["a"], c["b"])]
            rows.append((c["id"], *measured, _number(c["difference"]), *verdicts))
        changed = sum(c["changed"] for c in self.claims)
        out += [f"Claims ({len(self.claims)}, {changed} differ):", _text_table(_CLAIMS, rows), ""]
        differ = self.metrics[self.metrics.changed]
        out.append(
            f"Final metrics, mean over seeds ({len(differ)} of {len(self.metrics)} differ"
            + ("; the equal ones are not shown):" if len(differ) < len(self.metrics) else "):")
        )
        if len(differ):
            out.append(_text_table(_METRICS, [_metric_cells(r) for _, r in differ.iterrows()]))
        return "\n".join(out) + "\n"

    def write_html(self, path: str | Path) -> Path:
        """Write the comparison as a self-contained page (every metric; those that differ highlighted)."""
        path = Path(path)
        where = path.resolve().parent
        runs = "".join(
            f"<li><b>{name}</b>: {link(os.path.relpath(run.report_file.resolve(), where), str(run.path))} "
            f"({html.escape(_summary(run))})</li>"
            for name, run in (("A", self.a), ("B", self.b))
        )
        config = [
            _html_row(_CONFIG, [html.escape(k), html.escape(_setting(a)), html.escape(_setting(b))])
            for k, a, b in self.config
        ]
        claims = []
        for c in self.claims:
            measured = [value(x["measured"]) if x else ABSENT for x in (c["a"], c["b"])]
            verdicts = [verdict(x) if x else "" for x in (c["a"], c["b"])]
            claims.append(
                _html_row(_CLAIMS, [html.escape(c["id"]), *measured, _number(c["difference"]), *verdicts], c["changed"])
            )
        metrics = [
            _html_row(_METRICS, [html.escape(x) for x in _metric_cells(r)], r.changed)
            for _, r in self.metrics.iterrows()
        ]
        body = (
            f"<h1>Comparing two runs</h1><ul>{runs}</ul>"
            f"<h2>Config keys that differ ({len(config)})</h2>{table(_CONFIG, config) if config else '<p>None.</p>'}"
            f"<h2>Claims ({sum(c['changed'] for c in self.claims)} of {len(claims)} "
            f"differ)</h2>{table(_CLAIMS, claims)}"
            f"<h2>Final metrics, mean over seeds ({self.metrics.changed.sum()} of {len(metrics)} differ)</h2>"
            f"{table(_METRICS, metrics)}{_curves(self.a, self.b)}"
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, page("iclab compare", body))
        except OSError as err:
            raise ConfigError(f"cannot write {path}: {err.strerror}") from None
        return path


def _curves(a: RunFolder, b: RunFolder) -> str:
    """The two runs' training losses overlaid, a panel per model (A solid, B dashed), as an embedded figure."""
    from .figures import panel_grid, save, training_curve

    losses = {}
    for name, run in (("A", a), ("B", b)):
        metrics = run.read_metrics()
        losses[name] = metrics[(metrics.metric == "train_loss") & metrics.step.notna()]
    models = list(dict.fromkeys([*losses["A"].model, *losses["B"].model]))
    if not models:
        return ""
    fig, axes = panel_grid(len(models), width=4.2, height=3.2)
    for ax, model in zip(axes, models):
        for name, style in (("A", "-"), ("B", "--")):
            rows = losses[name][losses[name].model == model]
            if not rows.empty:
                line = training_curve(ax, rows, name)
                line.set(linestyle=style, marker="o" if rows.step.nunique() <= 20 else "", markersize=3)
        if all((losses[n].value > 0).all() for n in losses):
            ax.set_yscale("log")
        ax.set_title(model, fontsize=9)
        ax.set_ylabel("training loss", fontsize=8)
        ax.legend(fontsize=7)
    with tempfile.TemporaryDirectory() as scratch:
        data = base64.b64encode(save(fig, Path(scratch) / "curves.png").read_bytes()).decode()
    return (
        "<h2>Training curves</h2><p>A solid, B dashed: the mean over each run's seeds, with its min–max band.</p>"
        f"<img src='data:image/png;base64,{data}' alt='training curves of A and B'>"
    )


def compare_runs(a: str | Path, b: str | Path) -> Comparison:
    """Compare two finished run folders; :class:`ConfigError` if either is not one."""
    run_a, run_b = _finished(a), _finished(b)
    config = [(k, a, b) for k, (a, b) in differences(run_a.read_config(), run_b.read_config()).items()]
    return Comparison(run_a, run_b, config, _claims(run_a.read_claims(), run_b.read_claims()), _metrics(run_a, run_b))


def _finished(path: str | Path) -> RunFolder:
    run = RunFolder.open(path)
    if not run.finished:
        raise ConfigError(f"{path} has not finished (no claims.json); `iclab resume {path}` completes it")
    return run


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _same(x, y) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float) and x != x and y != y)  # NaN equals NaN here


def _claims(a: list[dict], b: list[dict]) -> list[dict]:
    by_a, by_b = {c["id"]: c for c in a}, {c["id"]: c for c in b}
    rows = []
    for claim_id in dict.fromkeys([*by_a, *by_b]):
        ca, cb = by_a.get(claim_id), by_b.get(claim_id)
        numbers = ca and cb and _is_number(ca["measured"]) and _is_number(cb["measured"])
        changed = not (ca and cb and _same(ca["measured"], cb["measured"]) and ca["holds"] == cb["holds"])
        rows.append(
            {
                "id": claim_id,
                "a": ca,
                "b": cb,
                "changed": changed,
                "difference": cb["measured"] - ca["measured"] if numbers else None,
            }
        )
    return rows


def _final(run: RunFolder) -> pd.Series:
    """Final metrics, mean over seeds, indexed by (setting, model, n, metric) as text."""
    metrics = run.read_metrics()
    final = metrics[metrics.step.isna()].copy()
    final["n"] = final.n.map(lambda n: "" if pd.isna(n) else str(n))
    for key in ("setting", "model"):
        final[key] = final[key].fillna("").astype(str)
    return final.groupby(_KEYS, sort=False).value.mean()


def _metrics(a: RunFolder, b: RunFolder) -> pd.DataFrame:
    both = pd.concat({"a": _final(a), "b": _final(b)}, axis=1)
    both["difference"] = both.b - both.a
    both["changed"] = ~((both.a == both.b) | (both.a.isna() & both.b.isna()))
    return both.reset_index()


def _summary(run: RunFolder) -> str:
    config, info = run.read_config(), run.read_info()
    return (
        f"{config.get('experiment')}, {config.get('scale')} scale, seeds {seeds(config)}, "
        f"{duration(info.get('wall_seconds'))} on {info.get('device', '?')}"
    )


def _setting(x) -> str:
    """A config value as ``--set`` would take it (``true``, ``null``, ``[1, 2]``)."""
    return x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)


def _metric_cells(row) -> list[str]:
    return [*(row[k] for k in _KEYS), *(_number(row[k]) for k in ("a", "b", "difference"))]


def _html_row(headers: list[str], cells: list[str], changed: bool = False) -> str:
    return f"<tr{' class=changed' if changed else ''}>" + "".join(cell(h, x) for h, x in zip(headers, cells)) + "</tr>"


def _number(x) -> str:
    return "" if x is None or pd.isna(x) else f"{x:.6g}"


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _text_table(headers: list[str], rows: list[tuple]) -> str:
    """Left-aligned columns, two spaces apart, indented."""
    rows = [tuple(map(str, r)) for r in rows]
    widths = [max(len(x) for x in column) for column in zip(headers, *rows)]
    return "\n".join("  " + "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in [tuple(headers), *rows])
