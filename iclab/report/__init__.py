"""Figures and HTML reports for run folders."""

from .html import write_index, write_report

__all__ = ["write_index", "write_report"]
