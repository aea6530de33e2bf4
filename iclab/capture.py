"""A training step replayed as a CUDA graph (``train.capture``).

On a GPU a small model's step is bound by kernel launches and Python, not arithmetic: the paper-scale
gpt-linear model reached under 1% of an H200's float32 rate stepping eagerly (docs/performance.md). A
CUDA graph records every kernel of one step (forward, backward, clipping, the optimizer's update) once
and replays them with one launch.

A graph replays fixed memory: it reads its prompts from tensors it owns, so each step's prompts, made on
the CPU from the seed's generators as in an eager run, are copied in from pinned memory first, and the
learning rate is a device tensor the caller fills before each replay. A new prompt shape (a curriculum's
next N) is one eager step, which is also the warm-up capture needs, then a new capture; the old graph
is dropped, since a curriculum never returns to a shape.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class CapturedStep:
    """Replays ``update(tokens, targets, n_context) -> losses (S,)`` as a CUDA graph, one per prompt shape.

    ``update`` must do the whole step in place (gradients, optimizer) with no host synchronisation, and
    leave the gradients as ``None`` before its backward pass, so that the graph owns the ones it writes.
    """

    def __init__(self, update: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor], device: torch.device):
        if device.type != "cuda":
            raise ValueError(f"a captured step needs a CUDA device, got {device}")
        self.update, self.device = update, device
        self.shape = None  # the (tokens, targets, n_context) shape the graph was captured at
        self.graph = self.tokens = self.targets = self.losses = None
        self.captures = 0

    def __call__(self, tokens: torch.Tensor, targets: torch.Tensor, n_context: int) -> torch.Tensor:
        """One step on ``tokens`` and ``targets`` (CPU tensors, stacked over seeds); returns each seed's loss
        ``(S,)`` on the device, valid until the next call."""
        shape = (tokens.shape, tokens.dtype, targets.shape, targets.dtype, n_context)
        if shape != self.shape:
            return self._warm_up_and_capture(tokens, targets, n_context, shape)
        self.tokens.copy_(tokens.pin_memory(), non_blocking=True)
        self.targets.copy_(targets.pin_memory(), non_blocking=True)
        self.graph.replay()
        return self.losses

    def _warm_up_and_capture(self, tokens, targets, n_context, shape) -> torch.Tensor:
        """This step run eagerly on a side stream (the warm-up capture needs: libraries set up, the optimizer's
        state made), then the step captured, unrun, for the steps after it."""
        self.graph = self.losses = None  # the old graph's memory goes back before the new one is made
        self.tokens = tokens.to(self.device)
        self.targets = targets.to(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            losses = self.update(self.tokens, self.targets, n_context).clone()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.losses = self.update(self.tokens, self.targets, n_context)
        self.shape = shape
        self.captures += 1
        return losses
