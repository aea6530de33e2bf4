"""Per layer: where a model holds what its learner computes (Akyürek et al. 2023, §5; docs/papers.md §3).

For every named hidden state (iclab's residual stream after the read-in and after each block, or a protocol
model's ``named_states``) and every target, a linear probe reads the state where the model predicts y_{k+1}
(after k = 1…N − 1 examples) and maps it to the target after those k examples: Xᵀy and w_OLS
(:func:`iclab.probes.probe_targets`), and the weights of the panel's linear learners asked for (ridge at λ*, the
closest learner). One probe per (state, k): ridge regression in closed form, with an intercept, on a training
split of prompts, its targets standardised per k and coordinate by that split (:func:`iclab.probes.standardise`),
so each k weighs alike; its R² = 1 − SSE/SST is scored on a held-out split. The control probe is the same fit on
the training targets shuffled across prompts: what a probe of that width reads from nothing (near 0, or below).
Bands are 5–95% bootstrap bands over the held-out prompts, the targets' spread held fixed.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ..learners import LinearLearner
from ..metrics import mean_band, prefix_weights
from ..probes import probe_targets, standardise
from ..rng import generator
from ..tasks.base import Episode

RIDGE = 1e-3
"""The probes' ridge penalty, relative to the mean eigenvalue of each state's covariance: enough to keep a
rank-deficient state (an LSA's few rows, a constant coordinate) solvable, too little to bias a well-posed fit."""

DECODABLE = 0.8
"""The held-out R² from which a target counts as decodable from a state (algorithm-selection's threshold)."""


def targets(episode: Episode, learners: Mapping[str, LinearLearner]) -> dict[str, torch.Tensor]:
    """``{name: (B, N − 1, d)}``: Xᵀy and w_OLS after k = 1…N − 1 examples, and ``w_<learner>`` for each learner."""
    base = probe_targets(episode)[:, :, :-1]  # (B, 2, N − 1, d): after n = 1…N − 1
    found = {"xty": base[:, 0], "w_ols": base[:, 1]}
    for name, learner in learners.items():
        found.setdefault(f"w_{name}", prefix_weights(learner, episode, None)[0][:, 1:])
    return found


def probe(
    train_states: Mapping[str, torch.Tensor],
    test_states: Mapping[str, torch.Tensor],
    train_targets: Mapping[str, torch.Tensor],
    test_targets: Mapping[str, torch.Tensor],
    n_boot: int = 1000,
    seed: int = 0,
) -> list[dict]:
    """Every state's probes of every target with their controls (see the module docstring): a record per state,
    ``{"layer", "state", "targets": {target: {"r2": band, "control_r2": band}}}``, a band being
    ``{"mean", "low", "high"}``. States are ``(B, K, W)``, targets ``(B, K, d)`` (K prefixes)."""
    names = list(train_targets)
    sizes = [train_targets[name].shape[-1] for name in names]
    raw = torch.cat([train_targets[name] for name in names], -1)  # (B, K, Σd)
    train, mean, std = standardise(raw, raw)
    test = (torch.cat([test_targets[name] for name in names], -1) - mean) / std
    shuffled = train[torch.randperm(len(train), generator=generator(seed, "identify-control"))]
    spread = (test - test.mean(0)).pow(2)  # (B, K, Σd)
    ratios = []  # per state: (B, 2, targets), each prompt's SSE over the mean SST (probe, then control)
    for state in train_states:
        fitted = _ridge_fit(train_states[state], torch.cat([train, shuffled], -1))
        prediction = fitted(test_states[state]).unflatten(-1, (2, -1))  # (B, K, 2, Σd)
        errors = (prediction - test[:, :, None]).pow(2).sum(1)  # (B, 2, Σd)
        sse = torch.stack([part.sum(-1) for part in errors.split(sizes, -1)], -1)  # (B, 2, targets)
        sst = torch.stack([part.sum((1, 2)).mean() for part in spread.split(sizes, -1)])  # (targets,)
        ratios.append(sse / sst)
    band = mean_band(torch.stack(ratios, 1), n_boot, seed=seed)  # each (states, 2, targets); R² = 1 − ratio
    r2 = lambda s, c, t: {  # noqa: E731
        "mean": 1 - band["mean"][s, c, t].item(),
        "low": 1 - band["high"][s, c, t].item(),
        "high": 1 - band["low"][s, c, t].item(),
    }
    return [
        {
            "layer": s,
            "state": state,
            "targets": {name: {"r2": r2(s, 0, t), "control_r2": r2(s, 1, t)} for t, name in enumerate(names)},
        }
        for s, state in enumerate(train_states)
    ]


def _ridge_fit(states: torch.Tensor, values: torch.Tensor):
    """Per prefix k, the ridge map with intercept from ``states (B, K, W)`` to ``values (B, K, O)``; returns the
    function that applies it to other states."""
    states, values = states.double(), values.double()
    centre, offset = states.mean(0), values.mean(0)  # (K, W), (K, O)
    x = (states - centre).transpose(0, 1)  # (K, B, W)
    gram = x.transpose(1, 2) @ x  # (K, W, W)
    scale = gram.diagonal(dim1=1, dim2=2).mean(-1).clamp_min(1e-12)  # (K,)
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype)
    coef = torch.linalg.solve(
        gram + RIDGE * scale[:, None, None] * eye, x.transpose(1, 2) @ (values - offset).transpose(0, 1)
    )
    return lambda other: torch.einsum("bkw,kwo->bko", other.double() - centre, coef) + offset


def where(records: list[dict]) -> dict[str, dict]:
    """Per target, the answer to "in which layer": the first state whose probe's R² is at least :data:`DECODABLE`
    (None when none is), and the state of highest R², with its band."""
    found = {}
    for record in records:
        for target, scores in record["targets"].items():
            entry = found.setdefault(target, {"first_decodable": None, "best": None, "r2": None})
            if entry["first_decodable"] is None and scores["r2"]["mean"] >= DECODABLE:
                entry["first_decodable"] = record["state"]
            if entry["r2"] is None or scores["r2"]["mean"] > entry["r2"]["mean"]:
                entry["best"], entry["r2"] = record["state"], scores["r2"]
    return found
