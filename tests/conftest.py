import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import settings

from iclab.cores import cores

# Property tests draw the same examples on every machine and every run (a fixed seed, no example
# database): a fresh clone runs exactly what passed here, so CI cannot fail at random on code nobody
# touched. `make test-fuzz` (HYPOTHESIS_PROFILE=explore) draws fresh examples, many more of them; what it
# finds is pinned with @example.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", max_examples=2000, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Threads per test process: the cores shared among pytest-xdist's workers (`make test` runs one per core, so 1
# each), 2 in one process, unless ICLAB_TEST_THREADS says otherwise (e.g. 1 beside another job, where two
# 2-thread processes would spin against each other).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = int(os.environ.get("ICLAB_TEST_THREADS", max(1, cores() // WORKERS) if WORKERS > 1 else 2))
TOOLS = Path(__file__).resolve().parent.parent / "tools"


def _load_tool(name: str):
    """The script tools/<name>.py as a module (tools/ is not a package), registered in sys.modules, where a
    dataclass of it looks its module up."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tool():
    """Loads a script of tools/ as a module: ``tool("claim_costs")``."""
    return _load_tool


def _cap_memory(gigabytes: float) -> None:
    """Cap this test process's data segment (heap and private mappings) at ``gigabytes``, so a test that would
    allocate beyond it fails at once with torch's "can't allocate memory" instead of holding the machine
    (ICLAB_TEST_MEMORY_GB; 0 lifts the cap)."""
    import resource

    if gigabytes > 0:
        limit = int(gigabytes * 2**30)
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


_cap_memory(float(os.environ.get("ICLAB_TEST_MEMORY_GB", "8")))


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(THREADS)


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
    """A folder of three tiny finished runs on the first evaluation seed (100), which the scoreboard counts
    (their run.json says they follow the recipe, as the stand-ins they are):
    lsa-linear twice with TensorBoard events (``b`` with a larger learning rate, its one other config key)
    and gpt-linear. Shared by the report, compare and browser tests."""
    from iclab import api

    torch.set_num_threads(THREADS)
    root = tmp_path_factory.mktemp("reproduction")
    lsa = ["seed=100", "train.steps=20", "train.warmup=0", "flow.steps=200", "eval_prompts=500"]
    lsa.append("log.tensorboard=true")
    gpt = [
        "seed=100",
        "train.steps=10",
        "train.compile=false",
        "train.warmup=2",
        "model.n_layers=1",
        "model.width=16",
        "model.n_heads=2",
        "eval_prompts=200",
        "bootstrap=50",
    ]
    runs = {
        "a": api.run("lsa-linear", seeds=1, overrides=lsa, out=root / "lsa-a", progress=False),
        "b": api.run("lsa-linear", seeds=1, overrides=[*lsa, "train.lr=0.01"], out=root / "lsa-b", progress=False),
        "gpt": api.run("gpt-linear", seeds=1, overrides=gpt, out=root / "gpt", progress=False),
    }
    for result in runs.values():  # their tiny sizes stand in for the recipe's: counted, not variants or older
        config = result.folder.read_config()
        fingerprint = api.recipe(config["experiment"], config["scale"]).fingerprint
        result.folder.write_info({**result.folder.read_info(), "recipe_changes": {}, "fingerprint": fingerprint})
    return root, runs
