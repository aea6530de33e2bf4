"""A model of one's own, identified by iclab: a Hugging Face ``GPT2Model`` backbone between a linear read-in and a
linear read-out, as Garg et al. build theirs, trained briefly on iclab's linear regression and then handed to
``iclab.identify``.

It follows iclab's protocol (``iclab.identification.subject``): ``forward(tokens, n_context)`` reads an interleaved
prompt batch ``(B, 2N, d + 1)`` and returns one prediction per example ``(B, N)`` (read at the x tokens);
``named_states`` returns GPT-2's hidden states after the embedding and after each block, which the per-layer probes
read. Run it with ``python examples/identify_gpt2.py --steps 2000 --out /tmp/gpt2-identify``.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from transformers import GPT2Config, GPT2Model

import iclab
from iclab.prompts import InterleavedFormat
from iclab.rng import generator
from iclab.tasks.linear import GaussianInputs, LinearRegression


class GPT2Regressor(nn.Module):
    """Read-in (d + 1 → width), GPT-2 (no token embedding: ``inputs_embeds``), read-out (width → 1)."""

    prompt_format = InterleavedFormat()

    def __init__(self, d: int, n_context: int, width: int = 64, n_layers: int = 4, n_heads: int = 4):
        super().__init__()
        config = GPT2Config(n_positions=2 * n_context, n_embd=width, n_layer=n_layers, n_head=n_heads, use_cache=False)
        config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0
        self.read_in = nn.Linear(d + 1, width)
        self.backbone = GPT2Model(config)
        self.read_out = nn.Linear(width, 1)

    def _hidden(self, tokens: torch.Tensor):
        return self.backbone(inputs_embeds=self.read_in(tokens), output_hidden_states=True)

    def forward(self, tokens: torch.Tensor, n_context: int) -> torch.Tensor:
        """``(B, ⌈T/2⌉)``: the prediction of y_{k+1} at token 2k, the x token of example k + 1."""
        return self.read_out(self._hidden(tokens).last_hidden_state[:, ::2])[..., 0]

    def named_states(self, tokens: torch.Tensor, n_context: int) -> dict[str, torch.Tensor]:
        """GPT-2's hidden states at every token: after the embedding, then after each block."""
        states = self._hidden(tokens).hidden_states
        return {"embedding" if i == 0 else f"block {i}": state for i, state in enumerate(states)}


def train(model: GPT2Regressor, task, steps: int, batch_size: int = 64, lr: float = 1e-3, seed: int = 0) -> None:
    """Adam on the mean squared error of every prediction, fresh prompts at every step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for step in range(steps):
        prompt = model.prompt_format.encode(task.sample(batch_size, generator(seed, "train", step)))
        loss = (model(prompt.tokens, prompt.n_context) - prompt.targets).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main(argv: list[str] | None = None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--n-context", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    task = LinearRegression(GaussianInputs(args.d), n_context=args.n_context)
    torch.manual_seed(0)
    model = GPT2Regressor(args.d, args.n_context)
    train(model, task, args.steps)
    result = iclab.identify(model, task=task, prompts=args.prompts, out=args.out)
    for answer in result.summary["by_prefix"]:
        print(f"k={answer['k']}: {answer['answer'] or 'none within ε'} (closest {answer['closest']})")
    print(result.folder.report_file)
    return result


if __name__ == "__main__":
    main()
