"""Models map prompt tokens to predictions; they never see Task objects."""

from .lsa import LinearSelfAttention, LSALayer

__all__ = ["LinearSelfAttention", "LSALayer"]
