"""Models map prompt tokens to predictions; they never see Task objects."""

from .constructions import gd_construction
from .lsa import LinearSelfAttention, LSALayer

__all__ = ["LinearSelfAttention", "LSALayer", "gd_construction"]
