"""The `dipn_synthetic_1` / `dipn_synthetic_2` presets: the DIPN paper's synthetic generator (§5.1).

Paper (DIPN, §5.1, Eq. 18-20): the features are three 1-in-n categorical variables with n1, n2, n3
categories (data set 1: (2, 2, 2); data set 2: (3, 5, 7)). For each of the n1 n2 n3 combinations:
a ~ U(0, 1), b = 1 - a, mu ~ U(-50, 150), delta ~ U(0, 50), and the expected response at the
integer incentive i = 0..100 is (Eq. 19, 20)

    y[i] = a + b / (100 Z) * sum_{h=0..i} exp(-(h - mu)^2 / (2 delta^2)),
    Z    = max_{h=0..100} exp(-(h - mu)^2 / (2 delta^2)).

Each combination gets a random integer z ~ U{1..1000} (its number of data points); each data point
gets a promotion p ~ U{1..100} and a 0/1 label ~ Bernoulli(y[p]). The cost is the redeemed amount
(p x label): the paper's "response induced cost" with the per-capita constraint 11.0.

Choices the text leaves open (ours, documented):
- Users instead of bare data points: each pool user belongs to one combination, drawn with
  probability z_c / sum(z) (the paper's unequal, sparse combination sizes); every active user gets
  one event per day. With days=1, daily_active=1.0 the events are exactly the paper's data points.
- Levels: the 100 integer promotions 1..100 (level k = incentive k + 1), as in the paper; the option
  `levels` restricts the grid to a subset of the integers 0..100 (the curve is defined there).
- The parameters are drawn per combination in the order (a, mu, delta) for combination
  (c1, c2, c3) in lexicographic order, then z for every combination; the sum in Eq. 19 is evaluated
  in log space (exp(-((h-mu)^2 - min_h (h-mu)^2) / (2 delta^2))), identical to the paper's
  expression but safe when delta is tiny and mu lies far outside [0, 100].
- y can exceed 1 only if almost all 101 terms equal Z, which delta <= 50 rules out; we still clip
  to [0, 1] (a no-op for every draw we have seen).
- The feature columns are called cat1, cat2, cat3 with values 'v0', 'v1', ...; RCT logging with
  logged propensity 1/K; budgets [5, 11, 20] per capita (11.0 is the paper's constraint).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from promo_assets.simulation.landing import (
    CampaignDesign,
    Log,
    Pool,
    SimulationError,
    SimulationRequest,
    SimulationSummary,
    budgets_within,
    plain_number,
    rct_config,
    rng_pool,
    write_campaign,
)

CATEGORIES = {"dipn_synthetic_1": (2, 2, 2), "dipn_synthetic_2": (3, 5, 7)}
PAPER_LEVELS = tuple(range(1, 101))
DESCRIPTION = {
    "dipn_synthetic_1": "DIPN paper §5.1 generator (Eq. 18-20), categorical features n=(2,2,2); "
    "levels = promotions 1..100, cost = promotion x response, budget 11.0 per capita.",
    "dipn_synthetic_2": "DIPN paper §5.1 generator (Eq. 18-20), categorical features n=(3,5,7); "
    "levels = promotions 1..100, cost = promotion x response, budget 11.0 per capita.",
}
DEFAULTS: dict[str, Any] = {
    "levels": "1..100",
    "daily_active": 0.5,
    "budget_per_capita": [5.0, 11.0, 20.0],
}


def dipn_curves(a: np.ndarray, mu: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Eq. 19-20: y[c, i] for combinations c and integer incentives i = 0..100 (C x 101)."""
    h = np.arange(101, dtype=np.float64)[None, :]
    sq = (h - mu[:, None]) ** 2
    # exp(-(h-mu)^2/(2 d^2)) / Z  with Z = max_h exp(...)  ==  exp(-(sq - min sq) / (2 d^2))
    ratio = np.exp(-(sq - sq.min(axis=1, keepdims=True)) / (2.0 * delta[:, None] ** 2))
    y = a[:, None] + (1.0 - a)[:, None] / 100.0 * np.cumsum(ratio, axis=1)
    return np.clip(y, 0.0, 1.0)


def combination_parameters(n: tuple[int, int, int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """(a, mu, delta) per combination and its size weight z ~ U{1..1000} (§5.1)."""
    n_comb = int(np.prod(n))
    draws = rng.uniform(size=(n_comb, 3))
    a = draws[:, 0]
    mu = -50.0 + 200.0 * draws[:, 1]
    delta = 50.0 * draws[:, 2]
    delta = np.maximum(delta, 1e-9)  # U(0, 50) excludes 0; guard the measure-zero draw
    z = rng.integers(1, 1001, size=n_comb)
    return {"a": a, "b": 1.0 - a, "mu": mu, "delta": delta, "z": z}


def simulate_dipn(
    request: SimulationRequest,
    *,
    variant: str,
    levels: list[int] | None = None,
    daily_active: float = DEFAULTS["daily_active"],
    budget_per_capita: list[float] | None = None,
    log: Log = None,
) -> SimulationSummary:
    """Write a DIPN synthetic campaign (variant 'dipn_synthetic_1' or 'dipn_synthetic_2') as `request` asks."""
    users, seed = request.users, request.seed
    n = CATEGORIES[variant]
    levels_arr = np.asarray(PAPER_LEVELS if levels is None else levels, dtype=np.float64)
    if (
        levels_arr.ndim != 1 or levels_arr.size < 2 or np.any(np.diff(levels_arr) <= 0)
        or np.any(levels_arr != np.round(levels_arr)) or levels_arr[0] < 0 or levels_arr[-1] > 100
    ):
        raise SimulationError(f"{variant}: levels must be >= 2 ascending integers in 0..100, got {levels!r}")
    rng = rng_pool(seed)
    params = combination_parameters(n, rng)
    curves = dipn_curves(params["a"], params["mu"], params["delta"])  # C x 101
    combo = rng.choice(curves.shape[0], size=users, p=params["z"] / params["z"].sum())
    codes = np.asarray(list(itertools.product(*(range(k) for k in n))), dtype=np.int64)[combo]
    expected_response = curves[combo][:, levels_arr.astype(np.int64)]
    pool = Pool(
        features={"cat1": codes[:, 0], "cat2": codes[:, 1], "cat3": codes[:, 2]},
        categories={f"cat{j + 1}": [f"v{v}" for v in range(k)] for j, k in enumerate(n)},
        expected_response=expected_response,
        expected_cost=expected_response * levels_arr[None, :],
    )
    budgets = budgets_within(list(DEFAULTS["budget_per_capita"] if budget_per_capita is None else budget_per_capita), pool)
    options = {
        "levels": "1..100" if levels is None else [plain_number(x) for x in levels_arr],
        "daily_active": float(daily_active),
        "n_categories": list(n),
    }
    config = rct_config({"levels": [plain_number(x) for x in levels_arr]}, "redeemed", budgets, ips_clip=200.0)
    design = CampaignDesign(variant, config, list(levels_arr), "redeemed", options, float(daily_active))
    return write_campaign(request, design, pool, log=log)
