"""The deployed champion's effect, estimated from one decided day's events with the logged propensities.

A decision gives every user either the champion's level π_i (probability 1 − s) or a level drawn from
the exploration mix w (probability s, the user chosen at random, independently of the features). The
probability that the decision gives user i level k is therefore known exactly:

    P_i(k) = (1 − s) · 1{k = π_i} + s · w_k        (the propensity written with the decision)

so every event is a draw of a randomized experiment, and the doubly robust pseudo-outcome

    Γ_ik = m_ik + 1{a_i = k} / P_i(k) · (y_i − m_ik)        (and Λ_ik the same for the cost)

is an unbiased estimate of user i's expected response at level k, whatever the champion's predictions
m_ik (they serve as control variates: the better they predict, the narrower the interval; DR /
CUPED-style). a_i is the *decided* level: the effect is that of deciding by the champion (intent to
treat), so a coupon system that did not apply a decision lowers the effect rather than biasing it.

From the day's events (n of them) the means of Γ and Λ estimate

- the champion's value and spend per user, V_C = mean Γ_iπ_i and S_C = mean Λ_iπ_i;
- every level's mean response and cost, μ_k = mean Γ_ik and κ_k = mean Λ_ik;

and from them the two comparisons a marketing team reports:

- **against random levels at equal spend**: R(S) is the value of the cost-matched random reference
  of the leaderboard (`promo_assets.evaluation.honest.random_mix`: the cheapest level mixed with a
  uniform level, or a uniform level with the dearest, in the proportion whose cost is S), and the
  effect is Δ = V_C − R(S_C): the extra response per user the champion brings over random levels
  that spend the same;
- **against the cheapest level** ("no incentive" where level 0 costs nothing): Δ₀ = V_C − μ_cheapest.

Each is a smooth function g of the means, so each event gets its influence term
ψ_i = g(θ̂) + ∇g(θ̂) · (T_i − θ̂) (T_i: its pseudo-outcomes), whose mean is the estimate and whose spread
gives the interval. The terms of many days are pooled into a confidence sequence
(`promo_assets.monitoring.sequential`), valid however often it is read.

The **plain difference of means** between the champion and the explore group is computed beside it, as
the reference for the interval's width (it is not at equal spend).

No dagster here (domain code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from promo_assets.core.coefficients import Coefficients
from promo_assets.evaluation.records import LoggedEvents


@dataclass(frozen=True)
class EffectTerms:
    """One day's estimates and the per-event influence terms of the two comparisons."""

    effect: float               # Δ: champion − random at equal spend (per user)
    psi: np.ndarray             # n influence terms of Δ (mean = effect)
    vs_cheapest: float          # Δ₀: champion − the cheapest level
    psi_cheapest: np.ndarray
    champion_value: float       # V_C
    champion_cost: float        # S_C
    random_value: float         # R(S_C)
    level_value: np.ndarray     # μ_k
    level_cost: np.ndarray      # κ_k
    dm_effect: float            # plain difference of means: champion group − explore group (response)
    dm_se: float
    matched: bool               # False when S_C lies outside the random reference's cost range (R clipped)


@dataclass(frozen=True)
class Deployment:
    """How a day's decision gave the levels (what makes each event a randomized draw): the champion's
    level π_i per event (n, int), the realized exploration share s, the exploration mix w (K) and
    whether each user was explored (n, bool)."""

    champion_level: np.ndarray
    share: float
    mix: np.ndarray
    explore: np.ndarray


def _random_value(level_value: np.ndarray, level_cost: np.ndarray, spend: float, order: np.ndarray) -> tuple[float, bool]:
    """R(spend): the value of the cost-matched random mix (cheapest ↔ uniform ↔ dearest, linear in
    between; `order`: the levels' costs that say which is cheapest and dearest)."""
    lo, hi = int(np.argmin(order)), int(np.argmax(order))
    v0, c0 = level_value[lo], level_cost[lo]
    vu, cu = float(level_value.mean()), float(level_cost.mean())
    vd, cd = level_value[hi], level_cost[hi]
    if spend <= cu:
        if cu - c0 <= 1e-12:
            return float(vu), abs(spend - cu) <= 1e-12
        share = (spend - c0) / (cu - c0)
        return float(v0 + min(max(share, 0.0), 1.0) * (vu - v0)), 0.0 <= share
    if cd - cu <= 1e-12:
        return float(vu), False
    share = (spend - cu) / (cd - cu)
    return float(vu + min(share, 1.0) * (vd - vu)), share <= 1.0


def effect_terms(events: LoggedEvents, deployment: Deployment, predicted: Coefficients, level_costs) -> EffectTerms:
    """The day's effect estimates from its n events (module docstring).

    events: the day's n events, `logged` the decided level a_i (int), `response` and `cost` realized
    (their propensity is the deployment's, computed here); deployment: the champion's levels π_i, the
    realized exploration share s, the exploration mix w and who was explored (`Deployment`);
    predicted: the champion's predictions m_ik (response, cost; n × K each); level_costs: the levels'
    incentives (which level is cheapest / dearest).
    """
    y = np.asarray(events.response, dtype=np.float64)
    c = np.asarray(events.cost, dtype=np.float64)
    a = np.asarray(events.logged, dtype=np.int64)
    pi = np.asarray(deployment.champion_level, dtype=np.int64)
    m = np.asarray(predicted[0], dtype=np.float64)
    q = np.asarray(predicted[1], dtype=np.float64)
    w = np.asarray(deployment.mix, dtype=np.float64)
    share = deployment.share
    order = np.asarray(level_costs, dtype=np.float64)
    n, k = m.shape
    rows = np.arange(n)
    prob = share * np.broadcast_to(w, (n, k)).copy()
    prob[rows, pi] += 1.0 - share
    hit = np.zeros((n, k))
    hit[rows, a] = 1.0 / prob[rows, a]
    gamma = m + hit * (y[:, None] - m)            # Γ (n × K)
    lam = q + hit * (c[:, None] - q)              # Λ
    t = np.column_stack([gamma[rows, pi], lam[rows, pi], gamma, lam])   # T_i
    theta = t.mean(axis=0)
    cheap = int(np.argmin(order))

    def g(th: np.ndarray) -> float:
        r, _ = _random_value(th[2:2 + k], th[2 + k:], th[1], order)
        return th[0] - r

    effect = g(theta)
    grad = np.empty(theta.size)
    for j in range(theta.size):  # central differences: g is piecewise linear in the means
        h = 1e-6 * max(1.0, abs(theta[j]))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        grad[j] = (g(up) - g(down)) / (2 * h)
    psi = effect + (t - theta) @ grad
    psi0 = gamma[rows, pi] - gamma[:, cheap]
    random_value, matched = _random_value(theta[2:2 + k], theta[2 + k:], theta[1], order)
    ex = np.asarray(deployment.explore, dtype=bool)
    dm, dm_se = math.nan, math.nan
    if ex.sum() >= 2 and (~ex).sum() >= 2:
        dm = float(y[~ex].mean() - y[ex].mean())
        dm_se = float(math.sqrt(y[~ex].var(ddof=1) / (~ex).sum() + y[ex].var(ddof=1) / ex.sum()))
    return EffectTerms(effect=float(effect), psi=psi, vs_cheapest=float(psi0.mean()), psi_cheapest=psi0,
                       champion_value=float(theta[0]), champion_cost=float(theta[1]), random_value=random_value,
                       level_value=theta[2:2 + k].copy(), level_cost=theta[2 + k:].copy(), dm_effect=dm, dm_se=dm_se,
                       matched=matched)


def true_effect(true_response, true_cost, champion_level, level_costs) -> dict:
    """The same comparisons in truth (simulated campaigns): the champion's levels π for the users decided
    for against the cost-matched random reference at the champion's true spend, and against the
    cheapest level, per user (the benchmark's yardstick for the interval's coverage)."""
    v = np.asarray(true_response, dtype=np.float64)
    c = np.asarray(true_cost, dtype=np.float64)
    pi = np.asarray(champion_level, dtype=np.int64)
    rows = np.arange(v.shape[0])
    order = np.asarray(level_costs, dtype=np.float64)
    vc, sc = float(v[rows, pi].mean()), float(c[rows, pi].mean())
    r, _ = _random_value(v.mean(axis=0), c.mean(axis=0), sc, order)
    return {"effect": vc - r, "vs_cheapest": vc - float(v[:, int(np.argmin(order))].mean()), "champion_value": vc,
            "champion_cost": sc, "random_value": r}
