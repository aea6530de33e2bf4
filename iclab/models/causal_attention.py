"""One-layer causal linear attention over complex numbers (Zheng et al., docs/papers.md §5).

For tokens e_t = [x_t; x_{t−1}] ∈ C^{2d} the prediction of x_{t+1} is

    ŷ_t = W^{PV} (Σ_{i≤t} e_i e_iᴴ) W^{KQ} e_t / (t − 1),   t = 2, …, L,

with W^{PV} ∈ C^{d×2d} (``w_pv``) and W^{KQ} ∈ C^{2d×2d} (``w_kq``). All L − 1 predictions
of a batch are computed at once: with q_t = W^{KQ}e_t, the vectors S_t q_t (S_t = Σ_{i≤t} e_i e_iᴴ)
come from :func:`causal_gram_apply`, chunked causal linear attention, O(L·d²) per sequence
instead of the O(L²·d²) of recomputing S_t for every prefix. The time axis is cut into chunks of
``CHUNK`` steps, and S_t u_t is the sum of the earlier chunks' Gram matrices (a cumulative sum
of one eᴴe product per chunk) applied to u_t, plus e_i (e_iᴴ u_t) for the steps i ≤ t of t's own
chunk (a masked chunk × chunk product): batched matrix products over all (sequence, chunk)
pairs. S_t depends on the data only: the Gram sums are computed once, in the forward pass, and
the map u ↦ (S_t u_t)_t, linear and self-adjoint, is an autograd function whose backward pass
applies the same map, with the same sums, to the gradient. The model pads the tokens to whole
chunks once and runs over blocks of ``BLOCK`` sequences: the temporaries of the forward and
backward passes are then block-sized, which the allocator can reuse (batch-sized ones are
freshly mapped memory, whose page faults can cost as much as the arithmetic), while each
operation still covers enough work to amortise its per-call overhead. Training goes further: the
half_sse loss (``forward(tokens, targets=...)``) computes its gradients in the same pass, block by
block, so each block's backward runs while its ~2 MB of temporaries are still in cache, where
autograd would keep every batch-sized temporary for a second sweep through memory.

Initialisations: ``"diagonal"`` (W^{KQ} = [[0, 0], [a₀I, 0]], W^{PV} = [b₀I, 0], which makes
ŷ_t = (a₀b₀/(t − 1)) Σ_{i=2}^{t} x_i x_{i−1}ᴴ x_t, one GD step on the in-context OLS loss) or
``"random"`` (i.i.d. complex Gaussian entries of standard deviation ``init_scale``).
``diagonal_only=True`` keeps the weights on the support of the diagonal initialisation (the
diagonals of the W^{KQ} bottom-left block and of the W^{PV} left block): the other entries
start at zero and are masked in the forward pass, so they get no gradient — the same as
projecting after every optimisation step.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import ConfigError
from .registry import rebuildable

INITS = ("diagonal", "random")
BLOCK = 4096  # sequences per block of the forward pass (module docstring): ~30 MB temporaries at L = 100, 2d = 10
CHUNK = 10  # time steps per chunk: small masked products, few Gram sums
FUSED_BLOCK = 256  # sequences per block of the fused loss: ~2 MB temporaries, which stay in cache


def _chunk_apply(keys, keys_h, states, queries):
    """u_tᵀS_tᵀ for every row u_tᵀ of ``queries`` (chunks of sequences, ``(B·n, chunk, D)``), from the
    chunks' tokens, their conjugate transposes and the Gram sums S_tᵀ of the earlier chunks."""
    chunk = keys.shape[-2]
    future = torch.ones(chunk, chunk, dtype=torch.bool, device=keys.device).triu(1)
    scores = (queries @ keys_h).masked_fill_(future, 0)  # e_iᴴ u_t for i ≤ t in the chunk
    return torch.baddbmm(queries @ states, scores, keys)


class _ChunkApply(torch.autograd.Function):
    """u ↦ (S_t u_t)_t with the data (chunks, Gram sums) fixed: the backward pass applies the same map
    to the gradient."""

    generate_vmap_rule = True

    @staticmethod
    def forward(keys, keys_h, states, queries):
        return _chunk_apply(keys, keys_h, states, queries)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:3])

    @staticmethod
    def backward(ctx, grad):
        return None, None, None, _chunk_apply(*ctx.saved_tensors, grad)


def _chunks(tokens: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(keys, their conjugate transposes, Gram sums S_tᵀ of the earlier chunks) of tokens ``(B, L, D)``
    whose length is a multiple of ``chunk``: ``(B·n, chunk, D)``, ``(B·n, D, chunk)``, ``(B·n, D, D)``."""
    b, length, dim = tokens.shape
    n = length // chunk
    # Rows are vectors, so S_t u_t is the row u_tᵀS_tᵀ, and a chunk adds eᴴe to S_tᵀ (e: its rows).
    keys = tokens.reshape(b * n, chunk, dim)
    keys_h = keys.conj().resolve_conj().mT  # materialised once: matmul would copy a lazy conjugate per product
    gram = (keys_h @ keys).reshape(b, n, dim, dim)
    states = gram.cumsum(1).sub_(gram).reshape(b * n, dim, dim)  # S_tᵀ at the end of the previous chunk
    return keys, keys_h, states


def causal_gram_apply(tokens: torch.Tensor, vectors: torch.Tensor, chunk: int = CHUNK) -> torch.Tensor:
    """S_t u_t = Σ_{i≤t} e_i (e_iᴴ u_t) for every t, ``(B, L, D)``, from tokens e and vectors u ``(B, L, D)``.

    Differentiable in ``vectors`` only (the tokens are data). ``chunk`` is the time-chunk size of
    the chunked causal linear attention (L is padded to a multiple of it).
    """
    if tokens.requires_grad:
        raise ValueError("causal_gram_apply does not differentiate through the tokens")
    b, length, dim = tokens.shape
    n = -(-length // chunk)
    if n * chunk != length:  # zero tokens add nothing to S_t
        pad = (0, 0, 0, n * chunk - length)
        return causal_gram_apply(nn.functional.pad(tokens, pad), nn.functional.pad(vectors, pad), chunk)[:, :length]
    out = _ChunkApply.apply(*_chunks(tokens, chunk), vectors.reshape(b * n, chunk, dim))
    return out.reshape(b, length, dim)


def _half_sse_and_gradients(w_kq, w_pv, tokens, targets):
    """(Σ over sequences of ½Σ_t‖ŷ_t − y_t‖², its gradients in W^{KQ} and W^{PV}) from tokens ``(B, L, 2d)``
    and targets ``(B, L − 1, d)``, block by block (module docstring: each block's backward runs while
    its temporaries are still in cache). Gradients follow PyTorch's convention for complex weights
    (the conjugate Wirtinger derivative, times 2): with r_t = ŷ_t − y_t and z_t = S_t W^{KQ} e_t,
    ∂/∂W^{PV} = Σ_t r_t z_tᴴ/(t − 1) and ∂/∂W^{KQ} = Σ_t S_t g_t e_tᴴ with g_t = W^{PV}ᴴ r_t/(t − 1)
    (S_t is self-adjoint, so the backward pass reuses the forward's chunked map)."""
    length, dim = tokens.shape[1:]
    padded = -(-length // CHUNK) * CHUNK
    # 1/(t − 1) at t = 2..L and 0 at t = 1 and at the padding, so the padded positions' residuals vanish.
    weights = torch.zeros(padded, 1, device=tokens.device, dtype=w_pv.real.dtype)
    weights[1:length] = 1 / torch.arange(1, length, device=tokens.device, dtype=weights.dtype)[:, None]
    loss, grad_kq, grad_pv = 0, 0, 0
    for e, y in zip(tokens.split(FUSED_BLOCK), targets.split(FUSED_BLOCK)):
        e = nn.functional.pad(e, (0, 0, 0, padded - length)).reshape(-1, dim)  # (b·padded, 2d)
        y = nn.functional.pad(y, (0, 0, 1, padded - length))  # y_t at position t − 1 ... aligned with z_t
        keys, keys_h, states = _chunks(e.reshape(-1, padded, dim), CHUNK)
        z = _chunk_apply(keys, keys_h, states, (e @ w_kq.T).reshape(-1, CHUNK, dim)).reshape(-1, dim)  # z_t
        residual = (z @ w_pv.T).reshape(y.shape) * weights - y  # r_t, (b, padded, d)
        loss = loss + torch.vdot(residual.flatten(), residual.flatten()).real / 2
        weighted = (residual * weights).flatten(0, 1)  # r_t/(t − 1), (b·padded, d)
        grad_pv = grad_pv + weighted.mT @ z.conj()
        g = _chunk_apply(keys, keys_h, states, (weighted @ w_pv.conj()).reshape(-1, CHUNK, dim)).reshape(-1, dim)
        grad_kq = grad_kq + g.mT @ e.conj()
    return loss, grad_kq, grad_pv


class _HalfSSE(torch.autograd.Function):
    """The summed half_sse loss of the model's weights, its gradients computed with the loss (extra,
    non-differentiable outputs: under vmap a Function may keep nothing else)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(w_kq, w_pv, tokens, targets):
        return _half_sse_and_gradients(w_kq, w_pv, tokens, targets)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_non_differentiable(*output[1:])
        ctx.save_for_backward(*output[1:])

    @staticmethod
    def backward(ctx, grad, *_):
        grad_kq, grad_pv = ctx.saved_tensors
        return grad * grad_kq, grad * grad_pv, None, None


def diagonal_support(d: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks (W^{KQ} ``(2d, 2d)``, W^{PV} ``(d, 2d)``) of the diagonal initialisation's entries."""
    eye = torch.eye(d, dtype=torch.bool, device=device)
    kq = torch.zeros(2 * d, 2 * d, dtype=torch.bool, device=device)
    kq[d:, :d] = eye
    pv = torch.zeros(d, 2 * d, dtype=torch.bool, device=device)
    pv[:, :d] = eye
    return kq, pv


@rebuildable
class CausalLinearAttention(nn.Module):
    """ŷ_t = W^{PV}(Σ_{i≤t} e_i e_iᴴ)W^{KQ}e_t/(t − 1); see the module docstring.

    Args:
        d: dimension of x (tokens have 2d rows).
        init: ``"diagonal"`` or ``"random"``.
        a0, b0: the diagonal initialisation's scalars.
        init_scale: standard deviation of the random initialisation.
        complex: complex weights (complex64/complex128) or real ones (for real sequences).
        diagonal_only: restrict the weights to the diagonal initialisation's support.
        dtype: the real precision (``torch.float32`` or ``torch.float64``).
        generator: the random stream for the random initialisation.
    """

    def __init__(
        self,
        d: int,
        init: str = "diagonal",
        a0: float = 0.1,
        b0: float = 0.1,
        init_scale: float = 0.1,
        complex: bool = True,
        diagonal_only: bool = False,
        dtype: torch.dtype = torch.float32,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if d < 1:
            raise ConfigError(f"d must be >= 1, got {d}")
        if init not in INITS:
            raise ConfigError(f"init must be one of {INITS}, got {init!r}")
        self.d, self.diagonal_only = d, diagonal_only
        if complex:
            dtype = torch.complex64 if dtype == torch.float32 else torch.complex128
        self.w_kq = nn.Parameter(torch.zeros(2 * d, 2 * d, dtype=dtype))
        self.w_pv = nn.Parameter(torch.zeros(d, 2 * d, dtype=dtype))
        with torch.no_grad():
            if init == "diagonal":
                self.w_kq[d:, :d] = a0 * torch.eye(d, dtype=torch.float64)
                self.w_pv[:, :d] = b0 * torch.eye(d, dtype=torch.float64)
            else:
                for p in (self.w_kq, self.w_pv):
                    # A complex normal with E|z|² = init_scale² (real: a plain normal).
                    p.copy_(init_scale * torch.randn(p.shape, generator=generator, dtype=dtype))
            if diagonal_only:
                kq, pv = diagonal_support(d)
                self.w_kq.mul_(kq)
                self.w_pv.mul_(pv)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W^{KQ}, W^{PV}) as used by the forward pass (masked when ``diagonal_only``)."""
        if not self.diagonal_only:
            return self.w_kq, self.w_pv
        kq, pv = diagonal_support(self.d, self.w_kq.device)
        return self.w_kq * kq, self.w_pv * pv

    fused_losses = frozenset({"half_sse"})
    """Loss conventions :meth:`forward` computes itself when given targets (see :mod:`iclab.train`)."""

    def forward(
        self, tokens: torch.Tensor, n_context: int | None = None, targets: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Predictions ŷ_2..ŷ_L, ``(B, L − 1, d)``, from tokens ``(B, L, 2d)`` (``n_context`` unused:
        every token is context for the later ones); with ``targets`` ``(B, L − 1, d)``, the batch's
        half_sse loss ½Σ_t‖ŷ_t − y_t‖² averaged over sequences instead, forward and backward in
        one blocked pass (:func:`_half_sse_and_gradients`; faster than autograd through the predictions:
        ``benchmarks/mesa_epoch.py`` measures by how much, ``benchmarks/results.json`` holds the figure)."""
        w_kq, w_pv = self.weights()
        if targets is not None:
            loss, _, _ = _HalfSSE.apply(w_kq, w_pv, tokens.to(w_kq.dtype), targets.to(w_kq.dtype))
            return loss / tokens.shape[0]
        length = tokens.shape[1]
        # Padded to whole chunks once, rather than block by block in causal_gram_apply.
        tokens = nn.functional.pad(tokens.to(w_kq.dtype), (0, 0, 0, -length % CHUNK))
        steps = torch.arange(1, length, device=tokens.device, dtype=tokens.real.dtype)  # t − 1
        return torch.cat(
            [  # W^{PV} S_t W^{KQ} e_t / (t − 1), block by block
                (causal_gram_apply(block, block @ w_kq.T, CHUNK) @ w_pv.T)[:, 1:length] / steps[:, None]
                for block in tokens.split(BLOCK)
            ]
        )

    def diagonal_part(self) -> CausalLinearAttention:
        """A copy restricted to the diagonal initialisation's support (``diagonal_only``): the per-coordinate
        one-step-GD form that gradient descent from the diagonal initialisation keeps in the population."""
        part = CausalLinearAttention(
            self.d, complex=self.w_kq.is_complex(), diagonal_only=True, dtype=self.w_kq.real.dtype
        ).to(self.w_kq.device)
        part.load_state_dict(self.state_dict())
        with torch.no_grad():  # the stored weights too, not only the forward pass's
            for weight, support in zip((part.w_kq, part.w_pv), diagonal_support(self.d, self.w_kq.device)):
                weight.mul_(support)
        return part

    def diagonal_product(self) -> torch.Tensor:
        """a_j·b_j for each coordinate j: W^{KQ}[d + j, j]·W^{PV}[j, j], ``(d,)``."""
        w_kq, w_pv = self.weights()
        index = torch.arange(self.d, device=w_kq.device)
        return w_kq[self.d + index, index] * w_pv[index, index]

    def off_diagonal_ratio(self) -> float:
        """max over W^{KQ}, W^{PV} of ‖entries off the diagonal support‖_F / ‖entries on it‖_F."""
        ratios = []
        for w, mask in zip(self.weights(), diagonal_support(self.d, self.w_kq.device)):
            w = w.detach()
            ratios.append((w[~mask].abs().norm() / w[mask].abs().norm()).item())
        return max(ratios)
