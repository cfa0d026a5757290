"""EOM (and true) cost-response curves of allocations over the budget frontier.

`eom_curve` evaluates a model's allocations either at given per-capita budgets (through the
allocator, `promo_assets.allocation.solve`) or along the whole frontier of its coefficients
(the breakpoints of `promo_assets.allocation.frontier`, thinned to `n_points` evenly spread in
predicted cost), with EOM on the holdout RCT users and, when the truth is known, the true value.
`policy_curves` stacks the curves of every model plus the oracle's and the random policy's, the
input of `promo_assets.evaluation.plots.plot_frontier`.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.evaluation.eom import (
    EvaluationError,
    _as_matrix,
    _checked,
    eom_batch,
    lambda_upper_bound,
    levels_at_lambdas,
    prediction_matrices,
)
from promo_assets.evaluation.honest import ipw_mix, mix_true_value, random_mix
from promo_assets.evaluation.records import LoggedEvents, Truth
from promo_assets.evaluation.truth import allocate

__all__ = ["eom_curve", "frontier_lambdas", "policy_curves", "random_reference_curve", "logged_level_costs",
           "CURVE_COLUMNS", "RANDOM_CURVE_SHARES"]

CURVE_COLUMNS = [
    "model", "lambda_", "budget_per_capita", "predicted_value", "predicted_cost",
    "eom_value", "eom_cost", "n_matched", "true_value", "true_cost",
]
RANDOM_CURVE_SHARES = np.linspace(0.0, 2.0, 41)  # the random reference's curve: cheapest .. uniform .. dearest


def frontier_lambdas(response, cost, n_points: int | None = 50) -> np.ndarray:
    """Multipliers spanning the allocator's whole frontier of the predicted (response, cost).

    Takes the N x K predictions; calls `promo_assets.allocation.frontier(response, cost)` and keeps
    the (finite) breakpoint multipliers whose total cost lies nearest to `n_points` evenly spaced
    costs between the frontier's cheapest and dearest point (all of them when None), each lowered
    by a relative 1e-9 so that the KKT argmax gives the frontier's allocation at that breakpoint,
    plus lambda = 0 (every user's best-value level) and `lambda_upper_bound` (every user's
    cheapest level).
    Returns the sorted unique multipliers.
    """
    from promo_assets.allocation import frontier

    fr = frontier(np.asarray(response, dtype=np.float64), np.asarray(cost, dtype=np.float64))
    lams = np.asarray(fr.lambdas, dtype=np.float64)
    tot = np.asarray(fr.costs, dtype=np.float64)
    ok = np.isfinite(lams) & (lams >= 0) & np.isfinite(tot)
    lams, tot = lams[ok], tot[ok]
    if n_points is not None and lams.size > n_points:
        order = np.argsort(tot, kind="stable")
        lams, tot = lams[order], tot[order]
        grid = np.linspace(tot[0], tot[-1], n_points)
        idx = np.clip(np.searchsorted(tot, grid), 0, tot.size - 1)
        lams = lams[np.unique(idx)]
    # frontier() lists at breakpoint lambda_b the allocation just below it (the step taken): at
    # lambda_b itself the argmax ties and keeps the cheaper level, so evaluate a hair below.
    lams = lams * (1 - 1e-9)
    extra = [0.0, lambda_upper_bound(response, cost)]
    return np.unique(np.concatenate([lams, extra]))


def eom_curve(coefficients, events: LoggedEvents, budgets: Sequence[float] | None = None, *,
              n_points: int | None = 50, truth: Truth | None = None, seed: int = 0, model: str = "") -> pd.DataFrame:
    """EOM of a model's allocations over budgets or over its whole frontier.

    Takes `coefficients` (the predicted (response, cost), N x K each, for the N holdout users), the
    logged RCT `events` (see `eom`), and either `budgets` (per-capita budgets, allocated with the
    allocator's `solve`) or None (the whole frontier, `frontier_lambdas(response, cost, n_points)`
    of the predictions, allocations by the KKT
    argmax of v - lambda c). An optional `truth` (N x K) adds the true value.
    Returns a DataFrame with CURVE_COLUMNS, one row per allocation, sorted by predicted cost:
    lambda_, budget_per_capita (the budget asked for; NaN on the frontier), predicted_value /
    predicted_cost (per capita under the model), eom_value, eom_cost, n_matched, true_value,
    true_cost (NaN without truth).
    """
    ev, _ = _checked(events)
    n = ev.logged.shape[0]
    v, c = prediction_matrices(coefficients, n)
    if budgets is not None:
        budgets = [float(b) for b in budgets]
        results = [allocate(v, c, b, seed=seed) for b in budgets]
        assigned = np.stack([np.asarray(r.levels, dtype=np.int64) for r in results])
        lams = np.array([float(r.lambda_) for r in results])
        budget_col = np.array(budgets)
    else:
        lams = frontier_lambdas(v, c, n_points)
        assigned = levels_at_lambdas(v, c, lams)
        budget_col = np.full(lams.size, np.nan)
    rows = np.arange(n)
    eom_v, eom_c, nm = eom_batch(assigned, ev.logged, ev.response, ev.cost, ev.propensity)
    frame = pd.DataFrame({
        "model": model,
        "lambda_": lams,
        "budget_per_capita": budget_col,
        "predicted_value": v[rows[None], assigned].mean(axis=1),
        "predicted_cost": c[rows[None], assigned].mean(axis=1),
        "eom_value": eom_v,
        "eom_cost": eom_c,
        "n_matched": nm,
        "true_value": np.nan,
        "true_cost": np.nan,
    })
    if truth is not None:
        tv = _as_matrix(truth.response, "true_values", n, v.shape[1])
        tc = _as_matrix(truth.cost, "true_costs", n, v.shape[1])
        frame["true_value"] = tv[rows[None], assigned].mean(axis=1)
        frame["true_cost"] = tc[rows[None], assigned].mean(axis=1)
    return frame.sort_values(["predicted_cost", "lambda_"], ignore_index=True)[CURVE_COLUMNS]


def logged_level_costs(logged, cost, propensity=None, n_levels: int | None = None) -> np.ndarray:
    """Per-level mean logged cost (self-normalized IPW within each level), K values.

    The random policy's budget scaling uses it when the truth is unknown. A level nobody
    received gets the largest observed level mean (conservative: the random policy then spends
    less, never more, than the budget).
    """
    ev, ipw = _checked(LoggedEvents(logged, np.zeros(np.shape(logged)), cost, propensity))
    t, z = ev.logged, ev.cost
    k = int(n_levels if n_levels is not None else t.max() + 1)
    den = np.bincount(t, weights=ipw, minlength=k)[:k]
    num = np.bincount(t, weights=ipw * z, minlength=k)[:k]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den
    if np.all(np.isnan(out)):
        raise EvaluationError("no logged users: cannot estimate per-level costs")
    return np.where(np.isnan(out), np.nanmax(out), out)


def random_reference_curve(events: LoggedEvents, level_costs=None, *, truth: Truth | None = None,
                           shares=RANDOM_CURVE_SHARES) -> pd.DataFrame:
    """The cost-matched random reference's cost-response curve (CURVE_COLUMNS, model 'random').

    One point per share of `promo_assets.evaluation.honest.random_mix` (0: everyone at the cheapest
    level, 1: a uniformly random level, 2: everyone at the dearest), levels ordered by
    `level_costs` (default: their logged mean cost): EOM value / cost of the mix (self-normalized
    IPW with weights mix(t)/p, `ipw_mix`, every holdout event counts), n_matched the events with
    mix(t) > 0, and with the `truth` the mix's true value / cost (`mix_true_value`). lambda_ and
    budget_per_capita are NaN (a mix has no multiplier); predicted_value / predicted_cost NaN.
    """
    ev, _ = _checked(events)
    if level_costs is None:
        level_costs = logged_level_costs(ev.logged, ev.cost, ev.propensity)
    mixes = [random_mix(level_costs, s) for s in shares]
    eom = np.array([ipw_mix(m, ev) for m in mixes], dtype=np.float64).reshape(-1, 3)
    frame = pd.DataFrame({
        "model": "random", "lambda_": np.nan, "budget_per_capita": np.nan,
        "predicted_value": np.nan, "predicted_cost": np.nan,
        "eom_value": eom[:, 0], "eom_cost": eom[:, 1], "n_matched": eom[:, 2].astype(np.int64),
        "true_value": np.nan, "true_cost": np.nan,
    })
    if truth is not None:
        true = np.array([mix_true_value(m, truth) for m in mixes])
        frame["true_value"], frame["true_cost"] = true[:, 0], true[:, 1]
    return frame[CURVE_COLUMNS]


def policy_curves(models: Mapping[str, tuple], events: LoggedEvents, *, truth: Truth | None = None,
                  n_points: int | None = 40, random_budgets: Sequence[float] | None = None, seed: int = 0,
                  log: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Frontier curves of every model, the oracle (when the truth is known) and the random policy.

    Takes models: name -> (model_version, response, cost) or name -> (response, cost), N x K each for
    the holdout users; the logged RCT `events`; an optional `truth` (N x K); the number of frontier
    points per model. The random policy is the cost-matched random reference of `policy_evaluation`
    (`random_reference_curve`: the mix of levels from everyone at the cheapest level through a
    uniformly random level to everyone at the dearest, levels ordered by their logged mean cost),
    so the point of the curve at EOM cost = budget is exactly the `random` row of
    `evaluate_policies`. `random_budgets` is accepted for compatibility and ignored. Returns the
    stacked `eom_curve` frames (CURVE_COLUMNS) with `model` set to the name, 'oracle' or 'random'.
    """
    ev, _ = _checked(events)
    frames = []
    k = None
    for name, spec in models.items():
        coefficients = (spec[-2], spec[-1])
        k = np.shape(coefficients[0])[1] if k is None else k
        frames.append(eom_curve(coefficients, ev, None, n_points=n_points, truth=truth, model=name))
        if log:
            log(f"curve of {name}: {len(frames[-1])} points")
    if truth is not None:
        k = np.shape(truth.response)[1]
        frames.append(eom_curve((truth.response, truth.cost), ev, None, n_points=n_points, truth=truth,
                                model="oracle"))
    if k is None:
        raise EvaluationError("policy_curves needs at least one model or the truth")
    level_costs = logged_level_costs(ev.logged, ev.cost, ev.propensity, k)
    rnd = random_reference_curve(ev, level_costs, truth=truth)
    frames.append(rnd[CURVE_COLUMNS])
    return pd.concat(frames, ignore_index=True)
