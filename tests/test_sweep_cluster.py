"""A sweep on a real Ray cluster of two nodes started on this machine (`ray start --head`, `ray start --address`):
its points run on both nodes, and when the worker node is lost mid-sweep (every process of it killed, as a machine
that goes away) its point runs again on the head, resuming its folder, and the sweep ends with every point once."""

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

import iclab

RAY = Path(sys.executable).with_name("ray")
pytestmark = pytest.mark.skipif(not RAY.exists(), reason=f"no Ray to start ({RAY}): pip install -e '.[sweep]'")

GRID = ["--grid", "task.d=2,3,4", "--grid", "train.lr=0.003,0.01"]  # 6 points: the worker node runs several
# Points long enough (checkpointed every 25 steps) for the worker node to be caught inside one.
SETS = {"train.steps": 300, "train.checkpoint_every": 25, "covariances": {"isotropic": None}}
DEADLINE_S = 240


def test_a_sweep_on_two_nodes_survives_losing_the_worker_node(tmp_path):
    # Unix socket paths live under a node's temp folder and must stay short: not pytest's tmp_path.
    head_dir, worker_dir = (tempfile.mkdtemp(prefix="r", dir="/tmp") for _ in range(2))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}  # as on a real cluster
    port = _free_port()
    out, log = tmp_path / "sweep", tmp_path / "sweep.log"
    sweep = None
    try:
        head = _ray_start(["--head", f"--port={port}", "--include-dashboard=false"], head_dir, env)
        if head.returncode != 0:
            pytest.skip(f"`ray start --head` cannot start here: {(head.stderr or head.stdout).strip()[-300:]}")
        worker = _ray_start([f"--address=127.0.0.1:{port}"], worker_dir, env)
        assert worker.returncode == 0, worker.stderr[-2000:]
        sets = [arg for key, value in SETS.items() for arg in ("--set", f"{key}={json.dumps(value)}")]
        argv = [sys.executable, "-m", "iclab", "sweep", "lsa-linear", "--scale", "smoke", *GRID, *sets]
        # The sweep's driver attaches to the head, the node Ray prefers on its machine: the worker node can go.
        argv += ["--address", f"127.0.0.1:{port}", "--out", str(out)]
        with log.open("w") as sink:
            sweep = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        head_id, worker_id = _node_id(head_dir), _node_id(worker_dir)
        finished_there, interrupted = _lose_the_worker_node_inside_its_second_point(out, worker_dir, sweep, log)
        assert sweep.wait(timeout=DEADLINE_S) == 0, log.read_text()[-3000:]
    finally:
        if sweep is not None and sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
        _kill(_node_pids(head_dir) | _node_pids(worker_dir))
        for folder in (head_dir, worker_dir):
            shutil.rmtree(folder, ignore_errors=True)

    points = pd.read_parquet(out / "points.parquet").set_index("point")
    names = {p.name for p in out.iterdir() if p.is_dir() and p.name not in ("figures", ".locks")}
    assert len(points) == 6 and set(points.index) == names  # one run folder per point, one row each
    assert (points.status == "finished").all() and all((out / name / "claims.json").exists() for name in names)
    assert set(points.node) == {head_id, worker_id}
    assert points.loc[interrupted, "node"] == head_id
    assert json.loads((out / interrupted / "run.json").read_text())["resumed"]  # from what the lost node left
    assert (points.loc[sorted(finished_there), "node"] == worker_id).all()
    table, claims = pd.read_parquet(out / "sweep.parquet"), pd.read_parquet(out / "claims.parquet")
    assert not table.duplicated().any() and set(table.point) == names
    for name in names:
        assert len(claims[claims.point == name]) == len(json.loads((out / name / "claims.json").read_text()))
    # The interrupted point ends as that point run alone (on one thread, as a point of one CPU runs).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        alone = iclab.run(
            "lsa-linear",
            scale="smoke",
            overrides={**SETS, **_grid_values(interrupted)},
            out=tmp_path / "alone",
            device="cpu",
            progress=False,
        )
    finally:
        torch.set_num_threads(threads)
    assert _verdicts(out / interrupted) == _verdicts(alone.path)


def _lose_the_worker_node_inside_its_second_point(
    out: Path, worker_dir: str, sweep: subprocess.Popen, log: Path
) -> tuple[set[str], str]:
    """Wait until the worker node has finished a point and is training another, then kill every process of it.
    Returns the finished points it ran and the one it was inside. A point's run folder lock names the process
    training it, which is a process of the node."""
    seen_there, deadline = set(), time.time() + DEADLINE_S
    while time.time() < deadline:
        assert sweep.poll() is None, f"the sweep ended before the worker node was caught: {log.read_text()[-3000:]}"
        worker = _node_pids(worker_dir)
        holders = {run.parent.name: _holder_pid(run) for run in out.glob("*/.lock")}
        inside = {name for name, pid in holders.items() if pid in worker and not (out / name / "claims.json").exists()}
        seen_there |= inside
        finished_there = {name for name in seen_there if (out / name / "claims.json").exists()}
        point = next(iter(inside), None)
        if finished_there and point and not (out / point / "claims.json").exists():  # still inside it, as it goes
            _kill(worker)
            return finished_there, point
        time.sleep(0.3)
    raise AssertionError(f"the worker node never ran a second point: {log.read_text()[-3000:]}")


def _ray_start(args: list[str], temp_dir: str, env: dict) -> subprocess.CompletedProcess:
    """Start a Ray node of one CPU (and a small object store) whose every file lives under ``temp_dir``."""
    command = [str(RAY), "start", *args, f"--temp-dir={temp_dir}", "--num-cpus=1", "--object-store-memory=100000000"]
    return subprocess.run(
        [*command, "--disable-usage-stats"], env=env, capture_output=True, text=True, timeout=DEADLINE_S
    )


def _free_port() -> int:
    """A free port for the head's GCS, outside the range Ray gives its worker processes (10002-19999)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if not 10000 <= port < 20000:
            return port


def _processes() -> dict[int, tuple[int, str]]:
    """Every process of this machine: pid → (parent pid, command line)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = (entry / "status").read_text()
        except OSError:  # ended meanwhile
            continue
        table[int(entry.name)] = (int(re.search(r"^PPid:\s*(\d+)", status, re.M).group(1)), command)
    return table


def _node_pids(temp_dir: str) -> set[int]:
    """The processes of the Ray node whose temp folder is ``temp_dir``: those naming it (its raylet, its GCS, ...)
    and every process they started (its workers and agents, which rename themselves ``ray::...``)."""
    table = _processes()
    pids = {pid for pid, (_, command) in table.items() if temp_dir in command}
    while more := {pid for pid, (parent, _) in table.items() if parent in pids} - pids:
        pids |= more
    return pids


def _node_id(temp_dir: str) -> str:
    """The Ray node id of the node under ``temp_dir``, from its raylet's command line."""
    commands = (command for _, command in _processes().values() if "raylet/raylet" in command and temp_dir in command)
    return re.search(r"--node_id=(\w+)", next(commands)).group(1)


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _holder_pid(lock: Path) -> int | None:
    """The process a run folder's ``.lock`` names (None while it is empty or being written)."""
    try:
        return json.loads(lock.read_text() or "null")["pid"]
    except (OSError, ValueError, TypeError):
        return None


def _grid_values(point: str) -> dict:
    """``task.d=2__train.lr=0.01`` → ``{"task.d": 2, "train.lr": 0.01}``."""
    return {key: json.loads(value) for key, value in (pair.split("=", 1) for pair in point.split("__"))}


def _verdicts(run: Path) -> list[tuple]:
    """A run's claims: id, holds and what was measured."""
    return [(c["id"], c["holds"], c["measured"]) for c in json.loads((run / "claims.json").read_text())]
