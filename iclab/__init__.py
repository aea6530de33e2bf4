"""iclab: a laboratory for in-context learning research.

Quick start::

    import iclab
    result = iclab.run("lsa-linear", scale="quick")
    print(result.claims, result.path)
    sweep = iclab.sweep("lsa-linear", {"task.d": [2, 4]}, seeds=3)   # a grid of runs on Ray
    loaded = iclab.load_model(result.path)                          # a trained model, its task and format
    iclab.evaluate(result.path, shifts=["standard", "skewed"])      # an evaluation folder

The API is imported on first use, so ``import iclab`` (and ``iclab --help``) start no torch.
"""

from .version import __version__ as __version__  # iclab.__version__

_API = {name: "api" for name in ("RunResult", "list_experiments", "rejudge", "report", "reproduce", "resume", "run")}
_API.update({name: "sweeps" for name in ("SweepResult", "rejudge_sweep", "resume_sweep", "sweep")})
_API.update(
    {
        "LoadedModel": "loading",
        "load_model": "loading",
        "evaluate": "evaluation",
        "EvaluationResult": "evaluation",
        "identify": "identification",
        "IdentificationResult": "identification",
        "export": "hub",
        "latest_run": "runs",
        "archive": "runs",
    }
)
__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    raise AttributeError(f"module 'iclab' has no attribute {name!r}")
