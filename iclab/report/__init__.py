"""Figures and HTML pages for run and sweep folders: a report per run, the scoreboard across runs (and
its markdown claim × seed table, and why a claim does not reproduce), the comparison of two runs, a sweep's
report and an evaluation's. This package renders folders; it never runs anything."""

from .compare import compare_runs
from .diagnosis import diagnoses, write_non_reproductions
from .evaluation import write_evaluation_report
from .html import write_report
from .index import aggregate, write_index, write_seed_table
from .sweep import write_sweep_report

__all__ = [
    "aggregate",
    "compare_runs",
    "diagnoses",
    "write_evaluation_report",
    "write_index",
    "write_non_reproductions",
    "write_report",
    "write_seed_table",
    "write_sweep_report",
]
