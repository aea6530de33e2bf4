"""A model linearised at its initial weights: training it is the kernel (NTK) regime of that model.

f_lin(x; θ) = f(x; θ₀) + J_θf(x; θ₀)·(θ − θ₀): the first-order Taylor expansion of a network around its
initialisation θ₀. Its features J_θf(x; θ₀) are fixed, so fitting θ is a linear regression on them, with the
model's empirical neural tangent kernel; the network itself learns features as θ moves. Boix-Adserà et al.'s
theory of template tasks is a kernel analysis, and the authors compared it with trained transformers
(docs/papers.md §6).
"""

from __future__ import annotations

from torch import nn
from torch.func import functional_call, jvp

from .registry import rebuildable


@rebuildable
class Linearised(nn.Module):
    """``model`` linearised at its current weights θ₀, which become buffers (fixed); the trainable parameters
    are the shifts θ − θ₀ (``shifts.<i>``, zero at the start, one per distinct parameter of ``model`` in its
    order; tied parameters share one), so the linearised model starts equal to ``model``. ``forward`` takes
    ``model``'s arguments: one Jacobian-vector product, f(θ₀) + J(θ₀)·shift, costing about two forward passes
    of ``model``; every operation of ``model`` must have a forward-mode derivative (a :class:`GPTTransformer`
    needs ``attention="math"``: PyTorch's fused attention kernels have none). Weight decay on the shifts pulls
    θ towards θ₀, not towards 0, and ignores ``model``'s names (its no-decay rules do not apply)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        named = list(model.named_parameters(remove_duplicate=False))
        distinct = list({id(p): p for _, p in named}.values())
        index = {id(p): i for i, p in enumerate(distinct)}
        self.names = [name for name, _ in named]
        self.tied = [index[id(p)] for _, p in named]  # the shift of each name
        self.shifts = nn.ParameterList([nn.Parameter(p.detach().new_zeros(p.shape)) for p in distinct])
        for name, p in named:
            owner, _, leaf = name.rpartition(".")
            module = model.get_submodule(owner)
            delattr(module, leaf)
            module.register_buffer(leaf, p.detach().clone())

    def forward(self, *args, **kwargs):
        start = {name: self.model.get_buffer(name) for name in self.names}
        shift = {name: self.shifts[i] for name, i in zip(self.names, self.tied)}
        value, change = jvp(lambda weights: functional_call(self.model, weights, args, kwargs), (start,), (shift,))
        return value + change
