"""Evaluation of models and learners on shared prompts: losses by prefix with bootstrap bands, weight
alignment, comparisons of two predictors, which algorithm a model matches, attention patterns and
language-model losses (the loss conventions are :mod:`iclab.losses`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import torch

from .config import ConfigError
from .learners import Learner, LinearLearner
from .losses import loss_scale, prompt_losses, token_losses
from .prompts import InterleavedFormat, PairedFormat
from .rng import generator
from .tasks.base import Episode


def mean_band(
    values: torch.Tensor,
    n_boot: int = 1000,
    band: tuple[float, float] = (0.05, 0.95),
    seed: int = 0,
    chunk: int = 100,
) -> dict[str, torch.Tensor]:
    """The mean over prompts of ``values (B, ...)`` with a bootstrap band.

    Returns float64 ``{"mean", "low", "high"}``, each of ``values``' shape without its first
    dimension: the mean over the B prompts and the ``band`` quantiles of that mean over ``n_boot``
    resamplings of the prompts (with replacement; drawn from the ``(seed, "bootstrap")`` stream).
    """
    values = values.double().cpu()
    replicates = resampled_means(values, n_boot, generator(seed, "bootstrap"), chunk)
    return _band(values.mean(0), replicates.reshape(n_boot, -1), band)


def resampled_means(values: torch.Tensor, n_boot: int, g: torch.Generator, chunk: int = 100) -> torch.Tensor:
    """The means over prompts of ``values (B, ...)`` on ``n_boot`` resamplings of the prompts (with replacement, drawn
    from ``g``), float64 ``(n_boot, ...)``: one matrix product per ``chunk`` of replicates."""
    flat = values.double().cpu().reshape(len(values), -1)  # (B, M)
    means = [counts @ flat / len(flat) for counts in _resampling_counts(len(flat), n_boot, chunk, g)]  # (rows, M)
    return torch.cat(means).reshape(n_boot, *values.shape[1:])


def seed_band(
    values: torch.Tensor, n_boot: int = 1000, band: tuple[float, float] = (0.05, 0.95), seed: int = 0, chunk: int = 100
) -> dict[str, torch.Tensor]:
    """The mean over seeds and prompts of ``values (S, B, ...)`` (S models on the same B prompts) with a
    band over both: each of the ``n_boot`` replicates resamples the seeds and, independently, the prompts
    (a two-level bootstrap, so the band holds the spread between seeds as well as the prompts' noise).
    Returns float64 ``{"mean", "low", "high"}`` of ``values``' shape without its first two dimensions."""
    values = values.double().cpu()
    s, b = values.shape[:2]
    flat = values.reshape(s, b, -1)  # (S, B, M)
    g = generator(seed, "bootstrap", "seeds")
    means = []
    for seeds, prompts in zip(_resampling_counts(s, n_boot, chunk, g), _resampling_counts(b, n_boot, chunk, g)):
        by_prompt = torch.einsum("rs,sbm->rbm", seeds, flat)  # (rows, B, M): the resampled seeds' sum
        means.append(torch.einsum("rb,rbm->rm", prompts, by_prompt) / (s * b))
    return _band(values.mean((0, 1)), torch.cat(means), band)


def _resampling_counts(n: int, n_boot: int, chunk: int, g: torch.Generator):
    """Chunks of ``(rows, n)`` resampling weights (how often each of n items is drawn, with replacement),
    ``n_boot`` rows in all, so a replicate's mean is one matrix product."""
    for start in range(0, n_boot, chunk):
        rows = min(chunk, n_boot - start)
        index = torch.randint(n, (rows, n), generator=g)
        yield torch.zeros(rows, n, dtype=torch.float64).scatter_add_(1, index, torch.ones(rows, n, dtype=torch.float64))


def _band(mean: torch.Tensor, replicates: torch.Tensor, band: tuple[float, float]) -> dict[str, torch.Tensor]:
    """``{"mean", "low", "high"}`` from the mean and the ``(R, M)`` replicate means' ``band`` quantiles."""
    quantiles = torch.quantile(replicates, torch.tensor(band, dtype=torch.float64), dim=0)  # (2, M)
    return {"mean": mean, "low": quantiles[0].reshape(mean.shape), "high": quantiles[1].reshape(mean.shape)}


def trimmed_mean(values: torch.Tensor, drop: float) -> float:
    """The mean of ``values`` (flattened) without the ``drop`` fraction of the largest ones, e.g. a
    typical squared error that a handful of exploding prompts cannot set."""
    if not 0 <= drop < 1:
        raise ValueError(f"drop must be in [0, 1), got {drop}")
    kept = values.flatten().sort().values[: max(1, round(values.numel() * (1 - drop)))]
    return kept.mean().item()


def loss_by_prefix(
    prediction: torch.Tensor,
    target: torch.Tensor,
    loss: str = "mse",
    d: int | None = None,
    n_boot: int = 1000,
    band: tuple[float, float] = (0.05, 0.95),
    seed: int = 0,
    chunk: int = 100,
) -> dict[str, torch.Tensor]:
    """Loss at every prefix length with a bootstrap band across prompts.

    ``prediction`` and ``target`` are ``(B, N)`` (column k: the prediction from the first k
    examples). Returns float64 ``{"mean", "low", "high"}``, each ``(N,)``: the mean loss over
    prompts and its bootstrap band (:func:`mean_band`).
    """
    errors = loss_scale(loss, d) * (prediction.double() - target.double()).pow(2).cpu()  # (B, N)
    return mean_band(errors, n_boot, band, seed, chunk)


def band_rows(band: Mapping[str, torch.Tensor], metric: str) -> list[dict]:
    """Long-format rows of a by-prefix curve and its band (``{"mean", "low", "high"}``, each ``(N,)``):
    ``{"n": k, "metric": metric, "value": ...}`` and the same for ``metric_p05`` (low) and
    ``metric_p95`` (high), at every prefix length k."""
    return [
        {"n": k, "metric": metric + suffix, "value": band[stat][k].item()}
        for k in range(len(band["mean"]))
        for stat, suffix in (("mean", ""), ("low", "_p05"), ("high", "_p95"))
    ]


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two tensors, flattened, in float64."""
    a, b = a.double().flatten(), b.double().flatten()
    return (a @ b / (a.norm() * b.norm())).item()


def lsa_product(w_kq: torch.Tensor, w_pv: torch.Tensor) -> torch.Tensor:
    """The part of a one-layer LSA that fixes its prediction: (label row of W_PV) ⊗ W_KQ.

    ŷ = Σ_abc W_PV[D, a] S_ab W_KQ[b, c] e_c / N, so this (D, D, D) tensor determines ŷ and is
    invariant to the rescaling W_PV → cW_PV, W_KQ → W_KQ / c.
    """
    return torch.einsum("a,bc->abc", w_pv[-1].double(), w_kq.double())


def lsa_alignment(w_kq, w_pv, target_kq, target_pv) -> float:
    """Cosine between the :func:`lsa_product` of trained and target weights (rescaling-invariant)."""
    return cosine(lsa_product(w_kq, w_pv), lsa_product(target_kq, target_pv))


Predictor = Callable[[Episode], torch.Tensor]


def model_predictor(model: torch.nn.Module, prompt_format=PairedFormat()) -> Predictor:
    """Wrap a model as an episode → predictions function (no gradients, in the model's dtype; float64
    output on the CPU, beside the episode's targets wherever the model runs)."""
    parameter = next(model.parameters())

    @torch.no_grad()
    def predict(episode: Episode) -> torch.Tensor:
        prompt = prompt_format.encode(episode.to(parameter.device, parameter.dtype))
        return model(prompt.tokens, n_context=prompt.n_context).double().cpu()

    return predict


def predictor(source, prompt_format=PairedFormat()) -> Predictor:
    """An episode → ``(B, Q)`` float64 predictions function of a model (an ``nn.Module`` reading
    ``prompt_format``'s tokens, see :func:`model_predictor`), a learner (its ``predict_episode``) or a
    function that already is one."""
    if isinstance(source, torch.nn.Module):
        return model_predictor(source, prompt_format)
    return getattr(source, "predict_episode", source)


def prompt_errors(
    predictors: Mapping,
    task,
    n_prompts: int,
    seed: int,
    loss: str = "mse",
    chunk: int = 8192,
    prompt_format=PairedFormat(),
) -> dict:
    """Every predictor's loss on each of the same ``n_prompts`` fresh prompts, ``{key: (n_prompts,)}``
    float64 (a predictor is a model reading ``prompt_format``, a learner or a :data:`Predictor`, see
    :func:`predictor`). The prompts are drawn ``chunk`` at a time, chunk i from the ``(seed, "eval", i)``
    stream, so every predictor and every call with the same ``chunk`` sees the same ones."""
    predict = {key: predictor(source, prompt_format) for key, source in predictors.items()}
    per_prompt: dict = {key: [] for key in predict}
    for index, start in enumerate(range(0, n_prompts, chunk)):
        episode = task.sample(min(chunk, n_prompts - start), generator(seed, "eval", index))
        target = episode.y_query.double()
        for key, function in predict.items():
            per_prompt[key].append(prompt_losses(function(episode).cpu(), target.cpu(), loss))  # (chunk,)
    return {key: torch.cat(values) for key, values in per_prompt.items()}


def evaluate(
    predictors: Mapping,
    task,
    n_prompts: int,
    seed: int,
    loss: str = "mse",
    chunk: int = 8192,
    prompt_format=PairedFormat(),
) -> dict:
    """Loss of every predictor on the same ``n_prompts`` fresh prompts (:func:`prompt_errors`): returns
    ``{key: (mean loss, standard error)}`` in the named convention, with the keys of ``predictors``."""
    out = {}
    for key, v in prompt_errors(predictors, task, n_prompts, seed, loss, chunk, prompt_format).items():
        out[key] = (v.mean().item(), (v.std() / len(v) ** 0.5).item())
    return out


# Comparing two in-context learners (von Oswald et al. 2023): predictions and sensitivities ∂ŷ/∂x_q
# (the interpolation of trained and constructed LSA weights is iclab.models.interpolate_lsa).


def predictions(source, episode: Episode, prompt_format=PairedFormat()) -> torch.Tensor:
    """``(B, Q)`` float64 predictions of a model (``nn.Module`` reading prompt tokens) or a learner."""
    return predictor(source, prompt_format)(episode)


def sensitivity(source, episode: Episode, prompt_format=PairedFormat()) -> torch.Tensor:
    """∂ŷ/∂x_q for every query, ``(B, Q, d)`` in float64.

    Exact for linear learners (their weight vector), by autograd through the query inputs for
    models (in their own dtype) and for any other learner. Queries never see each other, so the
    gradient of the summed predictions is each query's own sensitivity.
    """
    e = episode.to(dtype=torch.float64)
    if isinstance(source, LinearLearner):
        return source.weights(e.xs, e.ys)[:, None, :].expand_as(e.x_query).clone()
    if isinstance(source, torch.nn.Module):
        parameter = next(source.parameters())
        e = episode.to(parameter.device, parameter.dtype)
    x_query = e.x_query.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        if isinstance(source, torch.nn.Module):
            prompt = prompt_format.encode(replace(e, x_query=x_query))
            out = source(prompt.tokens, n_context=prompt.n_context)
        else:
            out = source.predict(e.xs, e.ys, x_query)
        (grad,) = torch.autograd.grad(out.sum(), x_query)
    return grad.double().cpu()


def compare(a, b, episode: Episode, prompt_format=PairedFormat()) -> dict[str, float]:
    """How alike two predictors (models or learners) are on ``episode``.

    Returns ``pred_diff`` = mean |ŷ_A − ŷ_B|, ``sens_cosine`` = mean over queries of the cosine of
    their sensitivities ∂ŷ/∂x_q, and ``sens_l2`` = mean ‖∂ŷ_A/∂x_q − ∂ŷ_B/∂x_q‖.
    """
    pa, pb = (predictions(s, episode, prompt_format).cpu() for s in (a, b))
    sa, sb = (sensitivity(s, episode, prompt_format) for s in (a, b))
    return {
        "pred_diff": (pa - pb).abs().mean().item(),
        "sens_cosine": torch.nn.functional.cosine_similarity(sa, sb, dim=-1).mean().item(),
        "sens_l2": (sa - sb).norm(dim=-1).mean().item(),
    }


# Prefix queries (Garg et al.; see iclab.shifts): query k of an episode is x_query[:, k], predicted
# from the first k context examples. Errors are normalised by the zero predictor's, or are error rates.


def prefix_query_predictions(source, episode: Episode, prompt_format=InterleavedFormat()) -> torch.Tensor:
    """``(B, K)`` float64 predictions of every prefix query: by a causal model on interleaved prompts
    (one pass when the queries are the context's own inputs, else one pass per k), by a model on
    paired prompts (one prompt of k examples and the query per k ≥ 1), or by a learner. With no
    example (k = 0) learners and paired models predict 0, as Garg et al.'s baselines do."""
    k_max = episode.x_query.shape[1]
    own_inputs = episode.x_query.shape == episode.xs.shape and torch.equal(episode.x_query, episode.xs)
    if not isinstance(source, torch.nn.Module):
        e = episode.to(dtype=torch.float64)
        if own_inputs:
            try:
                return source.predict_prefixes(e.xs, e.ys)[:, :k_max]
            except torch.linalg.LinAlgError:
                # Inputs in a subspace defeat the Cholesky-based prefix forms: one batched predict per prefix.
                return Learner.predict_prefixes(source, e.xs, e.ys)[:, :k_max]
        columns = [torch.zeros(len(e.xs), dtype=torch.float64)]
        columns += [source.predict(e.xs[:, :k], e.ys[:, :k], e.x_query[:, k : k + 1])[:, 0] for k in range(1, k_max)]
        return torch.stack(columns, 1)
    parameter = next(source.parameters())
    e = episode.to(parameter.device, parameter.dtype)
    with torch.no_grad():
        if isinstance(prompt_format, PairedFormat):
            columns = [torch.zeros(len(e.xs), dtype=parameter.dtype, device=parameter.device)]
            for k in range(1, k_max):
                prefix = replace(
                    e, xs=e.xs[:, :k], ys=e.ys[:, :k], x_query=e.x_query[:, k : k + 1], y_query=e.y_query[:, k : k + 1]
                )
                prompt = prompt_format.encode(prefix)
                columns.append(source(prompt.tokens, prompt.n_context)[:, 0])
        elif own_inputs:
            return source(prompt_format.encode(e).tokens, e.n_context)[:, :k_max].double().cpu()
        else:
            columns = []
            for k in range(k_max):
                xs = torch.cat([e.xs[:, :k], e.x_query[:, k : k + 1]], 1)
                ys = torch.cat([e.ys[:, :k], e.y_query[:, k : k + 1]], 1)
                columns.append(source(prompt_format.encode(replace(e, xs=xs, ys=ys)).tokens, k + 1)[:, k])
    return torch.stack(columns, 1).double().cpu()


def error_metric(task) -> str:
    """The name of :func:`normalised_errors`' metric for ``task``: ``error_rate`` or ``normalised_mse``."""
    return "error_rate" if task.metric == "error_rate" else "normalised_mse"


def normalised_errors(
    task, prediction: torch.Tensor, target: torch.Tensor, n_boot: int = 1000, seed: int = 0, error_scale: float = 1.0
) -> dict[str, torch.Tensor]:
    """Error by prefix with its bootstrap band (:func:`mean_band` of :func:`normalised_prompt_errors`)."""
    return mean_band(normalised_prompt_errors(task, prediction, target, error_scale), n_boot, seed=seed)


def normalised_prompt_errors(
    task, prediction: torch.Tensor, target: torch.Tensor, error_scale: float = 1.0
) -> torch.Tensor:
    """``(B, K)`` float64 error of every prompt at every prefix: the squared error over the zero
    predictor's (``task.zero_error`` times a shift's ``error_scale``), or for sign labels whether sign(ŷ) is
    wrong (a tie ŷ = 0 counts as half an error)."""
    if task.metric == "error_rate":
        return ((1 - torch.sign(prediction) * target) / 2).double().cpu()  # 0, ½ or 1
    return (prediction.double() - target.double()).pow(2).cpu() / (task.zero_error * error_scale)


# Which learning algorithm a predictor implements (Akyürek et al. 2023): squared prediction
# distance between two predictors on shared prompts at every prefix length, and the distance
# between their implicit linear weights. Predictors are causal models reading interleaved
# prompts or learners; column k of every (B, N) array is the prediction from the first k examples.


def prefix_predictions(source, episode: Episode, prompt_format=InterleavedFormat()) -> torch.Tensor:
    """``(B, N)`` float64: a model's predictions of every context label from the examples before it
    (a causal ``nn.Module`` on interleaved prompts), or a learner's :meth:`predict_prefixes`."""
    if isinstance(source, torch.nn.Module):
        return model_predictor(source, prompt_format)(episode)
    return source.predict_prefixes_episode(episode.to(dtype=torch.float64)).cpu()


def spd(a: torch.Tensor, b: torch.Tensor, d: int, n_boot: int = 1000, seed: int = 0) -> dict[str, torch.Tensor]:
    """SPD(A, B)/d = E(A(D)(x) − B(D)(x))²/d at every prefix length, from ``(B, N)`` predictions
    on the same prompts, with a bootstrap 5–95% band: :func:`loss_by_prefix` with B as the target."""
    return loss_by_prefix(a, b, "mse_over_d", d, n_boot, seed=seed)


def mspd(spd_by_prefix: torch.Tensor, d: int) -> float:
    """MSPD: SPD averaged over the prefix lengths 1 ≤ k < d (the under-determined regime, where
    learners differ most). k = 0 is left out: every learner predicts 0 there, so it would add the
    same number to every learner's MSPD."""
    if not 1 < d <= len(spd_by_prefix):
        raise ConfigError(f"MSPD needs 2 <= d <= N = {len(spd_by_prefix)}, got d = {d}")
    return spd_by_prefix[1:d].mean().item()


def probe_labels(
    source, episode: Episode, probes: torch.Tensor, prompt_format=InterleavedFormat(), chunk_tokens: int = 2**18
) -> torch.Tensor:
    """``(B, N, P)`` float64: the labels a predictor gives P probe inputs ``probes (B, P, d)`` after
    each prefix of k = 0…N − 1 examples of every prompt's context.

    A causal model reads, for each k, P prompts per context whose token 2k is a probe (the first k
    examples, then [x'; 0]): B·P sequences of 2k + 1 tokens, run about ``chunk_tokens`` tokens at a time
    (the activations' memory grows with the tokens run together, not with the sequences). A learner
    predicts the probes from the first k examples (0 for k = 0).
    """
    e = episode.to(dtype=torch.float64)
    batch, n = e.ys.shape
    n_probes = probes.shape[1]
    columns = [torch.zeros(batch, n_probes, dtype=torch.float64)]
    if not isinstance(source, torch.nn.Module):
        columns += [source.predict(e.xs[:, :k], e.ys[:, :k], probes.double()).cpu() for k in range(1, n)]
        return torch.stack(columns, dim=1)
    parameter = next(source.parameters())
    tokens = prompt_format.encode(e).tokens.to(parameter)  # (B, 2N, D)
    probe_tokens = torch.cat([probes, torch.zeros_like(probes[..., :1])], -1).to(parameter)  # (B, P, D)
    columns = []
    with torch.no_grad():
        for k in range(n):
            context = tokens[:, None, : 2 * k].expand(-1, n_probes, -1, -1)  # (B, P, 2k, D)
            rows = torch.cat([context, probe_tokens[:, :, None]], 2).flatten(0, 1)  # (B·P, 2k + 1, D)
            chunk = max(1, chunk_tokens // (2 * k + 1))
            out = [source(rows[i : i + chunk], k + 1)[:, -1] for i in range(0, len(rows), chunk)]
            columns.append(torch.cat(out).double().cpu().view(batch, n_probes))
    return torch.stack(columns, dim=1)


def implicit_weights(probes: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The linear map closest to a predictor around each context: least squares with intercept of
    ``labels (B, N, P)`` on ``probes (B, P, d)`` (the same probes for every prefix), batched.

    Returns ŵ ``(B, N, d)`` and the fit's R² ``(B, N)`` (1 for a linear predictor, lower where it
    is not linear; a constant predictor counts as linear, R² = 1).
    """
    probes, labels = probes.double().cpu(), labels.double().cpu()
    centred = probes - probes.mean(1, keepdim=True)  # the intercept absorbs the means
    residual_labels = labels - labels.mean(-1, keepdim=True)
    w = torch.einsum("bdp,bnp->bnd", torch.linalg.pinv(centred), residual_labels)
    residual = residual_labels - torch.einsum("bpd,bnd->bnp", centred, w)
    total = residual_labels.pow(2).sum(-1)
    # Constant labels (e.g. every learner at k = 0) have no variance to explain: R² = 1 up to rounding.
    r2 = 1 - residual.pow(2).sum(-1) / total.clamp_min(1e-12 * labels.pow(2).sum(-1) + 1e-300)
    return w, r2


def prefix_weights(source, episode: Episode, probes: torch.Tensor, prompt_format=InterleavedFormat()):
    """A predictor's (implicit) linear weights after every prefix, ``(B, N, d)``, and the R² of
    the fit ``(B, N)``: a linear learner contributes its own w (R² = 1), anything else the least
    squares fit of its labels on the probe inputs (:func:`probe_labels`, :func:`implicit_weights`)."""
    if isinstance(source, LinearLearner):
        e = episode.to(dtype=torch.float64)
        w = source.prefix_weights(e.xs, e.ys)
        if w is None:
            w = torch.stack(
                [torch.zeros_like(e.xs[:, 0])]
                + [source.weights(e.xs[:, :k], e.ys[:, :k]) for k in range(1, e.xs.shape[1])],
                dim=1,
            )
        return w.cpu(), torch.ones(w.shape[:2], dtype=torch.float64)
    return implicit_weights(probes, probe_labels(source, episode, probes, prompt_format))


def ilwd(w_a: torch.Tensor, w_b: torch.Tensor, n_boot: int = 1000, seed: int = 0) -> dict[str, torch.Tensor]:
    """ILWD = E‖ŵ_A − ŵ_B‖²/d at every prefix length from ``(B, N, d)`` weights, with a bootstrap
    5–95% band (:func:`mean_band`)."""
    distance = (w_a.double() - w_b.double()).pow(2).sum(-1) / w_a.shape[-1]  # (B, N)
    return mean_band(distance, n_boot, seed=seed)


# Attention and language models: attention patterns from a transformer's named activations
# (iclab.models.activations), next-token losses of a causal language model.


def attention_patterns(model: torch.nn.Module, tokens: torch.Tensor, n_context: int) -> torch.Tensor:
    """Every layer's attention matrices of a transformer on ``tokens``, ``(L, B, H, T, T)`` (rows:
    queries, summing to 1): its ``blocks.{l}.attn.hook_pattern`` activations, without gradients."""
    names = [name for name in model.activation_names() if name.endswith(".attn.hook_pattern")]
    with torch.no_grad():
        _, found = model(tokens, n_context, activations=names)
    return torch.stack([found[name] for name in names])


def next_token_loss(model: torch.nn.Module, blocks: torch.Tensor, batch_size: int) -> float:
    """The mean next-token cross-entropy (nats) of a causal language model over every target of
    ``blocks`` ``(n, T + 1)`` (inputs ``row[:-1]``, targets ``row[1:]``), ``batch_size`` blocks at a
    time; its exp is the perplexity."""
    device = next(model.parameters()).device
    with torch.no_grad():
        losses = [
            token_losses(model(rows[:, :-1], rows.shape[1] - 1), rows[:, 1:])
            for rows in blocks.to(device).split(batch_size)
        ]  # each (b,), every block holding T targets
    return torch.cat(losses).mean().item()


def diagonal_mass(model: torch.nn.Module, blocks: torch.Tensor) -> torch.Tensor:
    """Every head's mean attention to the token itself, A_ii averaged over query positions i ≥ 1
    (A_00 = 1 under causal attention) and the ``blocks`` ``(n, T + 1)`` (inputs ``row[:-1]``):
    ``(L, H)``. Uniform causal attention gives :func:`uniform_diagonal_mass`."""
    tokens = blocks[:, :-1].to(next(model.parameters()).device)  # (n, T)
    patterns = attention_patterns(model, tokens, tokens.shape[1])  # (L, n, H, T, T)
    return patterns.diagonal(dim1=-2, dim2=-1)[..., 1:].mean((1, 3)).cpu()  # (L, H)


def uniform_diagonal_mass(block: int) -> float:
    """The :func:`diagonal_mass` of uniform causal attention over blocks of ``block`` tokens: the mean
    of 1/(i + 1) over i = 1 … T − 1."""
    return sum(1 / (i + 1) for i in range(1, block)) / (block - 1)
