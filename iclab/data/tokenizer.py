"""Tokenizers for text corpora, and packing a token stream into blocks.

Two kinds (``tokenizer.kind``): ``bpe``, a byte-level BPE (GPT-2's scheme: UTF-8 bytes mapped
to printable characters, split by GPT-2's pre-tokenising pattern, merges learned on the training
split) trained with Hugging Face ``tokenizers`` and cached as a JSON file, and ``byte``, the raw
UTF-8 bytes (256 ids, no training; the fallback that needs nothing). Both round-trip any text.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..config import ConfigError

TOKENIZERS = ("bpe", "byte")


class ByteTokenizer:
    """UTF-8 bytes as token ids (vocabulary 256)."""

    vocab_size = 256

    def encode(self, text: str) -> torch.Tensor:
        """Token ids ``(n,)`` (long) of ``text``."""
        return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).long()

    def decode(self, ids) -> str:
        """The text of token ids (bytes that are not valid UTF-8 become U+FFFD)."""
        return bytes(torch.as_tensor(ids).tolist()).decode("utf-8", errors="replace")


class BPETokenizer:
    """A byte-level BPE (Hugging Face ``tokenizers``); build it with :meth:`train` or :meth:`load`."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()

    @classmethod
    def train(cls, text: str, vocab_size: int) -> BPETokenizer:
        """Learn merges on ``text`` until the vocabulary (the 256 byte symbols included) has
        ``vocab_size`` tokens, or no pair is left to merge."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        if vocab_size < 256:
            raise ConfigError(f"tokenizer.vocab_size must be >= 256 (the byte alphabet) for bpe, got {vocab_size}")
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
        tokenizer.train_from_iterator(text.splitlines(keepends=True), trainer)
        return cls(tokenizer)

    @classmethod
    def load(cls, path: str | Path) -> BPETokenizer:
        """A tokenizer saved by :meth:`save`."""
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)))

    def save(self, path: str | Path) -> None:
        """Write the tokenizer's JSON file (atomically)."""
        tmp = Path(path).with_suffix(".tmp")
        self._tokenizer.save(str(tmp))
        os.replace(tmp, path)

    def encode(self, text: str) -> torch.Tensor:
        """Token ids ``(n,)`` (long) of ``text``."""
        return torch.tensor(self._tokenizer.encode(text).ids, dtype=torch.long)

    def decode(self, ids) -> str:
        """The text of token ids."""
        return self._tokenizer.decode(torch.as_tensor(ids).tolist())


def make_tokenizer(kind: str, train_text: str, vocab_size: int, cache: str | Path | None = None):
    """A :class:`ByteTokenizer`, or a :class:`BPETokenizer` of ``vocab_size`` tokens trained on
    ``train_text``, loaded from ``cache`` when that file exists and saved there otherwise."""
    if kind not in TOKENIZERS:
        raise ConfigError(f"tokenizer.kind must be one of {TOKENIZERS}, got {kind!r}")
    if kind == "byte":
        return ByteTokenizer()
    if cache is not None and Path(cache).exists():
        return BPETokenizer.load(cache)
    tokenizer = BPETokenizer.train(train_text, vocab_size)
    if cache is not None:
        tokenizer.save(cache)
    return tokenizer


def pack_blocks(ids: torch.Tensor, length: int) -> torch.Tensor:
    """A token stream ``(n,)`` cut into ``(n_blocks, length + 1)`` rows: row i is tokens
    [i·length, (i+1)·length], so inputs ``row[:-1]`` and next-token targets ``row[1:]`` cover the
    stream once (consecutive rows share one token; the tail that fills no block is dropped)."""
    if length < 1:
        raise ConfigError(f"block length must be >= 1, got {length}")
    if ids.numel() < length + 1:
        raise ConfigError(f"a stream of {ids.numel()} tokens fills no block of {length} + 1 tokens")
    return ids.unfold(0, length + 1, length)  # (n_blocks, length + 1)
