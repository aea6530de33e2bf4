"""Text corpora and tokenizers: the only place that reads files a user points at.

:mod:`iclab.data.text` loads a corpus as train / validation / test strings (a Wikitext-layout
folder, a plain text file split by fraction, or the offline default, the language reference
that ships with Python); :mod:`iclab.data.tokenizer` turns them into token ids (a byte-level
BPE trained with Hugging Face ``tokenizers``, or raw bytes) and packs them into blocks.
"""

from .text import WIKITEXT_FILES, TextSplits, load_corpus, pydoc_topics, split_text, text_file, wikitext
from .tokenizer import TOKENIZERS, BPETokenizer, ByteTokenizer, make_tokenizer, pack_blocks

__all__ = [
    "WIKITEXT_FILES",
    "TextSplits",
    "load_corpus",
    "pydoc_topics",
    "split_text",
    "text_file",
    "wikitext",
    "TOKENIZERS",
    "BPETokenizer",
    "ByteTokenizer",
    "make_tokenizer",
    "pack_blocks",
]
