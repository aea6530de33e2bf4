"""The package's layering: every module imports only from lower layers (and its own package).

    config, rng, claims, ladders, ledger, version, formatting → devices, cores, capture, tasks, data, losses, parity,
    resources → prompts, shifts → models | learners | theory → train, curriculum → metrics → runs → report | loading
    → experiments → identification → api | evaluation | hub → sweeps → cli → __main__

Modules of one layer never import each other (models, learners and theory are siblings). A new
top-level module must be given its layer here, which is the point: placing it is a design decision.
"""

import ast
from pathlib import Path

import pytest

import iclab

LAYERS = [
    {"config", "rng", "claims", "ladders", "ledger", "version", "formatting"},
    {"devices", "cores", "capture", "tasks", "data", "losses", "parity", "resources"},
    {"prompts", "shifts"},
    {"models", "learners", "theory"},
    {"train", "curriculum"},
    {"metrics", "probes"},
    {"runs"},
    {"report", "loading"},
    {"experiments"},
    {"identification"},
    {"api", "evaluation", "hub"},
    {"sweeps"},
    {"cli"},
    {"__main__"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
ROOT = Path(iclab.__file__).parent


def _imports(path: Path) -> set[str]:
    """The top-level iclab modules that ``path`` imports (relative or absolute)."""
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    package = parts if path.name == "__init__.py" else parts[:-1]  # ('iclab', 'learners', ...)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
            elif node.module and node.module.split(".")[0] == "iclab":
                base = []
            else:
                continue
            target = base + (node.module.split(".") if node.module else [])
            if len(target) > 1:
                found.add(target[1])
            else:  # `from .. import claims`
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("iclab."))
    return found


MODULES = sorted(p for p in ROOT.rglob("*.py") if p != ROOT / "__init__.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_down_the_layers(path):
    own = path.relative_to(ROOT).parts[0].removesuffix(".py")
    assert own in RANK, f"iclab.{own} has no layer in tests/test_layers.py"
    upward = {m for m in _imports(path) - {own} if RANK.get(m, len(LAYERS)) >= RANK[own]}
    assert not upward, f"{path.relative_to(ROOT)} imports {sorted(upward)} from its own or a higher layer"
