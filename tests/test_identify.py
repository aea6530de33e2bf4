"""iclab identify: known answers per prefix, per layer, under interventions and over training."""

import importlib.util
import json
import runpy
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

import iclab
from iclab import api
from iclab.cli import main
from iclab.config import ConfigError
from iclab.identification.instrument import Plan, compare, probe_layers
from iclab.identification.panel import bayes_name, default_epsilon
from iclab.identification.subject import Subject
from iclab.learners import LeastSquares
from iclab.models import GPTTransformer, LinearSelfAttention
from iclab.models.constructions import gd_construction
from iclab.models.interventions import ablated, edited, patched
from iclab.models.raw import ridge_transformer
from iclab.models.transformer import GPTConfig
from iclab.prompts import InterleavedFormat, PairedFormat
from iclab.rng import generator
from iclab.tasks.linear import GaussianInputs, LinearRegression

D, N = 4, 8
TASK = LinearRegression(GaussianInputs(D), n_context=N)
FAST = {"prompts": 300, "bootstrap": 100}


def _compare(model, prompt_format, task=TASK, probes=False):
    plan = Plan.build(task, [], None, FAST["prompts"], FAST["bootstrap"], 0, probes)
    subject = Subject(model, prompt_format)
    analysis = compare(subject, plan)
    if probes:
        probe_layers(subject, plan, analysis, {})
    return analysis


def test_epsilon_defaults_from_the_noise():
    assert default_epsilon(TASK) == pytest.approx(0.01)  # Akyürek et al.'s 0.01 at x, w ~ N(0, I), no noise
    noisy = LinearRegression(GaussianInputs(D), n_context=N, noise=0.5)
    assert default_epsilon(noisy) == pytest.approx(0.25 / D)  # σ² above 1% of E[y²] = 4.25
    assert (bayes_name(TASK), bayes_name(noisy)) == ("ols", "bayes(λ=0.25)")


def test_the_one_step_gd_construction_is_gd_with_its_step_size():
    lsa = gd_construction(LinearSelfAttention(D + 1, readout_sign=-1.0), N, 0.4)  # w = (0.4/k) Σ y_i x_i
    analysis = _compare(lsa, PairedFormat())
    epsilon = analysis.panel.epsilon
    for answer in analysis.panel.answers:
        assert answer.answer == "gd1(η=0.4)" and answer.separated, answer
        assert answer.spd["mean"] < 1e-10 and answer.ilwd["mean"] < 1e-10
    ols = analysis.panel.spds["ols"]["mean"]
    assert (ols[1:D] > epsilon).all()  # at small k, far from OLS
    assert (analysis.panel.linear_fit_r2[1:] > 1 - 1e-6).all()  # a linear predictor: its implicit fit is exact


class RidgeProgram(nn.Module):
    """raw.py's ridge transformer as a paired protocol model: one hand-built program per context size, every
    query read alone."""

    prompt_format = PairedFormat()

    def __init__(self, d: int, lam: float):
        super().__init__()
        self.d, self.lam = d, lam

    def forward(self, tokens, n_context):
        context, queries = tokens[:, :n_context], tokens[:, n_context:]
        b, q = queries.shape[:2]
        rows = torch.cat([context[:, None].expand(-1, q, -1, -1), queries[:, :, None]], 2).flatten(0, 1)
        return ridge_transformer(self.d, n_context, self.lam)(rows).view(b, q)


def test_the_ridge_construction_is_ridge_with_its_lambda():
    task = LinearRegression(GaussianInputs(3), n_context=6)
    analysis = _compare(RidgeProgram(3, 0.1), PairedFormat(), task)
    for answer in analysis.panel.answers:
        assert answer.answer == "ridge(0.1)" and answer.separated, answer


def test_an_untrained_transformer_matches_no_learner():
    model = GPTTransformer(GPTConfig(D + 1, n_layers=2, n_heads=2, width=16, max_tokens=2 * N), generator(0))
    analysis = _compare(model, InterleavedFormat())
    assert [a.answer for a in analysis.panel.answers] == [None] * (N - 1)


class OLSModel(nn.Module):
    """A protocol model that runs OLS on interleaved prompts and names its running w_OLS as a hidden state."""

    @staticmethod
    def _examples(tokens):
        xs, ys = tokens[:, 0::2, :-1], tokens[:, 1::2, -1]
        return xs, torch.cat([ys, torch.zeros_like(xs[:, : xs.shape[1] - ys.shape[1], 0])], 1)  # a last x: y unread

    def forward(self, tokens, n_context):
        return LeastSquares().predict_prefixes(*self._examples(tokens))

    def named_states(self, tokens, n_context):
        xs, ys = (v.double() for v in self._examples(tokens))
        w = [torch.zeros_like(xs[:, 0])] + [LeastSquares().weights(xs[:, :k], ys[:, :k]) for k in range(1, xs.shape[1])]
        return {"w_ols": torch.stack(w, 1).repeat_interleave(2, 1)[:, : tokens.shape[1]]}  # x and y token of each k


def test_a_protocol_model_running_ols_is_ols_and_holds_w_ols():
    analysis = _compare(OLSModel(), InterleavedFormat(), probes=True)
    assert all(a.answer == "ols" for a in analysis.panel.answers)
    (state,) = analysis.layers
    assert state["state"] == "w_ols"
    assert state["targets"]["w_ols"]["r2"]["mean"] > 0.99
    assert abs(state["targets"]["w_ols"]["control_r2"]["mean"]) < 0.1
    assert analysis.where["w_ols"]["first_decodable"] == "w_ols"


class WrongShape(nn.Module):
    def forward(self, tokens, n_context):
        return tokens[..., -1]  # (B, 2N): a prediction per token, not per example


def test_a_protocol_model_of_the_wrong_shape_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"returned \(2, 16\) for 2 prompts of 8 context examples") as error:
        iclab.identify(WrongShape(), task=TASK, out=tmp_path / "x", **FAST)
    assert "\n" not in str(error.value) and not (tmp_path / "x").exists()
    with pytest.raises(ConfigError, match="needs its task"):
        iclab.identify(OLSModel(), out=tmp_path / "x")


def _shared_query(n_prompts: int = 6):
    episode = TASK.sample(n_prompts, generator(1)).to(dtype=torch.float64)
    one_query = episode.x_query[:1].expand_as(episode.x_query).clone()  # one query, several contexts
    return PairedFormat().encode(replace(episode, x_query=one_query))


def test_mean_ablating_the_attention_of_a_one_layer_lsa_removes_the_context():
    lsa = gd_construction(LinearSelfAttention(D + 1, readout_sign=-1.0), N, 0.4).double()
    prompt = _shared_query()
    before = lsa(prompt.tokens, N)
    assert before.std() > 0.01  # the context matters
    with ablated(lsa, ["blocks.0.hook_attn_out"], "mean"):
        after = lsa(prompt.tokens, N)
    torch.testing.assert_close(after, after[:1].expand_as(after))  # the same for every prompt with this query
    torch.testing.assert_close(lsa(prompt.tokens, N), before)  # the edit ends with the block


def test_patching_one_prompts_activation_into_another_gives_the_first_prediction():
    lsa = gd_construction(LinearSelfAttention(D + 1, readout_sign=-1.0), N, 0.4).double()
    prompt = _shared_query(2)
    a, b = prompt.tokens[:1], prompt.tokens[1:]
    prediction, found = lsa(a, N, activations=["blocks.0.hook_attn_out"])
    with patched(lsa, found):
        torch.testing.assert_close(lsa(b, N), prediction)
    gpt = GPTTransformer(GPTConfig(D + 1, n_layers=2, n_heads=2, width=16, max_tokens=2 * N), generator(0)).double()
    tokens = InterleavedFormat().encode(TASK.sample(2, generator(2)).to(dtype=torch.float64)).tokens
    prediction, found = gpt(tokens[:1], N, activations=["blocks.1.hook_resid_post"])
    with patched(gpt, found):
        torch.testing.assert_close(gpt(tokens[1:], N), prediction)


def test_every_attention_activation_is_writable():
    gpt = GPTTransformer(GPTConfig(D + 1, n_layers=1, n_heads=2, width=16, max_tokens=2 * N), generator(0)).double()
    tokens = InterleavedFormat().encode(TASK.sample(3, generator(3)).to(dtype=torch.float64)).tokens
    expected = gpt(tokens, N)
    names = [f"blocks.0.attn.hook_{name}" for name in ("q", "k", "v", "attn_scores", "pattern", "z")]
    with edited(gpt, {name: lambda value: value.clone() for name in names}):  # the written-out path, unchanged
        prediction, found = gpt(tokens, N, activations=names)
    torch.testing.assert_close(prediction, expected)
    assert found["blocks.0.attn.hook_q"].shape == (3, 2 * N, 2, 8)  # (B, T, H, d_h)
    assert found["blocks.0.attn.hook_attn_scores"].shape == (3, 2, 2 * N, 2 * N)
    with ablated(gpt, ["blocks.0.attn.hook_pattern"], "zero"):  # no attention: the output map's bias alone
        _, found = gpt(tokens, N, activations=["blocks.0.hook_attn_out"])
    torch.testing.assert_close(found["blocks.0.hook_attn_out"], gpt.layers[0].attn.out.bias.expand(3, 2 * N, 16))
    with pytest.raises(ConfigError, match="unknown activation"):
        with ablated(gpt, ["blocks.0.attn.hook_nothing"]):
            pass


GPT = [
    "train.steps=12",
    "train.compile=false",
    "train.warmup=2",
    "train.log_every=2",
    "train.keep=[3, 6]",
    "model.n_layers=1",
    "model.width=16",
    "model.n_heads=2",
    "eval_prompts=200",
    "bootstrap=50",
]


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory):
    """A tiny finished gpt-linear run with checkpoints kept at steps 3 and 6 (and its last, 12)."""
    root = tmp_path_factory.mktemp("gpt")
    return iclab.run("gpt-linear", overrides=GPT, out=root / "run", progress=False).path


def test_the_timeline_of_three_kept_checkpoints_writes_its_figure_and_summary(gpt_run):
    result = iclab.identify(gpt_run, timeline=True, **FAST)
    summary = json.loads((result.path / "summary.json").read_text())
    assert [s["step"] for s in summary["by_step"]] == [3, 6, 12]
    assert all(len(s["by_prefix"]) == 9 and s["by_layer"] for s in summary["by_step"])  # N = 10: k = 1…9
    assert {s["train_loss_step"] for s in summary["by_step"]} <= {2, 4, 6, 8, 10, 12}
    assert (result.path / "figures" / "timeline.png").exists() and (result.path / "report.html").exists()
    assert result.path.name in (gpt_run / "report.html").read_text()  # linked from the run's report
    assert api.report(result.path) == result.path / "report.html"  # `iclab report` redoes it as an identification
    assert "Per prefix" in (result.path / "report.html").read_text()


def test_the_cli_reports_the_closest_learner_and_an_ablation(gpt_run, tmp_path, capsys):
    out = tmp_path / "identified"
    argv = ["identify", str(gpt_run), "--ablate", "blocks.0.attn.hook_z", "--out", str(out), "--prompts", "300"]
    assert main([*argv, "--bootstrap", "100"]) == 0
    printed = capsys.readouterr().out
    assert "k=1: " in printed and "ε = " in printed
    summary = json.loads((out / "summary.json").read_text())
    ablation = summary["ablations"]["blocks.0.attn.hook_z"]
    assert len(ablation["by_prefix"]) == len(summary["by_prefix"])
    assert ablation["loss"] != summary["loss"]  # the ablated model predicts otherwise
    assert summary["command"].startswith("iclab identify")


def test_an_export_and_a_garg_run_are_identified(gpt_run, tmp_path):
    from test_convert import _garg_run

    export = iclab.export(gpt_run, tmp_path / "export")
    result = iclab.identify(export, probes=False, **FAST)
    assert result.path.parent == tmp_path and result.path.name.startswith("export-identify-")
    with pytest.raises(ConfigError, match=r"train\.keep") as error:  # one checkpoint: no timeline
        iclab.identify(export, timeline=True, **FAST)
    assert "\n" not in str(error.value)
    _garg_run(tmp_path / "garg")
    result = iclab.identify(tmp_path / "garg", timeline=True, **FAST)
    assert result.path.parent == tmp_path / "garg" and [s["step"] for s in result.summary["by_step"]] == [50, 100]
    assert result.summary["bayes"] is None  # a sparse w has no Gaussian prior: no Bayes learner


def test_the_gpt2_example_follows_the_protocol(tmp_path):
    example = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "identify_gpt2.py"))
    result = example["main"](
        ["--steps", "0", "--d", "3", "--n-context", "5", "--prompts", "200", "--out", str(tmp_path / "x")]
    )
    summary = result.summary
    assert [state["state"] for state in summary["by_layer"]][:2] == ["embedding", "block 1"]
    assert all(answer["answer"] is None for answer in summary["by_prefix"])  # untrained: no learner


def test_the_llc_of_linear_regression_is_half_its_parameters():
    pytest.importorskip("devinterp")
    from iclab.identification.llc import Settings, estimate

    p, n = 6, 2000
    g = generator(5)
    x = torch.randn(n, p, generator=g)
    y = x @ torch.randn(p, generator=g) + torch.randn(n, generator=g)  # unit noise: half the squared error is the NLL
    model = nn.Linear(p, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.linalg.lstsq(x, y[:, None]).solution.T)  # at the minimum
    settings = Settings(lr=2e-4, localization=1.0, chains=4, draws=200, batch_size=50, samples=n)
    found = estimate(model, lambda m, i: 0.5 * (m(x[i])[:, 0] - y[i]).pow(2), settings)
    expected = p / 2 * settings.nbeta / (settings.nbeta + settings.localization)  # γ stiffens each direction a little
    assert abs(found["mean"] - expected) <= 3 * found["std"], found
    assert len(found["loss_trace"]) == 4 and len(found["loss_trace"][0]) == 200


def test_the_timeline_carries_the_llc_and_its_chains(gpt_run, tmp_path):
    pytest.importorskip("devinterp")
    llc = {"chains": 2, "draws": 20, "samples": 128, "batch_size": 32}
    result = iclab.identify(gpt_run, timeline=True, llc=llc, probes=False, out=tmp_path / "x", **FAST)
    steps = result.summary["by_step"]
    assert all(s["llc"]["settings"]["draws"] == 20 and len(s["llc"]["loss_trace"]) == 2 for s in steps)
    assert (tmp_path / "x" / "figures" / "llc_traces.png").exists()


@pytest.mark.skipif(importlib.util.find_spec("devinterp") is not None, reason="devinterp is installed")
def test_the_llc_without_devinterp_is_refused_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match=r"pip install 'iclab\[devinterp\]'"):
        iclab.identify(OLSModel(), task=TASK, llc=True, out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


class NaNModel(nn.Module):
    def forward(self, tokens, n_context):
        return torch.full((len(tokens), n_context), float("nan"), dtype=tokens.dtype)


class EvenOnly(nn.Module):
    """Reads N from the tokens' shape, so a prompt ending in an x without its y gets one prediction too few."""

    def forward(self, tokens, n_context):
        return tokens[:, 1::2, -1].cumsum(1)


class NaNLater(OLSModel):
    """Finite on the first prompts of a batch, NaN beyond them: only the full identification meets it."""

    def forward(self, tokens, n_context):
        out = super().forward(tokens, n_context).clone()
        out[2:] = float("nan")
        return out


@pytest.mark.parametrize(
    "model, says",
    [
        (NaNModel(), "predicted NaN or an infinity at 16 of 16 positions"),
        (EvenOnly(), r"returned \(2, 7\) for 2 prompts of 8 x's, the last without its y"),
        (NaNLater(), "'NaNLater' predicted NaN or an infinity"),
    ],
)
def test_a_protocol_model_with_nan_or_that_reads_n_from_the_shape_is_refused_in_one_line(model, says, tmp_path):
    with pytest.raises(ConfigError, match=says) as error:
        iclab.identify(model, task=TASK, out=tmp_path / "x", **FAST)
    assert "\n" not in str(error.value) and not (tmp_path / "x").exists()
