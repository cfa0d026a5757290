"""The `demo` preset: the built-in default campaign.

A coupon campaign with six incentive levels (amounts 0, 1, 2, 3, 5, 8), a binary response
(redeemed and paid or not) and cost = incentive x response (cost rule 'redeemed').

Users (static over the simulated days):
  numeric      age (18-75), activity (active days in the last 28, 0-28), tenure_days (0-3650),
               avg_spend (average basket, > 0)
  categorical  city (5 cities), device (android / ios / web), period_of_day (the user's usual
               time of day: morning / afternoon / evening / night; event_time falls in it)

True response of user i at incentive x (monotone non-decreasing in x):
  p_i(x) = base_i + A_i * h_i(x),   h_i(0) = 0, h_i increasing, h_i < 1
  base_i = sigmoid(-2.7 + 2.8 a_i + 0.3 (log avg_spend_i - 3.3) + city + device + 0.15 [tenure > 365]),
           a_i = activity_i / 28 (active users redeem more without any incentive)
  A_i    = 0.75 (1 - base_i) sigmoid(-0.2 + city_sens + period_sens - 3 (a_i - 0.5) - 0.015 (age_i - 37) + e_i),
           e_i ~ N(0, 0.2) unobserved (sensitive: inactive, young, evening users, chengdu / wuhan;
           active users redeem anyway and care little about the coupon)
  h_i    = 1 - exp(-x / s_i) for most users (diminishing returns), s_i = 2.5 speed(period) e^{N(0, 0.15)};
           x^3 / (x^3 + x0_i^3) for "threshold" users (S-shaped: 85 % of android users under 30, 5 % of
           the others), x0_i = 3.5 speed(period) e^{N(0, 0.2)}; evening users react to smaller amounts
           (speed 0.7), morning users to larger ones (1.3).

Logging (option `logging`):
  'rct' (default)  uniform random level each day, logged propensity 1/K, randomized: true.
  'confounded'     the DIPN paper's Figure 3: the logged level depends on activity, active users get
                   lower incentives: P(level j | i) = softmax_j(-gamma (2 a_i - 1) t_j), t = linspace(-1, 1, K),
                   gamma = option `confounding` (default 2.0). The events carry no propensity column,
                   campaign.yaml says randomized: false, and the true propensities are written to
                   truth/propensity.parquet.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit, softmax

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

LEVELS = (0.0, 1.0, 2.0, 3.0, 5.0, 8.0)
CITIES = ("beijing", "shanghai", "guangzhou", "chengdu", "wuhan")
CITY_SHARE = (0.25, 0.25, 0.2, 0.15, 0.15)
CITY_BASE = (0.10, 0.15, 0.0, -0.10, -0.15)
CITY_SENS = (-0.4, -0.2, 0.0, 0.35, 0.5)
DEVICES = ("android", "ios", "web")
DEVICE_SHARE = (0.55, 0.35, 0.10)
DEVICE_BASE = (0.0, 0.15, -0.2)
PERIODS = ("morning", "afternoon", "evening", "night")
PERIOD_SHARE = (0.25, 0.30, 0.35, 0.10)
PERIOD_HOURS = ((6, 12), (12, 18), (18, 24), (0, 6))
PERIOD_SENS = (-0.5, 0.0, 0.5, 0.2)
PERIOD_SPEED = (1.3, 1.0, 0.7, 0.9)

DESCRIPTION = (
    "Default coupon campaign: levels 0,1,2,3,5,8, binary response, cost = incentive x response; "
    "numeric age/activity/tenure_days/avg_spend and categorical city/device/period_of_day; "
    "city and period of day change incentive sensitivity; daily uniform RCT, or "
    "logging='confounded' (active users get lower incentives, propensities not logged)."
)
DEFAULTS: dict[str, Any] = {
    "levels": list(LEVELS),
    "daily_active": 0.5,
    "logging": "rct",
    "confounding": 2.0,
    "budget_per_capita": [0.5, 1.0, 1.5],
}


def build_pool(users: int, seed: int, levels: np.ndarray, logging: str, confounding: float) -> Pool:
    """Draw the user pool and its true curves (see the module docstring)."""
    rng = rng_pool(seed)
    n = users
    age = np.clip(np.round(rng.normal(37.0, 11.0, n)), 18, 75)
    activity = np.round(28.0 * rng.beta(1.3, 1.3, n))
    a = activity / 28.0
    tenure = np.minimum(np.round(rng.exponential(500.0, n) + 60.0 * a), 3650.0)
    avg_spend = np.round(np.exp(rng.normal(3.0 + 0.6 * a, 0.5, n)), 2)
    city = rng.choice(len(CITIES), size=n, p=CITY_SHARE)
    device = rng.choice(len(DEVICES), size=n, p=DEVICE_SHARE)
    period = rng.choice(len(PERIODS), size=n, p=PERIOD_SHARE)
    e_amp = rng.normal(0.0, 0.2, n)
    e_speed = rng.normal(0.0, 0.15, n)
    e_x0 = rng.normal(0.0, 0.2, n)
    u_threshold = rng.random(n)

    def truth_of(f: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The true curves of these users for features `f` (a category code beyond the preset's own,
        e.g. a new city of a population shift, has no effect of its own)."""
        a = f["activity"] / 28.0
        age, device, period = f["age"], f["device"], f["period_of_day"]
        threshold = u_threshold < np.where((age < 30) & (device == 0), 0.85, 0.05)
        base = expit(
            -2.7 + 2.8 * a + 0.3 * (np.log(f["avg_spend"]) - 3.3)
            + _effect(CITY_BASE, f["city"]) + _effect(DEVICE_BASE, device) + 0.15 * (f["tenure_days"] > 365)
        )
        amp = 0.75 * (1.0 - base) * expit(
            -0.2 + _effect(CITY_SENS, f["city"]) + _effect(PERIOD_SENS, period)
            - 3.0 * (a - 0.5) - 0.015 * (age - 37.0) + e_amp
        )
        speed = _effect(PERIOD_SPEED, period, 1.0)
        s = 2.5 * speed * np.exp(e_speed)
        x0 = 3.5 * speed * np.exp(e_x0)
        x = levels[None, :]
        h_dim = 1.0 - np.exp(-x / s[:, None])
        h_s = x**3 / (x**3 + x0[:, None] ** 3)
        h = np.where(threshold[:, None], h_s, h_dim)
        expected_response = base[:, None] + amp[:, None] * h
        return expected_response, expected_response * x

    features = {"age": age, "activity": activity, "tenure_days": tenure, "avg_spend": avg_spend,
                "city": city, "device": device, "period_of_day": period}
    expected_response, expected_cost = truth_of(features)

    assignment = None
    if logging == "confounded":
        t = np.linspace(-1.0, 1.0, levels.size)
        assignment = softmax(-confounding * (2.0 * a - 1.0)[:, None] * t[None, :], axis=1)
    hours = np.asarray(PERIOD_HOURS, dtype=np.float64)[period]
    return Pool(
        features=features,
        categories={"city": list(CITIES), "device": list(DEVICES), "period_of_day": list(PERIODS)},
        expected_response=expected_response,
        expected_cost=expected_cost,
        assignment=assignment,
        hours=hours,
        truth_of=truth_of,
    )


def _effect(table: tuple[float, ...], codes: np.ndarray, unknown: float = 0.0) -> np.ndarray:
    """`table[code]` per user; `unknown` for a code beyond the table (a category the preset does not know)."""
    values = np.append(np.asarray(table, dtype=np.float64), unknown)
    return values[np.minimum(codes, len(table))]


def simulate_demo(
    request: SimulationRequest,
    *,
    levels: list[float] | None = None,
    daily_active: float = DEFAULTS["daily_active"],
    logging: str = DEFAULTS["logging"],
    confounding: float = DEFAULTS["confounding"],
    budget_per_capita: list[float] | None = None,
    log: Log = None,
) -> SimulationSummary:
    """Write a `demo` campaign as `request` asks (see the module docstring for the model)."""
    users, seed = request.users, request.seed
    levels_arr = np.asarray(DEFAULTS["levels"] if levels is None else levels, dtype=np.float64)
    if levels_arr.ndim != 1 or levels_arr.size < 2 or levels_arr[0] < 0 or np.any(np.diff(levels_arr) <= 0):
        raise SimulationError(f"demo: levels must be >= 2 ascending non-negative amounts, got {levels!r}")
    if logging not in ("rct", "confounded"):
        raise SimulationError(f"demo: logging must be 'rct' or 'confounded', got {logging!r}")
    if not np.isfinite(confounding) or confounding < 0:
        raise SimulationError(f"demo: confounding must be a finite number >= 0, got {confounding!r}")
    pool = build_pool(users, seed, levels_arr, logging, float(confounding))
    budgets = budgets_within(list(DEFAULTS["budget_per_capita"] if budget_per_capita is None else budget_per_capita), pool)
    options = {
        "levels": [plain_number(x) for x in levels_arr],
        "daily_active": float(daily_active),
        "logging": logging,
        "confounding": float(confounding),
    }
    config = rct_config({"levels": [plain_number(x) for x in levels_arr]}, "redeemed", budgets, randomized=logging == "rct")
    design = CampaignDesign("demo", config, list(levels_arr), "redeemed", options, float(daily_active),
                            log_propensity=logging == "rct")
    return write_campaign(request, design, pool, log=log)
