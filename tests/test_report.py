"""Reports, the scoreboard, run comparison and TensorBoard events, on a folder of tiny runs."""

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from iclab import api
from iclab.cli import _print_times, main
from iclab.config import ConfigError
from iclab.report.live import check_logging
from iclab.runs import RunFolder


class _Page(HTMLParser):
    """The ids and link targets of a page, and its text."""

    def __init__(self, text: str):
        super().__init__()
        self.ids, self.links, self.text = set(), [], []
        self.feed(text)
        self.text = re.sub(r"\s+", " ", " ".join(self.text))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a":
            self.links.append(attrs["href"])

    def handle_data(self, data):
        self.text.append(data)


def test_index_aggregates_the_counted_runs(tiny_runs):
    root, runs = tiny_runs
    index = api.report(root)  # a folder of runs: every report and the index
    assert index == root / "index.html"
    page = _Page(index.read_text())
    # lsa-a and lsa-b are both seed 100 of lsa-linear at quick scale: the newer, lsa-b, counts.
    counted = [runs["b"], runs["gpt"]]
    rows = 0
    for run in counted:
        claims = json.loads(run.folder.claims_file.read_text())
        rows += len(claims)
        for claim in claims:
            assert f"{run.path.name}/report.html#claim-{claim['id']}" in page.links
            assert claim["statement"] in page.text
            if claim["figure"]:
                assert f"{run.path.name}/report.html#figure-{claim['figure']}" in page.links
    assert not any(link.startswith("lsa-a/report.html#") for link in page.links)
    assert "superseded by lsa-b" in page.text
    paper = [c for run in counted for c in run.claims if c["kind"] == "paper"]
    diagnostics = [c for run in counted for c in run.claims if c["kind"] == "diagnostic"]
    assert paper and diagnostics
    held = sum(c["holds"] for c in paper)
    assert f"Paper claims: {held} of {len(paper)} hold" in page.text
    assert "over seeds; diagnostics: " in page.text and "seeds 100 of 2 experiments in 2 runs" in page.text
    html = index.read_text()
    scoreboard = html.split("id='claims'")[1].split("id='diagnostics'")[0]
    assert scoreboard.count("<table") == 1  # one table of the papers' claims, a heading row per paper
    papers = {c["paper"] for c in paper}
    assert scoreboard.count("<tr class='paper'>") == len(papers) > 1
    assert scoreboard.count("<details>") == len(paper)  # one row per (experiment, scale, claim)
    shown = html.split("id='diagnostics'")[1].split("id='runs'")[0]
    assert shown.count("<details>") == len(diagnostics)  # iclab's own checks in a table of their own
    for run in runs.values():  # the runs table: each run's wall time from its run.json
        assert re.search(rf"{run.path.name} .*\d+ s", page.text)


def test_report_has_anchors_environment_and_time(tiny_runs):
    _, runs = tiny_runs
    run = runs["a"].folder
    info = run.read_info()
    assert {
        "iclab",
        "python",
        "torch",
        "device",
        "threads",
        "started",
        "resumed",
        "wall_seconds",
        "cpu_seconds",
    } <= set(info)
    assert info["device"] == "cpu" and info["resumed"] is False and info["wall_seconds"] > 0
    assert re.fullmatch(r"[0-9a-f]{40}", info["commit"])  # the tests run from a git checkout
    page = _Page(run.report_file.read_text())
    assert {f"claim-{c['id']}" for c in run.read_claims()} | {f"figure-{f.stem}" for f in run.figures()} <= page.ids
    assert "#figure-learners" in page.links  # the claims table links each claim to its figure
    assert "wall time" in page.text and info["commit"] in page.text and info["torch"] in page.text


def test_claims_name_existing_figures_and_keep_their_keys(tiny_runs):
    _, runs = tiny_runs
    for run in runs.values():
        figures = {f.stem for f in run.folder.figures()}
        for claim in run.claims:
            keys = [key for key in claim if key != "clauses"]  # a claim of several clauses names them last
            assert "clauses" not in claim or list(claim)[-1] == "clauses"
            assert keys == [
                "id",
                "paper",
                "statement",
                "measured",
                "expected",
                "holds",
                "kind",
                "subject",
                "source",
                "paper_value",
                "figure",
            ]
            assert (claim["kind"] == "paper") == bool(claim["source"])
            assert claim["figure"] is None or claim["figure"] in figures, claim["id"]
    assert any(c["figure"] for c in runs["gpt"].claims)


def test_reproduce_prints_each_experiments_time(tiny_runs, capsys):
    _, runs = tiny_runs
    _print_times(list(runs.values()), 75.0, 2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["experiment", "seeds", "wall", "time", "CPU", "time"]
    assert [line.split()[:2] for line in lines[1:-2]] == [
        ["lsa-linear", "100"],
        ["lsa-linear", "100"],
        ["gpt-linear", "100"],
    ]
    assert lines[-2].split()[0] == "total"
    assert lines[-1] == "elapsed 1 min 15 s (2 runs at a time)"


def test_compare_shows_the_changed_key_and_metrics(tiny_runs, tmp_path, capsys):
    _, runs = tiny_runs
    a, b = runs["a"].path, runs["b"].path
    page = tmp_path / "pages" / "compare.html"
    assert main(["compare", str(a), str(b), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    config = out.split("Config keys that differ (1):")[1].split("Claims")[0]
    assert re.search(r"train\.lr\s+0\.003\s+0\.01", config)
    changed = out.split("Final metrics")[1]
    assert re.search(r"isotropic\s+lsa-isotropic\s+mse\s", changed)  # the trained model's loss moved with lr
    assert not re.search(r"\sols\s", changed)  # the reference learners' losses did not
    html = _Page(page.read_text())
    assert "train.lr" in html.text and "preconditioner_cosine" in html.text
    assert "Training curves" in html.text and "alt='training curves of A and B'" in page.read_text()
    assert any(link.endswith(f"{a.name}/report.html") for link in html.links)


def test_compare_of_a_run_with_itself_finds_no_difference(tiny_runs, capsys):
    _, runs = tiny_runs
    assert main(["compare", str(runs["b"].path), str(runs["b"].path)]) == 0
    out = capsys.readouterr().out
    assert "Configs are identical" in out and re.search(r"Claims \(\d+, 0 differ\)", out) and "(0 of" in out


def test_compare_rejects_bad_input(tiny_runs, tmp_path, capsys):
    _, runs = tiny_runs
    unfinished = RunFolder.create("lsa-linear", {"experiment": "lsa-linear"}, out=tmp_path / "unfinished").path
    (tmp_path / "a-file").touch()
    a = str(runs["a"].path)
    for argv, message in [
        ([str(tmp_path / "nothing"), a], "not a run folder"),
        ([a, str(unfinished)], "has not finished"),
        ([a, a, "--html", str(tmp_path / "a-file" / "compare.html")], "cannot write"),
    ]:
        assert main(["compare", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("iclab: error:") and message in err and err.count("\n") == 1


def test_report_rejects_a_folder_without_runs(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "nor a folder of runs" in capsys.readouterr().err


def test_tensorboard_events_read_back(tiny_runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, runs = tiny_runs
    run = runs["a"].folder
    metrics = run.read_metrics()
    assert sorted(p.name for p in (run.path / "tb").iterdir()) == ["seed100", "unseeded"]
    seed0 = EventAccumulator(str(run.path / "tb" / "seed100")).Reload()
    history = metrics[(metrics.metric == "train_loss") & (metrics.model == "lsa-isotropic")]
    events = seed0.Scalars("isotropic/lsa-isotropic/train_loss")
    assert [e.step for e in events] == history.step.tolist() and len(events) > 0
    assert [e.value for e in events] == pytest.approx(history.value.tolist(), rel=1e-6)
    final = metrics.query("model == 'lsa-isotropic' and metric == 'preconditioner_cosine' and setting == 'isotropic'")
    assert seed0.Scalars("final/isotropic/lsa-isotropic/preconditioner_cosine")[0].value == pytest.approx(
        final.value.item(), rel=1e-6
    )
    unseeded = EventAccumulator(str(run.path / "tb" / "unseeded")).Reload()
    ols = metrics[(metrics.model == "ols") & (metrics.metric == "mse") & (metrics.setting == "anisotropic")]
    assert unseeded.Scalars("final/anisotropic/ols/mse")[0].value == pytest.approx(
        ols.value.item(), rel=1e-5, abs=1e-12
    )
    assert not (runs["gpt"].path / "tb").exists()  # off by default


@pytest.mark.parametrize(
    "override, message", [("log.tensorbord=true", "unknown config key"), ("log.tensorboard=3", "expects bool")]
)
def test_log_options_are_validated(override, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        api.run("lsa-linear", overrides=[override], out=tmp_path / "r", progress=False)
    assert not (tmp_path / "r").exists()


def test_a_logger_without_its_package_is_a_config_error(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="needs the tensorboard package"):
        check_logging({"log": {"tensorboard": True}})
    check_logging({"log": {"tensorboard": False, "wandb": False}})
    check_logging({})  # a config.yaml from before the log block


def test_report_of_a_run_from_before_run_json(tiny_runs, tmp_path):
    _, runs = tiny_runs
    old = tmp_path / "old"
    shutil.copytree(runs["b"].path, old)
    (old / "run.json").unlink()
    page = _Page(api.report(old).read_text())
    assert "wall time ?" in page.text and "claim-tracks-ols" not in page.ids
    assert {f"claim-{c['id']}" for c in runs["b"].claims} <= page.ids


def test_compare_imports_no_torch(tiny_runs):
    _, runs = tiny_runs
    code = (
        "import sys\n"
        "from iclab.cli import main\n"
        f"assert main(['compare', {str(runs['a'].path)!r}, {str(runs['b'].path)!r}]) == 0\n"
        "assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# --- issue 55: a damaged run folder is one line naming the file; a folder of runs reports every other run ---------


def _one_line(err: str) -> str:
    assert err.startswith("iclab: error:") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _copies(tiny_runs, tmp_path, *names) -> dict:
    """Copies of the tiny runs ``names`` (keys of ``tiny_runs``) in a folder of runs of their own."""
    root, runs = tiny_runs
    return {name: shutil.copytree(runs[name].path, tmp_path / "runs" / runs[name].path.name) for name in names}


def test_a_broken_config_yaml_is_one_line_for_eval_report_and_compare(tiny_runs, tmp_path, capsys):
    """Item 6: a broken line appended to config.yaml gave yaml tracebacks."""
    run = _copies(tiny_runs, tmp_path, "gpt")["gpt"]
    with (run / "config.yaml").open("a") as f:
        f.write("broken: [\n")
    before = sorted(run.iterdir())
    for argv in (["eval", str(run)], ["report", str(run)], ["compare", str(run), str(tiny_runs[1]["gpt"].path)]):
        assert main(argv) == 2, argv
        err = _one_line(capsys.readouterr().err)
        assert f"cannot read {run / 'config.yaml'} (" in err and "at line" in err and "restore it" in err
    assert sorted(run.iterdir()) == before  # no evaluation folder, no report rewritten


def test_a_malformed_claims_json_skips_its_run_and_the_others_are_reported(tiny_runs, tmp_path, capsys):
    """Item 7: one malformed claims.json made `iclab report runs` die (JSONDecodeError): no run was reported."""
    copies = _copies(tiny_runs, tmp_path, "a", "gpt")
    (copies["gpt"] / "claims.json").write_text("{")
    (copies["a"] / "report.html").unlink()
    assert main(["report", str(tmp_path / "runs")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"skipped {copies['gpt']}: cannot read {copies['gpt'] / 'claims.json'}" in err
    assert f"({tmp_path / 'runs' / 'index.html'} reports every other run)" in err
    assert (copies["a"] / "report.html").exists()  # the other run is reported
    index = _Page((tmp_path / "runs" / "index.html").read_text())
    assert "Unreadable run folders (left out)" in index.text and copies["a"].name in index.text


def test_a_missing_metrics_parquet_is_one_line_for_compare_and_skipped_by_report(tiny_runs, tmp_path, capsys):
    """Item 8: metrics.parquet deleted: compare crashed, report silently dropped the final metrics."""
    copies = _copies(tiny_runs, tmp_path, "a", "b")
    (copies["b"] / "metrics.parquet").unlink()
    assert main(["compare", str(copies["a"]), str(copies["b"])]) == 2
    assert f"{copies['b'] / 'metrics.parquet'} is missing" in _one_line(capsys.readouterr().err)
    report = (copies["b"] / "report.html").read_text()
    assert main(["report", str(tmp_path / "runs")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"skipped {copies['b']}: {copies['b'] / 'metrics.parquet'} is missing" in err
    assert (copies["b"] / "report.html").read_text() == report  # not rewritten without its metrics
    assert (copies["a"] / "report.html").exists() and (tmp_path / "runs" / "index.html").exists()


def test_a_read_only_run_folder_is_one_line_for_report(tiny_runs, tmp_path, capsys, monkeypatch):
    """Item 10: a read-only run folder gave `iclab report` a PermissionError traceback."""
    import errno
    import os

    run = _copies(tiny_runs, tmp_path, "gpt")["gpt"]
    report = (run / "report.html").read_bytes()
    if os.geteuid() == 0:  # root writes into a read-only folder: refuse as the file system would
        replace = os.replace

        def refuse(source, target, *args, **kwargs):
            if os.path.dirname(target) == str(run):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(target))
            return replace(source, target, *args, **kwargs)

        monkeypatch.setattr(os, "replace", refuse)
    run.chmod(0o555)
    try:
        assert main(["report", str(run)]) == 2
    finally:
        run.chmod(0o755)
    err = _one_line(capsys.readouterr().err)
    assert f"cannot write {run / 'report.html'} (Permission denied): make its folder writable" in err
    assert (run / "report.html").read_bytes() == report and not list(run.glob(".*iclab-tmp"))
