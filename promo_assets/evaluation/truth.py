"""Ground truth for simulated campaigns, the oracle, and the random reference policy.

- `true_policy_value`: the true per-capita response and cost of an allocation, from the truth
  curves (the simulator's expected response / expected cost of every user at every level).
- `oracle_policy`: the allocator (`promo_assets.allocation.solve`) run on the true curves at the
  same per-capita budget: the best any model's coefficients can do.
- `random_policy`: uniformly random levels, scaled to respect the budget (see its docstring).
"""

from __future__ import annotations

import numpy as np

from promo_assets.evaluation.eom import EvaluationError, _as_levels, _as_matrix

__all__ = ["true_policy_value", "oracle_policy", "random_policy", "allocate"]


def true_policy_value(assigned, true_values, true_costs) -> tuple[float, float]:
    """True per-capita (response, cost) of an allocation.

    Takes assigned (N levels), true_values and true_costs (N x K expected response / cost of each
    user at each level). Returns (mean_i v_i,a_i, mean_i c_i,a_i).
    """
    v = _as_matrix(true_values, "true_values")
    c = _as_matrix(true_costs, "true_costs", v.shape[0], v.shape[1])
    a = _as_levels(assigned, "assigned", n=v.shape[0], k=v.shape[1])
    rows = np.arange(v.shape[0])
    return float(v[rows, a].mean()), float(c[rows, a].mean())


def allocate(response, cost, budget_per_capita: float, seed: int = 0):
    """Allocate with the project's allocator at a per-capita budget.

    Thin call to `promo_assets.allocation.solve(response, cost, budget_per_capita, per_capita=True,
    seed=seed)`; returns its result (`.levels`, `.lambda_`, ...).
    """
    from promo_assets.allocation import solve

    return solve(np.asarray(response, dtype=np.float64), np.asarray(cost, dtype=np.float64),
                 float(budget_per_capita), per_capita=True, seed=seed)


def oracle_policy(true_values, true_costs, budget_per_capita: float, seed: int = 0) -> np.ndarray:
    """The oracle's allocation: the allocator run on the true curves at the same per-capita budget.

    Takes true_values, true_costs (N x K) and the budget; returns N assigned levels.
    """
    v = _as_matrix(true_values, "true_values")
    c = _as_matrix(true_costs, "true_costs", v.shape[0], v.shape[1])
    return np.asarray(allocate(v, c, budget_per_capita, seed=seed).levels, dtype=np.int64)


def random_policy(n_users: int, n_levels: int, cost, budget_per_capita: float, seed: int = 0) -> np.ndarray:
    """Uniformly random levels, scaled to respect a per-capita budget.

    Takes the number of users and levels, the expected cost of each level (K values, or N x K per
    user; e.g. the logged per-level mean cost), the per-capita budget and a seed.

    How it is scaled: with C_unif = the mean over users of the mean cost over levels (the expected
    per-capita cost of a uniformly random level) and C_min = the mean over users of their cheapest
    level's cost, a share q of the users (exactly floor(q N), chosen at random) gets a uniformly
    random level and everyone else their cheapest level, with
        q = 1                                   if C_unif <= budget,
        q = (budget - C_min) / (C_unif - C_min) if C_min < budget < C_unif,
        q = 0                                   if budget <= C_min (the budget cannot be met; all
                                                 users get their cheapest level).
    So the expected per-capita cost is min(C_unif, max(budget, C_min)) (up to the rounding of qN,
    which only lowers it). Returns N int levels.
    """
    if n_users < 1 or n_levels < 1:
        raise EvaluationError(f"n_users and n_levels must be >= 1, got {n_users}, {n_levels}")
    c = np.asarray(cost, dtype=np.float64)
    if c.ndim == 1:
        if c.shape[0] != n_levels:
            raise EvaluationError(f"costs has {c.shape[0]} levels, expected {n_levels}")
        c = np.broadcast_to(c, (n_users, n_levels))
    c = _as_matrix(c, "costs", n_users, n_levels)
    b = float(budget_per_capita)
    if not np.isfinite(b) or b < 0:
        raise EvaluationError(f"budget_per_capita must be a finite number >= 0, got {budget_per_capita!r}")
    cheapest = np.argmin(c, axis=1)
    c_min = float(c[np.arange(n_users), cheapest].mean())
    c_unif = float(c.mean())
    if c_unif <= b:
        q = 1.0
    elif b <= c_min:
        q = 0.0
    else:
        q = (b - c_min) / (c_unif - c_min)
    rng = np.random.default_rng(seed)
    levels = cheapest.astype(np.int64).copy()
    m = int(np.floor(q * n_users + 1e-9))
    chosen = rng.permutation(n_users)[:m]
    levels[chosen] = rng.integers(0, n_levels, size=m)
    return levels
