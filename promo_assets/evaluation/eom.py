"""Expected Outcome Metric (EOM) on randomized holdout data, Q(v, c), AUCC and bootstrap intervals.

EOM (end-to-end paper §3.3, Eq. 5–6; DFCL §5.4): given an allocation (one assigned level per
holdout user) and the users' logged RCT records (level t_i, response y_i, cost z_i, logging
propensity p_i = P(t_i | x_i)), keep the users whose logged level equals the assigned one,
S = {i : t_i = a_i}, and estimate the allocation's per-capita response and cost by the
self-normalized inverse-propensity weighted means

    V = sum_{i in S} y_i / p_i  /  sum_{i in S} 1 / p_i,      C = sum_{i in S} z_i / p_i  /  sum_{i in S} 1 / p_i.

With equal propensities this is the end-to-end paper's plain mean over S (Eq. 6); with the
per-arm assignment shares w_t = N_t / N it is DFCL's estimator. When `propensity` is None we use
the empirical shares N_t / N (DFCL §5.4). Each term is an unbiased-in-the-limit (ratio) estimate
of the mean over all users of E[y | do(a_i)], because P(i in S) = p_i.

Q(v, c) at a per-capita budget b (end-to-end paper, Algorithm 1): bisection on the dual multiplier
alpha (our `lambda_`) in [0, alpha_max]; each midpoint's allocation is the per-user argmax of
v_ij - lambda c_ij (KKT, Eq. 4); its EOM cost C is compared with b (the *empirical* per-capita cost
on the RCT data, not the predicted one); stop when |C - b| <= tol or after max_iter iterations;
Q is the EOM value V at the last midpoint. The n-ary variant (the paper's remark after
Algorithm 1) evaluates n - 1 interior points per iteration in one vectorized pass.

AUCC (area under the cost curve; Du, Lee & Ghaffarizadeh 2019, "Improve user retention with causal
learning", the metric used by the end-to-end paper §4.2 and DFCL §6.1.2 on CRITEO-UPLIFT) for
two-arm campaigns: rank users by a score (the predicted incremental value per incremental cost,
(v_i1 - v_i0) / (c_i1 - c_i0)); for the top-k users, the incremental value and cost of treating them
are estimated from the RCT as k x (mean of treated - mean of control) within the top k (IPW means
when propensities are given); both are normalized by their value at k = N, giving a curve from
(0, 0) to (1, 1) of normalized incremental value against normalized incremental cost; AUCC is the
trapezoidal area under it. A random ranking gives about 0.5, a perfect ROI ranking approaches 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from promo_assets.core.errors import DomainError
from promo_assets.evaluation.records import LoggedEvents

__all__ = [
    "EvaluationError",
    "QResult",
    "inverse_propensity",
    "levels_at_lambdas",
    "eom",
    "eom_batch",
    "lambda_upper_bound",
    "q_at_budget",
    "q_at_budget_bisection",
    "q_search",
    "bootstrap_eom",
    "bootstrap_eom_samples",
    "roi_score",
    "aucc",
    "cost_curve",
]



class EvaluationError(DomainError, ValueError):
    """Bad input to an evaluation function (shapes, levels out of range, bad propensities...)."""


# --------------------------------------------------------------------------------------- checks
def _as_levels(x, name: str, n: int | None = None, k: int | None = None) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise EvaluationError(f"{name} must be a 1-D array of level indices, got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise EvaluationError(f"{name} has {a.shape[0]} entries, expected one per user ({n})")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        af = a.astype(np.float64)
        if not np.all(np.isfinite(af)) or np.any(af != np.round(af)):
            raise EvaluationError(f"{name} must hold integer level indices")
        a = af.astype(np.int64)
    a = a.astype(np.int64, copy=False)
    if a.size and a.min() < 0:
        raise EvaluationError(f"{name} has negative level indices")
    if k is not None and a.size and a.max() >= k:
        raise EvaluationError(f"{name} has level {a.max()} but there are only {k} levels (0..{k - 1})")
    return a


def _as_vector(x, name: str, n: int) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise EvaluationError(f"{name} must have one value per user ({n}), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise EvaluationError(f"{name} contains NaN or infinite values")
    return a


def _as_matrix(x, name: str, n: int | None = None, k: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2:
        raise EvaluationError(f"{name} must be a 2-D array users x levels, got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise EvaluationError(f"{name} has {a.shape[0]} rows, expected one per user ({n})")
    if k is not None and a.shape[1] != k:
        raise EvaluationError(f"{name} has {a.shape[1]} levels, expected {k}")
    if not np.all(np.isfinite(a)):
        raise EvaluationError(f"{name} contains NaN or infinite values")
    return a


def prediction_matrices(coefficients, n: int | None = None, what: str = "coefficients") -> tuple[np.ndarray, np.ndarray]:
    """The predicted (response, cost) of `coefficients` (a Coefficients or any (response, cost) pair)
    as checked float64 N x K matrices (N = `n` when given), errors naming `what`."""
    try:
        pred_response, pred_cost = coefficients
    except (TypeError, ValueError):
        raise EvaluationError(f"{what} must be a (response, cost) pair of users x levels arrays, got "
                              f"{type(coefficients).__name__}") from None
    v = _as_matrix(pred_response, f"{what}.response", n)
    c = _as_matrix(pred_cost, f"{what}.cost", n, v.shape[1])
    return v, c


def inverse_propensity(logged, propensity=None) -> np.ndarray:
    """Inverse logging propensities 1 / p_i for N logged levels.

    `propensity` may be None (use the empirical level shares N_t / N, DFCL §5.4), a scalar, or N
    values in (0, 1]. Returns an N float array.
    """
    t = _as_levels(logged, "logged")
    n = t.shape[0]
    if propensity is None:
        counts = np.bincount(t)
        return n / counts[t].astype(np.float64)
    p = np.asarray(propensity, dtype=np.float64)
    if p.ndim == 0:
        p = np.full(n, float(p))
    if p.shape != (n,):
        raise EvaluationError(f"propensity must be a scalar or one value per user ({n}), got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
        bad = p[~(np.isfinite(p) & (p > 0) & (p <= 1))]
        raise EvaluationError(f"propensity must lie in (0, 1]; found e.g. {bad[:3].tolist()}")
    return 1.0 / p


def _checked(events: LoggedEvents) -> tuple[LoggedEvents, np.ndarray]:
    """(the events with checked level, response and cost arrays, the inverse propensities 1 / p_i)."""
    t = _as_levels(events.logged, "logged")
    n = t.shape[0]
    if n == 0:
        raise EvaluationError("no logged users to evaluate on")
    y = _as_vector(events.response, "response", n)
    z = _as_vector(events.cost, "cost", n)
    ipw = inverse_propensity(t, events.propensity)
    return LoggedEvents(t, y, z, events.propensity), ipw


# -------------------------------------------------------------------------------- allocations
def levels_at_lambdas(response, cost, lambdas) -> np.ndarray:
    """The KKT allocation (end-to-end paper Eq. 4) for each dual multiplier.

    Takes the predicted response, cost (N x K) and L multipliers; returns an L x N int array whose row l holds
    argmax_j (v_ij - lambda_l c_ij) per user: the project's one decision rule and tie rule
    (`promo_assets.allocation.decide_at_lambdas`: on equal reduced value the cheaper level, then
    the lower index).
    """
    from promo_assets.allocation.decision import decide_at_lambdas

    return decide_at_lambdas(response, cost, lambdas)


# ------------------------------------------------------------------------------------------ EOM
def eom_batch(assigned, logged, response, cost, propensity=None):
    """EOM of many allocations at once (end-to-end paper Eq. 5–6, self-normalized IPW).

    Takes assigned (L x N levels, or N for one allocation) and the logged arrays (N each; see
    `eom`). Returns (values, costs, n_matched): three arrays of length L with the per-capita
    response, per-capita cost and |S| of each allocation; NaN where no user matches.
    """
    ev, ipw = _checked(LoggedEvents(logged, response, cost, propensity))
    t, y, z = ev.logged, ev.response, ev.cost
    a = np.asarray(assigned)
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2 or a.shape[1] != t.shape[0]:
        raise EvaluationError(
            f"assigned must be N or L x N levels with N = {t.shape[0]} logged users, got shape {a.shape}"
        )
    match = a == t[None]
    w = match * ipw[None]
    denom = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = (w @ y) / denom
        costs = (w @ z) / denom
    return vals, costs, match.sum(axis=1)


def eom(assigned, logged, response, cost, propensity=None) -> tuple[float, float]:
    """EOM of one allocation: (per-capita response, per-capita cost).

    Takes assigned (N levels, the allocation), logged (N levels received in the RCT), response
    and cost (N observed outcomes) and propensity (None, a scalar or N logging probabilities of the
    logged level). Computes sum_S y/p / sum_S 1/p and sum_S z/p / sum_S 1/p over
    S = {i : assigned_i = logged_i} (end-to-end paper Eq. 5–6; DFCL §5.4). NaN when S is empty.
    """
    t = _as_levels(logged, "logged")
    a = _as_levels(assigned, "assigned", n=t.shape[0])
    vals, costs, _ = eom_batch(a, t, response, cost, propensity)
    return float(vals[0]), float(costs[0])


# ------------------------------------------------------------------------------------ Q(v, c)
@dataclass(frozen=True)
class QResult:
    """Q(v, c) at a per-capita budget: the EOM value and cost at the multiplier found."""

    value: float
    cost: float
    lambda_: float
    n_iter: int
    n_matched: int
    converged: bool  # True when |cost - budget| <= tol was reached


def lambda_upper_bound(response, cost) -> float:
    """The smallest multiplier at which every user picks a cheapest level (alpha_max).

    For each user, j0 = the cheapest level (best value among equally cheap ones); every user picks
    j0 once lambda >= max_{i, j: c_ij > c_ij0} (v_ij - v_ij0) / (c_ij - c_ij0). Returns that bound
    times (1 + 1e-6) (and 1.0 when no level is worth paying for).
    """
    v = np.asarray(response, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    cmin = c.min(axis=1, keepdims=True)
    cheapest = c <= cmin + 1e-12 * np.maximum(1.0, np.abs(cmin))
    v0 = np.where(cheapest, v, -np.inf).max(axis=1, keepdims=True)
    dc = c - cmin
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(dc > 0, (v - v0) / np.where(dc > 0, dc, 1.0), -np.inf)
    top = float(np.max(slope)) if slope.size else -np.inf
    if not np.isfinite(top) or top <= 0:
        return 1.0
    return top * (1 + 1e-6) + 1e-12


def _check_q_inputs(coefficients, events: LoggedEvents, budget_per_capita):
    """((v, c) checked, the checked events, their inverse propensities); the budget checked apart."""
    ev, ipw = _checked(events)
    t = ev.logged
    v, c = prediction_matrices(coefficients, t.shape[0])
    if t.max() >= v.shape[1]:
        raise EvaluationError(f"logged has level {t.max()} but coefficients have only {v.shape[1]} levels")
    b = float(budget_per_capita)
    if not math.isfinite(b) or b < 0:
        raise EvaluationError(f"budget_per_capita must be a finite number >= 0, got {budget_per_capita!r}")
    return (v, c), ev, ipw


def _eom_at(pair, ev: LoggedEvents, ipw, lambdas):
    assigned = levels_at_lambdas(pair[0], pair[1], lambdas)
    match = assigned == ev.logged[None]
    w = match * ipw[None]
    denom = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ ev.response) / denom, (w @ ev.cost) / denom, match.sum(axis=1)


def q_at_budget_bisection(coefficients, events: LoggedEvents, budget_per_capita, *, max_iter: int = 50,
                          lambda_max: float | None = None, tol: float = 1e-4) -> QResult:
    """Q(v, c) by bisection, line by line the end-to-end paper's Algorithm 1.

    Takes `coefficients` (the predicted (response, cost), N x K each, for the N RCT users), the
    logged events (`LoggedEvents`, see `eom`), the per-capita budget T/B, the maximum number of iterations I
    (`max_iter`), alpha_max (`lambda_max`, default `lambda_upper_bound(*coefficients)`) and the cost tolerance epsilon
    (`tol`). Returns a QResult whose `.value` is Q(v, c) = V(v, c, alpha_m) at the last midpoint.
    EOM here is the self-normalized IPW form (equal to the paper's plain mean for a uniform RCT).
    """
    pair, ev, ipw = _check_q_inputs(coefficients, events, budget_per_capita)
    b = float(budget_per_capita)
    if max_iter < 1:
        raise EvaluationError("max_iter must be >= 1")
    lo, hi = 0.0, float(lambda_max if lambda_max is not None else lambda_upper_bound(*pair))
    it, converged = 0, False
    mid = V = C = float("nan")
    m = 0
    while it < max_iter:
        it += 1
        mid = 0.5 * (lo + hi)
        Vs, Cs, ms = _eom_at(pair, ev, ipw, [mid])
        V, C, m = float(Vs[0]), float(Cs[0]), int(ms[0])
        if abs(C - b) <= tol:
            converged = True
            break
        if C > b:  # too expensive: raise the multiplier (a smaller budget in the MCKP)
            lo = mid
        else:  # too cheap (or nobody matched): lower the multiplier
            hi = mid
    return QResult(V, C, mid, it, m, converged)


def q_at_budget(coefficients, events: LoggedEvents, budget_per_capita, *, arity: int = 2,
                max_iter: int | None = None, lambda_max: float | None = None, tol: float = 1e-4) -> QResult:
    """Q(v, c) at a per-capita budget (end-to-end paper Algorithm 1 and its n-ary variant).

    Takes `coefficients` (the predicted (response, cost), N x K each), the logged RCT events
    (`LoggedEvents`, see `eom`) and budget_per_capita.
    `arity` = n splits the search interval into n parts per iteration and evaluates its n - 1
    interior multipliers in one vectorized pass (`arity=2` is exactly Algorithm 1, see
    `q_at_budget_bisection`). The next interval is the one between the last multiplier whose EOM
    cost is above the budget and the first one at or below it. `max_iter` defaults to
    ceil(50 / log2(n)) (the same final interval width as 50 bisection steps). Stops early when some
    |C - b| <= tol; otherwise returns the point of the last iteration closest in cost to b.
    Returns a QResult (`.value` is Q(v, c)).
    """
    if arity < 2:
        raise EvaluationError(f"arity must be >= 2, got {arity}")
    if arity == 2:
        return q_at_budget_bisection(coefficients, events, budget_per_capita,
                                     max_iter=50 if max_iter is None else max_iter, lambda_max=lambda_max, tol=tol)
    pair, ev, ipw = _check_q_inputs(coefficients, events, budget_per_capita)
    b = float(budget_per_capita)
    if max_iter is None:
        max_iter = int(math.ceil(50 / math.log2(arity)))
    hi = float(lambda_max if lambda_max is not None else lambda_upper_bound(*pair))
    return q_search(lambda lams: _eom_at(pair, ev, ipw, lams), hi, b, arity=arity, max_iter=max_iter, tol=tol)


def q_search(evaluate, lambda_max: float, budget_per_capita: float, *, arity: int = 8, max_iter: int = 17,
             tol: float = 1e-4) -> QResult:
    """The n-ary multiplier search behind `q_at_budget`, for any per-capita estimator.

    Takes `evaluate(lambdas) -> (values, costs, n_matched)` (three arrays, one entry per multiplier;
    e.g. the IPW EOM or the doubly robust estimate of the KKT allocation at each multiplier), the
    upper end of the search interval, the budget, the arity, the iteration cap and the tolerance.
    Splits [0, lambda_max] into `arity` parts per iteration, keeps the interval between the last
    multiplier whose cost is above the budget and the first one at or below it, stops when some
    |C - b| <= tol. Returns the QResult of the point of the last iteration closest in cost to b.
    """
    if max_iter < 1:
        raise EvaluationError("max_iter must be >= 1")
    b = float(budget_per_capita)
    lo, hi = 0.0, float(lambda_max)
    fractions = np.arange(1, arity) / arity
    best = (float("nan"), float("nan"), float("nan"), 0)
    it, converged = 0, False
    while it < max_iter:
        it += 1
        lams = lo + (hi - lo) * fractions
        Vs, Cs, ms = evaluate(lams)
        err = np.abs(np.asarray(Cs, dtype=np.float64) - b)
        err = np.where(np.isnan(err), np.inf, err)
        j = int(np.argmin(err))
        best = (float(Vs[j]), float(Cs[j]), float(lams[j]), int(ms[j]))
        if err[j] <= tol:
            converged = True
            break
        cheap = ~(Cs > b)  # at or below the budget (NaN counts as cheap, as in bisection)
        if cheap.any():
            first = int(np.argmax(cheap))
            hi, lo = float(lams[first]), (float(lams[first - 1]) if first > 0 else lo)
        else:
            lo = float(lams[-1])
    return QResult(best[0], best[1], best[2], it, best[3], converged)


# ------------------------------------------------------------------------------------ bootstrap
def bootstrap_eom_samples(assigned, logged, response, cost, propensity=None, *, n_boot: int = 200,
                          seed: int = 0, chunk_users: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap replicates of the EOM value and cost of one allocation (users resampled).

    Uses the Poisson bootstrap: each replicate weights user i by an independent Poisson(1) count
    (the large-N limit of multinomial resampling), so only the matched users are drawn and the
    replicates are a matrix product, chunked over users. Returns (values, costs), two arrays of
    length n_boot (NaN for a replicate that drew no matched user).
    """
    ev, ipw = _checked(LoggedEvents(logged, response, cost, propensity))
    t, y, z = ev.logged, ev.response, ev.cost
    a = _as_levels(assigned, "assigned", n=t.shape[0])
    if n_boot < 1:
        raise EvaluationError("n_boot must be >= 1")
    idx = np.flatnonzero(a == t)
    rng = np.random.default_rng(seed)
    num_y = np.zeros(n_boot)
    num_z = np.zeros(n_boot)
    den = np.zeros(n_boot)
    for s in range(0, idx.size, chunk_users):
        sel = idx[s:s + chunk_users]
        w = rng.poisson(1.0, size=(n_boot, sel.size)).astype(np.float64) * ipw[sel][None]
        num_y += w @ y[sel]
        num_z += w @ z[sel]
        den += w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num_y / den, num_z / den


def bootstrap_eom(assigned, logged, response, cost, propensity=None, n_boot: int = 200, seed: int = 0,
                  *, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the EOM per-capita response of one allocation.

    Takes the same arrays as `eom`, the number of replicates and a seed; returns (low, high),
    the (1 - level)/2 and (1 + level)/2 quantiles of the replicate values (default 95%).
    (NaN, NaN) when no user matches.
    """
    if not 0 < level < 1:
        raise EvaluationError(f"level must be in (0, 1), got {level}")
    vals, _ = bootstrap_eom_samples(assigned, logged, response, cost, propensity, n_boot=n_boot, seed=seed)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(vals, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


# ----------------------------------------------------------------------------------------- AUCC
def roi_score(response, cost, eps: float = 1e-9) -> np.ndarray:
    """Two-arm ROI score (v_i1 - v_i0) / (c_i1 - c_i0) used to rank users for AUCC.

    Takes the predicted response, cost N x 2 (level 0 = control); the cost uplift is floored at `eps` so a free
    treatment with positive uplift ranks first. Returns N scores.
    """
    v = _as_matrix(response, "response")
    c = _as_matrix(cost, "cost", v.shape[0], v.shape[1])
    if v.shape[1] != 2:
        raise EvaluationError(f"roi_score needs exactly two levels (control, treatment), got {v.shape[1]}")
    return (v[:, 1] - v[:, 0]) / np.maximum(c[:, 1] - c[:, 0], eps)


def cost_curve(score, logged, response, cost, propensity=None, *, n_bins: int | None = 100):
    """The normalized cost curve behind AUCC (Du et al. 2019) for a two-arm RCT.

    Takes N scores (higher = treat first), logged levels in {0, 1} (1 = treated), responses,
    costs and propensities. For the top-k users by score (k on `n_bins` equally spaced
    population fractions, or every k when None) the incremental value is
    k x (mean response of treated - mean response of control within the top k), IPW means when
    propensities are given, and the same for cost. Returns (x, y): incremental cost and value
    normalized by their values at k = N, starting at (0, 0) and ending at (1, 1).
    """
    ev, ipw = _checked(LoggedEvents(logged, response, cost, propensity))
    t, y, z = ev.logged, ev.response, ev.cost
    n = t.shape[0]
    s = _as_vector(score, "score", n)
    if t.max() > 1:
        raise EvaluationError("AUCC needs a two-arm campaign: logged levels must be 0 (control) or 1")
    order = np.argsort(-s, kind="stable")
    tt, yy, zz, ww = t[order], y[order], z[order], ipw[order]
    wt, wc = ww * (tt == 1), ww * (tt == 0)
    cwt, cwc = np.cumsum(wt), np.cumsum(wc)
    cyt, cyc = np.cumsum(wt * yy), np.cumsum(wc * yy)
    czt, czc = np.cumsum(wt * zz), np.cumsum(wc * zz)
    if cwt[-1] == 0 or cwc[-1] == 0:
        raise EvaluationError("AUCC needs both treated (level 1) and control (level 0) users")
    ks = np.arange(1, n + 1) if n_bins is None else np.unique(
        np.clip(np.round(np.linspace(0, n, n_bins + 1)[1:]).astype(int), 1, n))
    i = ks - 1
    ok = (cwt[i] > 0) & (cwc[i] > 0)
    ks, i = ks[ok], i[ok]
    inc_v = ks * (cyt[i] / cwt[i] - cyc[i] / cwc[i])
    inc_c = ks * (czt[i] / cwt[i] - czc[i] / cwc[i])
    if inc_v[-1] <= 0 or inc_c[-1] <= 0:
        raise EvaluationError(
            "AUCC is undefined: the treatment's overall incremental value or cost is not positive "
            f"(value {inc_v[-1] / n:.4g}, cost {inc_c[-1] / n:.4g} per capita)"
        )
    x = np.concatenate([[0.0], inc_c / inc_c[-1]])
    yv = np.concatenate([[0.0], inc_v / inc_v[-1]])
    return x, yv


def aucc(score, logged, response, cost, propensity=None, *, n_bins: int | None = 100) -> float:
    """AUCC, area under the normalized cost curve (Du et al. 2019; end-to-end §4.2, DFCL §6.1.2).

    Takes N ranking scores (e.g. `roi_score(response, cost)`), logged levels in {0, 1}, responses,
    costs, optional propensities and the number of population fractions `n_bins`. Returns the
    trapezoidal area under `cost_curve` (about 0.5 for a random ranking).
    """
    x, y = cost_curve(score, logged, response, cost, propensity, n_bins=n_bins)
    return float(np.trapezoid(y, x))
