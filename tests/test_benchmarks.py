"""The benchmarks' bookkeeping, on made-up inputs (no benchmarking here): a ratio to a reference is
written only when the reference was timed in the same run, and the reproduction's time is recorded
from run folders without any path of the machine."""

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import reproduce_time  # noqa: E402
import seeds_scaling  # noqa: E402
import train_throughput  # noqa: E402

RATES = {
    "a_transformer_sdpa": [40.0, 44.0, 42.0],
    "a_transformer_math": [50.0, 52.0, 48.0],
    "a_transformer_math_compiled": [60.0, 66.0, 63.0],
}
LEARNERS = {"ols": 0.02, "ridge(0.1)": 0.03, "3-nn": 0.04}


def test_no_ratio_without_a_reference_timed_in_the_same_run(capsys):
    result = train_throughput.summarise(
        2, 150e9, RATES, None, "not measured: transformers is not installed", 280.0, LEARNERS
    )
    assert "garg_reference_steps_per_s" not in result and "garg_reference_rounds" not in result
    assert not any("vs_garg" in row for row in result.values() if isinstance(row, dict))
    assert set(result["targets_met"]) == {"a_flops_fraction", "c_total_seconds"}  # no verdict on an absent ratio
    train_throughput.print_table(result)
    out = capsys.readouterr().out
    assert "reference not measured" in out
    assert all("reference not measured" in line for line in out.splitlines() if line.startswith("a_transformer"))

    timed = train_throughput.summarise(2, 150e9, RATES, [20.0, 25.0, 21.0], "measured here", 280.0, LEARNERS)
    assert timed["garg_reference_steps_per_s"] == 21.0
    assert timed["a_transformer_math"]["vs_garg"] == pytest.approx(50.0 / 21.0)
    assert "vs_garg" not in timed["b_lsa"]  # (b) is another configuration than the reference's
    assert timed["targets_met"]["a_compiled_vs_garg"] is True and timed["targets_met"]["a_eager_vs_garg"] is False


def test_gpu_rows_get_ratios_only_with_a_reference():
    rows = {"iclab_fp32": {"steps_per_s": 30.0}, "iclab_bf16": {"steps_per_s": 90.0}}
    assert train_throughput.with_reference(rows, None) == {
        "iclab_fp32": {"steps_per_s": 30.0},
        "iclab_bf16": {"steps_per_s": 90.0},
    }
    assert train_throughput.ratio_text(rows["iclab_fp32"]) == "reference not measured"
    train_throughput.with_reference(rows, 30.0)
    assert rows["iclab_bf16"]["vs_garg"] == 3.0 and train_throughput.ratio_text(rows["iclab_bf16"]) == "3.00"


def test_the_results_file_records_no_path_of_the_machine():
    text = (Path(__file__).parents[1] / "benchmarks" / "results.json").read_text()
    assert "/tmp" not in text and "/home" not in text and "/work" not in text


def test_reproduce_time_reads_a_finished_reproduction(tiny_runs, tmp_path, monkeypatch):
    root, runs = tiny_runs
    monkeypatch.setattr(train_throughput, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr(reproduce_time, "TIMES", tmp_path / "times.json")
    result = reproduce_time.main(["--existing", str(root), "--jobs", "1"])
    text = (tmp_path / "results.json").read_text()
    assert json.loads(text)["reproduce_time"] == json.loads(json.dumps(result))
    counted = [runs["gpt"], runs["b"]]  # lsa-a is an older run of lsa-b's seed
    assert [r["experiment"] for r in result["runs"]] == ["gpt-linear", "lsa-linear"]
    walls = [run.folder.read_info()["wall_seconds"] for run in counted]
    assert [r["wall_seconds"] for r in result["runs"]] == walls and result["total_wall_seconds"] == sum(walls)
    assert (
        result["matmul_gflops"] > 0
        and result["wall_x_matmul_gflop"] == result["total_wall_seconds"] * result["matmul_gflops"]
    )
    assert str(root) not in text and str(tmp_path) not in text
    times = json.loads((tmp_path / "times.json").read_text())["experiments"]  # what `iclab list` and `show` print
    assert times["gpt-linear"]["quick"]["seconds"] == round(walls[0], 1)
    assert times["lsa-linear"]["quick"] == {**times["lsa-linear"]["quick"], "runs": 1, "seeds_per_run": 1, "jobs": 1}


def test_seeds_scaling_times_the_training_of_a_run_of_one_seed_and_of_several(tmp_path, monkeypatch):
    monkeypatch.setattr(train_throughput, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr(seeds_scaling, "RESULTS", tmp_path / "results.json")
    result = seeds_scaling.main(["--only", "gd-mechanism", "--scale", "smoke", "--seeds", "2", "--threads", "1"])
    found = result["experiments"]["gd-mechanism"]
    assert json.loads((tmp_path / "results.json").read_text())["seeds_scaling"] == json.loads(json.dumps(result))
    for run in (found["one_seed"], found["2_seeds"]):  # the training loop of every ctx.trained call is timed
        assert 0 < run["training_seconds"] < run["wall_seconds"]
    assert found["ratio"] == round(found["2_seeds"]["wall_seconds"] / found["one_seed"]["wall_seconds"], 2)


def test_every_experiments_timing_overrides_leave_its_scales_valid():
    """A timed run shrinks only the evaluation: its overrides resolve and pass the checks at every scale."""
    from iclab import experiments

    for name in experiments.names():
        spec = experiments.get(name)
        for scale in spec.scales:
            config = spec.configure(scale, spec.timing, seeds=1).record
            assert all(not key.startswith(("train", "model")) for key in spec.timing), name
            assert config["scale"] == scale


def test_recipe_cost_times_every_model_and_records_an_estimate_that_show_prints(tmp_path, monkeypatch, capsys):
    import recipe_cost

    from iclab import experiments
    from iclab.cli import main

    monkeypatch.setattr(train_throughput, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr(recipe_cost, "TIMES", tmp_path / "times.json")
    result = recipe_cost.main(
        ["lsa-linear", "--scale", "smoke", "--steps", "4", "--threads", "1", "--set", "train.steps=24"]
    )
    found = result["estimates"]["lsa-linear"]
    planned = {name: m["planned_steps"] for name, m in found["models"].items()}
    assert planned == {"lsa-isotropic": 24, "lsa-anisotropic": 24}  # the smoke recipe's 20, changed by --set
    assert found["seconds"] == sum(m["planned_steps"] * m["step_seconds"] for m in found["models"].values())
    assert all(map(math.isfinite, (m["step_seconds"] for m in found["models"].values())))
    times = json.loads((tmp_path / "times.json").read_text())["experiments"]["lsa-linear"]["smoke"]
    assert times["estimated"] and times["timed_steps"] == 4 and times["seconds"] == round(found["seconds"], 1)
    assert times["overrides"] == {"train.steps": 24}
    monkeypatch.setattr(experiments, "TIMES", tmp_path / "times.json")
    experiments._times.cache_clear()
    try:
        assert main(["show", "lsa-linear", "--scale", "smoke"]) == 0
        assert "from a timed run of 4 steps per model" in capsys.readouterr().out
    finally:
        experiments._times.cache_clear()


def test_a_timed_run_keeps_the_warm_up_its_recipe_needs_to_stay_finite():
    """mesa-ar's gradient descent from a sharp start (a₀ = b₀ = 2) diverges within 10 steps without its warm-up;
    timing it must not."""
    from iclab import api

    sharp = {"inits": [[2.0, 2.0]], "size_sweep.init": [2.0, 2.0], "train.steps": 20, "starts.sparse": []}
    # Full-batch steps on 600 sequences (tens of ms), so that the marginal time of 9 steps stands above the noise
    # of a run's own overhead on a busy machine (the smoke scale's 100 sequences step in about 3 ms).
    sharp |= {"train.train_size": 600, "size_sweep.sizes": []}
    cost = api.time_recipe("mesa-ar", "smoke", steps=10, overrides={**sharp, "full_model.sparse": []})
    assert cost["models"] and all(model["step_seconds"] > 0 for model in cost["models"].values())
    assert cost["models"]["gaussian-1-full-a2-b2"]["planned_steps"] == 20


def test_the_generated_corpus_reads_as_wikitext_and_its_bpe_reaches_the_vocabulary_asked(tmp_path):
    import generated_wikitext

    from iclab.data import wikitext
    from iclab.data.tokenizer import BPETokenizer

    corpus = wikitext(generated_wikitext.write_corpus(tmp_path / "wiki", megabytes=0.2, words=3000))
    sizes = [len(corpus.train), len(corpus.validation), len(corpus.test)]
    assert sum(sizes) >= 0.2e6 and sizes[0] > 8 * sizes[1] and sizes[1] > 0 and sizes[2] > 0
    assert BPETokenizer.train(corpus.train, 2000).vocab_size == 2000  # the model gets the shapes it is timed at
    assert generated_wikitext.generated_text(0.01, 100) == generated_wikitext.generated_text(0.01, 100)  # seeded
