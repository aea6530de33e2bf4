"""``symbols-lm``: language modelling with Boix-Adserà et al.'s attention modification.

Boix-Adserà, Saremi, Abbe, Bengio, Littwin & Susskind (ICLR 2024); docs/papers.md §6 (Boix-Adserà et al.), the
language-modelling paragraph. A GPT-style causal language model (:class:`iclab.models.GPTTransformer`
read at every position, token embeddings tied to the output, next-token cross-entropy at every
position) is trained from scratch three ways, all else equal (same initial weights and batches
per seed): ``plain``; ``kq``, with the trainable per-head a_h·XXᵀ added to the attention logits;
``kq-nodiag``, the same with XXᵀ's diagonal masked (the paper's variant: a_h then weighs a
token's similarity to the other tokens, not its own |x_i|²). The a_h start at 0, so at step 0
the three models are the same function.

Text (:mod:`iclab.data`): ``data.path`` null is the offline default, Python's language
reference (``pydoc_data.topics``, 465 kB) split 90 / 5 / 5%; a folder in the Wikitext raw layout
(``wiki.{train,valid,test}.raw``) or a text file (split by ``data.fractions``) otherwise. A
byte-level BPE of ``tokenizer.vocab_size`` tokens is trained on the training split and cached in
the run folder (``tokenizer.json``; ``tokenizer.kind = byte`` uses raw bytes). Each split's token
stream is packed into blocks of ``model.block`` tokens; training draws random blocks, the
validation perplexity exp(mean cross-entropy) runs over every validation block each
``train.log_every`` steps. Optimisation: AdamW with linear warm-up, cosine decay and gradient
clipping (the ``train`` block); seeds train together under vmap.

Outputs: validation perplexity curves per variant (min–max band over seeds), the final
validation and test perplexities (mean and standard deviation over seeds), the learned a per
layer and head, and the attention's diagonal mass (mean A_ii over query positions i ≥ 1, on
validation blocks) per layer and head for every variant, beside uniform causal attention's.

The paper reports a small perplexity gain and no numbers; the claims are judged over seeds together, by the
test registered before any evaluation run (docs/experiments/symbols-lm.md, "Claim history"): the modified
model's mean final validation perplexity over the seeds lies below the plain model's by more than
``tolerance.sigmas`` standard errors of the difference of the two means.

Scales: quick (a 2-layer, width-64 model that under-fits in 600 steps), long (a 3-layer, width-128
model with dropout for about 14 passes over the corpus, the paper's over-fitting regime as far as a CPU
reaches it) and paper (GPT-2 small on Wikitext-2); each judges the claims. How the scales were chosen and
what they measured: docs/experiments/symbols-lm.md.
"""

from __future__ import annotations

import math

import torch

from .. import claims as C
from ..config import ConfigError
from ..data import load_corpus, make_tokenizer, pack_blocks
from ..metrics import diagonal_mass, next_token_loss, uniform_diagonal_mass
from ..models import GPTConfig, GPTTransformer
from ..report.figures import heatmap, new_figure, save, training_curve
from ..train import TokenBlocks, held_out
from .base import Experiment, RunContext

PAPER = "Boix-Adserà et al. (ICLR 2024)"

VARIANTS = {
    "plain": {},
    "kq": {"logit_identity": True},
    "kq-nodiag": {"logit_identity": True, "mask_identity_diagonal": True},
}
"""The models compared: the options of :class:`iclab.models.GPTTransformer` that make each."""

DEFAULTS = {
    "seed": 0,
    "seeds": 3,
    # path: null = Python's language reference (offline); a Wikitext-layout folder; or a text file.
    # fractions: the train / validation / test split of a text file (and of the default corpus).
    "data": {"path": None, "fractions": [0.9, 0.05, 0.05]},
    "tokenizer": {"kind": "bpe", "vocab_size": 1024},
    "variants": list(VARIANTS),
    # block: the context length (tokens per training sequence); attention "math": seeds train
    # together under vmap, which has no batching rule for SDPA on CPU.
    # dropout: GPT-2's (read-in, attention weights, residual branches), in training only.
    "model": {
        "n_layers": 2,
        "n_heads": 4,
        "width": 64,
        "mlp_ratio": 4.0,
        "block": 64,
        "identity_scale": 1.0,
        "attention": "math",
        "dropout": 0.0,
    },
    # log_every: the validation perplexity is evaluated every log_every steps.
    "train": {
        "steps": 600,
        "batch_size": 16,
        "lr": 0.002,
        "optimizer": "adamw",
        "weight_decay": 0.01,
        "schedule": "cosine",
        "warmup": 60,
        "clip": 1.0,
        "log_every": 50,
        "checkpoint_every": 200,
    },
    "eval": {"batch_size": 64, "diagonal_blocks": 32},
    # sigmas: a gain counts when the difference of the variants' mean final validation perplexities over seeds
    # exceeds this many standard errors of it (from the seeds' standard deviations).
    "tolerance": {"sigmas": 2.0},
}

SCALES = {
    # Smoke: the whole pipeline in seconds (tokenizer, training, evaluation, claims, report) on byte tokens;
    # its verdicts mean nothing.
    "smoke": {
        "seeds": 1,
        "tokenizer": {"kind": "byte", "vocab_size": 300},
        "data": {"fractions": [0.8, 0.1, 0.1]},
        "model": {"width": 16, "n_heads": 2, "n_layers": 1, "block": 16},
        "train": {"steps": 4, "warmup": 0, "log_every": 2, "batch_size": 4},
        "eval": {"batch_size": 256, "diagonal_blocks": 4},
    },
    # Quick: a 2-layer, width-64 model on the language reference (BPE of 1024 tokens, blocks of
    # 64), 3 seeds × 3 variants, 600 steps of 16 blocks (about 4 passes over the 147k training tokens).
    "quick": {},
    # Paper (docs/papers.md §6): GPT-2 small (12 layers, width 768, 12 heads, block 1024) from scratch on
    # Wikitext-2 raw, AdamW 3e-4, batch 8. It needs the Wikitext-2 raw folder at data.path (not
    # shipped; iclab downloads nothing) and a GPU (~124M parameters per model and seed). The BPE
    # has GPT-2's vocabulary size but is trained on Wikitext-2's training split; the steps (about
    # 20 passes over the ~2.4M training tokens), warm-up, decay and clipping are our choices (the
    # paper gives none).
    # Long (minutes a seed on a CPU; times in docs/experiments/symbols-lm.md): the authors' regime as far
    # as a CPU reaches it: a 3-layer, width-128 model with their dropout of 0.1, about 14 passes over the
    # language reference's training tokens, where the quick model under-fits.
    "long": {
        "model": {"n_layers": 3, "n_heads": 4, "width": 128, "block": 128, "dropout": 0.1},
        "train": {
            "steps": 1000,
            "batch_size": 16,
            "lr": 0.001,
            "weight_decay": 0.1,
            "warmup": 100,
            "log_every": 100,
            "checkpoint_every": 100,
        },
    },
    "paper": {
        "data": {"path": "wikitext-2-raw"},
        "tokenizer": {"vocab_size": 50257},
        "model": {"n_layers": 12, "n_heads": 12, "width": 768, "block": 1024, "dropout": 0.1},
        "train": {
            "steps": 6000,
            "batch_size": 8,
            "lr": 0.0003,
            "weight_decay": 0.1,
            "warmup": 300,
            "log_every": 200,
            "checkpoint_every": 1000,
        },
        "eval": {"batch_size": 8},
    },
}


def _checks(config: dict):
    """Reject bad names and sizes before anything trains."""
    for name in config["variants"]:
        if name not in VARIANTS:
            raise ConfigError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    if "plain" not in config["variants"] or len(config["variants"]) < 2:
        raise ConfigError("variants must hold plain and at least one modified variant to compare with it")
    if min(config["model"]["block"], config["eval"]["batch_size"], config["eval"]["diagonal_blocks"]) < 1:
        raise ConfigError("model.block, eval.batch_size and eval.diagonal_blocks must be >= 1")


def _blocks(ctx: RunContext, config: dict) -> tuple[int, dict[str, torch.Tensor]]:
    """The vocabulary size and every split's token stream packed into ``(n, block + 1)`` rows."""
    data = config["data"]
    corpus = load_corpus(data["path"], data["fractions"])
    tokenizer_cfg = config["tokenizer"]
    tokenizer = make_tokenizer(
        tokenizer_cfg["kind"], corpus.train, tokenizer_cfg["vocab_size"], ctx.folder.path / "tokenizer.json"
    )
    blocks = {
        split: pack_blocks(tokenizer.encode(text), config["model"]["block"]) for split, text in corpus._asdict().items()
    }
    for split, rows in blocks.items():
        ctx.log(
            setting="data", model=tokenizer_cfg["kind"], metric=f"{split}_tokens", value=rows.numel() - len(rows) + 1
        )
    return tokenizer.vocab_size, blocks


def _make_model(variant: str, vocab_size: int, config: dict):
    """A factory ``generator -> model`` for one of :data:`VARIANTS`."""
    arch = config["model"]
    return lambda g: GPTTransformer(
        GPTConfig(
            None,
            arch["n_layers"],
            arch["n_heads"],
            arch["width"],
            arch["mlp_ratio"],
            max_tokens=arch["block"],
            stride=1,
            attention=arch["attention"],
            vocab_size=vocab_size,
            tied_output=True,
            identity_scale=arch["identity_scale"],
            dropout=arch["dropout"],
            **VARIANTS[variant],
        ),
        g,
    )


def run(config: dict, ctx: RunContext):
    """Train every variant on every seed, evaluate, claim and draw."""
    vocab_size, blocks = _blocks(ctx, config)
    batch = config["eval"]["batch_size"]

    evaluate = held_out({"val_perplexity": lambda m, seed: math.exp(next_token_loss(m, blocks["validation"], batch))})

    final, histories, a_values, masses = {}, {}, {}, {}
    for variant in config["variants"]:
        # every gain compares a variant with the plain model: the plain part serves them all
        with ctx.part(variant, claims=["*-gain"] if variant == "plain" else [f"{variant}-gain"]):
            result = ctx.trained(
                variant,
                _make_model(variant, vocab_size, config),
                TokenBlocks(blocks["train"]),
                train={**config["train"], "loss": "cross_entropy"},
                setting="lm",
                callback=evaluate,
                together=True,  # the validation split is the same for every seed
            )
            histories[variant] = ctx.history("val_perplexity", model=variant)
            final[variant] = {
                split: [math.exp(next_token_loss(m, blocks[split], batch)) for m in result.models]
                for split in ("validation", "test")
            }
            masses[variant] = torch.stack(
                [diagonal_mass(m, blocks["validation"][: config["eval"]["diagonal_blocks"]]) for m in result.models]
            )  # (S, L, H)
            if VARIANTS[variant]:
                a_values[variant] = torch.stack([m.identity_terms()["a"] for m in result.models])  # (S, L, H)
            _log_variant(ctx, variant, result.seeds, final[variant], masses[variant], a_values.get(variant))
    claims = _claims(config, final)
    _figures(ctx, config, histories, final, a_values, masses)
    return claims


def _log_variant(
    ctx: RunContext, variant: str, seeds: list[int], final: dict, masses: torch.Tensor, a_values: torch.Tensor | None
):
    """Log one variant per seed: its final perplexities (``final``: split → one per seed), its attention's
    diagonal mass and, for a modified variant, the learned a (``(S, L, H)`` each); then the perplexities'
    spread over seeds."""
    for k, seed in enumerate(seeds):
        ctx.log_metrics(
            {f"{split}_perplexity": values[k] for split, values in final.items()},
            setting="lm",
            model=variant,
            seed=seed,
        )
        ctx.log_metrics(
            {f"mass_layer{layer}_head{head}": mass for (layer, head), mass in _by_head(masses[k])},
            setting="diagonal",
            model=variant,
            seed=seed,
        )
        if a_values is not None:
            ctx.log_metrics(
                {f"a_layer{layer}_head{head}": a for (layer, head), a in _by_head(a_values[k])},
                setting="identity",
                model=variant,
                seed=seed,
            )
    if len(ctx.seeds) > 1:  # a spread over seeds
        ctx.log_metrics(
            {f"{split}_perplexity_sd": _sd(values) for split, values in final.items()},
            setting="lm",
            model=variant,
        )


def _by_head(matrix: torch.Tensor):
    """``((layer, head), value)`` for every entry of an ``(L, H)`` matrix."""
    return [((layer, head), value) for layer, row in enumerate(matrix.tolist()) for head, value in enumerate(row)]


def _mean(values) -> float:
    return sum(values) / len(values)


def _sd(values) -> float:
    """The sample standard deviation over seeds (NaN for a single seed: there is no spread to measure)."""
    if len(values) < 2:
        return math.nan
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _claims(config: dict, final: dict) -> list:
    """Per modified variant, judged over seeds together (:func:`iclab.claims.over_seeds_test`): its mean final
    validation perplexity is below the plain model's by more than ``tolerance.sigmas`` standard errors of the
    difference of the two means. Each seed (a pass of one seed) measures the pair (plain, modified)."""
    sigmas = config["tolerance"]["sigmas"]
    (p,) = final["plain"]["validation"]  # a pass judges its one seed
    claims = []
    for variant in config["variants"]:
        if variant == "plain":
            continue
        (m,) = final[variant]["validation"]
        what = "a·XXᵀ" if variant == "kq" else "a·XXᵀ with XXᵀ's diagonal masked (the authors' notebook run)"
        claims.append(
            C.over_seeds_test(
                f"{variant}-gain",
                PAPER,
                f"the language model with {what} reaches a lower final validation perplexity than the plain one "
                f"(same initial weights and batches): over the seeds, its mean is below the plain model's by more "
                f"than {sigmas:g} standard errors of the difference of the two means "
                "(measured per seed: the two perplexities and the relative gain; judged over the seeds together)",
                {variant: round(m, 3), "plain": round(p, 3), "relative gain": f"{(p - m) / p:+.2%}"},
                (p, m),
                sigmas,
                about=C.paper(
                    "§5, the GPT-2 Wikitext figure",
                    "a small gain, no number in the paper (the authors' review reply, with both the a·XXᵀ and "
                    "b·AX terms on Wikitext-103: 17.08 → 16.69)",
                ),
                figure="validation_perplexity",
            )
        )
    return claims


def _figures(ctx: RunContext, config: dict, histories: dict, final: dict, a_values: dict, masses: dict):
    fig, axes = new_figure(2, width=5.0, height=3.6)
    for k, (variant, history) in enumerate(histories.items()):
        training_curve(axes[0], history, variant, metric="val_perplexity")
        values = final[variant]["validation"]
        axes[1].errorbar([k], [_mean(values)], yerr=[_sd(values)] if len(values) > 1 else None, fmt="o", capsize=4)
        axes[1].plot([k] * len(values), values, "k.", ms=3)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("validation perplexity (min–max over seeds)")
    axes[0].legend(fontsize=8)
    axes[1].set_xticks(range(len(histories)), list(histories))
    axes[1].set_ylabel("final validation perplexity")
    axes[1].set_title("mean ± sd over seeds (dots: seeds)", fontsize=9)
    save(fig, ctx.folder.figure("validation_perplexity"))

    if a_values:
        fig, axes = new_figure(len(a_values), width=3.6, height=3.0)
        limit = max(v.abs().max().item() for v in a_values.values()) or 1.0
        for ax, (variant, values) in zip(axes, a_values.items()):
            heatmap(ax, values.mean(0), f"{variant}: learned a (mean over seeds)\nrows: layers, columns: heads", limit)
        save(fig, ctx.folder.figure("identity_a"))

    fig, axes = new_figure(1, width=6.0, height=3.6)
    n_layers, n_heads = next(iter(masses.values())).shape[1:]
    positions = range(n_layers * n_heads)
    width = 0.8 / len(masses)
    for k, (variant, mass) in enumerate(masses.items()):
        axes[0].bar([p + k * width for p in positions], mass.mean(0).flatten().tolist(), width, label=variant)
    axes[0].axhline(
        uniform_diagonal_mass(config["model"]["block"]), color="k", ls=":", lw=0.8, label="uniform causal attention"
    )
    axes[0].set_xticks(
        [p + 0.4 - width / 2 for p in positions],
        [f"L{l}H{h}" for l in range(n_layers) for h in range(n_heads)],
        fontsize=7,
    )
    axes[0].set_ylabel("attention to itself, mean A_ii (i ≥ 1)")
    axes[0].set_title("diagonal mass per layer and head (mean over seeds, validation blocks)", fontsize=9)
    axes[0].legend(fontsize=7)
    save(fig, ctx.folder.figure("diagonal_mass"))


EXPERIMENT = Experiment(
    name="symbols-lm",
    paper=PAPER,
    defaults=DEFAULTS,
    scales=SCALES,
    run=run,
    checks=_checks,
    claims_version=2,
    timing={"eval.diagonal_blocks": 4},  # a timed run's smaller evaluation (iclab.api.time_recipe)
)
