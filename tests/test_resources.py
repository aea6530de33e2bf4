"""The memory estimate of a resolved config (iclab.resources): refused before anything allocates, one line."""

import pytest

from iclab import experiments
from iclab.cli import main
from iclab.config import ConfigError, leaves
from iclab.resources import GB, ROLES, check_memory, needs, out_of_memory

LAPTOP = {"limits.memory_gb": 24}


TOO_LARGE = {("algorithm-selection", "paper")}
"""Scales that need more than 24 GB: algorithm-selection's paper evaluation runs 10 000 prompts of 80 tokens through
16 layers of 512 at once (about 20 GB: 48 bytes a token and width, measured on 1 000 and 3 000 such prompts)."""


@pytest.mark.parametrize("name", experiments.names())
def test_every_scale_of_every_experiment_but_one_fits_a_24_gb_machine(name):
    spec = experiments.get(name)
    for scale in experiments.scales(name):
        if (name, scale) in TOO_LARGE:
            with pytest.raises(ConfigError, match="needs about .*the evaluation's forward pass"):
                spec.configure(scale, LAPTOP)
            assert spec.configure(scale, {"limits.memory_gb": 64})
        else:
            config = spec.configure(scale, LAPTOP).record
            assert 0 < sum(need.bytes for need in needs(config)) < 24 * GB


MEMORY_ROLES = {role: matches for role, matches in ROLES.items() if role not in ("bootstrap", "eval_batch")}
"""The roles a huge value of which needs memory (more bootstrap replicates take time, 100 at a time; an evaluation
batch above the evaluation's prompts changes nothing)."""


def size_keys(config):
    """Every integer key the estimate reads as a size (a list's are given as one value)."""
    return [
        key
        for key, value in leaves(config)
        if isinstance(value, int)
        and not isinstance(value, bool)
        and not key.startswith("log.")
        and any(matches(key.rpartition(".")[2]) for matches in MEMORY_ROLES.values())
    ]


@pytest.mark.parametrize("name", experiments.names())
def test_a_huge_size_key_of_any_experiment_is_refused_in_one_line(name):
    spec = experiments.get(name)
    keys = size_keys(spec.resolve("quick"))
    assert keys
    for key in keys:
        with pytest.raises(ConfigError) as refused:
            spec.configure("quick", {**LAPTOP, key: 10**9})
        assert "\n" not in str(refused.value)


def test_the_huge_d_the_fuzz_test_drew_names_its_key_before_allocating(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "gpt-linear", "--set", "task.d=62020", "--out", str(out)]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("iclab: error: task.d = 62020 needs about")
    assert "lower task.d" in said[0] and not out.exists()


def test_the_memory_a_run_may_hold_can_be_set_and_is_checked():
    spec = experiments.get("gpt-linear")
    with pytest.raises(ConfigError, match="eval_prompts = 4000 needs about"):
        spec.configure("quick", {"limits.memory_gb": 0.001})
    for bad in ("abc", -1, 0, float("inf")):
        with pytest.raises(ConfigError, match="limits.memory_gb must be a positive number"):
            spec.configure("quick", {"limits.memory_gb": bad})
    record = spec.configure("quick", {"limits.memory_gb": 100}).record
    check_memory(record)  # the limit is not the recipe: the run's fingerprint ignores it (iclab.runs.NOT_RECIPE)


def test_show_prints_the_estimate_even_where_a_run_would_be_refused(capsys):
    assert main(["show", "gpt-linear"]) == 0
    assert "# estimated memory: about" in capsys.readouterr().out
    assert main(["show", "gpt-linear", "--set", "task.d=62020", "--set", "limits.memory_gb=24"]) == 0
    assert "more than that, so `iclab run` refuses it" in capsys.readouterr().out


def test_allocator_failures_are_told_apart_from_other_errors():
    assert out_of_memory(MemoryError())
    assert out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"))
    assert out_of_memory(type("OutOfMemoryError", (RuntimeError,), {})("CUDA out of memory. Tried to allocate 2 GiB"))
    assert not out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not out_of_memory(ValueError("out of memory"))


def test_a_run_out_of_memory_says_where_in_one_line_and_stays_resumable(tmp_path, monkeypatch, capsys):
    from iclab.experiments.base import RunContext

    def no_room(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 30800000000 bytes")

    tiny = ["--set", "train.steps=4", "--set", "train.warmup=0", "--set", "eval_prompts=50", "--seed", "3"]
    monkeypatch.setattr(RunContext, "evaluate", no_room)  # after the model trained: its checkpoint is kept
    out = tmp_path / "run"
    assert main(["run", "lsa-linear", *tiny, "--out", str(out)]) == 2
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("iclab:")]
    assert len(said) == 1 and "out of memory in part" in said[0] and "the largest size is train.batch_size" in said[0]
    assert f"`iclab resume {out}` continues" in said[0]
    monkeypatch.undo()
    assert main(["resume", str(out)]) == 0 and (out / "claims.json").exists()
