"""Models, tasks and prompt formats described as JSON (what checkpoints record) and rebuilt from it."""

import json

import pytest
import torch

from iclab.config import ConfigError
from iclab.models import (
    MLP,
    MODELS,
    CausalLinearAttention,
    FeatureLSA,
    GPTConfig,
    GPTTransformer,
    Linearised,
    LinearSelfAttention,
    OneHotMLP,
    RecurrentReader,
    describe,
    gd_construction,
    rebuild,
)
from iclab.probes import PoolingProbes
from iclab.prompts import (
    AutoregressiveFormat,
    InterleavedFormat,
    PairedFormat,
    TokenFormat,
    describe_format,
    format_from_description,
)
from iclab.rng import generator
from iclab.tasks import (
    SineRegression,
    autoregressive_from_config,
    describe_task,
    function_class,
    linear_regression_from_config,
    task_from_description,
    template_task,
)


def _frozen_gd_features(g):
    lsa = LinearSelfAttention(5, 1, "merged", normalize=False, readout_sign=-1.0, generator=g)
    gd_construction(lsa, 10, 1.0)
    return FeatureLSA(MLP(1, 8, 4, generator=g), lsa, train_attention=False)


# One model of every rebuildable class, with its input: (make(generator), tokens).
EXAMPLES = {
    "GPTTransformer": (
        lambda g: GPTTransformer(GPTConfig(4, 2, 2, 16, max_tokens=12, logit_identity=True), g),
        torch.randn(3, 12, 4, generator=generator(1)),
    ),
    "LinearSelfAttention": (
        lambda g: LinearSelfAttention(4, 2, "separate", clip=3.0, init_scale=0.3, generator=g),
        torch.randn(3, 6, 4, generator=generator(2)),
    ),
    "FeatureLSA": (_frozen_gd_features, torch.randn(3, 6, 2, generator=generator(3))),
    "MLP": (lambda g: MLP(3, 8, 2, depth=3, generator=g), torch.randn(3, 3, generator=generator(4))),
    "CausalLinearAttention": (
        lambda g: CausalLinearAttention(3, init="random", dtype=torch.float64, generator=g),
        torch.randn(2, 7, 6, generator=generator(5), dtype=torch.complex128),
    ),
    "OneHotMLP": (
        lambda g: OneHotMLP(6, 4, 16, 3, equality=True, generator=g),
        torch.randint(6, (3, 4), generator=generator(6)),
    ),
    "Linearised": (
        lambda g: Linearised(GPTTransformer(GPTConfig(4, 2, 2, 16, max_tokens=12, attention="math"), g)),
        torch.randn(3, 12, 4, generator=generator(8)),
    ),
    "RecurrentReader": (
        lambda g: RecurrentReader(6, 8, 2, "lstm", generator=g),
        torch.randint(6, (3, 4), generator=generator(9)),
    ),
    "PoolingProbes": (
        lambda g: PoolingProbes(2, 2, 3, 5, 8, 2, 16, generator=g),
        torch.randn(3, 2, 5, 8, generator=generator(7)),
    ),
}


def _outputs(model, tokens):
    with torch.no_grad():
        if isinstance(model, MLP):
            return model(tokens)
        return model(tokens, 3)


def test_every_rebuildable_class_has_an_example():
    assert set(EXAMPLES) == set(MODELS)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_model_rebuilt_from_its_description_and_weights_is_the_same_model(name):
    make, tokens = EXAMPLES[name]
    model = make(generator(0))
    spec = describe(model)
    assert spec["class"] == name and "generator" not in spec["arguments"]
    spec = json.loads(json.dumps(spec))  # what a checkpoint stores
    rebuilt = rebuild(spec)
    assert type(rebuilt) is type(model) and describe(rebuilt) == spec
    state = model.state_dict()
    assert rebuilt.state_dict().keys() == state.keys()  # parameters and buffers (FeatureLSA's frozen attention)
    rebuilt.load_state_dict(state)
    assert torch.equal(_outputs(rebuilt, tokens), _outputs(model, tokens))


def test_unknown_or_unrecorded_classes_cannot_be_rebuilt():
    plain = torch.nn.Linear(2, 3)
    assert describe(plain) == {"class": "Linear", "arguments": None}
    with pytest.raises(ConfigError, match="cannot rebuild a Linear"):
        rebuild(describe(plain))


@pytest.mark.parametrize(
    "task",
    [
        linear_regression_from_config({"d": 3, "n_context": 5, "cov": [1.0, 2.0, 3.0], "noise": 0.1, "w_sparsity": 2}),
        linear_regression_from_config({"d": 2, "n_context": 4, "inputs": "uniform", "low": -0.5, "high": 0.5}),
        function_class("sparse-linear", 4, 6, sparsity=2),
        function_class("decision-tree", 4, 6, depth=3),
        function_class("noisy-linear", 3, 5, noise=0.5),
        SineRegression(4),
        autoregressive_from_config({"d": 2, "length": 5}),
        template_task("aba-abb", 8),
    ],
    ids=lambda t: type(t).__name__,
)
def test_a_task_rebuilt_from_its_description_samples_the_same_prompts(task):
    description = json.loads(json.dumps(describe_task(task)))
    rebuilt = task_from_description(description)
    a, b = task.sample(4, generator(1)), rebuilt.sample(4, generator(1))
    for field in ("xs", "ys", "x_query", "y_query", "tokens", "targets"):
        if hasattr(a, field):
            assert torch.equal(getattr(a, field), getattr(b, field)), field


def test_bad_task_descriptions_are_config_errors():
    with pytest.raises(ConfigError, match="unknown task kind"):
        task_from_description({"kind": "text"})
    with pytest.raises(ConfigError, match="unknown function class"):
        task_from_description({"kind": "function-class", "class": "cubic", "d": 3, "n_context": 5})
    with pytest.raises(ConfigError):
        task_from_description({"kind": "function-class", "class": "linear", "d": 3, "n_context": 5, "depth": 2})


@pytest.mark.parametrize(
    "fmt", [PairedFormat(), PairedFormat("mu"), InterleavedFormat(), AutoregressiveFormat(), TokenFormat()], ids=repr
)
def test_prompt_formats_round_trip(fmt):
    description = json.loads(json.dumps(describe_format(fmt)))
    assert type(format_from_description(description)) is type(fmt)
    assert describe_format(format_from_description(description)) == description
