"""Monotone building blocks (issue #17): the constrained monotonic dense layer of CMNN (Runje &
Shankaranarayana, ICML 2023; our own torch version), its activations (ReLU, ELU and our CLU), the
four-parameter response model (FPM) and DNN-M's sign-constrained sigmoid layers.

Monotonicity holds *by construction* in each incentive attribute with indicator t = +1 (increasing)
or -1 (decreasing): the weights seen by an attribute input are |W| or -|W| on every forward pass,
hidden layers after the first see only t = +1 inputs (non-negative weights), every activation is
non-decreasing and every gate or FPM parameter is computed from the user's features only (never from
the attributes). FORMULAS.md ("Constrained monotonic dense layer", "CoMAN") has the equations; the
choices the papers leave open are stated where they are made.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn
import torch.nn.functional as F

from promo_assets.models.errors import ModelInputError

CONVEX_ACTIVATIONS = ("relu", "elu", "clu")
CLU_ONE = math.sqrt(2.0) / 2.0  # CLU(1)
ADAPTIVE_SHARPNESS = 2.0  # adaptive_masks' default sharpness
# reference CMNN split of a layer's units into [convex | concave | saturated]
BLOCK_RATIO = (7, 7, 2)


def clu(x: torch.Tensor) -> torch.Tensor:
    """CLU, the Convex Linear Unit: CLU(x) = (x + sqrt(x^2 + 1) - 1) / 2.

    The paper's formula (Eq. 13) is not recovered (FORMULAS.md); this is our documented choice of a
    strictly increasing, strictly convex, zero-centred, lower-bounded activation that tends to ReLU:
    CLU(0) = 0; CLU'(x) = (1 + x / sqrt(x^2 + 1)) / 2 in (0, 1); CLU''(x) = 1 / (2 (x^2 + 1)^{3/2}) > 0;
    CLU(x) -> -1/2 as x -> -inf and CLU(x) - x -> 0 as x -> +inf. tests/unit/models/test_monotone.py checks
    these on a grid (first and second differences > 0) and against autograd."""
    return 0.5 * (x + torch.sqrt(x * x + 1.0) - 1.0)


def convex_activation(name: str):
    """The convex, non-decreasing, zero-centred, lower-bounded base activation rho."""
    if name == "relu":
        return torch.relu
    if name == "elu":
        return F.elu
    if name == "clu":
        return clu
    raise ModelInputError(f"unknown monotone activation {name!r}; expected one of {', '.join(CONVEX_ACTIVATIONS)}")


def concave(rho):
    """rho_hat(x) = -rho(-x): concave and non-decreasing."""
    return lambda x: -rho(-x)


def saturated(rho):
    """rho_tilde(x) = rho(x + 1) - rho(1) for x < 0, rho_hat(x - 1) + rho(1) for x >= 0: bounded,
    non-decreasing, convex then concave."""
    def f(x: torch.Tensor) -> torch.Tensor:
        one = rho(torch.ones((), dtype=x.dtype, device=x.device))
        return torch.where(x < 0, rho(x + 1.0) - one, -rho(1.0 - x) + one)
    return f


def block_sizes(units: int, ratio: Sequence[int] = BLOCK_RATIO) -> tuple[int, int, int]:
    """Split `units` into (convex, concave, saturated) counts by `ratio` (every count >= 0, sum = units)."""
    total = float(sum(ratio))
    convex_n = int(round(units * ratio[0] / total))
    concave_n = int(round(units * ratio[1] / total))
    concave_n = min(concave_n, units - convex_n)
    return convex_n, concave_n, units - convex_n - concave_n


class MonotoneDense(nn.Module):
    """Constrained monotonic dense layer: z = x W' + b with W'[k, :] = |W[k, :]| (t_k = 1),
    -|W[k, :]| (t_k = -1), W[k, :] (t_k = 0), reparameterised on every forward pass.

    `indicator`: one t per input (None: all +1, the hidden layers). `activation`: a convex base
    (relu / elu / clu: units split into [convex | concave | saturated] blocks by `ratio`), 'sigmoid'
    (DNN-M) or None (linear output). `forward(x, convex_share=None)`: with `convex_share` (N x 1 in
    (0, 1), the Adaptive Activation's learned ratio) the non-saturated units are softly assigned,
    the first share of them convex, the rest concave (see `adaptive_masks`)."""

    def __init__(self, in_features: int, out_features: int, indicator: Sequence[int] | None = None,
                 activation: str | None = "clu", ratio: Sequence[int] = BLOCK_RATIO):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
        nn.init.uniform_(self.weight, -1.0 / math.sqrt(in_features), 1.0 / math.sqrt(in_features))
        t = torch.ones(in_features) if indicator is None else torch.as_tensor(list(indicator), dtype=torch.float32)
        if t.numel() != in_features or not bool(((t == 1) | (t == -1) | (t == 0)).all()):
            raise ModelInputError(f"monotonicity indicator must hold {in_features} values in {{1, -1, 0}}")
        self.register_buffer("t", t.reshape(-1, 1))
        self.all_increasing = bool((t == 1).all())
        self.activation = activation
        if activation in CONVEX_ACTIVATIONS:
            self.blocks = block_sizes(out_features, ratio)
        elif activation in (None, "sigmoid"):
            self.blocks = (0, 0, 0)
        else:
            raise ModelInputError(f"unknown monotone activation {activation!r}")
        cv, cc, _ = self.blocks
        # CLU's one-expression form of the three blocks (`_clu_blocks`): per unit the convex (+1) /
        # concave (-1) sign q and the saturated mask (not part of the state: derived from the shape)
        self.register_buffer("clu_q", torch.cat([torch.ones(cv), -torch.ones(cc), torch.zeros(out_features - cv - cc)]),
                             persistent=False)
        self.register_buffer("clu_sat", torch.cat([torch.zeros(cv + cc), torch.ones(out_features - cv - cc)]),
                             persistent=False)
        self.register_buffer("one", torch.ones(()), persistent=False)
        self.register_buffer("clu_j", 0.5 * ADAPTIVE_SHARPNESS * (torch.arange(out_features) + 0.5), persistent=False)

    def signed_weight(self) -> torch.Tensor:
        w = self.weight
        if self.all_increasing:
            return w.abs()
        return torch.where(self.t == 0, w, self.t * w.abs())

    def forward(self, x: torch.Tensor, convex_share: torch.Tensor | None = None) -> torch.Tensor:
        return self.activate(x @ self.signed_weight() + self.bias, convex_share)

    def activate(self, z: torch.Tensor, convex_share: torch.Tensor | None = None) -> torch.Tensor:
        """The layer's activation of pre-activations z (see the class docstring)."""
        if self.activation is None:
            return z
        if self.activation == "sigmoid":
            return torch.sigmoid(z)
        if self.activation == "clu":
            return self._clu_blocks(z, convex_share)
        rho = convex_activation(self.activation)
        cv, cc, _ = self.blocks
        n_cc = cv + cc
        head, sat = z[..., :n_cc], z[..., n_cc:]
        if convex_share is None:
            out = torch.cat([rho(head[..., :cv]), concave(rho)(head[..., cv:])], dim=-1)
        else:
            m = adaptive_masks(convex_share, n_cc)
            out = m * rho(head) + (1.0 - m) * concave(rho)(head)
        return torch.cat([out, saturated(rho)(sat)], dim=-1)

    def _clu_blocks(self, x: torch.Tensor, convex_share: torch.Tensor | None) -> torch.Tensor:
        """The CLU layer's [convex | concave | saturated] blocks in one expression (few tensor ops: on
        small batches the op count, not the arithmetic, sets the time per epoch). With
        f_q(y) = (y + q (sqrt(y^2 + 1) - 1)) / 2: convex CLU(x) = f_1(x), concave -CLU(-x) = f_-1(x),
        m CLU + (1 - m)(-CLU(-x)) = f_{2m-1}(x), and saturated (s = +1 for x >= 0, -1 for x < 0)
        = f_{-s}(x - s) + s CLU(1), CLU(1) = sqrt(2) / 2. tests/unit/models/test_monotone.py checks it against the
        block definition."""
        sat = self.clu_sat
        if convex_share is None:
            q = self.clu_q
        else:  # 2 adaptive_masks - 1 = tanh(sharpness (share units - j - 1/2) / 2), 0 on the saturated units
            q = torch.tanh(convex_share * (0.5 * ADAPTIVE_SHARPNESS * (self.blocks[0] + self.blocks[1]))
                           - self.clu_j) * self.clu_q.abs()
        s = sat * torch.sign(x)   # sign(0) = 0 gives the saturated block's value 0 at 0 as well
        y = x - s
        # hypot(y, 1) = sqrt(y^2 + 1); addcmul / add(alpha) fuse the products: fewer passes over (N, M, units)
        return torch.add(0.5 * torch.addcmul(y, q - s, torch.hypot(y, self.one) - 1.0), s, alpha=CLU_ONE)


def adaptive_masks(convex_share: torch.Tensor, units: int, sharpness: float = ADAPTIVE_SHARPNESS) -> torch.Tensor:
    """Adaptive Activation masks (CoMAN Eq. 14, form not recovered; our choice): unit j of the
    `units` non-saturated units is convex with weight sigmoid(sharpness (share * units - j - 1/2)),
    concave with the rest, so a share of 0.3 makes about the first 30 % convex. `convex_share`: any
    shape (..., 1) in (0, 1); returns (..., units). The weights are in (0, 1) and depend on the user
    only, so each unit stays non-decreasing in its pre-activation."""
    j = torch.arange(units, dtype=convex_share.dtype, device=convex_share.device)
    return torch.sigmoid(sharpness * (convex_share * units - j - 0.5))


def fpm_response(params: torch.Tensor, u: torch.Tensor, binary: bool) -> torch.Tensor:
    """Four-parameter model (FPM; FORMULAS.md's documented choice, normalised to the level range),
    link-scale output.

    `params` (..., 4) raw network outputs -> r0, rmax, x0, k; `u` (...) the monotone incentive index
    normalised per user so that u = 0 at the least and u = 1 at the most generous corner of the
    levels' attribute box (`AttributeCurves.unit_index`). With g(u) = sigmoid(k' (u - x0)):

        r(u) = r0 + (rmax - r0) (g(u) - g(0)) / (g(1) - g(0)),   k' = 4 k / (rmax - r0)

    so r0 is the response without incentive (u = 0) and rmax the response at the most generous
    design (u = 1), as the paper describes them; x0 = sigmoid(p2) in (0, 1) is the inflection point
    inside the level range and k = softplus(p3) the sensitivity there (before the 1 / (g(1) - g(0))
    normalisation). Binary: r0 = sigmoid(p0), rmax = r0 + (1 - r0) sigmoid(p1), returned as logit(r);
    other response types: r0 = p0, rmax - r0 = softplus(p1), on the link scale.
    Non-decreasing in u for every parameter value. (Our first form, r0 + (rmax - r0) sigmoid(k'(s - x0))
    on the raw index, reached r0 and rmax only at s = -inf / +inf and saturated: x0 could sit outside the
    levels' index range, where the curve is flat and its gradient vanishes; measured with
    benchmarks/coman_paper.py on the tuning seeds.)"""
    p0, p1, px, pk = params.unbind(-1)
    k = F.softplus(pk)
    if binary:
        r0 = torch.sigmoid(p0)
        span = (1.0 - r0) * torch.sigmoid(p1)
    else:
        r0 = p0
        span = F.softplus(p1)
    x0 = torch.sigmoid(px)
    slope = (4.0 * k / span.clamp_min(1e-4)).clamp(0.05, 50.0)
    g0, g1 = torch.sigmoid(-slope * x0), torch.sigmoid(slope * (1.0 - x0))
    r = r0 + span * (torch.sigmoid(slope * (u - x0)) - g0) / (g1 - g0).clamp_min(1e-6)
    if binary:
        r = r.clamp(1e-6, 1.0 - 1e-6)
        return torch.log(r) - torch.log1p(-r)
    return r


class MonotoneStack(nn.Module):
    """CMNN: MonotoneDense layers on [incentive attributes (t per attribute), user representation
    (t = 0)] then hidden layers (t = +1) and a linear t = +1 output of `out` units."""

    def __init__(self, signs: Sequence[int], rep_dim: int, hidden: Sequence[int], activation: str, out: int = 1):
        super().__init__()
        layers, d, t = [], len(signs) + rep_dim, list(signs) + [0] * rep_dim
        for h in hidden:
            layers.append(MonotoneDense(d, int(h), t, activation))
            d, t = int(h), None
        self.hidden = nn.ModuleList(layers)
        self.output = MonotoneDense(d, out, t, None)

    def forward(self, attrs: torch.Tensor, rep: torch.Tensor, convex_share: torch.Tensor | None = None) -> torch.Tensor:
        """attrs (N, M, A), rep (N, R) -> (N, M, out); `convex_share` (N, 1) or None."""
        share = None if convex_share is None else convex_share[:, None, :]
        first, a = (self.hidden[0] if len(self.hidden) else self.output), attrs.shape[-1]
        w = first.signed_weight()
        # the user part of the first layer once per user, not once per (user, level): same result
        x = first.activate(attrs @ w[:a] + (rep @ w[a:])[:, None, :] + first.bias, share)
        for layer in self.hidden[1:]:
            x = layer(x, share)
        return self.output(x) if len(self.hidden) else x
