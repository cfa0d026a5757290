"""The budget-value frontier of the MCKP LP relaxation (every lambda breakpoint at once)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import _checks
from ._hull import Hull, compute_hull
from .errors import AllocationInputError, InfeasibleBudgetError
from .solver import Allocation, Log, _Critical, _finish, _Lower, _Spec


@dataclass(frozen=True, eq=False)
class Frontier:
    """LP optimum (total predicted response) as a function of the budget: a concave, piecewise-linear,
    increasing curve.

    Arrays (length P+1, P = number of distinct breakpoints), ordered by increasing budget:
        lambdas: the multiplier at each vertex of the curve: ``lambdas[0] = inf`` (every user at
            the cheapest level), then the distinct incremental efficiencies in decreasing order;
            between vertices p-1 and p the slope of the curve (d response / d budget) is lambdas[p].
        costs, response: total cost and total predicted response of the allocation at each vertex, i.e. after
            every hull segment with efficiency >= lambdas[p] has been taken. Both are
            non-decreasing; ``costs[0]`` is the minimum feasible budget and ``costs[-1]`` the
            cost of the unconstrained (lambda = 0) allocation.

    Methods ``response_at``, ``lambda_at`` and ``allocation`` answer for any budget in O(log P)
    (response) or O(N) (levels), without re-solving.
    """

    lambdas: np.ndarray
    costs: np.ndarray
    response: np.ndarray
    n_users: int
    n_levels: int
    _hull: Hull = field(repr=False)
    _order: np.ndarray = field(repr=False)  # segments sorted by decreasing efficiency
    _cum_cost: np.ndarray = field(repr=False)  # cost after the first m sorted segments (M+1)
    _cum_value: np.ndarray = field(repr=False)

    def _total(self, budget: float, per_capita: bool) -> float:
        b = _checks.check_budget(budget)
        total = b * self.n_users if per_capita else b
        if total < self.costs[0] - 1e-12 * max(1.0, abs(self.costs[0])):
            m = self.costs[0] / self.n_users if per_capita else self.costs[0]
            raise InfeasibleBudgetError(
                f"budget {b:.10g}{' per capita' if per_capita else ''} is below the cheapest "
                f"allocation (minimum feasible budget = {m:.10g})",
                m,
            )
        return total

    def response_at(self, budget: float, per_capita: bool = False) -> float:
        """LP optimum (total predicted response) at ``budget`` (linear interpolation between vertices;
        flat past the end)."""
        return float(np.interp(self._total(budget, per_capita), self.costs, self.response))

    def lambda_at(self, budget: float, per_capita: bool = False) -> float:
        """lambda* at ``budget``: the slope of the curve there (0 past the last vertex)."""
        total = self._total(budget, per_capita)
        p = int(np.searchsorted(self.costs, total, side="right"))
        return float(self.lambdas[p]) if p < self.lambdas.shape[0] else 0.0

    def levels_at(self, budget: float, per_capita: bool = False, seed: int = 0) -> np.ndarray:
        """Chosen level per user at ``budget`` (same as ``allocation(...).levels``)."""
        return self.allocation(budget, per_capita=per_capita, seed=seed).levels

    def allocation(
        self, budget: float, per_capita: bool = False, seed: int = 0, *, rounding: str = "sample"
    ) -> Allocation:
        """The :class:`Allocation` that :func:`solve` returns for ``budget``, from the stored hulls."""
        total = self._total(budget, per_capita)
        h = self._hull
        cum = self._cum_cost
        mseg = self._order.shape[0]
        k = int(np.searchsorted(cum, total, side="right")) - 1  # segments fully taken
        k = max(0, min(k, mseg))
        taken_users = h.seg_user[self._order[:k]]
        counts = np.bincount(taken_users, minlength=h.n)
        levels = np.take_along_axis(h.vert_levels, counts[:, None], axis=1)[:, 0].astype(np.int32)
        critical = None
        if k < mseg:
            seg = int(self._order[k])
            lam = float(h.seg_eff[seg])
            crit_user = int(h.seg_user[seg])
            cdc = float(h.seg_dc[seg])
            critical = _Critical(crit_user, min(max((total - float(cum[k])) / cdc, 0.0), 1.0), float(h.seg_dv[seg]), cdc,
                                 int(h.vert_levels[crit_user, counts[crit_user] + 1]))
        else:
            lam = 0.0
        return _finish(_Lower(levels, float(self._cum_value[k]), float(cum[k]), lam), total, critical,
                       _Spec(rounding, seed, "per_capita" if per_capita else "total"), self.n_levels,
                       {"method": "frontier"})

    def to_frame(self):
        """The vertices as a pandas DataFrame (lambda_, cost, response) for plots and storage."""
        import pandas as pd

        return pd.DataFrame({"lambda_": self.lambdas, "cost": self.costs, "response": self.response})


def frontier(response, cost, *, log: Log = None) -> Frontier:
    """The whole budget-value frontier of the LP relaxation (DIPN Eq. 2 for every budget at once).

    Args:
        response, cost: N x K arrays (float32/float64, cost >= 0), as for :func:`solve`.
    Returns:
        :class:`Frontier` with arrays ``lambdas`` (decreasing, inf first), ``costs`` and
        ``response`` (non-decreasing) at each breakpoint, and ``response_at`` / ``lambda_at`` /
        ``allocation(budget)`` helpers.

    Memory: about 40 bytes per hull segment (at most N x (K-1) segments), plus N x K int16.
    """
    v, c = _checks.check_pair(response, cost)
    n, k = v.shape
    hull = compute_hull(v, c, log=log)
    order = np.argsort(-hull.seg_eff, kind="stable")
    base_c = float(hull.base_cost.sum())
    base_v = float(hull.base_value.sum())
    cum_c = np.empty(order.shape[0] + 1)
    cum_v = np.empty(order.shape[0] + 1)
    cum_c[0], cum_v[0] = base_c, base_v
    np.cumsum(hull.seg_dc[order], out=cum_c[1:])
    np.cumsum(hull.seg_dv[order], out=cum_v[1:])
    cum_c[1:] += base_c
    cum_v[1:] += base_v
    eff = hull.seg_eff[order]
    # one vertex per distinct efficiency: the last segment of each run of equal efficiencies
    if eff.shape[0]:
        last = np.flatnonzero(np.r_[eff[1:] != eff[:-1], True])
        lambdas = np.r_[math.inf, eff[last]]
        fc = np.r_[cum_c[0], cum_c[last + 1]]
        fv = np.r_[cum_v[0], cum_v[last + 1]]
    else:
        lambdas = np.array([math.inf])
        fc = cum_c[:1].copy()
        fv = cum_v[:1].copy()
    if log is not None:
        log(f"frontier: {lambdas.shape[0] - 1} breakpoints over {n} users")
    if not (np.all(np.diff(fc) >= 0) and np.all(np.diff(fv) >= 0)):  # pragma: no cover
        raise AllocationInputError("internal error: frontier is not monotone")
    return Frontier(
        lambdas=lambdas,
        costs=fc,
        response=fv,
        n_users=n,
        n_levels=k,
        _hull=hull,
        _order=order,
        _cum_cost=cum_c,
        _cum_value=cum_v,
    )
