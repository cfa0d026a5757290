"""Compiled forward and backward of DIPN's uplift chain, isotonic sum and smoothness loss (numba).

For each row (user) and the campaign's K ordered levels, with pre-activations z (N x K) from the
uplift net and one carry factor u_j per level:

    q_0 = ReLU(z_0)  (or, with `signed_offset`, the chain starts empty and the output w_0 = z_0)
    q_j = ReLU(z_j + u_j q_{j-1}),  j = 1..K-1            each uplift weight fed into the next
    cum_l = sum_{j <= l} q_j                               Eq. 12 with the isotonic embedding (Eq. 9)
    smooth = sum_n sum_{j=2..K-1} (s_j - s_{j-1})^2 / (s_j s_{j-1} + eps) / (N K),   s_j = f_j q_j

(f_j = slope factor per level for unequally spaced levels, 1 otherwise; Eq. 16 on the uplift slopes.)

Why compiled code: the chain is sequential in the level, and the level-parallel alternatives cost
O(N K^2) (a K x K carry matrix) or many small tensor ops; measured on the 2-core machine with
K = 100, batch 256 (benchmarks/dipn_paper.py reports the per-epoch ratio), a torch autograd loop,
a numpy loop and the matrix form all made DIPN's step 1.8-2.5x the DNN's, because the per-level
work of both the chain and the smoothness loss dominates. One loop per row in numba does the chain,
the cumulative sum and the smoothness loss in a single pass forward and a single pass backward.
`tests/unit/models/test_models.py` checks values and gradients against a plain autograd implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

_NO_EPS = np.float32(0.0)


@njit(cache=True, fastmath=True)
def _forward(z, u, factor, signed, eps, with_smooth):  # pragma: no cover - compiled
    n, k = z.shape
    q = np.empty_like(z)
    cum = np.empty_like(z)
    smooth = 0.0
    for i in range(n):
        if signed:
            q[i, 0] = z[i, 0]
            prev = np.float32(0.0)
        else:
            v = z[i, 0]
            q[i, 0] = v if v > 0.0 else np.float32(0.0)
            prev = q[i, 0]
        acc = q[i, 0]
        cum[i, 0] = acc
        for j in range(1, k):          # sequential in the level: the chain
            pre = z[i, j] + u[j] * prev
            v = pre if pre > 0.0 else np.float32(0.0)
            q[i, j] = v
            prev = v
            acc += v
            cum[i, j] = acc
        if with_smooth:
            row = np.float32(0.0)
            for j in range(2, k):      # independent pair terms: vectorizable
                s = q[i, j] * factor[j]
                sp = q[i, j - 1] * factor[j - 1]
                d = s - sp
                row += d * d / (s * sp + eps)
            smooth += row
    return q, cum, smooth / (n * k)


@njit(cache=True, fastmath=True)
def _backward(z, u, q, factor, signed, eps, grads, g_smooth):  # pragma: no cover - compiled
    g_q, g_cum = grads  # g_q (0, 0) when no gradient reached q
    has_gq = g_q.shape[0] > 0
    n, k = z.shape
    gz = np.zeros_like(z)
    gu = np.zeros(k, dtype=np.float32)
    scale = np.float32(g_smooth / (n * k))
    hi = np.zeros(k, dtype=np.float32)   # d/ds_j of the pair (j, j-1), j >= 2
    lo = np.zeros(k, dtype=np.float32)   # d/ds_j of the pair (j+1, j), j >= 1
    for i in range(n):
        if scale != 0.0:
            # each pair term (s_j - s_{j-1})^2 / (s_j s_{j-1} + eps): derivative in both of its levels
            for j in range(2, k):
                s = q[i, j] * factor[j]
                sp = q[i, j - 1] * factor[j - 1]
                inv = np.float32(1.0) / (s * sp + eps)
                d = s - sp
                t1 = 2 * d * inv
                t2 = d * d * inv * inv
                hi[j] = scale * (t1 - t2 * sp) * factor[j]
                lo[j - 1] = scale * (-t1 - t2 * s) * factor[j - 1]
        run = np.float32(0.0)    # sum_{l >= j} g_cum_l
        carry = np.float32(0.0)  # gradient reaching q_j through q_{j+1}'s pre-activation
        for j in range(k - 1, 0, -1):
            run += g_cum[i, j]
            g = run + carry + hi[j] + lo[j]
            if has_gq:
                g += g_q[i, j]
            if q[i, j] > 0.0:                  # ReLU active: pre-activation z_j + u_j q_{j-1} > 0
                gz[i, j] = g
                if not (j == 1 and signed):
                    gu[j] += g * q[i, j - 1]
                carry = g * u[j]
            else:
                carry = np.float32(0.0)
        run += g_cum[i, 0]
        g0 = run + (g_q[i, 0] if has_gq else np.float32(0.0))
        if signed:
            gz[i, 0] = g0                      # w_0 = z_0, the signed offset (not in the chain)
        else:
            g0 += carry
            if q[i, 0] > 0.0:
                gz[i, 0] = g0
    return gz, gu


@dataclass(frozen=True)
class ChainSettings:
    """The chain's constants: `factor` a K numpy array of slope factors (ones for equally spaced
    levels), `signed_offset`, and the smoothness loss's `eps` (None: not computed)."""

    factor: np.ndarray
    signed_offset: bool
    eps: float | None


class IsotonicChain(torch.autograd.Function):
    """(q, cum, smooth) = IsotonicChain.apply(z, u, settings); see the module docstring.

    `z` N x K float32 (CPU), `u` K float32 carry factors (u_0 unused), `settings` a ChainSettings.
    Gradients flow to z and u."""

    @staticmethod
    def forward(ctx, z, u, settings):
        factor, signed_offset, eps = settings.factor, settings.signed_offset, settings.eps
        zd = z.detach().contiguous().numpy()
        ud = u.detach().numpy().astype(np.float32)
        ctx.set_materialize_grads(False)
        with_smooth = eps is not None
        q, cum, smooth = _forward(zd, ud, factor, bool(signed_offset), np.float32(eps if with_smooth else 0.0),
                                  with_smooth)
        ctx.save_for_backward(z, u)
        ctx.q, ctx.factor, ctx.signed, ctx.eps = q, factor, bool(signed_offset), np.float32(eps or 0.0)
        ctx.with_smooth = with_smooth
        return (torch.from_numpy(q), torch.from_numpy(cum),
                torch.tensor(smooth if with_smooth else float("nan"), dtype=z.dtype))

    @staticmethod
    def backward(ctx, g_q, g_cum, g_smooth):
        z, u = ctx.saved_tensors
        zd = z.detach().contiguous().numpy()
        # unused outputs come as None (set_materialize_grads(False)): no zero arrays to build and read
        has_gq = g_q is not None
        gq = g_q.detach().contiguous().numpy() if has_gq else np.zeros((0, 0), dtype=np.float32)
        gc = (torch.zeros_like(z) if g_cum is None else g_cum).detach().contiguous().numpy()
        gs = 0.0 if g_smooth is None else float(g_smooth)
        if gs != 0.0 and not ctx.with_smooth:
            raise RuntimeError("IsotonicChain: a gradient reached the smoothness loss, which was not computed (eps=None)")
        gz, gu = _backward(zd, u.detach().numpy().astype(np.float32), ctx.q, ctx.factor, ctx.signed, ctx.eps,
                           (gq, gc), gs)
        return torch.from_numpy(gz), torch.from_numpy(gu), None


def chain_cum(z: np.ndarray, u: np.ndarray, factor: np.ndarray, signed_offset: bool) -> np.ndarray:
    """The chain's cumulative sums `cum` (N x K float32) for scoring: `isotonic_chain(...)[1]` without
    gradients or the smoothness loss, on NumPy arrays (float32: z N x K, u and factor K), with no
    tensor made per call (a one-user DIPN prediction calls it once)."""
    return _forward(z, u, factor, bool(signed_offset), _NO_EPS, False)[1]


def isotonic_chain(z: torch.Tensor, u: torch.Tensor, factor: np.ndarray, signed_offset: bool, eps: float | None):
    """Functional form of IsotonicChain (float32 CPU tensors). `eps` None skips the smoothness loss
    (its value is then NaN), e.g. for scoring. Without gradients (scoring under `inference_mode` /
    `no_grad`) the kernel is called directly, without the autograd Function's set-up: the same
    numbers, a quarter of a one-user DIPN prediction less."""
    factor = np.asarray(factor, dtype=np.float32)
    if not torch.is_grad_enabled() or not (z.requires_grad or u.requires_grad):
        with_smooth = eps is not None
        q, cum, smooth = _forward(z.detach().float().contiguous().numpy(), u.detach().float().numpy(), factor,
                                  bool(signed_offset), np.float32(eps if with_smooth else 0.0), with_smooth)
        return (torch.from_numpy(q), torch.from_numpy(cum),
                torch.tensor(smooth if with_smooth else float("nan"), dtype=torch.float32))
    return IsotonicChain.apply(z.float(), u.float(), ChainSettings(factor, signed_offset, eps))
