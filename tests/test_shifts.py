"""A shifted prompt keeps every property of its task except what the shift changes (property-based)."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iclab import experiments, shifts
from iclab.rng import generator
from iclab.tasks import CLASSES, function_class
from iclab.tasks.linear import CONFIG_KEYS, linear_regression_from_config

N, PROMPTS = 12, 2000
LABEL_SHIFTS = ("scale-y=0.5", "scale-y=3", "noisy")
INPUT_SHIFTS = tuple(n for n in shifts.NAMES if n != "noisy") + ("scale-x=0.333", "scale-x=3")


def _experiment_tasks() -> dict:
    """Every experiment's own linear-regression task block, with a context of N examples."""
    tasks = {}
    for name in experiments.names():
        block = experiments.get(name).defaults.get("task", {})
        if set(block) <= set(CONFIG_KEYS) and "d" in block:
            tasks[name] = {**block, "n_context": N}
    return tasks


EXPERIMENT_TASKS = _experiment_tasks()


def _task(source: str, option: dict):
    """A task from an experiment's block or a function class, with one option (noise, sparsity) set."""
    if source in EXPERIMENT_TASKS:
        return linear_regression_from_config({**EXPERIMENT_TASKS[source], **option})
    parameters = {"sparsity": option["w_sparsity"]} if "w_sparsity" in option and source == "linear" else {}
    if source == "noisy-linear" and "noise" in option:
        parameters = {"noise": option["noise"]}
    return function_class(source, 5, N, **parameters)


def _noise_sd(task) -> float:
    """The standard deviation of a label around f(x) as the task draws it."""
    return getattr(task, "scale", 1.0) * getattr(task, "noise", 0.0)


def _residual_sd(task, xs, ys, truth) -> float:
    return (ys - task.function(xs, truth)).std().item()


OPTIONS = [{}, {"noise": 0.5}, {"noise": 2.0}, {"w_sparsity": 2}]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(sorted(EXPERIMENT_TASKS) + sorted(CLASSES)),
    option=st.sampled_from(OPTIONS),
    name=st.sampled_from(INPUT_SHIFTS),
    seed=st.integers(0, 10_000),
)
def test_input_shifts_keep_the_task(source, option, name, seed):
    task = _task(source, option)
    episode = task.sample(PROMPTS, generator(seed), torch.float64)
    shifted = shifts.shift(name)(episode, task, generator(seed + 1))
    # The function is the prompt's own, sparsity and all.
    assert shifted.truth is episode.truth
    assert shifted.x_query.shape[:2] == shifted.y_query.shape and shifted.xs.shape == episode.xs.shape
    sd = _noise_sd(task)
    for xs, ys in ((shifted.xs, shifted.ys), (shifted.x_query, shifted.y_query)):
        if task.metric == "error_rate":  # classification keeps sign labels
            assert set(ys.unique().tolist()) <= {-1.0, 1.0}
            assert torch.equal(ys, task.function(xs, shifted.truth))
        elif sd == 0:
            assert torch.allclose(ys, task.function(xs, shifted.truth), atol=1e-9)
        else:  # the task's label noise, not less
            assert _residual_sd(task, xs, ys, shifted.truth) == pytest.approx(sd, rel=0.1)


@settings(max_examples=30, deadline=None)
@given(
    source=st.sampled_from(sorted(EXPERIMENT_TASKS)),
    noise=st.sampled_from([0.0, 0.5, 2.0]),
    name=st.sampled_from(LABEL_SHIFTS),
    seed=st.integers(0, 10_000),
)
def test_label_shifts_change_only_the_labels(source, noise, name, seed):
    task = _task(source, {"noise": noise})
    episode = task.sample(PROMPTS, generator(seed), torch.float64)
    shifted = shifts.shift(name)(episode, task, generator(seed + 1))
    assert torch.equal(shifted.xs, episode.xs) and shifted.truth is episode.truth
    if name.startswith("scale-y"):
        scale = float(name.partition("=")[2])
        assert torch.allclose(shifted.ys, scale * episode.ys)  # the same noisy labels, scaled
    else:
        assert shifted.ys.pow(2).mean().item() == pytest.approx(task.zero_error, rel=0.1)


def test_an_example_shown_again_keeps_its_label():
    task = linear_regression_from_config({"d": 4, "n_context": N, "noise": 1.0})
    episode = task.sample(50, generator(3), torch.float64)
    doubled = shifts.shift("duplicated")(episode, task, generator(4))
    assert torch.equal(doubled.ys[:, 0::2], doubled.ys[:, 1::2])
    assert torch.equal(doubled.ys[:, 0::2], episode.ys[:, : N // 2])
    overlap = shifts.shift("overlapping")(episode, task, generator(4))
    for k in range(1, N):  # the query is an earlier example, label and all
        shown = (overlap.x_query[:, k, None] == episode.xs[:, :k]).all(-1)
        assert torch.equal(overlap.y_query[:, k], (episode.ys[:, :k] * shown).sum(1) / shown.sum(1))
    orthants = shifts.shift("random-orthants")(episode, task, generator(4))
    assert torch.equal(orthants.x_query, episode.xs) and torch.equal(orthants.y_query, episode.ys)
