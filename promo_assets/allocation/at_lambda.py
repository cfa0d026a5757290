"""The decision at a stored multiplier: what `budget_dual` hands to `allocation` and `policy_evaluation`.

`solve` finds λ* and the LP optimum for one set of users. Downstream assets must not solve again:
they apply the stored λ* (DIPN §3.2, Eq. 7) with one rule for the users that are *tied* at λ*
(indifferent between a cheaper and a dearer level: the hull segments of efficiency exactly λ*).

- `tie_share(response, cost, lambda_, budget)`: the share of the tied users' extra cost that the
  LP optimum at `budget` takes (0 when nobody is tied), stored next to λ* in `budget_dual`.
- `decide_at(response, cost, lambda_, share, seed)`: every user gets `decide` at λ* just above the
  tie (the cheaper tied level); the tied users, in a seeded order, then take their dearer tied level
  while the cumulated extra cost stays within `share` of the tied users' total extra; the next one is
  the (single) fractional user, rounded up with probability equal to its remaining share (DIPN §3.1).
  On the users `tie_share` was computed for this is the LP optimum at the budget up to that one
  user; on other users (the holdout) it is the same decision rule.
"""

from __future__ import annotations

import math

import numpy as np

from .decision import decide

_REL = 1e-9  # λ*(1 ± 1e-9): just above / below the tie, robust to the rounding of λ* = dv/dc


def _sides(values, costs, lambda_: float) -> tuple[np.ndarray, np.ndarray]:
    """(levels just above λ: the cheaper tied level, levels just below λ: the dearer tied level)."""
    lam = float(lambda_)
    if not math.isfinite(lam) or lam <= 0:
        low = decide(values, costs, lam)
        return low, low
    return decide(values, costs, lam * (1 + _REL)), decide(values, costs, lam * (1 - _REL))


def _extra(costs, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    rows = np.arange(low.shape[0])
    c = np.asarray(costs)
    return np.asarray(c[rows, high], dtype=np.float64) - np.asarray(c[rows, low], dtype=np.float64)


def tie_share(response, cost, lambda_: float, budget: float) -> float:
    """Share in [0, 1] of the tied users' extra cost that fills `budget` (a total, not per capita)."""
    low, high = _sides(response, cost, lambda_)
    extra = _extra(cost, low, high)
    rows = np.arange(low.shape[0])
    base = float(np.asarray(cost)[rows, low].sum(dtype=np.float64))
    return share_of(base, float(extra.sum()), budget)


def share_of(base_cost: float, extra_total: float, budget: float) -> float:
    """The tie share from the cost of every user's cheaper tied level and the tied users' total
    extra cost (what `tie_share` sums; the chunked version sums them chunk by chunk)."""
    if extra_total <= 0:
        return 0.0
    return float(min(max((float(budget) - base_cost) / extra_total, 0.0), 1.0))


def decide_at(response, cost, lambda_: float, share: float = 0.0, seed: int = 0) -> np.ndarray:
    """Levels (int32, N) at the stored multiplier `lambda_` and tie share `share` (module doc)."""
    low, high = _sides(response, cost, lambda_)
    levels = low.copy()
    tied = np.flatnonzero(low != high)
    up = tied_up(_extra(cost, low, high)[tied], share, seed)
    levels[tied[up]] = high[tied[up]]
    return levels


def tied_up(extra: np.ndarray, share: float, seed: int) -> np.ndarray:
    """Which of the tied users (in user order, with extra costs `extra`) take their dearer level:
    positions into `extra`, drawn in a seeded order until `share` of the total extra is spent, the
    next one (the fractional user) with probability equal to its remaining share."""
    if extra.size == 0 or share <= 0:
        return np.zeros(0, dtype=np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(extra.size)
    ext = extra[order]
    target = min(float(share), 1.0) * float(ext.sum())
    cum = np.cumsum(ext)
    n_up = int(np.searchsorted(cum, target * (1 + 1e-12), side="right"))
    up = order[:n_up]
    if n_up < order.size:  # the fractional user
        left = target - (float(cum[n_up - 1]) if n_up else 0.0)
        if ext[n_up] > 0 and rng.random() < left / ext[n_up]:
            up = order[: n_up + 1]
    return up
