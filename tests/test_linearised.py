"""The linearised model (iclab.models.Linearised): the first-order Taylor expansion of a network at its initial
weights, checked against the network itself and against a finite-difference expansion."""

import torch

from iclab.models import GPTConfig, GPTTransformer, Linearised
from iclab.rng import generator


def _network(seed=0):
    return GPTTransformer(GPTConfig(3, 2, 2, 16, max_tokens=8, attention="math"), generator(seed)).double()


def _shifted(model, shifts):
    """``model`` with every parameter moved by the matching tensor of ``shifts``."""
    with torch.no_grad():
        for p, s in zip(model.parameters(), shifts):
            p.add_(s)
    return model


def test_the_linearised_model_starts_as_the_network_and_is_its_first_order_expansion():
    tokens = torch.randn(4, 8, 3, generator=generator(1), dtype=torch.float64)
    linear = Linearised(_network())
    assert [n for n, _ in linear.named_parameters()] == [f"shifts.{i}" for i in range(len(linear.names))]
    with torch.no_grad():
        start = linear(tokens, 4)
        assert torch.equal(start, _network()(tokens, 4))
        direction = [
            torch.randn(p.shape, generator=generator(2, i), dtype=torch.float64) for i, p in enumerate(linear.shifts)
        ]
        errors = []
        for eps in (1e-2, 5e-3):
            for shift, v in zip(linear.shifts, direction):
                shift.copy_(eps * v)
            errors.append(
                (linear(tokens, 4) - _shifted(_network(), [eps * v for v in direction])(tokens, 4)).abs().max()
            )
            # Linear in the shift: twice the shift moves the output twice as far from the start.
            for shift, v in zip(linear.shifts, direction):
                shift.copy_(2 * eps * v)
            twice = linear(tokens, 4)
            for shift, v in zip(linear.shifts, direction):
                shift.copy_(eps * v)
            assert torch.allclose(twice - start, 2 * (linear(tokens, 4) - start), rtol=1e-10, atol=1e-12)
    # The network's own second-order term: halving the step quarters the gap.
    assert 3.0 < errors[0] / errors[1] < 5.0 and errors[0] > 0


def test_only_the_shifts_train_and_the_start_stays_put():
    tokens = torch.randn(16, 8, 3, generator=generator(3), dtype=torch.float64)
    linear = Linearised(_network())
    start = {name: buffer.clone() for name, buffer in linear.model.named_buffers()}
    optimizer = torch.optim.Adam(linear.parameters(), lr=1e-2)
    losses = []
    for _ in range(20):
        loss = (linear(tokens, 4) - 1.0).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert all(torch.equal(buffer, start[name]) for name, buffer in linear.model.named_buffers())
    assert not list(linear.model.parameters())


def test_tied_parameters_become_one_shift():
    first, second = torch.nn.Linear(3, 3, bias=False).double(), torch.nn.Linear(3, 3, bias=False).double()
    second.weight = first.weight
    network = torch.nn.Sequential(first, torch.nn.Tanh(), second)
    linear = Linearised(network)
    assert len(linear.shifts) == 1 and linear.tied == [0, 0] and not list(network.parameters())
    x = torch.randn(5, 3, generator=generator(4), dtype=torch.float64)
    shift = torch.randn(3, 3, generator=generator(5), dtype=torch.float64)
    with torch.no_grad():
        linear.shifts[0].copy_(1e-6 * shift)
        moved = linear(x)
    weight = network[0].weight  # θ₀, now a buffer
    expected = torch.tanh(x @ (weight + 1e-6 * shift).T) @ (weight + 1e-6 * shift).T
    assert torch.allclose(moved, expected, rtol=0, atol=1e-10)  # both layers moved by the one shift
