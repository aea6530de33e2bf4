"""The scoreboard in a real browser (headless Chromium, Debian's ``chromium`` package).

Opens a tiny reproduction's index, checks that every claim of every counted run's ``claims.json``
is there, follows a claim's figure link into the run's report, and checks that the figure it points
to is shown: the page scrolls to it, the embedded image decodes, and a screenshot of the page has
that figure's pixels where the browser laid it out. Also: no sideways scrolling at phone width, and
the aggregated table's per-seed values hidden until opened, fitting a phone when opened, and shown
in print.
"""

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import matplotlib.image
import numpy as np
import pytest

from iclab import api

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")

# Measures, once the page has loaded, what the test asks about, and posts it to the frame around it.
PROBE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const root = document.documentElement, found = {scrollY: window.scrollY, width: root.clientWidth,
    scrollWidth: root.scrollWidth};
  const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if (target) {
    const image = target.querySelector('img'), box = image.getBoundingClientRect(), style = getComputedStyle(image);
    Object.assign(found, {top: target.getBoundingClientRect().top, decoded: image.complete && image.naturalWidth > 0,
      visible: style.visibility === 'visible' && style.display !== 'none', source: image.src.slice(0, 21),
      image: [box.left + image.clientLeft, box.top + image.clientTop + window.scrollY, image.clientWidth,
        image.clientHeight], natural: [image.naturalWidth, image.naturalHeight]});
  }
  parent.postMessage(JSON.stringify(found), '*');
}, 50));
</script>"""
# Holds the page in a frame of a given size (headless Chromium's window is at least 500 px wide;
# a frame can be a phone's width) and writes what the probe posts into an attribute of <body>.
FRAME = """<!doctype html><body style="margin:0">
<iframe src="{src}" style="width:{width}px;height:{height}px;border:0"></iframe>
<script>addEventListener('message', e => document.body.setAttribute('data-probe', e.data));</script></body>"""


def _chromium(tmp_path, url: str, *flags: str) -> str:
    """Run headless Chromium on ``url`` with a fresh profile; returns its standard output."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            *flags,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# On the scoreboard: the shown height (0 when not rendered) of every per-seed list (details content)
# before and after the probe opens them (``?open`` in the address), and the page's width.
DETAILS_PROBE = """<script>
window.addEventListener('load', () => {
  const details = [...document.querySelectorAll('details')], heights = () => details.map(d => {
    const list = d.querySelector('ul.seeds');
    return list.checkVisibility() ? list.getBoundingClientRect().height : 0;
  });
  const closed = heights();
  if (location.search.includes('open')) details.forEach(d => { d.open = true; });
  setTimeout(() => {
    const root = document.documentElement;
    parent.postMessage(JSON.stringify({closed, shown: heights(), width: root.clientWidth,
      scrollWidth: root.scrollWidth}), '*');
  }, 50);
});
</script>"""


def _probe(
    tmp_path,
    page: Path,
    fragment: str,
    width: int,
    height: int,
    probe: str = PROBE,
    query: str = "",
    text: str | None = None,
) -> dict:
    """Open a copy of ``page`` (or ``text`` in its place) with ``probe`` added, at ``?query#fragment``,
    in a ``width`` × ``height`` frame; returns what the probe measured."""
    copy = tmp_path / f"probed-{page.parent.name}-{page.name}"
    copy.write_text((page.read_text() if text is None else text).replace("</body>", probe + "</body>"))
    frame = tmp_path / f"frame-{copy.name}"
    frame.write_text(
        FRAME.format(src=f"{copy.name}{'?' + query if query else ''}#{fragment}", width=width, height=height)
    )
    dom = _chromium(tmp_path, frame.as_uri(), f"--window-size={max(width, 500) + 20},{height + 20}", "--dump-dom")
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, "the probe did not run"
    return json.loads(found.group(1).replace("&quot;", '"'))


class _Links(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.links = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append(dict(attrs)["href"])


def test_scoreboard_links_claims_to_their_visible_figures(tiny_runs, tmp_path):
    root, runs = tiny_runs
    index = api.report(root)
    rendered = _Links(_chromium(tmp_path, index.as_uri(), "--dump-dom")).links
    for run in (runs["b"], runs["gpt"]):  # lsa-a is an older run of lsa-b's seed: not counted
        for claim in json.loads(run.folder.claims_file.read_text()):
            assert f"{run.path.name}/report.html#claim-{claim['id']}" in rendered, claim["id"]
    assert not any(link.startswith("lsa-a/report.html#") for link in rendered)

    # Follow gpt-linear's tracks-ols claim to its figure (the evidence link in that claim's row).
    href = next(link for link in rendered if link.startswith("gpt/") and "#figure-" in link)
    target = urlsplit(urljoin(index.as_uri(), href))
    report, fragment = Path(unquote(target.path)), unquote(target.fragment)
    figure = report.parent / "figures" / f"{fragment.removeprefix('figure-')}.png"
    assert report.exists() and figure.exists()

    found = _probe(tmp_path, report, fragment, 1280, 900)
    assert found["scrollY"] > 0 and abs(found["top"]) < 2  # the browser scrolled to the figure
    assert found["decoded"] and found["visible"] and found["source"] == "data:image/png;base64"
    left, top, width, height = (round(v) for v in found["image"])
    source = matplotlib.image.imread(figure)[..., :3].mean(-1)  # (H, W) grey
    assert found["natural"] == [width, height] == [source.shape[1], source.shape[0]]  # shown at its own size

    # A screenshot of the whole page: where the browser put the image, the pixels are the figure's.
    shot = tmp_path / "report.png"
    _chromium(tmp_path, report.as_uri(), f"--window-size=1280,{top + height + 50}", f"--screenshot={shot}")
    pixels = matplotlib.image.imread(shot)[top : top + height, left : left + width, :3].mean(-1)  # (H, W) grey
    assert (pixels < 0.9).mean() > 0.02  # not blank
    assert np.abs(pixels - source).mean() < 0.01


@pytest.mark.parametrize("page", ["index.html", "lsa-a/report.html"])
def test_pages_fit_a_phone_screen(tiny_runs, tmp_path, page):
    root, _ = tiny_runs
    api.report(root)
    found = _probe(tmp_path, root / page, "", 400, 800)
    assert found["scrollWidth"] <= found["width"], found  # no sideways scrolling


def test_scoreboard_shows_each_seeds_values_on_demand_on_a_phone_and_in_print(tiny_runs, tmp_path):
    root, runs = tiny_runs
    index = api.report(root)
    rows = len(runs["b"].claims) + len(runs["gpt"].claims)
    closed = _probe(tmp_path, index, "", 1280, 900, DETAILS_PROBE)
    assert len(closed["closed"]) == rows and not any(closed["closed"])  # hidden until asked for
    phone = _probe(tmp_path, index, "", 400, 800, DETAILS_PROBE, query="open")
    assert all(h > 0 for h in phone["shown"]) and phone["scrollWidth"] <= phone["width"], phone
    # Print: the page's print styles applied on screen, at an A4 page's width inside its margins.
    printed = index.read_text().replace("@media print{", "@media all{")
    assert printed != index.read_text()
    paper = _probe(tmp_path, index, "", 718, 1000, DETAILS_PROBE, text=printed)
    assert all(h > 0 for h in paper["closed"]), paper  # every seed's values on paper, no click needed
    assert paper["scrollWidth"] <= paper["width"], paper


# The rendered text of each top-level section (innerText: what a reader sees, closed details excluded) and
# the colour of each verdict word.
SECTIONS_PROBE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const sections = [...document.querySelectorAll('h2')].map(h => {
    let text = '', node = h.nextElementSibling;
    while (node && node.tagName !== 'H2') { text += node.innerText + '\\n'; node = node.nextElementSibling; }
    return [h.innerText, text];
  });
  const colours = [...document.querySelectorAll('.ok, .fail, .finding')]
    .map(s => [s.innerText, getComputedStyle(s).color]);
  parent.postMessage(JSON.stringify({sections, colours}), '*');
}, 50));
</script>"""


def test_scoreboard_headlines_paper_claims_and_shows_diagnostics_findings_and_tuning_runs_apart(tmp_path):
    from test_scoreboard import _claim, _run

    root = tmp_path / "runs"
    for k, seed in enumerate(range(100, 105)):
        claims = [
            _claim("reproduces", True),
            _claim("not-here", k == 0, measured=0.3 + k / 10, paper_value=0.05),
            _claim("converged", True, kind="diagnostic"),
        ]
        _run(root, f"lsa-linear-seed{seed}", seed, claims, minute=k)
    _run(root, "lsa-linear-seed3", 3, [_claim("reproduces", False), _claim("not-here", True)], minute=9)
    # Newer runs of seed 100 that are not the recipe: a variant (a changed key) and a smoke run.
    variant = _run(
        root, "lsa-linear-seed100-lr", 100, [_claim("reproduces", False), _claim("not-here", True)], minute=10
    )
    variant.write_info({**variant.read_info(), "recipe_changes": {"train.lr": 0.01}})
    _run(root, "lsa-linear-smoke", 100, [_claim("reproduces", False)], minute=11, scale="smoke")
    found = _probe(tmp_path, api.report(root), "", 900, 1400, probe=SECTIONS_PROBE)
    sections = dict(found["sections"])
    assert list(sections)[:2] == ["The papers' claims", "Diagnostics"]  # the papers' claims first
    claims, diagnostics = sections["The papers' claims"], sections["Diagnostics"]
    assert "reproduces" in claims and "not-here" in claims and "converged" not in claims
    assert "does not reproduce here" in claims and "0.05" in claims  # beside the paper's number
    assert "converged" in diagnostics and "not counted among their claims" in diagnostics
    others = sections["Other runs (not counted)"]
    evaluation = sections["Runs on the evaluation seeds 100–104"]
    assert "lsa-linear-seed3" in others and "lsa-linear-seed3" not in evaluation
    assert "variant: train.lr=0.01" in others and "lsa-linear-seed100-lr" not in evaluation  # shown apart ...
    assert "smoke scale: the pipeline ran" in others and "lsa-linear-smoke" not in evaluation
    reproduces = claims.split("\nreproduces\n")[1].split("\nnot-here\n")[0]
    assert "\tholds\non 5 of 5 seeds" in reproduces  # ... and never counted: seed 100's recipe run judges
    colours = dict(found["colours"])
    assert colours["does not reproduce here"] != colours["holds"]  # a finding reads apart from a pass


# Every details element opened, then each table row's rendered text.
OPENED_PROBE = """<script>
window.addEventListener('load', () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  setTimeout(() => parent.postMessage(JSON.stringify(
    {rows: [...document.querySelectorAll('tr')].map(r => r.innerText)}), '*'), 50);
});
</script>"""


def test_a_run_of_five_seeds_shows_each_seeds_verdict_and_the_verdict_over_them(tmp_path):
    from test_scoreboard import _run, _seeds_claims

    root = tmp_path / "runs"
    verdicts = {100: True, 101: True, 102: False, 103: True, 104: True}
    _run(root, "lsa-linear-seeds100-104", 100, _seeds_claims(verdicts), minute=0, seeds=5)
    found = _probe(tmp_path, api.report(root), "", 1280, 900, probe=OPENED_PROBE)
    (row,) = [r for r in found["rows"] if r.startswith("gain")]
    assert "holds\non 4 of 5 seeds" in row and "100–104" in row  # the rule over the run's five seeds
    for seed, holds in verdicts.items():
        assert f"seed {seed}: {'✓' if holds else '✗'}" in row  # each seed's own verdict, one run
