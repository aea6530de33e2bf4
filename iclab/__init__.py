"""iclab: a laboratory for in-context learning research.

Quick start::

    import iclab
    result = iclab.run("lsa-linear", scale="quick")
    print(result.claims, result.path)
"""

from .api import RunResult, list_experiments, report, reproduce, resume, run

__all__ = ["RunResult", "list_experiments", "report", "reproduce", "resume", "run"]
__version__ = "0.1.0"
