"""The `dfcl_discount` preset: the DFCL paper's five-level discount campaign (§6.1.1 "Marketing data").

Shops/users get one of five discount rates each day (levels 0, 5, 10, 15, 20 % off), at random
(uniform RCT, logged propensity 1/5). The response is binary (the user orders that day or not); the
cost of an order is the discount rate x the user's order value (cost rule 'column': the events carry
the realized cost, 0 without an order), so the expected cost of level j is d_j x ov_i x p_i(d_j).

Users (static over the simulated days):
  numeric      activity (recent order frequency, 0-1), avg_basket (the order value ov_i seen through
               10 % multiplicative noise), coupon_rate (past share of orders with a discount, 0-1),
               distance_km (> 0)
  categorical  city (4 cities), segment (new / regular / loyal)

True order probability at discount d (non-decreasing in d):
  p_i(d) = base_i + A_i h_i(d)
  base_i = sigmoid(-1.2 + 2.4 (activity_i - 0.5) + city_base + segment_base + 0.35 sin(2 distance_i))
  A_i    = 0.6 (1 - base_i) sigmoid(-0.6 + 4 (coupon_rate_i - 0.3) + city_sens + segment_sens
                                     - 1.5 (activity_i - 0.5) + e_i),  e_i ~ N(0, 0.4) unobserved
  h_i    = (1 - exp(-d / s_i)) / (1 - exp(-0.2 / s_i)), s_i = 0.08 e^{N(0, 0.25)} (concave: diminishing
           returns) for most users; d^4 / (d^4 + x0_i^4) / h(0.2) with x0_i = 0.12 e^{N(0, 0.15)}
           ("threshold" users: S-shaped, little reaction below ~10 % off) for 60 % of the 'new'
           segment and 10 % of the others.
  ov_i   = exp(N(3.3, 0.35)) (about 27 per order).
Why this setting: the response is a small, heterogeneous lift on a large, feature-driven base rate,
and part of it is non-concave, so a two-stage model that minimizes log-loss spends its fit on the
base rate while the allocation depends only on the lift per unit cost: the log-loss optimum of a
finite model is not the decision optimum (DFCL §1, §4).

Budgets: six per-capita budgets at 10, 20, ..., 60 % of the range between the cheapest (no
discount: 0) and the dearest allocation (everyone 20 % off) under the true costs (the Table 3
analogue of benchmarks/dfcl_paper.py evaluates all six from one trained model).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit

from promo_assets.simulation.landing import (
    CampaignDesign,
    Log,
    Pool,
    SimulationRequest,
    SimulationSummary,
    rct_config,
    rng_pool,
    write_campaign,
)

LEVELS = (0.0, 0.05, 0.10, 0.15, 0.20)
CITIES = ("beijing", "shanghai", "chengdu", "wuhan")
CITY_SHARE = (0.3, 0.3, 0.2, 0.2)
CITY_BASE = (0.15, 0.1, -0.1, -0.15)
CITY_SENS = (-0.4, -0.2, 0.3, 0.5)
SEGMENTS = ("new", "regular", "loyal")
SEGMENT_SHARE = (0.25, 0.5, 0.25)
SEGMENT_BASE = (-0.4, 0.0, 0.5)
SEGMENT_SENS = (0.5, 0.0, -0.6)
BUDGET_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)

DESCRIPTION = (
    "DFCL paper §6.1.1 five-level discount campaign: discount rates 0-20 %, binary order response, "
    "cost = discount x order value (cost column); heterogeneous, partly S-shaped lifts on a "
    "feature-driven base rate; six budgets across the range."
)
DEFAULTS: dict[str, Any] = {"daily_active": 0.5}


def dfcl_pool(users: int, seed: int) -> tuple[Pool, list[float]]:
    """The simulated users and their truth (see the module docstring), and the six budgets."""
    rng = rng_pool(seed)
    activity = rng.uniform(size=users)
    order_value = np.exp(rng.normal(3.3, 0.35, size=users))
    basket = order_value * np.exp(rng.normal(0.0, 0.1, size=users))
    coupon_rate = rng.beta(2.0, 5.0, size=users)
    distance = rng.gamma(2.0, 1.5, size=users)
    city = rng.choice(len(CITIES), size=users, p=CITY_SHARE)
    segment = rng.choice(len(SEGMENTS), size=users, p=SEGMENT_SHARE)
    noise = rng.normal(0.0, 0.4, size=users)
    speed = 0.08 * np.exp(rng.normal(0.0, 0.25, size=users))
    x0 = 0.12 * np.exp(rng.normal(0.0, 0.15, size=users))
    threshold = rng.uniform(size=users) < np.where(segment == 0, 0.6, 0.1)

    base = expit(-1.2 + 2.4 * (activity - 0.5) + np.take(CITY_BASE, city) + np.take(SEGMENT_BASE, segment)
                 + 0.35 * np.sin(2.0 * distance))
    lift = 0.6 * (1 - base) * expit(-0.6 + 4.0 * (coupon_rate - 0.3) + np.take(CITY_SENS, city)
                                    + np.take(SEGMENT_SENS, segment) - 1.5 * (activity - 0.5) + noise)
    d = np.asarray(LEVELS)[None, :]
    top = LEVELS[-1]
    concave = (1 - np.exp(-d / speed[:, None])) / (1 - np.exp(-top / speed))[:, None]
    s_shape = (d ** 4 / (d ** 4 + x0[:, None] ** 4)) / (top ** 4 / (top ** 4 + x0 ** 4))[:, None]
    h = np.where(threshold[:, None], s_shape, concave)
    p = base[:, None] + lift[:, None] * h
    cost = d * order_value[:, None] * p
    pool = Pool(
        features={"activity": activity, "avg_basket": basket, "coupon_rate": coupon_rate,
                  "distance_km": distance, "city": city, "segment": segment},
        categories={"city": list(CITIES), "segment": list(SEGMENTS)},
        expected_response=p, expected_cost=cost, order_value=order_value,
    )
    dearest = float(cost.max(axis=1).mean())
    budgets = [round(f * dearest, 4) for f in BUDGET_FRACTIONS]
    return pool, budgets


def simulate_dfcl(request: SimulationRequest, *, daily_active: float = DEFAULTS["daily_active"],
                  log: Log = None) -> SimulationSummary:
    """Write a `dfcl_discount` campaign as `request` asks (see the module docstring)."""
    pool, budgets = dfcl_pool(request.users, request.seed)
    config = rct_config({"levels": list(LEVELS)}, "column", budgets)
    design = CampaignDesign("dfcl_discount", config, list(LEVELS), "column", {"daily_active": float(daily_active)},
                            float(daily_active))
    return write_campaign(request, design, pool, log=log)
