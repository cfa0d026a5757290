"""The `coman_spatiotemporal` preset (issue #17): a multi-attribute incentive campaign whose response
shifts by period of day and city, as in the CoMAN paper's Ele.me campaigns.

Incentive designs (option `incentive`):
  'coupon' (default)  "spend T, get A off" coupons, levels (amount, threshold) =
                      (0, 0), (3, 10), (5, 20), (5, 30), (8, 30), (10, 40); response increases with the
                      amount and decreases with the threshold; cost = amount x response (redeemed).
  'fee_waiver'        delivery-fee waivers on a fee of 6: levels (waiver, fee) = (w, 6 - w) for
                      w = 0, 1, 2, 3, 4, 6; response increases with the waiver (decreases with the fee
                      paid); cost = waiver x response.

Users (static over the days): numeric age, activity (0-28), avg_spend (> 0); categorical city (6
cities), period_of_day (breakfast, lunch, afternoon_tea, dinner, midnight_snack: the user's usual
ordering time; event_time falls in it), device; and the event day's weekday (monday .. sunday,
the same for every user on a day: the spatio-temporal embedding's third column, as in the paper's
temporal features; the population file and the truth are as of the last, holdout, day).

True response of user i at a level with attributes (a, t):
  u_i    = a exp(-t / (2 avg_spend_i))            coupon: the effective value (a threshold far above
                                                  the usual basket makes the coupon worth little)
  u_i    = waiver                                  fee waiver
  p_i    = base_i + amp_i h_city(u_i / s_i)
  base_i = sigmoid(-2.2 + 2.2 a_i + period_base + city_base + weekday_base + N(0, 0.2)),  a_i = activity / 28
  amp_i  = 0.8 (1 - base_i) sigmoid(period_sens + city_sens + weekday_sens - 2 (a_i - 0.5) + N(0, 0.3))
  weekday_base, weekday_sens: a modest weekday effect (monday .. sunday: base -0.1, -0.1, -0.05, 0,
  0.1, 0.25, 0.2; sensitivity 0, 0, 0, 0, 0.1, 0.25, 0.25: weekends order more and react more)
  s_i    = 5 period_speed e^{N(0, 0.15)}   (the incentive scale at which the user reacts)
  h      concave 1 - exp(-2v) in beijing and shanghai; convex min(1, 0.6 v^2) in chengdu and wuhan;
         S-shaped v^4 / (v^4 + 0.35) in hangzhou and xian; every h is non-decreasing, h(0) = 0, h <= 1
  p_i is clipped to at most 0.98.
So sensitivity curves differ in shape by city and in scale and amplitude by period (dinner and the
midnight snack are the most sensitive, breakfast the least). Logging: uniform RCT (propensity 1/K).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit

from promo_assets.simulation.landing import (
    CampaignDesign,
    Log,
    Pool,
    SimulationError,
    SimulationRequest,
    SimulationSummary,
    budgets_within,
    rct_config,
    rng_pool,
    write_campaign,
)

PERIODS = ("breakfast", "lunch", "afternoon_tea", "dinner", "midnight_snack")
PERIOD_SHARE = (0.15, 0.30, 0.15, 0.30, 0.10)
PERIOD_HOURS = ((6, 10), (10, 14), (14, 17), (17, 21), (21, 24))
PERIOD_BASE = (-0.4, 0.2, -0.2, 0.3, -0.1)
PERIOD_SENS = (-0.8, 0.0, 0.3, 0.5, 0.8)
PERIOD_SPEED = (1.4, 1.0, 0.9, 0.8, 0.6)
CITIES = ("beijing", "shanghai", "chengdu", "wuhan", "hangzhou", "xian")
CITY_SHARE = (0.2, 0.2, 0.15, 0.15, 0.15, 0.15)
CITY_BASE = (0.2, 0.25, -0.1, -0.15, 0.0, -0.2)
CITY_SENS = (-0.3, -0.2, 0.4, 0.5, 0.1, 0.3)
CITY_SHAPE = ("concave", "concave", "convex", "convex", "s", "s")
DEVICES = ("android", "ios")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAY_BASE = (-0.1, -0.1, -0.05, 0.0, 0.1, 0.25, 0.2)
WEEKDAY_SENS = (0.0, 0.0, 0.0, 0.0, 0.1, 0.25, 0.25)

COUPON_LEVELS = ((0, 0), (3, 10), (5, 20), (5, 30), (8, 30), (10, 40))
FEE = 6
WAIVERS = (0, 1, 2, 3, 4, 6)

DESCRIPTION = (
    "CoMAN-style multi-attribute campaign: coupons with amount (increasing) and threshold (decreasing), or "
    "incentive='fee_waiver'; five periods of day and six cities whose sensitivity curves are concave, convex or "
    "S-shaped, the event day's weekday with a modest weekday effect; daily uniform RCT; lists the monotone models in "
    "campaign.yaml models.include"
)
DEFAULTS: dict[str, Any] = {"incentive": "coupon", "daily_active": 0.5, "budget_per_capita": [0.4, 0.8, 1.2]}
MODELS = ["s_learner", "dipn", "lgbm_s", "lgbm_s_mono", "lgbm_t", "dnn_m", "fpm", "cmnn", "coman"]


def shape(name: str, x: np.ndarray) -> np.ndarray:
    """The city's sensitivity curve h(x) of the incentive x: increasing, h(0) = 0, h <= 1."""
    if name == "concave":
        return 1.0 - np.exp(-2.0 * x)
    if name == "convex":
        return np.minimum(1.0, 0.6 * x**2)
    return x**4 / (x**4 + 0.35)


@dataclass(frozen=True)
class Levels:
    """An incentive's levels: `rows` (one attribute mapping per level), the attributes' `directions`,
    the `cost_attribute` and the effective-value inputs `inputs` (K x 2)."""

    rows: list[dict[str, float]]
    directions: dict[str, str]
    cost_attribute: str
    inputs: np.ndarray


def levels_of(incentive: str) -> Levels:
    """The levels of `incentive` ('coupon' or 'fee_waiver')."""
    if incentive == "coupon":
        rows = [{"amount": a, "threshold": t} for a, t in COUPON_LEVELS]
        return Levels(rows, {"amount": "increasing", "threshold": "decreasing"}, "amount",
                      np.asarray(COUPON_LEVELS, float))
    if incentive == "fee_waiver":
        rows = [{"waiver": w, "fee": FEE - w} for w in WAIVERS]
        return Levels(rows, {"waiver": "increasing", "fee": "decreasing"}, "waiver",
                      np.asarray([[w, 0] for w in WAIVERS], float))
    raise SimulationError(f"coman_spatiotemporal: incentive must be 'coupon' or 'fee_waiver', got {incentive!r}")


def build_pool(users: int, seed: int, incentive: str) -> tuple[Pool, np.ndarray]:
    """The user pool, its true curves and the level cost amounts (see the module docstring)."""
    at = levels_of(incentive).inputs
    rng = rng_pool(seed)
    n = users
    age = np.clip(np.round(rng.normal(32.0, 9.0, n)), 18, 70)
    activity = np.round(28.0 * rng.beta(1.2, 1.5, n))
    a = activity / 28.0
    avg_spend = np.round(np.exp(rng.normal(3.2 + 0.3 * a, 0.35, n)), 2)
    city = rng.choice(len(CITIES), size=n, p=CITY_SHARE)
    period = rng.choice(len(PERIODS), size=n, p=PERIOD_SHARE)
    device = rng.choice(len(DEVICES), size=n, p=(0.6, 0.4))
    base_logit = (-2.2 + 2.2 * a + np.asarray(PERIOD_BASE)[period] + np.asarray(CITY_BASE)[city]
                  + rng.normal(0.0, 0.2, n))
    sens_logit = (np.asarray(PERIOD_SENS)[period] + np.asarray(CITY_SENS)[city] - 2.0 * (a - 0.5)
                  + rng.normal(0.0, 0.3, n))
    scale = 5.0 * np.asarray(PERIOD_SPEED)[period] * np.exp(rng.normal(0.0, 0.15, n))
    amount, threshold = at[:, 0][None, :], at[:, 1][None, :]
    u = amount * np.exp(-threshold / (2.0 * avg_spend[:, None]))
    v = u / scale[:, None]
    h = np.zeros_like(v)
    for c, name in enumerate(CITY_SHAPE):
        rows = city == c
        h[rows] = shape(name, v[rows])
    cost_amounts = at[:, 0]
    hours = np.asarray(PERIOD_HOURS, dtype=np.float64)[period]
    static = {"age": age, "activity": activity, "avg_spend": avg_spend, "city": city, "period_of_day": period,
              "device": device}
    categories = {"city": list(CITIES), "period_of_day": list(PERIODS), "device": list(DEVICES),
                  "weekday": list(WEEKDAYS)}

    def on(day: dt.date) -> Pool:
        wd = day.weekday()
        base = expit(base_logit + WEEKDAY_BASE[wd])
        amp = 0.8 * (1.0 - base) * expit(sens_logit + WEEKDAY_SENS[wd])
        expected_response = np.clip(base[:, None] + amp[:, None] * h, 0.0, 0.98)
        return Pool(features={**static, "weekday": np.full(n, wd, dtype=np.int64)}, categories=categories,
                    expected_response=expected_response, expected_cost=expected_response * cost_amounts[None, :],
                    hours=hours)

    pool = on(dt.date(2026, 1, 1))  # a thursday (no weekday effect): the pool the budgets are checked on
    pool.by_day = on
    return pool, cost_amounts


def simulate_coman(request: SimulationRequest, *, incentive: str = DEFAULTS["incentive"],
                   daily_active: float = DEFAULTS["daily_active"], budget_per_capita: list[float] | None = None,
                   log: Log = None) -> SimulationSummary:
    """Write a `coman_spatiotemporal` campaign as `request` asks (see the module docstring)."""
    users, seed = request.users, request.seed
    levels = levels_of(incentive)
    rows, directions, cost_attr = levels.rows, levels.directions, levels.cost_attribute
    pool, cost_amounts = build_pool(users, seed, incentive)
    budgets = budgets_within(list(DEFAULTS["budget_per_capita"] if budget_per_capita is None else budget_per_capita), pool)
    treatments = {"levels": rows, "attributes": {k: {"monotone": d} for k, d in directions.items()},
                  "cost": {"attribute": cost_attr}}
    config = rct_config(treatments, "redeemed", budgets, models={"include": list(MODELS)},
                        segments=["period_of_day", "city"])
    design = CampaignDesign("coman_spatiotemporal", config, list(cost_amounts), "redeemed",
                            {"incentive": incentive, "daily_active": float(daily_active)}, float(daily_active),
                            treatment_labels=[str(k) for k in range(len(rows))])
    return write_campaign(request, design, pool, log=log)
