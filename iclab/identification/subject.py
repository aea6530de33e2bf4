"""The model being identified, and the protocol a model of one's own follows.

The protocol (any ``torch.nn.Module``):

* **input**: a prompt batch as iclab's formats build it, ``model(tokens, n_context)`` with float ``tokens``
  ``(B, T, d + 1)``: :class:`~iclab.prompts.InterleavedFormat` (the default: T = 2N tokens [x_1; 0], [0; y_1], …,
  the input rows first and the label row last) or :class:`~iclab.prompts.PairedFormat` (``n_context`` tokens
  [x_i; y_i], then the queries [x_q; 0]);
* **output**: one prediction per position, ``(B, N)`` for interleaved prompts (column k predicts y_{k+1} from the
  tokens up to x_{k+1}: a causal model) or ``(B, Q)`` for paired ones (one per query); a model of another output
  shape is refused;
* **optional**: a method ``named_states(tokens, n_context)`` returning ``{name: (B, T, W)}``, hidden states at every
  token, which the per-layer probes read (iclab's own models need none: their residual stream is read by its
  TransformerLens names, :func:`iclab.models.activations.residual_stream`). An attribute ``prompt_format`` names
  the format the model reads when the caller gives none.

``examples/identify_gpt2.py`` wraps a Hugging Face ``GPT2Model`` this way (a linear read-in, the backbone, a
linear read-out, as Garg et al. do).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from ..config import ConfigError
from ..metrics import prefix_query_predictions, probe_labels
from ..models.activations import residual_stream
from ..prompts import InterleavedFormat, PairedFormat
from ..tasks.base import Episode


class _Placed(nn.Module):
    """A model as iclab's metrics read it: their inputs go to the device and dtype of its first parameter, so a
    model without parameters (a learner written as a module) is given an empty float64 one on the CPU."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        if next(model.parameters(), None) is None:
            self.placement = nn.Parameter(torch.zeros(0, dtype=torch.float64), requires_grad=False)

    def forward(self, tokens: torch.Tensor, n_context: int) -> torch.Tensor:
        return self.model(tokens, n_context)


def _finite(predictions: torch.Tensor, whose: str) -> torch.Tensor:
    """``predictions``, or a :class:`ConfigError` where some are NaN or infinite: distances to a learner are
    taken between finite predictions."""
    bad = ~torch.isfinite(predictions)
    if bad.any():
        raise ConfigError(
            f"{whose} predicted NaN or an infinity at {int(bad.sum())} of {bad.numel()} positions: identify compares "
            "finite predictions (a diverged checkpoint? `iclab eval` shows its loss)"
        )
    return predictions


@dataclass
class Subject:
    """A model to identify, the prompt format it reads and its name (in tables and figures)."""

    model: nn.Module
    prompt_format: InterleavedFormat | PairedFormat
    name: str = "model"

    def __post_init__(self):
        if not isinstance(self.prompt_format, (InterleavedFormat, PairedFormat)):
            raise ConfigError(
                f"identification reads interleaved or paired prompts; {self.name!r} reads "
                f"{type(self.prompt_format).__name__} prompts"
            )
        self.model.eval()
        self._placed = _Placed(self.model)

    @property
    def paired(self) -> bool:
        return isinstance(self.prompt_format, PairedFormat)

    def check(self, episode: Episode) -> None:
        """Forward passes on two prompts: a model whose output is not one finite prediction per position is refused,
        and so is an interleaved model that cannot read a prompt ending in a query x (2N − 1 tokens: how ILWD's
        probe inputs are read, :func:`iclab.metrics.probe_labels`)."""
        e = self._place(episode[:2])
        prompt = self.prompt_format.encode(e)
        what = "queries" if self.paired else "context examples"
        expected = (2, prompt.tokens.shape[1] - prompt.n_context) if self.paired else (2, e.n_context)
        self._checked_call(prompt.tokens, prompt.n_context, expected, f"2 prompts of {expected[1]} {what}")
        if not self.paired:
            self._checked_call(
                prompt.tokens[:, :-1],
                prompt.n_context,
                expected,
                f"2 prompts of {expected[1]} x's, the last without its y",
            )

    def _checked_call(self, tokens: torch.Tensor, n_context: int, expected: tuple[int, int], prompts: str) -> None:
        try:
            with torch.no_grad():
                out = self._placed(tokens, n_context)
        except (RuntimeError, ValueError, IndexError, TypeError) as err:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ConfigError(
                f"{self.name!r} cannot read {type(self.prompt_format).__name__} prompts of shape "
                f"{tuple(tokens.shape)} ({prompts}): {reason} (iclab.identify's docs: the protocol)"
            ) from None
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        if shape != expected:
            raise ConfigError(
                f"{self.name!r} returned {shape} for {prompts}; the protocol asks for one prediction per position, "
                f"{expected} (iclab.identify's docs: the protocol)"
            )
        _finite(out, f"{self.name!r} on {prompts}")

    def _place(self, episode: Episode) -> Episode:
        parameter = next(self._placed.parameters())
        return episode.to(parameter.device, parameter.dtype)

    def predictions(self, episode: Episode) -> torch.Tensor:
        """``(B, N)`` float64: column k predicts y_{k+1} at x_{k+1} from the first k examples (paired models: 0 at
        k = 0, as every learner; interleaved models: their own prediction from x_1 alone)."""
        own = replace(episode, x_query=episode.xs, y_query=episode.ys)
        return _finite(prefix_query_predictions(self._placed, own, self.prompt_format), f"{self.name!r}")

    def probe_predictions(self, episode: Episode, probes: torch.Tensor) -> torch.Tensor:
        """``(B, N, P)`` float64: the labels of P probe inputs ``probes (B, P, d)`` after every prefix k = 0…N − 1
        (0 at k = 0 for a paired model)."""
        if not self.paired:
            return probe_labels(self._placed, episode, probes, self.prompt_format)
        e, probes = self._place(episode), probes.to(next(self._placed.parameters()))
        columns = [torch.zeros(len(e.xs), probes.shape[1], dtype=torch.float64)]
        with torch.no_grad():
            for k in range(1, e.n_context):
                prefix = replace(e, xs=e.xs[:, :k], ys=e.ys[:, :k], x_query=probes, y_query=probes[..., 0])
                prompt = self.prompt_format.encode(prefix)
                columns.append(self._placed(prompt.tokens, k).double().cpu())
        return torch.stack(columns, 1)

    @property
    def has_states(self) -> bool:
        """Whether the model names hidden states: iclab's residual stream or the protocol's ``named_states``."""
        return hasattr(self.model, "activation_names") or hasattr(self.model, "named_states")

    def state_names(self) -> list[str]:
        """The names of the hidden states the probes read, in the model's order."""
        if hasattr(self.model, "activation_names"):
            names = self.model.activation_names()
            return residual_stream(sum(name.endswith(".hook_resid_post") for name in names))
        return []  # the protocol's named_states: known once they are computed

    def _named(self, tokens: torch.Tensor, n_context: int) -> dict[str, torch.Tensor]:
        if hasattr(self.model, "activation_names"):
            _, found = self.model(tokens, n_context, activations=self.state_names())
            return found
        return dict(self.model.named_states(tokens, n_context))

    def states(self, episode: Episode) -> dict[str, torch.Tensor]:
        """``{name: (B, N − 1, W)}`` float64: each named hidden state where the model predicts y_{k+1} after
        k = 1…N − 1 examples (the token x_{k+1}: token 2k of an interleaved prompt, the query of a paired prompt
        of k examples)."""
        e = self._place(episode)
        with torch.no_grad():
            if not self.paired:
                found = self._named(self.prompt_format.encode(e).tokens, e.n_context)
                at = 2 * torch.arange(1, e.n_context)
                return {name: value[:, at].double().cpu() for name, value in found.items()}
            by_k = []
            for k in range(1, e.n_context):
                query = slice(k, k + 1)
                prefix = replace(e, xs=e.xs[:, :k], ys=e.ys[:, :k], x_query=e.xs[:, query], y_query=e.ys[:, query])
                found = self._named(self.prompt_format.encode(prefix).tokens, k)
                by_k.append({name: value[:, k].double().cpu() for name, value in found.items()})
        return {name: torch.stack([found[name] for found in by_k], 1) for name in by_k[0]}
