"""Several budgets at once (DIPN Eq. 4 and its per-capita form Eq. 5).

    max sum_ij v_ij x_ij   s.t.  sum_ij A_m(i,j) x_ij <= B_m  (m = 1..M),  sum_j x_ij = 1,  x >= 0

where A_m(i,j) = C_m[i,j] * G[i,m]: M cost types (C_m, one budget each), and/or overlapping user
groups (boolean masks G, one budget each; a user outside group m does not count against B_m).

Method (sound and exact up to the LP solver's tolerance):
1. the Lagrangian dual D(mu) = mu.B + sum_i max_j (v_ij - sum_m mu_m A_m(i,j)), mu >= 0, is
   minimized approximately through its entropy-smoothed version (softmax at temperature tau,
   D <= D_tau <= D + tau N log K) with scipy's L-BFGS-B, tau decreasing;
2. column generation polishes it exactly: users whose argmax at mu is not clear-cut enter a
   reduced primal LP (all K levels, every other user fixed at its argmax) solved by HiGHS
   (dual simplex, a vertex: at most M fractional users); its budget duals give mu'; fixed
   users whose level is not an argmax at mu' are added and the LP re-solved, until none is.
   Then the primal solution is optimal for the full LP and D(mu') equals its value.
The reported dual bound is D(mu') evaluated exactly (a valid upper bound for any mu >= 0), the
primal value is that of the returned allocation; their difference is the reported gap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog, minimize

from . import _checks
from .errors import AllocationInputError, InfeasibleBudgetError
from .solver import Log


@dataclass(frozen=True)
class MultiAllocation:
    """Result of :func:`solve_multi`.

    levels: int32 (N,) chosen level per user. multipliers: (M,) dual multipliers mu (one per
    budget). response: total predicted response of ``levels``; usage: (M,) their use of each
    budget; budgets: (M,) total budgets. lp_response: LP optimum found; dual_bound: D(multipliers);
    gap = dual_bound - response, relative_gap = gap / |dual_bound|; lp_gap = dual_bound - lp_response
    (the duality gap of the LP solve itself). fractional_users: users split in the LP optimum
    (resolved by seeded sampling, or by 'down' rounding to their least budget-hungry option);
    feasible: every usage <= budget.
    """

    levels: np.ndarray
    multipliers: np.ndarray
    response: float
    usage: np.ndarray
    budgets: np.ndarray
    lp_response: float
    dual_bound: float
    gap: float
    relative_gap: float
    lp_gap: float
    fractional_users: tuple[int, ...]
    feasible: bool
    info: dict = field(default_factory=dict)

    def summary(self) -> dict:
        return {
            "multipliers": [float(x) for x in self.multipliers],
            "response": self.response,
            "usage": [float(x) for x in self.usage],
            "budgets": [float(x) for x in self.budgets],
            "lp_response": self.lp_response,
            "dual_bound": self.dual_bound,
            "gap": self.gap,
            "relative_gap": self.relative_gap,
            "lp_gap": self.lp_gap,
            "fractional_users": list(self.fractional_users),
            "feasible": self.feasible,
        }


class _Constraints:
    """A_m(i,j) = C_m[i,j] * G[i,m] without materializing an N x K x M array when avoidable."""

    def __init__(self, cost_list: list[np.ndarray], groups: np.ndarray | None):
        self.costs = cost_list
        self.groups = groups
        self.m = len(cost_list)
        self.shared = all(x is cost_list[0] for x in cost_list)

    def a(self, m: int, rows=slice(None)) -> np.ndarray:
        c = np.asarray(self.costs[m][rows], dtype=np.float64)
        if self.groups is not None:
            c = c * self.groups[rows, m][:, None]
        return c

    def weighted(self, mu: np.ndarray, rows=slice(None)) -> np.ndarray:
        """sum_m mu_m A_m for the given rows (float64)."""
        if self.shared:
            c = np.asarray(self.costs[0][rows], dtype=np.float64)
            if self.groups is None:
                return c * float(mu.sum())
            return c * (self.groups[rows].astype(np.float64) @ mu)[:, None]
        out = None
        for m in range(self.m):
            if mu[m] == 0.0:
                continue
            term = self.a(m, rows) * mu[m]
            out = term if out is None else out + term
        if out is None:
            c0 = self.costs[0][rows]
            out = np.zeros(c0.shape, dtype=np.float64)
        return out

    def usage_levels(self, levels: np.ndarray, rows=slice(None)) -> np.ndarray:
        r = np.arange(levels.shape[0])
        return np.array([float(self.a(m, rows)[r, levels].sum()) for m in range(self.m)])

    def usage_soft(self, p: np.ndarray, rows=slice(None)) -> np.ndarray:
        return np.array([float((self.a(m, rows) * p).sum()) for m in range(self.m)])


def _parse(response, cost, budgets, groups, per_capita):  # noqa: C901
    v = _checks.as_matrix("response", response)
    _checks.check_finite("response", v)
    n, k = v.shape
    if isinstance(cost, (list, tuple)):
        cost_list = [_checks.as_matrix(f"cost[{m}]", x) for m, x in enumerate(cost)]
        names = [f"cost[{m}]" for m in range(len(cost_list))]
    else:
        arr = np.asarray(cost)
        if arr.ndim == 3:
            arr = _checks.as_matrix("cost", arr, ndim=3)
            cost_list = [arr[:, :, m] for m in range(arr.shape[2])]
            names = [f"cost[:, :, {m}]" for m in range(arr.shape[2])]
        else:
            c = _checks.as_matrix("cost", arr)
            if groups is None:
                raise AllocationInputError(
                    "one N x K cost array needs `groups` (N x M boolean masks, one budget per "
                    "group); for several cost types pass a list of N x K arrays or an N x K x M array"
                )
            g = np.asarray(groups)
            mm = g.shape[1] if g.ndim == 2 else 0
            cost_list = [c] * max(1, mm)
            names = ["cost"] * max(1, mm)
    if not cost_list:
        raise AllocationInputError("cost is empty: need at least one budget constraint")
    checked = set()
    for name, c in zip(names, cost_list, strict=True):
        if c.shape != v.shape:
            raise AllocationInputError(
                f"{name} must have the shape of response {v.shape}, got {c.shape}"
            )
        if id(c) not in checked:
            _checks.check_finite(name, c)
            _checks.check_nonnegative(name, c)
            checked.add(id(c))
    m = len(cost_list)
    g = None
    if groups is not None:
        g = np.asarray(groups)
        if g.shape != (n, m):
            raise AllocationInputError(
                f"groups must be a boolean N x M array ({n} x {m}), got shape {g.shape}"
            )
        if g.dtype != bool:
            if not np.isin(g, (0, 1)).all():
                raise AllocationInputError("groups must be boolean (or 0/1) masks")
            g = g.astype(bool)
    b = np.asarray(budgets, dtype=np.float64).reshape(-1)
    if b.shape[0] != m:
        raise AllocationInputError(f"budgets has {b.shape[0]} entries for {m} constraints")
    if not np.isfinite(b).all():
        raise AllocationInputError(f"budgets must be finite, got {b.tolist()}")
    if per_capita:
        sizes = g.sum(axis=0).astype(np.float64) if g is not None else np.full(m, float(n))
        b = b * sizes
    return v, _Constraints(cost_list, g), b


def _smoothed(v, cons, b, mu0, scale, log):
    """Minimize the entropy-smoothed dual with L-BFGS-B for decreasing temperatures."""
    n, k = v.shape
    spread = float(np.mean(v.max(axis=1) - v.min(axis=1))) + 1e-12 * (abs(float(v.mean())) + 1)
    mu = mu0.copy()
    evals = 0
    for tau in spread * np.array([1e-1, 1e-2, 1e-3, 1e-4]):

        def fg(x, tau=tau):
            nonlocal evals
            evals += 1
            s = v - cons.weighted(x)
            mx = s.max(axis=1, keepdims=True)
            e = np.exp((s - mx) / tau)
            z = e.sum(axis=1, keepdims=True)
            f = float(x @ b) + float((mx[:, 0] + tau * np.log(z[:, 0])).sum())
            p = e / z
            g = b - cons.usage_soft(p)
            return f / scale, g / scale

        res = minimize(fg, mu, jac=True, method="L-BFGS-B", bounds=[(0, None)] * mu.shape[0],
                       options={"maxiter": 500, "ftol": 1e-15, "gtol": 1e-12})
        mu = res.x
        if log:
            log(f"solve_multi: smoothed dual tau={tau:.3g}: mu={np.round(mu, 8).tolist()}")
    return mu, evals


def _dual(v, cons, b, mu):
    s = v - cons.weighted(mu)
    return float(mu @ b) + float(s.max(axis=1).sum()), s


MAX_ROUNDS = 50  # at most this many reduced LPs (each round adds the users whose level the new duals change)


def solve_multi(
    response,
    cost,
    budgets: Sequence[float],
    groups=None,
    per_capita: bool = False,
    seed: int = 0,
    *,
    rounding: str = "sample",
    log: Log = None,
) -> MultiAllocation:
    """Allocation under several budgets (DIPN Eq. 4; Eq. 5 with ``per_capita``).

    Args:
        response: N x K predicted response.
        cost: a list of M arrays N x K (cost types), an N x K x M array, or one N x K array
            together with ``groups``.
        budgets: M budgets (totals; per member of the group, or per user, when ``per_capita``).
        groups: optional N x M boolean masks; constraint m counts only the users of group m
            (groups may overlap).
        seed, rounding: as in :func:`solve` ("sample" or "down") for the fractional users.
    Returns:
        :class:`MultiAllocation` (levels, multipliers, response, usage, lp_response, dual_bound, gap).
    Raises:
        AllocationInputError on bad input; InfeasibleBudgetError when a budget is below its
        cheapest possible use (or when the budgets cannot be met together).
    """
    v, cons, b = _parse(response, cost, budgets, groups, per_capita)
    n, k = v.shape
    m = cons.m
    # necessary condition per constraint: everybody at the level using least of budget m
    for j in range(m):
        least = float(cons.a(j).min(axis=1).sum())
        if least > b[j] + 1e-12 * max(1.0, abs(b[j])):
            raise InfeasibleBudgetError(
                f"budget {j} ({b[j]:.10g}) is below the least it can cost: {least:.10g} with "
                f"every user at the level using least of it (minimum feasible budget = "
                f"{least:.10g})",
                least,
                constraint=j,
            )
    scale = max(1.0, float(np.abs(v).max(axis=1).sum()))
    mu, evals = _smoothed(v, cons, b, np.zeros(m), scale, log)
    tol = 1e-9 * max(1.0, float(np.abs(v).max()))
    _, s = _dual(v, cons, b, mu)
    fixed_lv = s.argmax(axis=1)
    srt = np.sort(s, axis=1)
    margin = srt[:, -1] - srt[:, -2] if k > 1 else np.full(n, np.inf)
    n_c = min(n, max(256, 8 * m))
    cand = np.zeros(n, dtype=bool)
    cand[np.argsort(margin, kind="stable")[:n_c]] = True
    rounds = 0
    res = None
    while True:
        rounds += 1
        ci = np.flatnonzero(cand)
        fi = np.flatnonzero(~cand)
        used_fixed = cons.usage_levels(fixed_lv[fi], fi) if fi.shape[0] else np.zeros(m)
        nc = ci.shape[0]
        a_ub = np.vstack([cons.a(j, ci).reshape(-1) for j in range(m)])
        a_eq = sp.csr_matrix(
            (np.ones(nc * k), np.arange(nc * k), np.arange(0, nc * k + 1, k)), shape=(nc, nc * k)
        )
        res = linprog(
            -np.asarray(v[ci], dtype=np.float64).reshape(-1),
            A_ub=sp.csr_matrix(a_ub),
            b_ub=b - used_fixed,
            A_eq=a_eq,
            b_eq=np.ones(nc),
            bounds=(0, None),
            method="highs-ds",
        )
        if res.status == 2:  # infeasible with these users fixed
            if nc == n:
                raise InfeasibleBudgetError(
                    "the budgets cannot be met together (the LP is infeasible), although each "
                    "one alone is above its minimum",
                    float("nan"),
                )
            n_c = min(n, 4 * nc)
            cand[np.argsort(margin, kind="stable")[:n_c]] = True
            continue
        if res.status != 0:
            raise RuntimeError(f"HiGHS failed on the reduced LP: {res.message}")
        mu_new = np.maximum(0.0, -np.asarray(res.ineqlin.marginals, dtype=np.float64))
        _, s = _dual(v, cons, b, mu_new)
        if fi.shape[0]:
            best = s[fi].max(axis=1)
            cur = s[fi, fixed_lv[fi]]
            viol = fi[best - cur > tol]
        else:
            viol = fi
        if log:
            log(f"solve_multi: round {rounds}: {nc} users in the LP, {viol.shape[0]} to add")
        mu = mu_new
        if viol.shape[0] == 0 or rounds >= MAX_ROUNDS:
            break
        cand[viol] = True
        fixed_lv[viol] = s[viol].argmax(axis=1)
    x = res.x.reshape(nc, k)
    levels = fixed_lv.astype(np.int32)
    levels[ci] = x.argmax(axis=1)
    frac = np.flatnonzero(x.max(axis=1) < 1 - 1e-9)
    frac_users = ci[frac]
    lp_value = float(v[fi, fixed_lv[fi]].sum()) - float(res.fun) if fi.shape[0] else -float(res.fun)
    rng = np.random.default_rng(seed)
    for r, i in zip(frac, frac_users, strict=True):
        p = np.clip(x[r], 0, None)
        if rounding == "sample":
            levels[i] = int(rng.choice(k, p=p / p.sum()))
        elif rounding == "down":
            support = np.flatnonzero(p > 1e-9)
            load = sum(cons.a(j, [i])[0, support] / max(b[j], 1e-300) for j in range(m))
            levels[i] = int(support[np.argmin(load)])
        else:
            raise AllocationInputError(f"rounding must be 'sample' or 'down', got {rounding!r}")
    dual, _ = _dual(v, cons, b, mu)
    value = float(v[np.arange(n), levels].sum())
    usage = cons.usage_levels(levels)
    gap = dual - value
    return MultiAllocation(
        levels=levels,
        multipliers=mu,
        response=value,
        usage=usage,
        budgets=b,
        lp_response=lp_value,
        dual_bound=dual,
        gap=gap,
        relative_gap=gap / abs(dual) if dual else (0.0 if gap == 0 else math.inf),
        lp_gap=dual - lp_value,
        fractional_users=tuple(int(i) for i in frac_users),
        feasible=bool(np.all(usage <= b + 1e-9 * np.maximum(1.0, np.abs(b)))),
        info={
            "method": "smoothed-dual L-BFGS-B + column generation (HiGHS)",
            "function_evaluations": evals,
            "rounds": rounds,
            "lp_users": int(nc),
            "converged": bool(viol.shape[0] == 0),
        },
    )
