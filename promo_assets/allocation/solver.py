"""Single-budget MCKP allocation: exact LP optimum, lambda*, seeded rounding, dual bound.

Implements the LP relaxation of DIPN Eq. 2 (= end-to-end paper Eq. 2), its dual (DIPN Eq. 6,
end-to-end Eq. 3: min_{lambda>=0} lambda*B + sum_i max_j (v_ij - lambda*c_ij)) and the KKT/argmax
decision rule (DIPN Eq. 7, end-to-end Eq. 4), with the per-capita form (DIPN Eq. 5) and the ratio
form of the GNN/hazard paper (Eq. 16).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from . import _checks
from ._hull import Hull, compute_hull, greedy, levels_after
from .decision import choose_levels, decide
from .errors import AllocationInputError, InfeasibleBudgetError

Log = Callable[[str], None] | None

#: above this many users x levels, solve() brackets lambda* from a user sample first
BRACKET_MIN_ELEMENTS = 1 << 20
BRACKET_MIN_USERS = 50_000
_SAMPLE_USERS = 100_000


@dataclass(frozen=True)
class Allocation:
    """An allocation of one level per user under one budget, with its LP certificate.

    Attributes:
        levels: int32 array (N,), the chosen level index per user (integral allocation).
        lambda_: lambda*, the optimal dual multiplier of the budget constraint (DIPN Eq. 6).
        response, cost: total predicted response and total cost of ``levels`` (float64 sums of
            the inputs).
        budget: the total budget the constraint used (budget x N when per capita; 0 for the ratio
            form, whose constraint is sum (c - ratio*v) x <= 0).
        lp_response, lp_cost: optimum of the LP relaxation (its total predicted response) and its
            cost.
        dual_bound: lambda*·budget + sum_i max_j (v_ij - lambda*·c_ij) >= every feasible response
            (equal to lp_response up to rounding, by LP duality).
        gap, relative_gap: dual_bound - response, and gap / |dual_bound|.
        fractional_user: the (at most one) user split between two levels in the LP optimum, or
            None; ``fraction`` is the LP share of its upper level and ``fractional_levels`` its
            (lower, upper) levels. With rounding="sample" the user gets the upper level with
            probability ``fraction`` (seeded; DIPN §3.1), which can exceed the budget by that one
            user's extra cost: ``feasible`` says whether cost <= budget.
        rounded_up: whether the fractional user got its upper level.
        kind: "total", "per_capita" or "ratio"; ``ratio`` the ratio bound for the ratio form.
        n_users, n_levels; ``info``: solver details (method, active users, timings...).
    """

    levels: np.ndarray
    lambda_: float
    response: float
    cost: float
    budget: float
    lp_response: float
    lp_cost: float
    dual_bound: float
    gap: float
    relative_gap: float
    fractional_user: int | None
    fraction: float
    fractional_levels: tuple[int, int] | None
    rounded_up: bool
    feasible: bool
    kind: str
    n_users: int
    n_levels: int
    ratio: float | None = None
    info: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """Scalar fields as a plain dict (for logs and metadata)."""
        return {
            "lambda_": self.lambda_,
            "response": self.response,
            "cost": self.cost,
            "budget": self.budget,
            "lp_response": self.lp_response,
            "lp_cost": self.lp_cost,
            "dual_bound": self.dual_bound,
            "gap": self.gap,
            "relative_gap": self.relative_gap,
            "fractional_user": self.fractional_user,
            "fraction": self.fraction,
            "rounded_up": self.rounded_up,
            "feasible": self.feasible,
            "kind": self.kind,
            "n_users": self.n_users,
            "n_levels": self.n_levels,
            "ratio": self.ratio,
        }


def _rel(gap: float, ref: float) -> float:
    if gap == 0.0:
        return 0.0
    return gap / abs(ref) if ref != 0.0 else math.inf


def round_fractional(theta: float, rounding: str, seed: int) -> bool:
    """Whether the fractional user (LP share ``theta`` of its upper level) gets its upper level:
    seeded sampling (DIPN §3.1) for rounding="sample", never for "down"."""
    if rounding == "sample":
        return bool(np.random.default_rng(seed).random() < theta)
    if rounding != "down":
        raise AllocationInputError(f"rounding must be 'sample' or 'down', got {rounding!r}")
    return False


def certificate(*, low_value: float, low_cost: float, lambda_: float, budget: float, theta: float,
                crit_dv: float, crit_dc: float, rounded_up: bool) -> dict:
    """The LP optimum, dual bound and gap of an allocation given its lower (lambda*+) allocation
    and critical segment (the LP's share `theta` of it, its dv and dc; `rounded_up`: the fractional
    user took its upper level, False when there is none): the scalar fields of `Allocation` (shared
    by `solve` and the chunked solver, which never holds every user's level at once)."""
    lp_value = low_value + theta * crit_dv
    lp_cost = low_cost + theta * crit_dc
    dual = low_value + (lambda_ * (budget - low_cost) if lambda_ > 0 else 0.0)
    value, cost = low_value, low_cost
    if rounded_up:
        value += crit_dv
        cost += crit_dc
    tol = 1e-9 * max(1.0, abs(budget))
    gap = dual - value
    return dict(lambda_=float(lambda_), response=float(value), cost=float(cost), budget=float(budget),
                lp_response=float(lp_value), lp_cost=float(lp_cost), dual_bound=float(dual), gap=float(gap),
                relative_gap=float(_rel(gap, dual)), feasible=bool(cost <= budget + tol))


@dataclass(frozen=True)
class _Spec:
    """How a solve runs: the `rounding` of the fractional user and its `seed`, the allocation's `kind`
    ("total", "per_capita", "ratio"), the ratio bound (`ratio`, for kind "ratio") and a progress `log`."""

    rounding: str
    seed: int
    kind: str
    log: Log = None
    ratio: float | None = None


@dataclass(frozen=True)
class _Lower:
    """The lower (lambda*+) allocation: every user's `levels` (the critical user at its lower level),
    their total `value` and `cost`, and the multiplier `lambda_`."""

    levels: np.ndarray
    value: float
    cost: float
    lambda_: float


@dataclass(frozen=True)
class _Critical:
    """The critical segment of the greedy: its `user`, the LP's share `theta` of it, its `dv`, `dc` and
    the user's `upper_level` (the level the segment leads to)."""

    user: int
    theta: float
    dv: float
    dc: float
    upper_level: int


def _finish(lower: _Lower, budget: float, critical: _Critical | None, spec: _Spec, k: int, info: dict) -> Allocation:
    """Build an Allocation from the lower (lambda*+) allocation and the critical segment (None: none)."""
    levels = lower.levels
    theta = critical.theta if critical is not None else 0.0
    frac_user = critical.user if (critical is not None and theta > 0.0) else None
    rounded_up = False
    lower_level = None
    if frac_user is not None:
        lower_level = int(levels[frac_user])
        rounded_up = round_fractional(theta, spec.rounding, spec.seed)
        if rounded_up:
            levels[frac_user] = critical.upper_level
    figures = certificate(low_value=lower.value, low_cost=lower.cost, lambda_=lower.lambda_, budget=budget, theta=theta,
                          crit_dv=critical.dv if critical is not None else 0.0,
                          crit_dc=critical.dc if critical is not None else 0.0, rounded_up=rounded_up)
    return Allocation(
        levels=levels,
        **figures,
        fractional_user=None if frac_user is None else int(frac_user),
        fraction=float(theta) if frac_user is not None else 0.0,
        fractional_levels=None if frac_user is None else (lower_level, int(critical.upper_level)),
        rounded_up=rounded_up,
        kind=spec.kind,
        n_users=int(levels.shape[0]),
        n_levels=int(k),
        ratio=spec.ratio,
        info=info,
    )


def _solve_on_hull(hull: Hull, remaining: float, rng) -> tuple:
    g = greedy(hull.seg_eff, hull.seg_dc, hull.seg_dv, remaining, rng)
    counts, low = levels_after(hull, g.taken)
    return g, counts, low


def _exact_all(v, c, budget, spec: _Spec, info):
    hull = compute_hull(v, c, log=spec.log)
    base_c = float(hull.base_cost.sum())
    base_v = float(hull.base_value.sum())
    remaining = budget - base_c
    if remaining < 0:  # only through rounding: the cheapest allocation's cost was checked before
        remaining = 0.0
    g, counts, low = _solve_on_hull(hull, remaining, np.random.default_rng(spec.seed))
    critical = None
    if g.crit >= 0:
        crit_user = int(hull.seg_user[g.crit])
        critical = _Critical(crit_user, g.theta, float(hull.seg_dv[g.crit]), float(hull.seg_dc[g.crit]),
                             int(hull.vert_levels[crit_user, counts[crit_user] + 1]))
    info.update(method="hull-greedy", segments=int(hull.seg_eff.shape[0]))
    lower = _Lower(low.astype(np.int32), base_v + g.taken_dv, base_c + g.taken_dc, g.lambda_)
    return _finish(lower, budget, critical, spec, v.shape[1], info)


def _bracket_from_sample(v, c, budget, rng, z):
    """Estimate [lam_lo, lam_hi] containing lambda* from a uniform sample of users."""
    n = v.shape[0]
    ns = min(n, max(min(5_000, n), min(_SAMPLE_USERS, n // 8)))
    idx = np.unique(rng.integers(0, n, ns))
    vs = np.asarray(v[idx], dtype=np.float64)
    cs = np.asarray(c[idx], dtype=np.float64)
    return sample_bracket(vs, cs, budget, n, rng, z)


def sample_bracket(vs, cs, budget, n, rng, z):
    """[lam_lo, lam_hi] containing lambda* with high probability, from ``vs``, ``cs``: the rows of
    a uniform sample (without replacement) of the ``n`` users of a problem with total ``budget``.

    The sample's cost curve C_s(lambda), scaled by n/n_s, estimates the population's; the
    bracket ends are where the sample cost crosses its target -/+ z standard deviations.
    """
    ns = vs.shape[0]
    hull = compute_hull(vs, cs)
    if hull.seg_eff.shape[0] == 0:
        return 0.0, math.inf
    base = float(hull.base_cost.sum())
    target = budget * ns / n
    g = greedy(hull.seg_eff, hull.seg_dc, hull.seg_dv, max(0.0, target - base), rng)
    _, low = levels_after(hull, g.taken)
    cu = np.take_along_axis(cs, low[:, None].astype(np.int64), axis=1)[:, 0]
    sd = float(cu.std()) * math.sqrt(ns * max(0.0, 1.0 - ns / n)) + 1e-12 * abs(target)
    delta = z * sd
    if target - delta < base:
        lam_hi = math.inf
    else:
        gh = greedy(hull.seg_eff, hull.seg_dc, hull.seg_dv, target - delta - base, rng)
        lam_hi = gh.lambda_ * (1 + 1e-7) + 1e-300
        if gh.crit < 0:  # everything fits below target - delta
            lam_hi = float(hull.seg_eff.min()) * (1 - 1e-7)
    gl = greedy(hull.seg_eff, hull.seg_dc, hull.seg_dv, max(0.0, target + delta - base), rng)
    lam_lo = gl.lambda_ * (1 - 1e-7)
    if not lam_lo < lam_hi:
        lam_lo = 0.0
    return max(0.0, lam_lo), lam_hi


_REFINE_MIN_USERS = 20_000


class _Refined(NamedTuple):
    """The bracket [lam_lo, lam_hi] after `_refine`, the users still active, and the cost and value of
    the users it fixed."""

    lam_lo: float
    lam_hi: float
    active: np.ndarray
    fixed_cost: float
    fixed_value: float


def _refine(v, c, act, levels, lam_lo, lam_hi, budget_left, steps=8) -> _Refined:
    """Split [lam_lo, lam_hi] in ``steps`` and keep the piece where the cost crosses the budget.

    Users of ``act`` whose argmax is the same at both ends of that piece are fixed (written to
    ``levels``).
    """
    va = np.asarray(v[act], dtype=np.float64)
    ca = np.asarray(c[act], dtype=np.float64)
    lams = np.linspace(lam_lo, lam_hi, steps + 1)
    buf = np.empty_like(va)
    rows = np.arange(act.shape[0])
    js, cost = [], []
    for lam in lams:
        j = choose_levels(va, ca, float(lam), buf, settle_ties=False)  # see choose_levels
        js.append(j)
        cost.append(float(ca[rows, j].sum()))
    cost = np.array(cost)  # non-increasing in lambda
    if not (cost[0] >= budget_left >= cost[-1]):
        return _Refined(lam_lo, lam_hi, act, 0.0, 0.0)  # the check after the greedy will widen
    q = int(np.flatnonzero(cost >= budget_left)[-1])
    q = min(q, steps - 1)
    same = js[q] == js[q + 1]
    jf = js[q][same]
    levels[act[same]] = jf
    fc = float(ca[rows[same], jf].sum())
    fv = float(va[rows[same], jf].sum())
    return _Refined(float(lams[q]), float(lams[q + 1]), act[~same], fc, fv)


class Scanned(NamedTuple):
    """One block scanned on a bracket: `levels`, the level chosen at lam_hi (first best); `fixed`,
    whether it is also a best level at lam_lo (then it is the rule's choice on the whole bracket:
    scores are linear in lambda); `flat_index`, the flat indices of (row, level) into `response` and
    `cost`, the block's float64 copies (valid until the next call)."""

    levels: np.ndarray
    fixed: np.ndarray
    flat_index: np.ndarray
    response: np.ndarray
    cost: np.ndarray


class BracketScan:
    """The scan that fixes users on a bracket [lam_lo, lam_hi] of lambda*, one block of rows at a
    time, with preallocated float64 buffers (fresh multi-MB temporaries per block cost page faults).

    ``scan(v_block, c_block, lam_lo, lam_hi)`` -> `Scanned`."""

    def __init__(self, rows: int, k: int):
        self.k = k
        self.vb = np.empty((rows, k))
        self.cb = np.empty((rows, k))
        self.sb = np.empty((rows, k))
        kp = -(-k // 8) * 8  # bool rows padded to whole 8-byte words for a fast row-wise "any"
        self.gt = np.zeros((rows, kp), dtype=bool)
        self.flat = np.arange(rows, dtype=np.int64) * k

    def __call__(self, v_block, c_block, lam_lo: float, lam_hi: float) -> Scanned:
        m, k = v_block.shape[0], self.k
        vb, cb, sb, gt = self.vb[:m], self.cb[:m], self.sb[:m], self.gt[:m]
        np.copyto(vb, v_block)
        np.copyto(cb, c_block)
        jh = choose_levels(vb, cb, lam_hi, sb, settle_ties=False)  # see choose_levels
        np.multiply(cb, -lam_lo, out=sb)
        np.add(sb, vb, out=sb)
        fi_all = self.flat[:m] + jh
        sj = sb.reshape(-1)[fi_all]
        np.greater(sb, sj[:, None], out=gt[:, :k])
        words = gt.view(np.uint64)
        anyw = words[:, 0].copy()
        for w in range(1, words.shape[1]):
            anyw |= words[:, w]
        return Scanned(jh, anyw == 0, fi_all, vb, cb)


class Fixed(NamedTuple):
    """What a scan over a bracket fixed: `levels`, each user's level at lam_hi (final for the fixed
    users); `active`, the users not fixed; the fixed users' total `cost` and `value`."""

    levels: np.ndarray
    active: np.ndarray
    cost: float
    value: float


def fix_on_bracket(response, cost, lam_lo: float, lam_hi: float, log: Log = None) -> Fixed:
    """One scan of every user over the bracket [lam_lo, lam_hi] (`Fixed`)."""
    n, k = response.shape
    rows = _checks.rows_per_chunk(k)
    levels = np.empty(n, dtype=np.int32)
    fixed_c = fixed_v = 0.0
    active = []
    scan = BracketScan(min(rows, n), k)
    for s0 in range(0, n, rows):
        m = min(rows, n - s0)
        jh, fx, fi_all, vb, cb = scan(response[s0 : s0 + m], cost[s0 : s0 + m], lam_lo, lam_hi)
        levels[s0 : s0 + m] = jh
        fi = fi_all[fx]
        fixed_c += float(cb.reshape(-1)[fi].sum())
        fixed_v += float(vb.reshape(-1)[fi].sum())
        active.append(np.flatnonzero(~fx) + s0)
        if log is not None and (s0 // rows) % 64 == 63:
            log(f"solve: scanned {s0 + m}/{n} users")
    return Fixed(levels, np.concatenate(active), fixed_c, fixed_v)


def _bracketed(v, c, budget, spec: _Spec, info):
    """Exact solve for large N: users whose choice is constant on a sampled bracket
    [lam_lo, lam_hi] of lambda* are fixed; the exact greedy runs on the others only.

    On [lam_lo, lam_hi] the dual equals that of the reduced problem plus a linear term, so if the
    reduced optimum lies in the bracket it is the global optimum; otherwise the bracket is widened.
    """
    n, k = v.shape
    log = spec.log
    rng = np.random.default_rng(spec.seed)
    attempts = [4.0, 16.0, None]
    for z in attempts:
        if z is None:
            lam_lo, lam_hi = 0.0, math.inf
        else:
            lam_lo, lam_hi = _bracket_from_sample(v, c, budget, rng, z)
        if log:
            log(f"solve: bracket lambda in [{lam_lo:.6g}, {lam_hi:.6g}] (z={z})")
        if lam_lo == 0.0 and math.isinf(lam_hi):
            return _exact_all(v, c, budget, spec, info)
        levels, act, fixed_c, fixed_v = fix_on_bracket(v, c, lam_lo, lam_hi, log)
        if log:
            log(f"solve: {act.shape[0]} of {n} users change level inside the bracket")
        if act.shape[0] > _REFINE_MIN_USERS and not math.isinf(lam_hi):
            lam_lo, lam_hi, act, fc, fv = _refine(v, c, act, levels, lam_lo, lam_hi,
                                                  budget - fixed_c)
            fixed_c += fc
            fixed_v += fv
            if log:
                log(f"solve: refined to [{lam_lo:.6g}, {lam_hi:.6g}], {act.shape[0]} users left")
        hull = compute_hull(v[act], c[act])
        base_c = float(hull.base_cost.sum())
        remaining = budget - fixed_c - base_c
        if remaining < 0:
            continue  # lambda* is above lam_hi
        g, counts, low = _solve_on_hull(hull, remaining, rng)
        lo_ok, hi_ok = g.lambda_interval
        if hi_ok < lam_lo or lo_ok > lam_hi:
            continue
        lam = min(max(g.lambda_, lam_lo), lam_hi)
        levels[act] = low
        critical = None
        if g.crit >= 0 and g.theta > 0:
            lu = int(hull.seg_user[g.crit])
            critical = _Critical(int(act[lu]), g.theta, float(hull.seg_dv[g.crit]), float(hull.seg_dc[g.crit]),
                                 int(hull.vert_levels[lu, counts[lu] + 1]))
        info.update(
            method="bracketed-hull-greedy",
            bracket=(lam_lo, lam_hi),
            active_users=int(act.shape[0]),
            segments=int(hull.seg_eff.shape[0]),
        )
        lower = _Lower(levels, fixed_v + float(hull.base_value.sum()) + g.taken_dv, fixed_c + base_c + g.taken_dc, lam)
        return _finish(lower, budget, critical, spec, k, info)
    raise AssertionError("unreachable: the full bracket always succeeds")


def _unconstrained(v, c, budget, spec: _Spec, info):
    """budget = +inf: every user at the most valuable level (the cheapest among equals)."""
    levels = decide(v, c, 0.0, ratio=0.0)  # ratio=0.0 only lifts the sign check on costs
    rows = _checks.rows_per_chunk(v.shape[1])
    val = cost = 0.0
    for s0 in range(0, v.shape[0], rows):
        lv = levels[s0 : s0 + rows, None].astype(np.int64)
        val += float(np.take_along_axis(v[s0 : s0 + rows], lv, axis=1).sum(dtype=np.float64))
        cost += float(np.take_along_axis(c[s0 : s0 + rows], lv, axis=1).sum(dtype=np.float64))
    info.update(method="unconstrained")
    return _finish(_Lower(levels, val, cost, 0.0), budget, None, spec, v.shape[1], info)


def _solve_checked(v, c, total, spec: _Spec):
    info: dict = {}
    n, k = v.shape
    if math.isinf(total):
        return _unconstrained(v, c, total, spec, info)
    if n * k >= BRACKET_MIN_ELEMENTS and n >= BRACKET_MIN_USERS:
        return _bracketed(v, c, total, spec, info)
    return _exact_all(v, c, total, spec, info)


def _infeasible(min_total: float, total: float, n: int, per_capita: bool, what="budget"):
    if per_capita:
        raise InfeasibleBudgetError(
            f"{what} per capita {total / n:.10g} is below the cheapest allocation: every user at "
            f"their cheapest level costs {min_total / n:.10g} per capita (minimum feasible budget "
            f"per capita = {min_total / n:.10g})",
            min_total / n,
        )
    raise InfeasibleBudgetError(
        f"{what} {total:.10g} is below the cheapest allocation: every user at their cheapest level "
        f"costs {min_total:.10g} in total (minimum feasible budget = {min_total:.10g})",
        min_total,
    )


def solve(
    response,
    cost,
    budget: float,
    per_capita: bool = False,
    seed: int = 0,
    *,
    rounding: str = "sample",
    log: Log = None,
) -> Allocation:
    """Exact optimum of the single-budget MCKP LP relaxation (DIPN Eq. 2 / Eq. 5 per capita).

    Args:
        response, cost: N x K arrays (float32 or float64; not copied) of predicted response and
            cost of every user x level. Costs must be >= 0; a level may be free; level 0 need not
            be the cheapest.
        budget: total budget, or budget per user when ``per_capita`` (total = budget x N).
            ``math.inf`` means unconstrained.
        seed: seeds the rounding of the fractional user (and the sampling used for large N).
        rounding: "sample" (DIPN §3.1: the fractional user takes its upper level with probability
            equal to its LP share; may exceed the budget by that user's extra cost) or "down"
            (always feasible).
        log: optional progress callback.

    Returns:
        :class:`Allocation` (levels, lambda_, response, cost, lp_response, dual_bound, gap, ...).

    Raises:
        AllocationInputError: bad shapes/dtypes, NaN/inf, negative costs, empty input.
        InfeasibleBudgetError: budget below sum_i min_j c_ij (the message gives that minimum).

    Method: each user's upper convex hull of (c_ij, v_ij) and the Sinha-Zoltners greedy by
    incremental efficiency (exact, no iterations); for large N, lambda* is first bracketed from
    a user sample and only users whose level changes inside the bracket enter the greedy.
    """
    v, c = _checks.check_pair(response, cost)
    b = _checks.check_budget(budget)
    _checks.check_solve_size(*v.shape)
    n = v.shape[0]
    total = b * n if per_capita else b
    min_total = _checks.min_cost_total(c, total)
    if log is not None:
        log(f"solve: inputs checked ({n} users x {v.shape[1]} levels, {v.dtype}/{c.dtype})")
    if min_total is not None and total < min_total:
        _infeasible(min_total, total, n, per_capita)
    return _solve_checked(v, c, total, _Spec(rounding, seed, "per_capita" if per_capita else "total", log))


def solve_ratio(
    response,
    cost,
    ratio: float,
    seed: int = 0,
    *,
    rounding: str = "sample",
    log: Log = None,
) -> Allocation:
    """Ratio-budget allocation (GNN/hazard paper Eq. 16): average cost per unit of response <= ratio.

    sum_ij c_ij x_ij / sum_ij v_ij x_ij <= ratio  <=>  sum_ij (c_ij - ratio*v_ij) x_ij <= 0
    (for a positive total response), i.e. the single-budget LP with shifted (signed) costs and
    budget 0; lambda_ is the multiplier of that shifted constraint, so the per-user decision is
    argmax_j v_ij - lambda*(c_ij - ratio*v_ij) (the paper's Eq. 19-20 up to sign conventions).

    Returns an :class:`Allocation` whose ``cost`` and ``lp_cost`` are the real (unshifted) costs,
    ``budget`` = ratio x value (the cost the ratio allows for the allocation's response),
    ``ratio`` = the bound, ``info['achieved_ratio']`` = cost / value; ``dual_bound``/``gap``
    refer to the shifted LP. Allocates an N x K float64 array for the shifted costs.

    Raises InfeasibleBudgetError when even the best user-by-user choice cannot meet the ratio
    (sum_i min_j (c_ij - ratio*v_ij) > 0).
    """
    v, c = _checks.check_pair(response, cost)
    r = _checks.check_budget(ratio, "ratio")
    if not math.isfinite(r) or r < 0:
        raise AllocationInputError(f"ratio must be a finite number >= 0, got {ratio!r}")
    shifted = c.astype(np.float64) - r * v.astype(np.float64)
    min_total = _checks.min_cost_total(shifted)
    if min_total > 0:
        raise InfeasibleBudgetError(
            f"ratio {r:.10g} is infeasible: even choosing per user the level minimizing "
            f"cost - ratio*value leaves sum(cost - ratio*value) = {min_total:.10g} > 0",
            r,
        )
    a = _solve_checked(v, shifted, 0.0, _Spec(rounding, seed, "ratio", log, ratio=r))
    rows = np.arange(v.shape[0])
    real_cost = float(c[rows, a.levels].sum(dtype=np.float64))
    lp_real_cost = a.lp_cost + r * a.lp_response  # shifted cost + ratio*response = real cost
    info = dict(a.info)
    info.update(
        shifted_cost=a.cost,
        shifted_lp_cost=a.lp_cost,
        achieved_ratio=real_cost / a.response if a.response else math.nan,
    )
    return Allocation(
        levels=a.levels,
        lambda_=a.lambda_,
        response=a.response,
        cost=real_cost,
        budget=r * a.response,
        lp_response=a.lp_response,
        lp_cost=float(lp_real_cost),
        dual_bound=a.dual_bound,
        gap=a.gap,
        relative_gap=a.relative_gap,
        fractional_user=a.fractional_user,
        fraction=a.fraction,
        fractional_levels=a.fractional_levels,
        rounded_up=a.rounded_up,
        feasible=bool(real_cost <= r * a.response + 1e-9 * max(1.0, abs(r * a.response))),
        kind="ratio",
        n_users=a.n_users,
        n_levels=a.n_levels,
        ratio=r,
        info=info,
    )


def dual_objective(response, cost, lambda_: float, budget: float) -> float:
    """The dual function lambda*B + sum_i max_j (v_ij - lambda*c_ij) (end-to-end paper Eq. 3).

    An upper bound on the LP (hence on every feasible allocation) for any lambda >= 0.
    """
    v, c = _checks.check_pair(response, cost, allow_negative_costs=True)
    lam = float(lambda_)
    n, k = v.shape
    rows = _checks.rows_per_chunk(k)
    tot = lam * float(budget) if lam > 0 else 0.0
    for s0 in range(0, n, rows):
        vb = np.asarray(v[s0 : s0 + rows], dtype=np.float64)
        cb = np.asarray(c[s0 : s0 + rows], dtype=np.float64)
        tot += float((vb - lam * cb).max(axis=1).sum())
    return tot
