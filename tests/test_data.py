import pytest
import torch

from iclab.config import ConfigError
from iclab.data import (
    BPETokenizer,
    ByteTokenizer,
    load_corpus,
    make_tokenizer,
    pack_blocks,
    pydoc_topics,
    split_text,
    wikitext,
)

TEXT = "The quick brown fox jumps over the lazy dog.\nÉté: naïve café — 3.14 ∑ x_i!\n\n  indented\tline\n" * 20


def _write_wikitext(folder):
    folder.mkdir()
    for name, text in (("wiki.train.raw", "train text\n"), ("wiki.valid.raw", "valid\n"), ("wiki.test.raw", "test\n")):
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_wikitext_folder_is_read_as_its_three_splits(tmp_path):
    splits = load_corpus(_write_wikitext(tmp_path / "wt"), [0.8, 0.1, 0.1])
    assert splits == ("train text\n", "valid\n", "test\n")
    assert wikitext(tmp_path / "wt").validation == "valid\n"


def test_text_file_is_split_by_fraction_at_line_breaks(tmp_path):
    lines = [f"line {k}\n" for k in range(100)]
    (tmp_path / "a.txt").write_text("".join(lines), encoding="utf-8")
    splits = load_corpus(tmp_path / "a.txt", [0.8, 0.1, 0.1])
    assert "".join(splits) == "".join(lines)
    assert all(part.endswith("\n") for part in splits)
    assert abs(len(splits.train) / len("".join(lines)) - 0.8) < 0.02


def test_default_corpus_is_the_language_reference_shipped_with_python():
    splits = pydoc_topics([0.9, 0.05, 0.05])
    assert sum(map(len, splits)) > 400_000 and "assert" in splits.train
    assert load_corpus(None, [0.9, 0.05, 0.05]) == splits


@pytest.mark.parametrize("fractions", [[0.5, 0.5], [0.9, 0.2, -0.1], [0.5, 0.3, 0.3]])
def test_bad_fractions_raise_config_error(fractions):
    with pytest.raises(ConfigError, match="fractions"):
        split_text(TEXT, fractions)


def test_missing_and_unreadable_paths_raise_config_error(tmp_path):
    with pytest.raises(ConfigError, match="neither"):
        load_corpus(tmp_path / "absent", [0.8, 0.1, 0.1])
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "wiki.valid.raw").write_text("x")
    with pytest.raises(ConfigError, match="wiki.train.raw"):
        load_corpus(tmp_path / "partial", [0.8, 0.1, 0.1])
    (tmp_path / "binary.txt").write_bytes(b"\xff\xfe\x00 not utf-8 \xc3")
    with pytest.raises(ConfigError, match="cannot read"):
        load_corpus(tmp_path / "binary.txt", [0.8, 0.1, 0.1])


def test_bpe_round_trips_text_and_is_cached(tmp_path):
    cache = tmp_path / "tokenizer.json"
    tokenizer = make_tokenizer("bpe", TEXT, 400, cache)
    assert isinstance(tokenizer, BPETokenizer) and 256 < tokenizer.vocab_size <= 400 and cache.exists()
    unseen = "Unseen: ζ → ∞, emoji 🙂 and\r\nwindows lines"
    for text in (TEXT, unseen):
        ids = tokenizer.encode(text)
        assert ids.dtype == torch.long and tokenizer.decode(ids) == text
    assert len(tokenizer.encode(TEXT)) < len(TEXT.encode()) / 2  # the merges compress what they were trained on
    cached = make_tokenizer("bpe", "other training text entirely", 400, cache)  # loaded, not retrained
    assert torch.equal(cached.encode(TEXT), tokenizer.encode(TEXT))


def test_byte_tokenizer_round_trips_utf8():
    tokenizer = make_tokenizer("byte", TEXT, 0)
    assert isinstance(tokenizer, ByteTokenizer) and tokenizer.vocab_size == 256
    assert torch.equal(tokenizer.encode("é"), torch.tensor([0xC3, 0xA9]))
    assert tokenizer.decode(tokenizer.encode(TEXT)) == TEXT


def test_bad_tokenizer_options_raise_config_error():
    with pytest.raises(ConfigError, match="kind"):
        make_tokenizer("wordpiece", TEXT, 300)
    with pytest.raises(ConfigError, match="vocab_size"):
        make_tokenizer("bpe", TEXT, 100)


def test_blocks_cover_the_stream_once_as_next_token_pairs():
    ids = torch.arange(23)
    blocks = pack_blocks(ids, 5)  # (4, 6)
    assert blocks.shape == (4, 6)
    assert torch.equal(blocks[:, :-1].flatten(), ids[:20]) and torch.equal(blocks[:, 1:].flatten(), ids[1:21])
    with pytest.raises(ConfigError, match="no block"):
        pack_blocks(ids[:5], 5)
