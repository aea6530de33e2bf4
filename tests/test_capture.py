"""train.capture: a training step replayed as a CUDA graph equals the eager step (on CUDA; skipped without it), and
changes nothing on a CPU."""

import pytest
import torch

from iclab.capture import CapturedStep
from iclab.config import ConfigError
from iclab.curriculum import Curriculum, CurriculumPrompts
from iclab.models import GPTConfig, GPTTransformer
from iclab.prompts import InterleavedFormat
from iclab.tasks import GaussianInputs, LinearRegression
from iclab.train import TrainConfig, train

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="a captured step needs a CUDA device")

D, N = 4, 9


def _make(g):
    return GPTTransformer(GPTConfig(D + 1, 2, 2, 32, max_tokens=2 * N, attention="math"), g)


def _data():
    """A curriculum that changes the prompts' shape twice in 50 steps: the captured step is made three times."""
    make_task = lambda d, n: LinearRegression(GaussianInputs(d), n_context=n)
    return CurriculumPrompts(make_task, InterleavedFormat(), Curriculum(2, D, 5, N, every=20))


def _trained(device, capture, steps=50, **kwargs):
    config = TrainConfig(
        steps=steps,
        batch_size=16,
        lr=3e-3,
        schedule="cosine",
        warmup=5,
        clip=1.0,
        log_every=5,
        checkpoint_every=20,
        capture=capture,
    )
    return train(_make, _data(), config, seeds=[0, 1], device=device, progress=False, **kwargs)


def _weights(result):
    return [{k: v.detach().cpu() for k, v in m.state_dict().items()} for m in result.models]


def _assert_same(a, b, **tolerance):
    for one, other in zip(_weights(a), _weights(b)):
        assert one.keys() == other.keys()
        for key in one:
            torch.testing.assert_close(one[key], other[key], **tolerance, msg=lambda m, key=key: f"{key}: {m}")


def test_capture_changes_nothing_on_a_cpu():
    _assert_same(_trained("cpu", True, steps=12), _trained("cpu", False, steps=12), rtol=0, atol=0)


def test_capture_needs_adam_and_no_compile():
    for bad in ({"optimizer": "sgd"}, {"compile": True}):
        with pytest.raises(ConfigError, match="train.capture"):
            TrainConfig(capture=True, **bad)
    with pytest.raises(ValueError, match="CUDA"):
        CapturedStep(lambda *args: None, torch.device("cpu"))


@cuda
def test_a_captured_step_gives_the_eager_weights_after_50_steps():
    eager, captured = _trained("cuda", False), _trained("cuda", True)
    _assert_same(captured, eager)  # float32's default tolerances
    losses = lambda r: [row["value"] for row in r.history if row["metric"] == "train_loss"]
    torch.testing.assert_close(losses(captured), losses(eager))


@cuda
def test_a_resumed_captured_run_equals_an_uninterrupted_one(tmp_path):
    def interrupt(step, models):
        if step == 35:
            raise KeyboardInterrupt

    whole = _trained("cuda", True)
    with pytest.raises(KeyboardInterrupt):
        _trained("cuda", True, checkpoint_dir=tmp_path, callback=interrupt)
    resumed = _trained("cuda", True, checkpoint_dir=tmp_path)
    _assert_same(resumed, whole)
