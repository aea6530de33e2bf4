"""Figures and HTML pages for run folders: a report per run, the scoreboard across runs, and the
comparison of two runs. This package renders folders; it never runs anything."""

from .compare import compare_runs
from .html import write_report
from .index import run_folders, write_index

__all__ = ["compare_runs", "run_folders", "write_index", "write_report"]
