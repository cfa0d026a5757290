"""Comparisons at equal spend: the matched true value, the cost-matched random reference, the doubly
robust EOM and the frontier area ratio (AUCC generalized to K > 2).

Why: a model's allocation spends whatever its *predicted* costs imply; under `cost: redeemed` that
can be several % above the budget in truth, and the plain `true_value / oracle_value` then credits
the model for spending more than the oracle. Everything here compares policies at the same spend.

- `matched_true_value` (simulated campaigns): the budget given to the allocator (`solve`, through
  the model's `frontier`, which returns exactly `solve`'s allocation for any budget without
  re-solving) is bisected until the allocation's TRUE per-capita cost equals the budget within
  `rel_tol` (0.1 %) from below, or is the closest the model's frontier allows. Its true value over
  the oracle's (`pct_oracle`) can then never exceed 1.
- The random reference is a *stochastic* policy, a mix of levels: `random_mix(level_costs, share)`
  moves from everyone at the cheapest level (share 0) through a uniformly random level (share 1)
  to everyone at the dearest level (share 2). Its EOM (self-normalized IPW with weights
  pi(t_i) / p_i, so every holdout event counts, not only those whose level a random draw hit) is a
  continuous function of the share, so `match_mix` scales it until its EOM (or DR, or true) cost
  equals the budget to 1e-9.
- Doubly robust EOM (Dudik, Langford & Li 2011), with a self-normalized correction:
      V_DR = 1/N sum_i sum_k pi_ik m_y(x_i, k) + sum_i rho_i (y_i - m_y(x_i, t_i)) / sum_i rho_i,
  rho_i = pi_i(t_i) / p_i (for a deterministic allocation: 1{a_i = t_i} / p_i); the same for the
  cost with m_z. m_y, m_z are the direct-method outcome model's predictions (N x K, fitted on the
  training days only, see `promo_assets.evaluation.outcome`). Unbiased when either the outcome
  model or the propensities are right; with a good outcome model its variance is that of the
  residuals, not of the responses, which is what matters when only ~1/K of the holdout events
  match a policy (K = 100). `dr_interval` gives its 95 % interval from the influence function (delta
  method) with a Student-t quantile on the effective number of matched events; `bootstrap_dr` the
  Poisson-bootstrap percentile interval (outcome model held fixed); `dr_q_at_budget` is the
  Q-style matched value: the KKT multiplier searched until the DR cost equals the budget.
- `area_ratio`: the area between a policy's cost-response frontier and the all-cheapest value,
  over the budget range from the cheapest allocation to the uniformly random one, divided by the
  same area of the random reference (1 = random, > 1 better). AUCC (`aucc`) stays for two-arm
  campaigns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from promo_assets.evaluation.eom import (
    EvaluationError,
    QResult,
    _as_levels,
    _as_matrix,
    _checked,
    bootstrap_eom,
    lambda_upper_bound,
    levels_at_lambdas,
    prediction_matrices,
    q_search,
)
from promo_assets.evaluation.records import LoggedEvents, OutcomePredictions, Truth
from promo_assets.evaluation.truth import allocate, true_policy_value

__all__ = [
    "MATCH_REL_TOL",
    "MatchedSpend",
    "MixMatch",
    "IntervalStrategy",
    "InfluenceInterval",
    "BootstrapInterval",
    "matched_true_value",
    "oracle_values",
    "pct_oracle_at_matched_spend",
    "spend_ratio",
    "pct_oracle",
    "random_mix",
    "match_mix",
    "mix_true_value",
    "ipw_mix",
    "dr_batch",
    "dr_mix",
    "bootstrap_dr",
    "dr_interval",
    "dr_q_at_budget",
    "frontier_area",
    "area_ratio",
]

MATCH_REL_TOL = 1e-3  # matched true cost within 0.1 % of the budget
MATCH_NOTE_TOL = 5e-3  # a matched cost further than 0.5 % from the budget gets a note


# ------------------------------------------------------------------------- spend and the oracle
@dataclass(frozen=True)
class MatchedSpend:
    """A model's allocation with its true cost matched to the budget.

    value, cost: true per-capita value and cost of the matched allocation (NaN when impossible);
    budget_given: the per-capita budget given to the allocator for it; levels: the allocation
    (None when impossible); n_iter: bisection steps; converged: |cost - budget| <= rel_tol x budget;
    note: '' or why the budget could not be matched within 0.5 % (what the closest allocation spends).
    """

    value: float
    cost: float
    budget_given: float
    levels: np.ndarray | None
    n_iter: int
    converged: bool
    note: str = ""


def matched_true_value(coefficients, truth: Truth, budget_per_capita: float, *, rel_tol: float = MATCH_REL_TOL,
                       max_iter: int = 100, seed: int = 0, frontier=None) -> MatchedSpend:
    """The true value of a model's allocation at the budget that makes its TRUE cost equal the budget.

    Takes the model's `coefficients` (its predicted (response, cost) pair, N x K each), the `Truth`
    (N x K expected response and cost), the per-capita budget b, the relative tolerance, the bisection cap, the seed of the
    allocator's rounding, and optionally the model's precomputed `promo_assets.allocation.frontier`.
    Bisects the per-capita budget B given to the allocator (its allocation at B is
    `frontier.allocation(B)`, the same as `solve(response, cost, B)`) between the model's cheapest
    and its unconstrained allocation, keeping the largest B whose true cost is <= b, until that cost
    is >= b (1 - rel_tol). The allocator's LP optimum splits at most one user between two levels;
    that user counts by its LP share (the expectation of the allocator's seeded rounding), so the
    true cost moves continuously with B and small holdouts are matched as closely as large ones
    (`levels` is the allocation with that user rounded down). When even the unconstrained allocation costs less than b in truth, that
    one is returned (the closest the frontier allows; `converged` False, `note` says so); when the
    cheapest allocation already costs more than b in truth, the result is empty (NaN, `note`).
    """
    from promo_assets.allocation import frontier as make_frontier

    v = _as_matrix(coefficients[0], "response")
    c = _as_matrix(coefficients[1], "cost", v.shape[0], v.shape[1])
    tv = _as_matrix(truth.response, "true_response", v.shape[0], v.shape[1])
    tc = _as_matrix(truth.cost, "true_cost", v.shape[0], v.shape[1])
    b = float(budget_per_capita)
    if not math.isfinite(b) or b <= 0:
        raise EvaluationError(f"budget_per_capita must be a finite number > 0, got {budget_per_capita!r}")
    fr = frontier if frontier is not None else make_frontier(v, c)
    n = v.shape[0]
    rows = np.arange(n)

    def at(budget: float):
        res = fr.allocation(budget, per_capita=True, seed=seed, rounding="down")
        lv = np.asarray(res.levels, dtype=np.int64)
        val, cst = float(tv[rows, lv].mean()), float(tc[rows, lv].mean())
        if res.fractional_user is not None and res.fraction > 0:  # the LP's one split user, by its share
            u, (low, up) = int(res.fractional_user), res.fractional_levels
            val += res.fraction * float(tv[u, up] - tv[u, low]) / n
            cst += res.fraction * float(tc[u, up] - tc[u, low]) / n
        return lv, val, cst

    lo = float(fr.costs[0]) / n
    hi = float(fr.costs[-1]) / n
    lv, val, cst = at(lo)
    if cst > b * (1 + rel_tol):
        return MatchedSpend(math.nan, math.nan, math.nan, None, 0, False,
                            f"the model's cheapest allocation already costs {cst:.4g} per capita in truth, "
                            f"above the budget {b:.4g}")
    if cst >= b * (1 - rel_tol):
        return MatchedSpend(val, cst, lo, lv, 0, True)
    top = at(hi)
    if top[2] <= b:
        ok = top[2] >= b * (1 - rel_tol)
        return MatchedSpend(top[1], top[2], hi, top[0], 0, ok,
                            "" if top[2] >= b * (1 - MATCH_NOTE_TOL) else f"the model's whole frontier costs at most {top[2]:.4g} per capita "
                            f"in truth, below the budget {b:.4g}: matched at its dearest allocation")
    best = (lv, val, cst, lo)
    it = 0
    while it < max_iter and hi - lo > 1e-12 * max(1.0, hi):
        it += 1
        mid = 0.5 * (lo + hi)
        lv, val, cst = at(mid)
        if cst <= b:
            lo, best = mid, (lv, val, cst, mid)
            if cst >= b * (1 - rel_tol):
                return MatchedSpend(val, cst, mid, lv, it, True)
        else:
            hi = mid
    lv, val, cst, given = best
    far = cst < b * (1 - MATCH_NOTE_TOL)
    return MatchedSpend(val, cst, given, lv, it, False,
                        f"closest true cost the frontier allows below the budget {b:.4g}: {cst:.4g} per capita"
                        if far else "")


def oracle_values(truth: Truth, budgets, *, seed: int = 0) -> list[float]:
    """The oracle's true per-capita value at each per-capita budget: the allocator run on the true
    curves (`Truth`, N x K), its LP optimum where that is larger (so that no allocation whose true cost is
    within the budget exceeds it). The denominator of `pct_oracle`."""
    tv = _as_matrix(truth.response, "true_response")
    tc = _as_matrix(truth.cost, "true_cost", tv.shape[0], tv.shape[1])
    out = []
    for b in budgets:
        res = allocate(tv, tc, float(b), seed=seed)
        value, _ = true_policy_value(np.asarray(res.levels, dtype=np.int64), tv, tc)
        out.append(max(value, float(res.lp_response) / tv.shape[0]))
    return out


def pct_oracle_at_matched_spend(coefficients, truth: Truth, budgets, *, seed: int = 0) -> list[float]:
    """A model's share of the oracle per per-capita budget: the true value of its allocation
    (`coefficients`, its predicted (response, cost)) at matched true spend (`matched_true_value`) over
    `oracle_values` (NaN where either is missing)."""
    oracle = oracle_values(truth, budgets, seed=seed)
    return [pct_oracle(matched_true_value(coefficients, truth, float(b), seed=seed).value, o)
            for b, o in zip(budgets, oracle)]


def _safe_ratio(num, den) -> float:
    """num / den as a float; NaN when either is missing or not finite, or den <= 0."""
    try:
        a, b = float(num), float(den)
    except (TypeError, ValueError):
        return math.nan
    if not (math.isfinite(a) and math.isfinite(b)) or b <= 0:
        return math.nan
    return a / b


def spend_ratio(cost: float, budget_per_capita: float) -> float:
    """Per-capita cost / per-capita budget (NaN when either is missing or the budget is 0)."""
    return _safe_ratio(cost, budget_per_capita)


def pct_oracle(matched_value: float, oracle_value: float) -> float:
    """matched_true_value / oracle_value as a fraction (NaN when either is missing or the oracle <= 0).

    `oracle_value` should be the oracle's LP optimum at the budget (or its allocation's true value
    when larger): every allocation whose true cost is <= the budget has a true value <= it, so a
    matched value (true cost <= budget) never gives more than 1.
    """
    return _safe_ratio(matched_value, oracle_value)


# ------------------------------------------------------------------------ the random reference
def random_mix(level_costs, share: float) -> np.ndarray:
    """The random reference's mix of levels (K probabilities) at `share` in [0, 2].

    share 0: everyone at the cheapest level of `level_costs`; share 1: a uniformly random level;
    share 2: everyone at the dearest level; linear in between:
      s <= 1: (1 - s) x cheapest + s x uniform;   s > 1: (2 - s) x uniform + (s - 1) x dearest.
    """
    lc = np.asarray(level_costs, dtype=np.float64)
    if lc.ndim != 1 or lc.size < 1 or not np.all(np.isfinite(lc)):
        raise EvaluationError(f"level_costs must be K finite numbers, got {lc!r}")
    s = float(share)
    if not 0 <= s <= 2:
        raise EvaluationError(f"share must lie in [0, 2], got {share!r}")
    k = lc.size
    uniform = np.full(k, 1.0 / k)
    end = np.zeros(k)
    if s <= 1:
        end[int(np.argmin(lc))] = 1.0
        return (1 - s) * end + s * uniform
    end[int(np.argmax(lc))] = 1.0
    return (2 - s) * uniform + (s - 1) * end


@dataclass(frozen=True)
class MixMatch:
    """The random reference's mix scaled to a budget (`match_mix`): the `mix` (K probabilities; None
    when even the cheapest mix costs more than the budget), its `share` (see `random_mix`), its
    per-capita `cost` and a `note` ('' or why the budget could not be matched)."""

    mix: np.ndarray | None
    share: float
    cost: float
    note: str


def match_mix(cost_of_mix: Callable[[np.ndarray], float], level_costs, budget_per_capita: float, *,
              what: str = "EOM", rel_tol: float = 1e-9, max_iter: int = 200) -> MixMatch:
    """Scale the random reference's mix until cost_of_mix(mix) equals the budget.

    Takes a function of a mix (K probabilities) returning its per-capita cost under some estimator
    (EOM, DR or the truth), the per-level costs that order the levels (`random_mix`), the budget and
    the estimator's name for messages. Bisection on the share in [0, 2].
    Returns a MixMatch: mix None and note set when even the cheapest mix costs more than the budget;
    the dearest mix and a note when even it costs less.
    """
    b = float(budget_per_capita)
    if not math.isfinite(b) or b <= 0:
        raise EvaluationError(f"budget_per_capita must be a finite number > 0, got {budget_per_capita!r}")
    lo, hi = 0.0, 2.0
    c_lo = float(cost_of_mix(random_mix(level_costs, lo)))
    if not math.isfinite(c_lo):
        return MixMatch(None, math.nan, math.nan,
                        f"the random reference's {what} cost is undefined (no usable holdout event)")
    if c_lo > b * (1 + rel_tol):
        return MixMatch(None, math.nan, c_lo, f"budget {b:.4g} per capita is below the cheapest {what} cost of the "
                                              f"random reference, {c_lo:.4g} (everyone at the cheapest level)")
    c_hi = float(cost_of_mix(random_mix(level_costs, hi)))
    if c_hi <= b:
        mix = random_mix(level_costs, hi)
        note = "" if c_hi >= b * (1 - 1e-3) else (
            f"the random reference spends at most {c_hi:.4g} per capita on {what} (everyone at the dearest "
            f"level), below the budget {b:.4g}")
        return MixMatch(mix, hi, c_hi, note)
    share, cost = lo, c_lo
    for _ in range(max_iter):
        if abs(cost - b) <= rel_tol * b:
            break
        mid = 0.5 * (lo + hi)
        c_mid = float(cost_of_mix(random_mix(level_costs, mid)))
        if c_mid > b:
            hi = mid
        else:
            lo = mid
        share, cost = mid, c_mid
    return MixMatch(random_mix(level_costs, share), share, cost, "")


def mix_true_value(mix, truth: Truth) -> tuple[float, float]:
    """True per-capita (value, cost) of the stochastic policy `mix`: sum_k mix_k x mean_i truth_ik."""
    tv = _as_matrix(truth.response, "true_values")
    tc = _as_matrix(truth.cost, "true_costs", tv.shape[0], tv.shape[1])
    m = np.asarray(mix, dtype=np.float64)
    return float(tv.mean(axis=0) @ m), float(tc.mean(axis=0) @ m)


# ----------------------------------------------------------------------------- the estimators
def _dm_at_logged(dm, t, name):
    n = t.shape[0]
    m = _as_matrix(dm, name, n)
    if t.max() >= m.shape[1]:
        raise EvaluationError(f"logged has level {t.max()} but {name} has only {m.shape[1]} levels")
    return m, m[np.arange(n), t]


def _ratio(num, den):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def ipw_mix(mix, events: LoggedEvents) -> tuple[float, float, int]:
    """EOM of the stochastic policy `mix` on the logged `events` (self-normalized IPW with weights
    mix[t_i] / p_i).

    Returns (per-capita value, per-capita cost, number of holdout events with mix[t_i] > 0).
    For a one-hot mix this is `eom` of everyone at that level.
    """
    ev, ipw = _checked(events)
    t, y, z = ev.logged, ev.response, ev.cost
    m = np.asarray(mix, dtype=np.float64)
    if t.max() >= m.size:
        raise EvaluationError(f"logged has level {t.max()} but the mix has only {m.size} levels")
    rho = m[t] * ipw
    den = rho.sum()
    return float(_ratio(rho @ y, den)), float(_ratio(rho @ z, den)), int((m[t] > 0).sum())


def dr_batch(assigned, events: LoggedEvents, outcome: OutcomePredictions):
    """Doubly robust EOM of many deterministic allocations at once.

    Takes assigned (L x N levels, or N), the logged `events` (see `eom`) and the `outcome` model's
    predictions (N x K response and cost, for the holdout events). Returns (values, costs,
    n_matched), arrays of length L: mean_i m(x_i, a_i) + sum_S (y_i - m(x_i, t_i)) / p_i / sum_S 1 / p_i
    over S = {i : a_i = t_i}; NaN where no event matches.
    """
    ev, ipw = _checked(events)
    t, y, z = ev.logged, ev.response, ev.cost
    n = t.shape[0]
    my, my_t = _dm_at_logged(outcome.response, t, "dm_values")
    mz, mz_t = _dm_at_logged(outcome.cost, t, "dm_costs")
    a = np.asarray(assigned)
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2 or a.shape[1] != n:
        raise EvaluationError(f"assigned must be N or L x N levels with N = {n} logged users, got shape {a.shape}")
    a = a.astype(np.int64, copy=False)
    if a.size and (a.min() < 0 or a.max() >= my.shape[1]):
        raise EvaluationError(f"assigned has levels outside 0..{my.shape[1] - 1}")
    rows = np.arange(n)[None]
    match = a == t[None]
    rho = match * ipw[None]
    den = rho.sum(axis=1)
    vals = my[rows, a].mean(axis=1) + _ratio(rho @ (y - my_t), den)
    csts = mz[rows, a].mean(axis=1) + _ratio(rho @ (z - mz_t), den)
    return vals, csts, match.sum(axis=1)


def dr_mix(mix, events: LoggedEvents, outcome: OutcomePredictions) -> tuple[float, float, int]:
    """Doubly robust EOM of the stochastic policy `mix` (K probabilities, the same for every user) on
    the logged `events` with the `outcome` model's predictions.

    mean_i sum_k mix_k m(x_i, k) + sum_i rho_i (y_i - m(x_i, t_i)) / sum_i rho_i, rho_i = mix[t_i] / p_i.
    Returns (value, cost, number of events with mix[t_i] > 0).
    """
    ev, ipw = _checked(events)
    t, y, z = ev.logged, ev.response, ev.cost
    my, my_t = _dm_at_logged(outcome.response, t, "dm_values")
    mz, mz_t = _dm_at_logged(outcome.cost, t, "dm_costs")
    m = np.asarray(mix, dtype=np.float64)
    if m.shape != (my.shape[1],):
        raise EvaluationError(f"the mix has {m.size} levels, the outcome model {my.shape[1]}")
    rho = m[t] * ipw
    den = rho.sum()
    v = float(my.mean(axis=0) @ m + _ratio(rho @ (y - my_t), den))
    c = float(mz.mean(axis=0) @ m + _ratio(rho @ (z - mz_t), den))
    return v, c, int((m[t] > 0).sum())


def _dr_terms(policy, events: LoggedEvents, outcome: OutcomePredictions | None, is_mix: bool):
    """Per-event terms of the self-normalized DR (or, without an outcome model, IPW) value of a
    policy: (dm, rho, resid), N each, with value = mean(dm) + sum(rho resid) / sum(rho).

    dm_i = the policy's DM value of user i (0 without an outcome model), rho_i = pi_i(t_i) / p_i,
    resid_i = y_i - m(x_i, t_i) (y_i without an outcome model). `policy`: N assigned levels, or with
    is_mix=True the random reference's mix (K probabilities, the same for every user).
    """
    ev, ipw = _checked(events)
    t, y = ev.logged, ev.response
    n = t.shape[0]
    pol = np.asarray(policy, dtype=np.float64) if is_mix else np.asarray(policy)
    if outcome is not None:
        my, my_t = _dm_at_logged(outcome.response, t, "dm_values")
        k = my.shape[1]
    else:
        my = my_t = None
        k = int(pol.shape[0]) if is_mix else int(t.max()) + 1
    if is_mix:
        if pol.shape[0] != k:
            raise EvaluationError(f"the mix has {pol.shape[0]} levels, expected {k}")
        if t.max() >= k:
            raise EvaluationError(f"logged has level {t.max()} but the mix has only {k} levels")
        rho = pol[t] * ipw
        dm = np.zeros(n) if my is None else my @ pol
    else:
        a = _as_levels(pol, "assigned", n=n)
        rho = (a == t) * ipw
        dm = np.zeros(n) if my is None else my[np.arange(n), np.minimum(a, my.shape[1] - 1)]
    resid = y if my_t is None else y - my_t
    return dm, rho, resid


def dr_interval(policy, events: LoggedEvents, outcome: OutcomePredictions | None = None, *, is_mix: bool = False,
                level: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the DR (or, without an `outcome` model, IPW) per-capita value from its
    influence function, with a Student-t quantile on the effective number of matched events.

    The self-normalized DR value V = mean_i dm_i + sum_i rho_i r_i / sum_i rho_i (terms as in
    `_dr_terms`) is linearized (delta method, the sandwich variance of a ratio estimator):
        phi_i = (dm_i - mean dm) + rho_i (r_i - R) / mean(rho),   R = sum rho r / sum rho,
        se = sd(phi) / sqrt(N)      (sd with N - 1),
    and the interval is V -/+ t_{(1+level)/2, df} se with df = ESS - 1, ESS = (sum rho)^2 / sum rho^2
    the effective number of events carrying weight (Kish; = the matched events for a deterministic
    allocation under equal propensities). Why not the percentile bootstrap: with K = 100 levels only
    ~50 holdout events match a policy; the 200-replicate percentile interval carries Monte Carlo
    noise (on one campaign 7 % narrower than its own 2,000-replicate version) and ignores that the
    residual variance is estimated from those few events; the influence function is exact to first
    order, deterministic and needs no replicates. Returns (low, high); (NaN, NaN) when fewer than two events carry
    weight (the variance of the residuals cannot be estimated).
    """
    if not 0 < level < 1:
        raise EvaluationError(f"level must be in (0, 1), got {level}")
    from scipy.stats import t as student_t

    dm, rho, resid = _dr_terms(policy, events, outcome, is_mix)
    n = dm.shape[0]
    den = rho.sum()
    if n < 2 or int((rho > 0).sum()) < 2 or not den > 0:
        return math.nan, math.nan
    r_bar = float(rho @ resid) / den
    value = float(dm.mean()) + r_bar
    phi = (dm - dm.mean()) + rho * (resid - r_bar) / (den / n)
    se = float(phi.std(ddof=1)) / math.sqrt(n)
    ess = den * den / float(rho @ rho)
    q = float(student_t.ppf((1 + level) / 2, max(ess - 1.0, 1.0)))
    return value - q * se, value + q * se


def bootstrap_dr(policy, events: LoggedEvents, outcome: OutcomePredictions | None = None, *, is_mix: bool = False,
                 n_boot: int = 200, seed: int = 0, level: float = 0.95, chunk_users: int = 50_000) -> tuple[float, float]:
    """Percentile bootstrap interval of the DR (or, without an `outcome` model, IPW) per-capita value.

    `policy` is N assigned levels (a deterministic allocation) or, with `is_mix=True`, the random
    reference's mix (K probabilities). Users are
    resampled with Poisson(1) weights w_i (outcome model held fixed):
        V_b = sum_i w_i dm_i / sum_i w_i + sum_i w_i rho_i r_i / sum_i w_i rho_i
    with dm_i = the policy's DM value of user i, r_i = y_i - m(x_i, t_i) (dm = 0, r = y without an
    outcome model: the self-normalized IPW EOM). Returns (low, high) (NaN, NaN when nothing matches).
    `evaluate_policies` uses it for the random reference's IPW interval (as `bootstrap_eom` for the
    models'); the DR intervals come from `dr_interval`.
    """
    if not 0 < level < 1:
        raise EvaluationError(f"level must be in (0, 1), got {level}")
    if n_boot < 1:
        raise EvaluationError("n_boot must be >= 1")
    dm, rho, resid = _dr_terms(policy, events, outcome, is_mix)
    n = dm.shape[0]
    rng = np.random.default_rng(seed)
    s_dm = np.zeros(n_boot)
    s_w = np.zeros(n_boot)
    s_rr = np.zeros(n_boot)
    s_rho = np.zeros(n_boot)
    need_all = outcome is not None
    idx = np.arange(n) if need_all else np.flatnonzero(rho > 0)
    for s in range(0, idx.size, chunk_users):
        sel = idx[s:s + chunk_users]
        w = rng.poisson(1.0, size=(n_boot, sel.size)).astype(np.float64)
        s_dm += w @ dm[sel]
        s_w += w.sum(axis=1)
        s_rr += w @ (rho[sel] * resid[sel])
        s_rho += w @ rho[sel]
    reps = (_ratio(s_dm, s_w) if need_all else 0.0) + _ratio(s_rr, s_rho)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


class IntervalStrategy(Protocol):
    """How a policy's per-capita value gets its confidence interval: passed into the evaluation as an
    object (as EconML passes `inference`), so that a new method is a new class, not a new branch.

    `interval(policy, events, outcome, is_mix=..., seed=...)` returns (low, high) of the value of
    `policy` (N assigned levels, or with is_mix=True the random reference's mix of K probabilities)
    on the logged `events`, doubly robust with the `outcome` model's predictions, IPW without them;
    `seed` is the evaluation's (a deterministic method ignores it)."""

    def interval(self, policy, events: LoggedEvents, outcome: OutcomePredictions | None = None, *,
                 is_mix: bool = False, seed: int = 0) -> tuple[float, float]: ...


@dataclass(frozen=True)
class InfluenceInterval:
    """The influence-function interval with a Student-t quantile (`dr_interval`) at `level`."""

    level: float = 0.95

    def interval(self, policy, events: LoggedEvents, outcome: OutcomePredictions | None = None, *,
                 is_mix: bool = False, seed: int = 0) -> tuple[float, float]:
        return dr_interval(policy, events, outcome, is_mix=is_mix, level=self.level)


@dataclass(frozen=True)
class BootstrapInterval:
    """The Poisson-bootstrap percentile interval with `n_boot` replicates at `level`: `bootstrap_eom`
    for an allocation's IPW value, `bootstrap_dr` for a mix or with an outcome model."""

    n_boot: int = 200
    level: float = 0.95

    def interval(self, policy, events: LoggedEvents, outcome: OutcomePredictions | None = None, *,
                 is_mix: bool = False, seed: int = 0) -> tuple[float, float]:
        if outcome is None and not is_mix:
            return bootstrap_eom(policy, events.logged, events.response, events.cost, events.propensity,
                                 n_boot=self.n_boot, seed=seed, level=self.level)
        return bootstrap_dr(policy, events, outcome, is_mix=is_mix, n_boot=self.n_boot, seed=seed, level=self.level)


def dr_q_at_budget(coefficients, events: LoggedEvents, outcome: OutcomePredictions, budget_per_capita: float, *,
                   arity: int = 8, max_iter: int = 17, rel_tol: float = 1e-4) -> QResult:
    """The matched (Q-style) DR value: the KKT allocation argmax_j (v_ij - lambda c_ij) with lambda
    searched (n-ary, `q_search`) until its DR cost equals the budget within rel_tol x budget.
    `coefficients`: the model's predicted (response, cost) pair (N x K each); `events`: the logged RCT;
    `outcome`: the outcome model's predictions. Returns a QResult (value = the DR value there, cost =
    its DR cost)."""
    ev, _ = _checked(events)
    v, c = prediction_matrices(coefficients, ev.logged.shape[0])
    b = float(budget_per_capita)

    def evaluate(lams):
        return dr_batch(levels_at_lambdas(v, c, lams), ev, outcome)

    return q_search(evaluate, lambda_upper_bound(v, c), b, arity=arity, max_iter=max_iter,
                    tol=rel_tol * max(b, 1e-12))


# --------------------------------------------------------------------------- the area ratio
def frontier_area(curve_costs, curve_values, lo: float, hi: float, base: float, n_grid: int = 401) -> float:
    """Area between a cost-response curve and the value `base`, over per-capita costs [lo, hi].

    The curve's points are sorted by cost and interpolated linearly (held flat before its cheapest
    and past its dearest point: a policy can always spend less). NaN points are dropped; NaN when
    no point is left or hi <= lo.
    """
    x = np.asarray(curve_costs, dtype=np.float64)
    y = np.asarray(curve_values, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size == 0 or not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return math.nan
    order = np.argsort(x, kind="stable")
    grid = np.linspace(lo, hi, n_grid)
    return float(np.trapezoid(np.interp(grid, x[order], y[order]) - base, grid))


def area_ratio(policy_costs, policy_values, random_costs, random_values) -> float:
    """AUCC generalized to K > 2 levels: a policy's frontier area over the random reference's.

    Takes the policy's curve (per-capita cost and value at points along its frontier) and the
    random reference's curve at shares 0..1 (`random_mix`; first point = everyone at the cheapest
    level, last = uniformly random). The budget range is [random_costs[0], random_costs[-1]] and the
    base value random_values[0] (everyone at the cheapest level). Returns
    frontier_area(policy) / frontier_area(random): 1 for the random reference, > 1 better; NaN when
    the random reference's area is not positive (no level adds value on this holdout).
    """
    rc = np.asarray(random_costs, dtype=np.float64)
    rv = np.asarray(random_values, dtype=np.float64)
    if rc.size < 2:
        raise EvaluationError("the random reference's curve needs at least two points")
    lo, hi, base = float(rc[0]), float(rc[-1]), float(rv[0])
    ref = frontier_area(rc, rv, lo, hi, base)
    if not math.isfinite(ref) or ref <= 0:
        return math.nan
    return frontier_area(policy_costs, policy_values, lo, hi, base) / ref
