"""The one per-user decision rule: the level with the largest reduced value at a multiplier.

DIPN Eq. 7, end-to-end Eq. 4 and GNN/hazard Eq. 19 all decide a user's level the same way: given
the predicted value v_ij and cost c_ij of each level j and a dual multiplier lambda >= 0, take

    level_i = argmax_j (v_ij - lambda * c_ij)

(the ratio form of the GNN/hazard paper replaces c by c - ratio * v). Every caller in the project
(the solver's scans, `decide` / `OnlinePolicy`, the joint customer + merchant allocation, the EOM
evaluation at many multipliers) uses `choose_levels` below, so they break ties the same way.

**Tie rule.** Among the levels with the largest reduced value v - lambda*c (compared exactly, as
floats), the *cheaper* level wins (smaller c: the budget-safe side of lambda), then the *lower
index*. At lambda = inf the reduced value is -c: the cheapest level, then the more valuable one,
then the lower index.
"""

from __future__ import annotations

import math

import numpy as np

from . import _checks
from .errors import AllocationInputError

_SMALL = 1 << 16  # cells (users x levels) that `decide` checks in one pass
_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))


def choose_levels(vb: np.ndarray, cb: np.ndarray, lambda_: float, out: np.ndarray | None = None, *,
                  settle_ties: bool = True) -> np.ndarray:
    """The decision rule on one block: float64 arrays `vb`, `cb` (rows x K) and one multiplier
    `lambda_` (>= 0, may be inf) -> int64 level per row, ties broken by the module's tie rule.

    `out` is an optional scratch buffer of the block's shape (overwritten; the solver reuses one).
    `settle_ties=False` skips the tie pass (it costs as much as the rest) and keeps the first best
    level: only for the solver's bracket scans, which fix a user only when that level is also a
    best level at the other end of a bracket [lam_lo, lam_hi]. Scores are linear in lambda, so it
    is then the *unique* best strictly inside the bracket (a level tied with it is worse there or
    costs and is worth the same with a higher index): the rule's choice at every multiplier
    inside; the other users stay undecided and the exact greedy decides them."""
    if out is None:
        out = np.empty(vb.shape, dtype=np.float64)
    if math.isinf(lambda_):  # reduced value -c: cheapest, then most valuable, then lowest index
        mc = cb.min(axis=1, keepdims=True)
        np.copyto(out, -np.inf)
        np.copyto(out, vb, where=cb == mc)
        return out.argmax(axis=1)
    np.multiply(cb, -lambda_, out=out)
    np.add(out, vb, out=out)
    j = out.argmax(axis=1)  # the first best level; rows with a tie are rare, settled below
    if not settle_ties:
        return j
    rows = np.arange(out.shape[0])
    best = out[rows, j]
    out[rows, j] = -np.inf  # a row ties when its second best equals its best (one pass, no mask)
    tied = np.flatnonzero(out.max(axis=1) >= best)
    if tied.size:
        out[tied, j[tied]] = best[tied]
        key = np.where(out[tied] >= best[tied, None], cb[tied], np.inf)
        j[tied] = key.argmin(axis=1)  # the cheapest of the tied levels, then the lowest index
    return j


def choose_level(response: list[float], cost: list[float], lambda_: float) -> int | None:
    """`choose_levels` for one user, `response` and `cost` given as Python floats (a service's one-user
    request: no NumPy call per step), or None when a value is not finite or a cost is negative (the
    caller then takes `decide`'s checked path). The same float64 arithmetic (cost * -lambda_ +
    response), the same tie rule."""
    isfinite = math.isfinite
    if not all(map(isfinite, response)) or not all(map(isfinite, cost)) or min(cost) < 0:
        return None
    if math.isinf(lambda_):  # reduced value -c: cheapest, then most valuable, then lowest index
        mc = min(cost)
        best = max(x for x, y in zip(response, cost) if y == mc)
        return next(j for j, (x, y) in enumerate(zip(response, cost)) if y == mc and x == best)
    neg = -lambda_
    r = [y * neg + x for x, y in zip(response, cost)]
    best = max(r)
    j = r.index(best)  # the first best level
    tied = [k for k, x in enumerate(r) if x >= best]
    if len(tied) > 1:  # the cheapest of the tied levels, then the lowest index
        j = min(tied, key=cost.__getitem__)
    return j


def decide(response, cost, lambda_: float, ratio: float | None = None) -> np.ndarray:
    """Per-user decision at a given multiplier (DIPN Eq. 7; end-to-end Eq. 4; GNN/hazard Eq. 19).

    levels_i = argmax_j (v_ij - lambda_*c_ij) (with c replaced by c - ratio*v for the ratio form),
    ties by the module's rule (the cheaper level, then the lower index). Returns an int32 array
    (N,). Accepts 1-D arrays (K,) for a single user (returns shape (1,)).
    """
    v = np.asarray(response)
    c = np.asarray(cost)
    if v.ndim == 1:
        v, c = v[None, :], c[None, :] if c.ndim == 1 else c
    lam = _multiplier(lambda_)
    if (ratio is None and v.shape == c.shape and v.ndim == 2 and v.shape[0] == 1 and v.shape[1] > 0
            and v.dtype in _FLOATS and c.dtype in _FLOATS):
        level = choose_level(v[0].tolist(), c[0].tolist(), lam)  # one user: plain floats, the same rule
        if level is not None:
            return np.array([level], dtype=np.int32)
    if (ratio is None and v.dtype == np.float64 and c.dtype == np.float64 and v.ndim == 2 and v.shape == c.shape
            and 0 < v.shape[0] * v.shape[1] <= _SMALL):
        # a few users (a service's request): one pass of checks, then the rule (the full checks below
        # name the first bad entry when there is one)
        with np.errstate(over="ignore", invalid="ignore"):
            if math.isfinite(v.sum() + c.sum()) and c.min() >= 0:
                return choose_levels(v, c, lam).astype(np.int32)
    v, c = _checks.check_pair(v, c, allow_negative_costs=ratio is not None)
    n, k = v.shape
    out = np.empty(n, dtype=np.int32)
    rows = _checks.rows_per_chunk(k)
    for s0 in range(0, n, rows):
        vb = np.asarray(v[s0 : s0 + rows], dtype=np.float64)
        cb = np.asarray(c[s0 : s0 + rows], dtype=np.float64)
        if ratio is not None:
            cb = cb - float(ratio) * vb
        out[s0 : s0 + rows] = choose_levels(vb, cb, lam)
    return out


def decide_at_lambdas(response, cost, lambdas) -> np.ndarray:
    """The decision at each of L multipliers: an L x N int64 array whose row l is the levels at
    lambdas[l] (the same rule and tie rule as `decide`). Response and cost are N x K; cost may be
    negative (evaluation code passes whatever the model predicted)."""
    v = np.asarray(response, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    if v.ndim != 2 or v.shape != c.shape:
        raise AllocationInputError(f"response {v.shape} and cost {c.shape} must be matching N x K arrays")
    lams = [_multiplier(x) for x in np.atleast_1d(np.asarray(lambdas, dtype=np.float64))]
    n, k = v.shape
    out = np.empty((len(lams), n), dtype=np.int64)
    rows = _checks.rows_per_chunk(k)
    buf = np.empty((min(rows, n), k))
    for s0 in range(0, n, rows):
        vb, cb = v[s0 : s0 + rows], c[s0 : s0 + rows]
        for i, lam in enumerate(lams):
            out[i, s0 : s0 + rows] = choose_levels(vb, cb, lam, buf[: vb.shape[0]])
    return out


def _multiplier(lambda_) -> float:
    lam = float(lambda_)
    if math.isnan(lam) or lam < 0:
        raise AllocationInputError(f"lambda_ must be >= 0, got {lambda_!r}")
    return lam
