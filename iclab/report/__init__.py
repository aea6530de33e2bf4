"""Figures and HTML reports for run and sweep folders."""

from .html import write_index, write_report
from .sweep import write_sweep_report

__all__ = ["write_index", "write_report", "write_sweep_report"]
