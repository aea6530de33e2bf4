"""The parity page (``docs/parity.md``): every quantity measured by iclab and by the authors' own code at the same
recipe, from the records under ``results/parity/`` (:mod:`iclab.parity`), with the agreement rule's verdict and
whether the claim's test holds on each side. Nothing here runs anything."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..config import ConfigError
from ..formatting import duration
from ..parity import AGREEMENT_RELATIVE, AGREEMENT_Z, Agreement, ParityRecord, Side, agreement, read_records
from ..runs import write_atomic


def _anchor(record: ParityRecord) -> str:
    """The anchor of a record's section (its heading as GitHub and the site slug it: lower case, punctuation
    dropped, spaces as hyphens)."""
    return re.sub(r"[^\w\- ]", "", f"{record.experiment} {record.quantity}".lower()).replace(" ", "-")


def _value(side: Side) -> str:
    return f"{side.mean:.4g} ± {side.stderr:.2g}"


def _holds(record: ParityRecord, side: Side) -> str:
    holds = record.holds(side)
    return "–" if holds is None else "holds" if holds else "fails"


def _apart(found: Agreement, authors: Side) -> str:
    """How far apart the two sides are: in pooled standard errors, or, where neither side has a spread (one value
    for every seed, e.g. one fitted reference), as a share of the authors' mean."""
    if found.difference == 0:
        return "equal"
    if found.stderr or not authors.mean:
        return f"{found.z:.1f} SE"
    return f"{abs(found.difference) / abs(authors.mean):.0%} of theirs, no spread"


def summary_line(record: ParityRecord) -> str:
    """One line on a record, for the non-reproductions page: both means, the agreement and the claim on each side."""
    found = agreement(record.iclab, record.authors)
    test = "" if record.test is None else f" {record.test['op']} {record.test['threshold']:g}"
    return (
        f"{record.description}: iclab {_value(record.iclab)}, the authors' code {_value(record.authors)} "
        f"({len(record.seeds)} seeds; {'agree' if found.agree else 'disagree'}); the claim's test{test} "
        f"{_holds(record, record.iclab)} in iclab and {_holds(record, record.authors)} in the authors' code"
    )


def parity_page(records: Sequence[ParityRecord]) -> str:
    """The markdown page: the rule, a table per experiment, then each record's seeds, recipe and notes."""
    lines = [
        "# Parity with the authors' code",
        "",
        "Written by `iclab report ROOT --parity PATH` from the records under `ROOT/parity/` (the drivers of "
        "`benchmarks/parity/`, one per peer code base). Each row is one quantity a claim reads, measured by iclab "
        "and by the paper's own implementation at the same recipe on the same seeds (below 100). "
        f"**Rule** (fixed before the first recorded comparison): the two agree when their means differ by at most "
        f"{AGREEMENT_Z:g} pooled standard errors or by at most {AGREEMENT_RELATIVE:.0%} of the authors' mean. "
        "*Claim* applies the claim's test to each side's mean: a claim that fails in both is the recipe's, not "
        "iclab's.",
        "",
    ]
    if not records:
        lines.append("No parity records yet.")
    experiments = sorted({r.experiment for r in records})
    for experiment in experiments:
        rows = [r for r in records if r.experiment == experiment]
        lines += [
            f"## {experiment}",
            "",
            "| quantity | claims | iclab | authors | agree | claim (iclab / authors) | paper |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            found = agreement(r.iclab, r.authors)
            claims = ", ".join(f"`{c}`" for c in r.claims) + (" (control)" if r.control else "")
            verdict = f"{'yes' if found.agree else '**no**'} ({_apart(found, r.authors)})"
            lines.append(
                f"| [{r.quantity}](#{_anchor(r)}) | {claims} | {_value(r.iclab)} | {_value(r.authors)}"
                f" | {verdict} | {_holds(r, r.iclab)} / {_holds(r, r.authors)} | {r.paper or '–'} |"
            )
        lines.append("")
    for r in records:
        test = "reads more than one value" if r.test is None else f"{r.test['op']} {r.test['threshold']:g}"
        recipe = ", ".join(f"{k} {v}" for k, v in r.recipe.items())
        lines += [
            f"### {r.experiment} {r.quantity}",
            "",
            f"{r.description}. Seeds {', '.join(map(str, r.seeds))}; the claim's test on a mean: {test}.",
            "",
            f"- recipe: {recipe}",
            f"- iclab ({r.commit or 'commit unknown'}, {duration(r.iclab.seconds)}): "
            f"{', '.join(f'{v:.4g}' for v in r.iclab.values)}; {r.iclab.note}",
            f"- the authors' code ({r.peer.get('repository', '?')} {r.peer.get('commit', '')[:7]}, "
            f"{duration(r.authors.seconds)}): {', '.join(f'{v:.4g}' for v in r.authors.values)}; {r.authors.note}",
            *(f"- {note}" for note in r.notes),
            f"- measured {r.date or '?'}",
            "",
        ]
    return "\n".join(lines)


def write_parity(root: str | Path, path: str | Path) -> Path:
    """Write :func:`parity_page` of the records under ``root/parity`` to ``path``."""
    records = read_records(Path(root) / "parity")
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, parity_page(records))
    except OSError as err:
        raise ConfigError(f"cannot write {path}: {err.strerror}") from None
    return path
