import pytest
import torch
from safetensors import safe_open

import iclab
from iclab import claims
from iclab.cli import main
from iclab.config import ConfigError
from iclab.data import pydoc_topics
from iclab.experiments import symbols_lm
from iclab.experiments.symbols_lm import VARIANTS
from iclab.metrics import next_token_loss
from iclab.models import GPTConfig, GPTTransformer
from iclab.models.attention import SelfAttention
from iclab.rng import generator

TINY = {
    "seeds": 2,
    "tokenizer.vocab_size": 300,
    "data.fractions": [0.8, 0.1, 0.1],
    "model.width": 16,
    "model.n_heads": 2,
    "model.n_layers": 1,
    "model.block": 16,
    "train.steps": 4,
    "train.warmup": 1,
    "train.log_every": 2,
    "train.batch_size": 4,
    "eval.batch_size": 256,
    "eval.diagonal_blocks": 4,
}


def _lm(variant="plain", vocab=30, block=12, **kw):
    return GPTTransformer(
        GPTConfig(
            None,
            2,
            2,
            16,
            max_tokens=block,
            stride=1,
            attention="math",
            vocab_size=vocab,
            tied_output=True,
            **{**VARIANTS[variant], **kw},
        ),
        generator(0),
    )


@pytest.mark.parametrize("variant", ["kq", "kq-nodiag"])
def test_with_a_at_zero_the_lm_equals_the_plain_one(variant):
    tokens = torch.randint(0, 30, (3, 12), generator=generator(1))
    plain, modified = _lm(), _lm(variant)
    torch.testing.assert_close(modified(tokens, 12), plain(tokens, 12), rtol=0, atol=0)
    with torch.no_grad():
        modified.layers[0].attn.a.fill_(0.5)
    assert not torch.allclose(modified(tokens, 12), plain(tokens, 12))


@pytest.mark.parametrize("attention", ["sdpa", "math"])
def test_masked_diagonal_leaves_each_tokens_own_similarity_out_of_a_xxt(attention):
    width, heads, head_dim = 8, 2, 4
    attn = SelfAttention(width, heads, logit_identity=True, mask_identity_diagonal=True, attention=attention)
    with torch.no_grad():
        attn.a.copy_(torch.tensor([0.3, -0.5]))
    x = torch.randn(3, 5, width, generator=generator(2))
    q, k, v = (z.unflatten(-1, (heads, head_dim)).transpose(1, 2) for z in attn.qkv(x).split(width, -1))
    gram = x @ x.transpose(1, 2)
    off_diagonal = gram - torch.diag_embed(gram.diagonal(dim1=-2, dim2=-1))
    logits = q @ k.transpose(-1, -2) / head_dim**0.5 + attn.a[:, None, None] * off_diagonal[:, None]
    weights = logits.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
    torch.testing.assert_close(attn(x, pattern=True)[1], weights)
    expected = attn.out((weights @ v).transpose(1, 2).reshape(3, 5, width))
    torch.testing.assert_close(attn(x), expected)
    torch.testing.assert_close(attn(x, slice(2, 5)), expected[:, 2:5])
    with pytest.raises(ConfigError, match="logit_identity"):
        SelfAttention(width, heads, mask_identity_diagonal=True)


def _corpus(tmp_path):
    """40 kB of the default corpus, as a plain text file split by fraction."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(pydoc_topics([0.9, 0.05, 0.05]))[:40_000], encoding="utf-8")
    return str(corpus)


def test_a_run_killed_mid_training_resumes_bit_identically(tmp_path, monkeypatch):
    overrides = {
        **TINY,
        "data.path": _corpus(tmp_path),
        "variants": ["plain", "kq"],
        "train.steps": 8,
        "train.checkpoint_every": 4,
    }
    full = iclab.run("symbols-lm", overrides=overrides, out=tmp_path / "full", progress=False)
    calls = []

    def killed_at_kq_step_6(*args):  # seed 0's pass: plain, 4 logs × 2 seeds + 2 splits = 10 calls; kq's step 6: 17th
        calls.append(1)
        if len(calls) == 17:
            raise KeyboardInterrupt
        return next_token_loss(*args)

    monkeypatch.setattr(symbols_lm, "next_token_loss", killed_at_kq_step_6)
    with pytest.raises(KeyboardInterrupt):
        iclab.run("symbols-lm", overrides=overrides, out=tmp_path / "cut", progress=False)
    monkeypatch.undo()
    with safe_open(tmp_path / "cut" / "checkpoints" / "kq" / "seed0" / "state.safetensors", "pt") as f:
        assert f.metadata()["step"] == "4"  # kq resumes mid-training
    resumed = iclab.resume(tmp_path / "cut", progress=False)
    columns = ["setting", "model", "seed", "step", "metric"]
    both = full.metrics.merge(resumed.metrics, on=columns, how="outer", suffixes=("_full", "_resumed"))
    assert len(both) == len(full.metrics) == len(resumed.metrics)
    assert (both.value_full == both.value_resumed).all()  # every perplexity, a and diagonal mass, exactly
    assert [c["measured"] for c in full.claims] == [c["measured"] for c in resumed.claims]


def test_tiny_run_writes_every_figure_claim_and_the_tokenizer(tmp_path):
    overrides = {**TINY, "data.path": _corpus(tmp_path)}
    result = iclab.run("symbols-lm", overrides=overrides, out=tmp_path / "run", progress=False)
    assert {p.name for p in result.folder.figures()} == {
        "validation_perplexity.png",
        "identity_a.png",
        "diagonal_mass.png",
    }
    assert (result.folder.path / "tokenizer.json").exists()
    assert {c["id"] for c in result.claims} == {"kq-gain", "kq-nodiag-gain"}
    # Judged over the run's seeds together: each seed measures (plain, modified), the run's verdict is the test.
    for claim in result.claims:
        assert isinstance(claim["holds"], bool) and "judged_at" not in claim and claim["kind"] == "paper"
        seeds = claims.seed_entries(claim, 0)
        assert set(seeds) == {0, 1} and all(s["holds"] is None for s in seeds.values())
        pairs = [s["statistic"] for s in seeds.values()]  # (plain, modified) final validation perplexities
        assert all(abs(p - s["measured"]["plain"]) < 1e-3 for (p, _), s in zip(pairs, seeds.values()))
        assert (claim["holds"], claim["seed_test"]) == claims.seed_test(pairs, 2.0)
    metrics = result.metrics
    final = metrics[(metrics.metric == "validation_perplexity") & metrics.step.isna()]
    assert len(final) == 6 and (final.value > 1).all() and (final.value < 300).all()
    assert len(metrics[(metrics.metric == "val_perplexity") & (metrics.model == "kq")]) == 2 * 2  # 2 seeds × 2 logs
    assert len(metrics[metrics.setting == "identity"]) == 2 * 2 * 2  # 2 variants × 2 seeds × 2 heads


def test_the_gain_is_judged_by_the_test_registered_before_the_evaluation_runs():
    """The modified model's mean perplexity over seeds must lie below the plain one's by more than 2 standard errors
    of the difference of the means: a gain on most seeds within the seeds' spread does not count, a clear one does,
    and equal models (a = 0 untrained) fail."""
    from iclab.experiments.symbols_lm import DEFAULTS, _claims

    def verdict(pairs):
        by_seed = {
            seed: _claims(
                DEFAULTS, {"plain": {"validation": [p]}, **{v: {"validation": [m]} for v in ("kq", "kq-nodiag")}}
            )
            for seed, (p, m) in enumerate(pairs)
        }
        return {entry["id"]: entry["holds"] for entry in claims.over_seeds(by_seed)}

    lower_on_four_of_five = [(61.0, 59.5), (60.0, 61.4), (60.5, 60.2), (59.8, 59.1), (60.2, 59.9)]
    assert set(verdict(lower_on_four_of_five).values()) == {False}
    clear = [(61.0, 59.5), (60.0, 58.9), (60.5, 59.3), (59.8, 58.4), (60.2, 58.8)]
    assert set(verdict(clear).values()) == {True}
    assert set(verdict([(60.0, 60.0), (61.0, 61.0)]).values()) == {False}


def test_bad_config_is_rejected_before_training(tmp_path):
    for key, value in (("variants", ["plain", "kv"]), ("variants", ["kq"])):
        with pytest.raises(ConfigError, match="variant"):
            iclab.run("symbols-lm", overrides={**TINY, key: value}, out=tmp_path / "run", progress=False)


def test_bad_data_paths_exit_2_with_one_line(tmp_path, capsys):
    (tmp_path / "no-train").mkdir()
    (tmp_path / "no-train" / "wiki.valid.raw").write_text("valid\n")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    for path, message in (
        (tmp_path / "absent", "neither"),
        (tmp_path / "no-train", "wiki.train.raw"),
        (tmp_path / "latin1.txt", "cannot read"),
    ):
        assert main(["run", "symbols-lm", "--set", f"data.path={path}", "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("iclab: error:") and message in err and err.count("\n") == 1
        assert not (tmp_path / "r").exists()
