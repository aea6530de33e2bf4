"""iclab: a laboratory for in-context learning research.

Quick start::

    import iclab
    result = iclab.run("lsa-linear", scale="quick")
    print(result.claims, result.path)

The API is imported on first use, so ``import iclab`` (and ``iclab --help``) start no torch.
"""

__all__ = ["RunResult", "list_experiments", "report", "reproduce", "resume", "run"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'iclab' has no attribute {name!r}")
