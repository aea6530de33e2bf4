import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from iclab.config import ConfigError
from iclab.models import OneHotMLP
from iclab.rng import generator
from iclab.tasks import template_task


def test_first_layer_is_a_linear_map_of_the_concatenated_one_hots_and_equalities():
    model = OneHotMLP(7, 3, hidden=5, depth=2, equality=True, generator=generator(0))
    tokens = torch.tensor([[1, 4, 1], [0, 2, 6]])
    one_hot = F.one_hot(tokens, 7).flatten(1).float()  # (B, 3·7), position-major
    same = (tokens[:, :, None] == tokens[:, None, :]).flatten(1).float()
    features = torch.cat([one_hot, same], 1)
    weight = torch.cat([model.embed, model.equality])  # (3·7 + 9, hidden)
    expected = model.read_out(F.relu(features @ weight + model.bias))
    torch.testing.assert_close(model(tokens), expected)
    assert all(p.abs().max() <= 1 / 30**0.5 for p in (model.embed, model.equality, model.bias))


def test_mlp_cannot_tell_unseen_aba_from_abb_a_permutation_of_untrained_rows_maps_one_to_the_other():
    # The symmetry behind the MLP's failure: no weight is shared between positions, so swapping
    # two unseen tokens' rows at the last position (which leaves the i.i.d. initialisation's law
    # unchanged) turns the output on an unseen αβγ into the output on αβα.
    task = template_task("aba-abb", 16, test_size=10)
    model = OneHotMLP(task.vocab_size, 3, hidden=32, generator=generator(1))
    train = task.sample(16, generator(2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    initial = model.embed.detach().clone()
    for _ in range(20):
        optimizer.zero_grad()
        F.mse_loss(model(train.tokens), train.targets).backward()
        optimizer.step()
    unseen = [v for v in range(task.vocab_size) if v not in set(train.tokens.flatten().tolist())]
    rows = torch.tensor([p * task.vocab_size + v for p in range(3) for v in unseen])
    assert torch.equal(model.embed[rows], initial[rows]) and not torch.equal(model.embed, initial)

    a, b, c = task.alphabet("test")[:3]
    swapped = OneHotMLP(task.vocab_size, 3, hidden=32)
    swapped.load_state_dict(model.state_dict())
    with torch.no_grad():
        last = 2 * task.vocab_size
        swapped.embed[[last + a, last + c]] = model.embed[[last + c, last + a]]
    torch.testing.assert_close(swapped(torch.tensor([[a, b, c]])), model(torch.tensor([[a, b, a]])))
    # With the equality matrix the two strings differ in the input itself.
    with_equality = OneHotMLP(task.vocab_size, 3, equality=True, generator=generator(1))
    assert not torch.allclose(with_equality(torch.tensor([[a, b, c]])), with_equality(torch.tensor([[a, b, a]])))


def test_mlp_vmaps_over_seeds_and_rejects_bad_sizes():
    members = [OneHotMLP(9, 2, hidden=8, equality=True, generator=generator(s)) for s in (0, 1)]
    params, buffers = stack_module_state(members)
    tokens = torch.randint(9, (2, 4, 2), generator=generator(3))
    out = vmap(lambda p, b, t: functional_call(members[0], (p, b), (t,)))(params, buffers, tokens)
    torch.testing.assert_close(out, torch.stack([m(t) for m, t in zip(members, tokens)]))
    with pytest.raises(ConfigError):
        OneHotMLP(9, 2, depth=1)
