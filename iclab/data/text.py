"""Text corpora as train / validation / test strings.

Three sources, chosen by ``data.path``:

* ``null``: the offline default, the text of Python's language reference that every Python
  installation ships as ``pydoc_data.topics`` (79 topics, about 465 kB of English prose and
  grammar), the topics in sorted order, split by fraction. Nothing is ever downloaded.
* a folder in the Wikitext raw layout: ``wiki.train.raw``, ``wiki.valid.raw``, ``wiki.test.raw``
  (e.g. Wikitext-2 raw, Merity et al.), used as they are.
* a plain text file (UTF-8), split by fraction into consecutive train / validation / test parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ..config import ConfigError

WIKITEXT_FILES = {"train": "wiki.train.raw", "validation": "wiki.valid.raw", "test": "wiki.test.raw"}
"""The file of each split in a Wikitext-layout folder."""


class TextSplits(NamedTuple):
    """A corpus's three splits, as strings."""

    train: str
    validation: str
    test: str


def split_text(text: str, fractions: Sequence[float]) -> TextSplits:
    """Consecutive train / validation / test parts of ``text`` with the given fractions of its
    characters (three positive numbers summing to 1), each cut at the line break nearest its end."""
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-6:
        raise ConfigError(f"data.fractions must be three positive numbers summing to 1, got {list(fractions)}")
    cuts, total = [0], 0.0
    for fraction in fractions[:2]:
        total += fraction
        cut = round(total * len(text))
        line_end = text.find("\n", cut)  # end a part at a line break, so no line is split in two
        cuts.append(max(cuts[-1], line_end + 1 if line_end >= 0 else len(text)))
    cuts.append(len(text))
    parts = [text[a:b] for a, b in zip(cuts, cuts[1:])]
    if not all(parts):
        raise ConfigError(f"the text ({len(text)} characters) is too short for the split {list(fractions)}")
    return TextSplits(*parts)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None


def wikitext(folder: str | Path) -> TextSplits:
    """The three splits of a Wikitext-layout folder (see :data:`WIKITEXT_FILES`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"data.path {str(folder)!r} is not a folder")
    missing = [name for name in WIKITEXT_FILES.values() if not (folder / name).is_file()]
    if missing:
        raise ConfigError(f"data.path {str(folder)!r} lacks {', '.join(missing)} (the Wikitext raw layout)")
    return TextSplits(*(_read(folder / name) for name in WIKITEXT_FILES.values()))


def text_file(path: str | Path, fractions: Sequence[float]) -> TextSplits:
    """A plain UTF-8 text file split by ``fractions`` (see :func:`split_text`)."""
    return split_text(_read(Path(path)), fractions)


def pydoc_topics(fractions: Sequence[float]) -> TextSplits:
    """The language reference shipped with Python (``pydoc_data.topics``), topics in sorted
    order, split by ``fractions``."""
    from pydoc_data.topics import topics

    return split_text("\n".join(topics[name] for name in sorted(topics)), fractions)


def load_corpus(path: str | Path | None, fractions: Sequence[float]) -> TextSplits:
    """The corpus ``data.path`` names (see the module docstring): None for the language
    reference, a folder in the Wikitext layout, or a text file split by ``fractions``."""
    if path is None:
        return pydoc_topics(fractions)
    path = Path(path).expanduser()
    if path.is_dir():
        return wikitext(path)
    if path.is_file():
        return text_file(path, fractions)
    raise ConfigError(f"data.path {str(path)!r} is neither a folder in the Wikitext layout nor a text file")
