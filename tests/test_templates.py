import pytest
import torch

from iclab.config import ConfigError
from iclab.prompts import TokenFormat
from iclab.rng import generator
from iclab.tasks.templates import (
    NAMED_TASKS,
    Template,
    TemplateTask,
    distinct_draws,
    majority_templates,
    named_templates,
    parse_templates,
    template_task,
)


def test_parser_reads_patterns_labels_and_weights():
    assert parse_templates("ABA:+1,ABB:-1") == [Template("ABA", 1.0), Template("ABB", -1.0)]
    assert parse_templates("AB:B:2, AA:A") == [Template("AB", "B", 2.0), Template("AA", "A")]
    assert parse_templates("A=+;B=-;A:+1")[0].pattern == "A=+;B=-;A"
    for bad in ("ABA", "ABA:", ":1", "AB:xy", "AB:1:heavy", "AB:1:2:3"):
        with pytest.raises(ConfigError):
            parse_templates(bad)


@pytest.mark.parametrize("spec", ["ABA:+1,BAB:-1", "AB:+1,ABB:-1", "AB:+1,AB:A", "AB:C", "AB:1:0", "+-:1"])
def test_tasks_reject_ambiguous_or_malformed_templates(spec):
    with pytest.raises(ConfigError):
        TemplateTask(parse_templates(spec), 10)


def test_every_named_task_builds_and_unknown_names_fail():
    for name in [*NAMED_TASKS, "majority-3"]:
        assert template_task(name, 20).n_templates >= 1
    with pytest.raises(ConfigError):
        named_templates("abba")
    with pytest.raises(ConfigError):
        TemplateTask(parse_templates("ABC:1"), train_size=2)


def test_majority_templates_are_distinct_up_to_renaming_with_first_symbol_majority_labels():
    templates = majority_templates(4)
    assert len(templates) == 8 and len({t.canonical() for t in templates}) == 8
    labels = {t.pattern: t.label for t in templates}
    assert labels["AAAB"] == 1.0 and labels["AABB"] == -1.0 and labels["ABBB"] == -1.0


def test_alphabets_are_disjoint_ranges_after_the_fixed_tokens():
    task = template_task("variable-binding", 7, validation_size=5, test_size=6)
    assert task.fixed_tokens == sorted("=+;-")
    ranges = [set(task.alphabet(s)) for s in ("train", "validation", "test")]
    assert [len(r) for r in ranges] == [7, 5, 6]
    assert not (ranges[0] & ranges[1]) and not (ranges[0] & ranges[2]) and not (ranges[1] & ranges[2])
    assert min(ranges[0]) == 4 and max(ranges[2]) == task.vocab_size - 1


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_samples_respect_their_templates_with_distinct_symbols_from_the_split(split):
    task = template_task("variable-binding", 12)
    batch = task.sample(500, generator(0), split)
    alphabet = set(task.alphabet(split))
    fixed = {c: i for i, c in enumerate(task.fixed_tokens)}
    for tokens, target, t in zip(batch.tokens.tolist(), batch.targets[:, 0].tolist(), batch.truth["template"].tolist()):
        template = task.templates[t]
        assignment = {}
        for c, token in zip(template.pattern, tokens):
            if c in fixed:
                assert token == fixed[c]
            else:
                assert token in alphabet and assignment.setdefault(c, token) == token
        assert len(set(assignment.values())) == len(assignment)  # distinct symbols within a sample
        assert target == template.label
    assert batch.targets.dtype == torch.float32 and batch.targets.shape == (500, 1)
    assert set(batch.truth["template"].tolist()) == set(range(4))


def test_symbolic_labels_are_the_substituted_token():
    task = template_task("AB:B,AA:A", 9)
    batch = task.sample(200, generator(1), "test")
    assert batch.targets.dtype == torch.long
    torch.testing.assert_close(batch.targets[:, 0], batch.tokens[:, 1])
    fixed = template_task("AB:=,AA:A", 9).sample(50, generator(1))
    assert set(fixed.targets[fixed.truth["template"] == 0, 0].tolist()) == {0}  # '=' is fixed token 0


def test_template_weights_and_determinism():
    task = TemplateTask([Template("AB", 1.0, 3.0), Template("AA", -1.0, 1.0)], 50)
    batch = task.sample(20000, generator(2))
    assert (batch.truth["template"] == 0).double().mean().item() == pytest.approx(0.75, abs=0.015)
    again = task.sample(20000, generator(2))
    assert torch.equal(batch.tokens, again.tokens)


def test_distinct_draws_are_uniform_over_ordered_tuples():
    draws = distinct_draws(60000, 2, 4, generator(3))
    assert (draws[:, 0] != draws[:, 1]).all() and draws.min() >= 0 and draws.max() < 4
    counts = torch.bincount(draws[:, 0] * 4 + draws[:, 1], minlength=16).double()
    pairs = counts[counts > 0]
    assert len(pairs) == 12 and (pairs / 5000 - 1).abs().max() < 0.06


def test_token_format_passes_ids_and_targets():
    batch = template_task("aba-abb", 8).sample(5, generator(4))
    prompt = TokenFormat().encode(batch)
    assert torch.equal(prompt.tokens, batch.tokens) and prompt.n_context == 3
    assert prompt.targets.shape == (5, 1)
    assert batch[:2].tokens.shape == (2, 3) and batch.to(dtype=torch.float64).targets.dtype == torch.float64
