"""A generated corpus in the Wikitext raw layout, for timing a recipe that reads Wikitext-2 on a machine without it.

    python benchmarks/generated_wikitext.py FOLDER [--megabytes 1] [--words 60000]

Writes ``wiki.train.raw``, ``wiki.valid.raw`` and ``wiki.test.raw`` (90 / 5 / 5%) of lines of random lower-case
words drawn from a fixed list of distinct ones (seed 0). A training step's cost depends on the model's shapes, not on
the words: on this corpus a byte-level BPE reaches GPT-2's vocabulary of 50 257 tokens, so symbols-lm's paper recipe
builds the paper's model, and a timed run of it (``recipe_cost.py symbols-lm --set data.path=FOLDER``) measures the
paper's step. Its losses and claims mean nothing. The default megabyte reaches that vocabulary with short
validation and test splits, which keeps a timed run's held-out evaluations short.
"""

from __future__ import annotations

import argparse
import random
import string
from pathlib import Path

from iclab.data import WIKITEXT_FILES


def generated_text(megabytes: float, words: int, seed: int = 0) -> str:
    """About ``megabytes`` MB of lines of 5–20 words drawn uniformly from ``words`` distinct words of 3–10 letters."""
    rng = random.Random(seed)
    vocabulary = list({"".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))) for _ in range(words)})
    lines, size = [], 0
    while size < megabytes * 1e6:
        line = " ".join(rng.choices(vocabulary, k=rng.randint(5, 20))) + "\n"
        lines.append(line)
        size += len(line)
    return "".join(lines)


def write_corpus(folder: Path, megabytes: float = 1.0, words: int = 60_000) -> Path:
    """Write the three splits of :func:`generated_text` into ``folder`` (made if missing); returns it."""
    text = generated_text(megabytes, words).splitlines(keepends=True)
    cuts = [0, int(0.9 * len(text)), int(0.95 * len(text)), len(text)]
    folder.mkdir(parents=True, exist_ok=True)
    for name, start, end in zip(WIKITEXT_FILES.values(), cuts, cuts[1:]):
        (folder / name).write_text("".join(text[start:end]))
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the three files go")
    parser.add_argument("--megabytes", type=float, default=1.0, help="the corpus's size (default 1)")
    parser.add_argument("--words", type=int, default=60_000, help="distinct words drawn (default 60 000)")
    args = parser.parse_args(argv)
    print(write_corpus(args.folder, args.megabytes, args.words))


if __name__ == "__main__":
    main()
