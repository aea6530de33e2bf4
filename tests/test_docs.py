"""The documentation's cross-references: ``docs/papers.md §N`` citations and links between docs pages."""

import re
from pathlib import Path

import iclab

ROOT = Path(iclab.__file__).resolve().parent.parent
PAPERS = ROOT / "docs" / "papers.md"
SOURCES = [
    p
    for pattern in (
        "iclab/**/*.py",
        "tests/*.py",
        "benchmarks/*.py",
        "tools/*.py",
        "examples/**/*.py",
        "*.md",
        "docs/**/*.md",
    )
    for p in ROOT.glob(pattern)
]


def test_every_citation_of_papers_md_names_a_section():
    sections = set(re.findall(r"^## (\d+)\. ", PAPERS.read_text(encoding="utf-8"), flags=re.M))
    assert sections == {str(n) for n in range(1, 8)}
    cited = {
        (p.relative_to(ROOT), n)
        for p in SOURCES
        for n in re.findall(r"docs/papers\.md §(\d+)", p.read_text(encoding="utf-8"))
    }
    assert cited, "nothing cites docs/papers.md"
    assert not {c for c in cited if c[1] not in sections}


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_links_between_docs_pages_resolve():
    links = [
        (page, target, anchor)
        for page in [*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
        for target, anchor in re.findall(r"\]\(([^)#:]*\.md)?(?:#([^)]*))?\)", page.read_text(encoding="utf-8"))
    ]
    assert len(links) > 7
    for page, target, anchor in links:
        linked = page.parent / target if target else page
        assert linked.exists(), f"{page.relative_to(ROOT)} links to {target}"
        assert not anchor or anchor in _anchors(linked), f"{page.relative_to(ROOT)} links to {target}#{anchor}"


def test_experiment_notes_are_named_after_experiments():
    from iclab import experiments

    notes = {p.stem for p in (ROOT / "docs" / "experiments").glob("*.md")} - {"index"}
    assert notes == set(experiments.names())  # a page per experiment, which the site's navigation lists


def test_the_readme_starts_in_a_minute_and_the_site_lists_every_page():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150
    listed = set(re.findall(r"^\s+- (?:[\w .×-]+: )?([\w/.-]+\.md)$", (ROOT / "mkdocs.yml").read_text(), flags=re.M))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages == listed, "every page of docs/ is in mkdocs.yml's nav (and only those)"


def test_the_api_pages_turn_every_sphinx_role_into_a_reference(tool):
    """Issue 55, build item 7: mkdocstrings printed the docstrings' roles (`:func:`x``) as they were. The site's
    Griffe extension (tools/griffe_roles.py) rewrites them: none is left in any docstring the site renders."""
    import griffe

    roles = tool("griffe_roles")
    package = griffe.load("iclab", search_paths=[ROOT], extensions=griffe.load_extensions(roles.SphinxRoles()))
    left = [obj.path for obj in roles._objects(package) if obj.docstring and roles.ROLE.search(obj.docstring.value)]
    assert not left
    train = package["api.run"].docstring.value
    assert '<autoref identifier="iclab.api.list_experiments" optional><code>list_experiments</code></autoref>' in train
    config = package["experiments.base.Experiment"].docstring.value
    assert 'identifier="iclab.config.ConfigError" optional><code>ConfigError</code>' in config  # ~ keeps the name


def test_the_pages_written_from_the_evaluation_runs_are_what_their_records_give(tmp_path, tool):
    """docs/seed-table.md, docs/non-reproductions.md, docs/parity.md and docs/claim-costs.md are written by `make pages`
    from the runs' records committed in results/ (`iclab archive`, and the parity records of benchmarks/parity/): no
    number on them is typed, and a change of the claims, the recipes or the records that would change them fails here
    until the pages are written again."""
    import shutil

    from iclab import api

    records = tmp_path / "results"
    shutil.copytree(ROOT / "results", records)
    api.report(records, tmp_path / "seed-table.md", tmp_path / "non-reproductions.md", tmp_path / "parity.md")
    (tmp_path / "claim-costs.md").write_text(tool("claim_costs").page(records), encoding="utf-8")
    for name in ("seed-table.md", "non-reproductions.md", "parity.md", "claim-costs.md"):
        written = (tmp_path / name).read_text(encoding="utf-8")
        assert written == (ROOT / "docs" / name).read_text(encoding="utf-8"), f"docs/{name}: run `make pages`"
