"""Simulator preset `bipartite`: customers, merchants and payment edges (the GNN/hazard paper's setting).

The generative story (all numbers are our choices; the paper publishes no generator):

* Merchants m have observed features ``m_f0..m_f3`` and a latent *enthusiasm* e_m (partly explained
  by ``m_f1``, partly hidden). Popular merchants (``m_f0``) attract more payments.
* Every customer u pays at ``1 + Poisson(edges_per_customer - 1)`` merchants drawn by popularity; the
  payment history is written as daily edge files (``edges/<date>.parquet``: user_id, merchant_id,
  n_payments, amount, event_date).
* The *bipartite influence*: I_u, the payment-weighted mean enthusiasm of the merchants u pays at,
  raises u's hazard of redeeming (customers of enthusiastic merchants respond more), and the mean
  responsiveness of a merchant's customers raises its sharing volume.
* Customers redeem a coupon of amount r when their latent threshold T_u <= r, with T_u drawn (per
  exposure) from a piecewise-constant hazard: a natural rate ``base_u`` at r = 0 (higher for
  customers with a long payment history), a low sensitivity ``low_u`` per 50 below the change point
  (default 100), a much larger ``high_u`` per 50 on [100, 150) and a small ``tail_u`` above (the
  paper's change points, Fig. 5: the curve jumps after 100 and then flattens below 1, which a
  logistic curve cannot follow). base/low/high/tail depend on *different* features, so the curves
  are not proportional across customers (Cox's assumption fails). Expected response at level j:
  ``1 - exp(-Lambda_u(r_j))`` with ``Lambda_u`` the cumulative hazard (the paper's Eq. 10 form).
* Merchants' expected sharing count at commission c: ``v_m * (1 + s_m * (c / 100) ** e)``, e =
  ``merchant_exponent`` (default 0.8: concave, so the paper's linear merchant head is misspecified; 1.0:
  linear), with a
  volume v_m and a slope s_m that grows with enthusiasm; the RCT count is Poisson. ``prev_shares``
  (shares in the days before the campaign, at no commission) is a merchant feature and the paper's
  normalizer of the merchant label.

Written files (the landing format of DESIGN.md plus the merchant side)::

    campaign.yaml                          customer levels, `merchants:` block, ratio budgets
    events/<date>.parquet                  customer RCT: user_id, treatment, response, cost,
                                           propensity, merchant_id, c_f0..c_f4, segment
    edges/<date>.parquet                   user_id, merchant_id, n_payments, amount, event_date
    population/<last date>.parquet         user_id + customer features (every customer)
    merchants/<date>.parquet               merchant RCT: merchant_id, treatment (commission),
                                           response (sharing count), cost, propensity,
                                           prev_shares, m_f0..m_f3
    merchant_population/<last date>.parquet merchant_id, prev_shares, m_f0..m_f3 (every merchant)
    truth/response.parquet                 user_id, level, incentive, expected_response, expected_cost
    truth/merchant_response.parquet        merchant_id, level, incentive, commission,
                                           expected_response, expected_cost
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from promo_assets.config.campaign import dump_campaign_yaml
from promo_assets.core.errors import DomainError
from promo_assets.simulation.landing import SimulationRequest

CUSTOMER_LEVELS = (0, 50, 100, 150, 200)
MERCHANT_LEVELS = (0, 25, 50, 75, 100)
CUSTOMER_FEATURES = ("c_f0", "c_f1", "c_f2", "c_f3", "c_f4")
CUSTOMER_CATEGORICAL = ("segment",)
MERCHANT_FEATURES = ("prev_shares", "m_f0", "m_f1", "m_f2", "m_f3")
SEGMENTS = ("a", "b", "c")


class BipartiteSimulationError(DomainError, ValueError):
    """Bad arguments to the bipartite simulator."""


def _check_levels(name: str, levels: Sequence[float]) -> np.ndarray:
    arr = np.asarray(list(levels), dtype=float)
    if arr.ndim != 1 or arr.size < 2:
        raise BipartiteSimulationError(f"{name} must list at least two amounts, got {levels!r}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(np.diff(arr) <= 0):
        raise BipartiteSimulationError(f"{name} must be finite, >= 0 and strictly ascending, got {levels!r}")
    return arr


def customer_hazard_increments(
    base: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    tail: np.ndarray,
    levels: np.ndarray,
    change_point: float,
    jump_width: float = 50.0,
) -> np.ndarray:
    """Hazard mass added between consecutive levels: N x K (column 0 includes the natural rate).

    The hazard per unit of incentive is ``low/50`` below `change_point`, ``high/50`` on
    [change_point, change_point + jump_width) and ``tail/50`` above; the increment for
    (r_{j-1}, r_j] is the integral of that rate, and level 0 gets `base` plus the mass in (0, r_0].
    """
    bounds = np.concatenate([[0.0], levels])
    lo, hi = bounds[:-1], bounds[1:]

    def overlap(a: float, b: float) -> np.ndarray:
        return np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0, None)

    below = overlap(0.0, change_point)
    jump = overlap(change_point, change_point + jump_width)
    above = overlap(change_point + jump_width, np.inf)
    inc = (low[:, None] * below + high[:, None] * jump + tail[:, None] * above) / 50.0
    inc[:, 0] += base
    return inc


@dataclass(frozen=True)
class BipartiteOptions:
    """The bipartite preset's options (see `simulate_bipartite`)."""

    merchants: int | None = None
    edges_per_customer: float = 5.0
    customer_levels: Sequence[float] = CUSTOMER_LEVELS
    merchant_levels: Sequence[float] = MERCHANT_LEVELS
    change_point: float = 100.0
    jump_width: float = 50.0
    rct_fraction: float = 0.5
    merchant_rct_fraction: float = 0.8
    influence: float = 1.0
    merchant_exponent: float = 0.8


def simulate_bipartite(request: SimulationRequest, *, log: Callable[[str], None] | None = None,
                       **options: Any) -> dict[str, Any]:
    """Write a bipartite customer–merchant campaign into `request.campaign_dir`; return a summary dict.

    Request: `days` daily files (RCT customers/merchants are spread uniformly over them), `users`
    customers, `seed` (the output is a deterministic function of all arguments), `start` first date
    (None: 2024-01-01). `options` (BipartiteOptions' fields): `merchants` (default users // 4), `edges_per_customer` (mean
    distinct merchants per customer, >= 1), `customer_levels` / `merchant_levels` (ascending
    amounts: coupons and commissions), `change_point` / `jump_width` (customers are much more
    sensitive to coupon amounts in [change_point, change_point + jump_width)), `rct_fraction` /
    `merchant_rct_fraction` (share of customers / merchants in the randomized experiment, uniform over levels), `influence` (strength of the merchant ->
    customer influence; 0 switches the bipartite influence off), `merchant_exponent` (e in the
    merchants' expected sharing count v (1 + s (c/100)^e): 0.8 concave by default, 1.0 linear as the
    paper's linear mapping head assumes; must be > 0).

    Returns a dict with the counts written (customers, merchants, edges, events, merchant_events),
    the dates, file paths, and the true mean response per level for both sides.
    """
    unknown = set(options) - set(BipartiteOptions.__dataclass_fields__)
    if unknown:
        raise BipartiteSimulationError(f"unknown option(s) for the bipartite preset: {sorted(unknown)}")
    o = BipartiteOptions(**options)
    campaign_dir, days, users, seed, start = request.campaign_dir, request.days, request.users, request.seed, request.start
    merchants, edges_per_customer, influence = o.merchants, o.edges_per_customer, o.influence
    customer_levels, merchant_levels, merchant_exponent = o.customer_levels, o.merchant_levels, o.merchant_exponent
    change_point, jump_width, rct_fraction, merchant_rct_fraction = (o.change_point, o.jump_width, o.rct_fraction,
                                                                     o.merchant_rct_fraction)
    if not (np.isfinite(merchant_exponent) and merchant_exponent > 0):
        raise BipartiteSimulationError(f"merchant_exponent must be a finite number > 0, got {merchant_exponent!r}")
    if days < 1:
        raise BipartiteSimulationError(f"days must be >= 1, got {days}")
    if users < 2:
        raise BipartiteSimulationError(f"users must be >= 2, got {users}")
    n_merch = int(merchants) if merchants is not None else max(users // 4, 2)
    if n_merch < 1:
        raise BipartiteSimulationError(f"merchants must be >= 1, got {merchants}")
    if edges_per_customer < 1:
        raise BipartiteSimulationError(f"edges_per_customer must be >= 1, got {edges_per_customer}")
    for name, frac in (("rct_fraction", rct_fraction), ("merchant_rct_fraction", merchant_rct_fraction)):
        if not 0 < frac <= 1:
            raise BipartiteSimulationError(f"{name} must be in (0, 1], got {frac}")
    c_levels = _check_levels("customer_levels", customer_levels)
    m_levels = _check_levels("merchant_levels", merchant_levels)
    start = start or date(2024, 1, 1)
    campaign_dir = Path(campaign_dir)
    t0 = time.perf_counter()
    say = log or (lambda _msg: None)
    rng = np.random.default_rng(seed)
    n_cust, K, Km = int(users), c_levels.size, m_levels.size
    dates = [start + timedelta(days=d) for d in range(days)]

    # --- merchants -------------------------------------------------------------------------
    m_x = rng.standard_normal((n_merch, 4))
    enthusiasm = 0.85 * m_x[:, 1] + 0.5 * rng.standard_normal(n_merch)
    popularity = np.exp(0.8 * m_x[:, 0])
    popularity /= popularity.sum()
    ticket = np.exp(3.0 + 0.4 * m_x[:, 3])

    # --- customers and payment edges -------------------------------------------------------
    c_x = rng.standard_normal((n_cust, len(CUSTOMER_FEATURES)))
    seg = rng.integers(0, len(SEGMENTS), n_cust)
    degree = 1 + rng.poisson(edges_per_customer - 1.0, n_cust)
    e_user = np.repeat(np.arange(n_cust), degree)
    e_merch = rng.choice(n_merch, size=e_user.size, p=popularity)
    # distinct (customer, merchant) pairs; duplicates draws merge into more payments
    key, counts = np.unique(e_user.astype(np.int64) * n_merch + e_merch, return_counts=True)
    e_user, e_merch = key // n_merch, key % n_merch
    n_pay = counts + rng.poisson(1.5, key.size)
    n_edges = key.size

    # bipartite influence: payment-weighted mean enthusiasm of a customer's merchants
    w_sum = np.bincount(e_user, weights=n_pay, minlength=n_cust)
    infl = np.bincount(e_user, weights=n_pay * enthusiasm[e_merch], minlength=n_cust) / np.maximum(w_sum, 1e-9)
    infl *= influence

    # customer response: piecewise hazard with a change point (see module docstring)
    hidden = rng.standard_normal(n_cust)
    seg_eff = np.array([0.0, 0.3, -0.3])[seg]
    activity = np.log1p(w_sum)
    activity = (activity - activity.mean()) / max(activity.std(), 1e-9)  # payment history volume
    base = np.exp(-2.4 + 0.4 * c_x[:, 0] + 0.5 * infl + 0.3 * activity)
    low = np.exp(-3.0 + 0.5 * c_x[:, 1] + 0.3 * infl + 0.2 * c_x[:, 3])
    high = np.exp(-0.5 + 0.6 * c_x[:, 2] - 0.3 * c_x[:, 1] + 0.9 * infl + seg_eff + 0.25 * hidden)
    tail = np.exp(-2.2 + 0.4 * c_x[:, 3] + 0.3 * infl - 0.2 * activity)
    inc = customer_hazard_increments(base, low, high, tail, c_levels, change_point, jump_width)
    cum_hazard = np.cumsum(inc, axis=1)
    c_expected = -np.expm1(-cum_hazard)  # N x K, increasing in the level

    # merchant response: sharing count, linear-ish in commission, customers raise volume
    c_resp_mean = c_expected.mean(axis=1)
    cust_resp_of_m = np.bincount(e_merch, weights=n_pay * c_resp_mean[e_user], minlength=n_merch) / np.maximum(
        np.bincount(e_merch, weights=n_pay, minlength=n_merch), 1e-9
    )
    cust_resp_of_m = np.where(np.bincount(e_merch, minlength=n_merch) > 0, cust_resp_of_m, c_resp_mean.mean())
    volume = np.exp(1.6 + 0.4 * m_x[:, 0] + 0.2 * enthusiasm + influence * 2.0 * (cust_resp_of_m - c_resp_mean.mean()))
    slope = np.exp(-0.6 + 0.7 * enthusiasm + 0.3 * m_x[:, 2])
    m_expected = volume[:, None] * (1.0 + slope[:, None] * (m_levels[None, :] / 100.0) ** merchant_exponent)
    prev_shares = rng.poisson(volume).astype(float)

    # --- identifiers and feature frames ----------------------------------------------------
    cust_ids = np.array([f"c{i:07d}" for i in range(n_cust)], dtype=object)
    merch_ids = np.array([f"m{i:06d}" for i in range(n_merch)], dtype=object)
    c_feat = pd.DataFrame(c_x, columns=list(CUSTOMER_FEATURES))
    c_feat["segment"] = np.asarray(SEGMENTS, dtype=object)[seg]
    m_feat = pd.DataFrame(m_x, columns=list(MERCHANT_FEATURES[1:]))
    m_feat.insert(0, "prev_shares", prev_shares)

    paths: dict[str, list[str]] = {"events": [], "edges": [], "merchants": []}
    for sub in ("events", "edges", "population", "truth", "merchants", "merchant_population"):
        (campaign_dir / sub).mkdir(parents=True, exist_ok=True)

    # --- payment edges per day: each payment lands on a uniform day ---------------------------
    pay_edge = np.repeat(np.arange(n_edges), n_pay)
    pay_day = rng.integers(0, days, pay_edge.size)
    ekey, e_n = np.unique(pay_edge.astype(np.int64) * days + pay_day, return_counts=True)
    ed_edge, ed_day = ekey // days, ekey % days
    ed_amount = np.round(e_n * ticket[e_merch[ed_edge]] * rng.lognormal(0.0, 0.3, ekey.size), 2)
    day_bounds = np.searchsorted(ed_day, np.arange(days + 1), sorter=np.argsort(ed_day, kind="stable"))
    order = np.argsort(ed_day, kind="stable")
    for d, day in enumerate(dates):
        idx = order[day_bounds[d]:day_bounds[d + 1]]
        frame = pd.DataFrame(
            {
                "user_id": cust_ids[e_user[ed_edge[idx]]],
                "merchant_id": merch_ids[e_merch[ed_edge[idx]]],
                "n_payments": e_n[idx].astype(np.int64),
                "amount": ed_amount[idx],
                "event_date": pd.Series([day] * idx.size, dtype="object"),
            }
        )
        path = campaign_dir / "edges" / f"{day.isoformat()}.parquet"
        frame.to_parquet(path, index=False)
        paths["edges"].append(str(path))

    # --- customer RCT events ---------------------------------------------------------------
    in_rct = np.flatnonzero(rng.random(n_cust) < rct_fraction)
    rct_level = rng.integers(0, K, in_rct.size)
    rct_day = rng.integers(0, days, in_rct.size)
    rct_resp = (rng.random(in_rct.size) < c_expected[in_rct, rct_level]).astype(float)
    # the merchant where the coupon was shared: a random one of the customer's merchants
    first = np.concatenate([[0], np.cumsum(np.bincount(e_user, minlength=n_cust))])
    deg = first[1:] - first[:-1]
    pick = first[in_rct] + np.floor(rng.random(in_rct.size) * deg[in_rct]).astype(np.int64)
    rct_merchant = merch_ids[e_merch[pick]]
    for d, day in enumerate(dates):
        sel = np.flatnonzero(rct_day == d)
        u = in_rct[sel]
        incentive = c_levels[rct_level[sel]]
        frame = pd.DataFrame(
            {
                "user_id": cust_ids[u],
                "treatment": incentive,
                "response": rct_resp[sel],
                "cost": incentive * rct_resp[sel],
                "propensity": np.full(sel.size, 1.0 / K),
                "merchant_id": rct_merchant[sel],
            }
        )
        frame = pd.concat([frame, c_feat.iloc[u].reset_index(drop=True)], axis=1)
        path = campaign_dir / "events" / f"{day.isoformat()}.parquet"
        frame.to_parquet(path, index=False)
        paths["events"].append(str(path))

    # --- merchant RCT events ---------------------------------------------------------------
    m_rct = np.flatnonzero(rng.random(n_merch) < merchant_rct_fraction)
    m_level = rng.integers(0, Km, m_rct.size)
    m_day = rng.integers(0, days, m_rct.size)
    m_resp = rng.poisson(m_expected[m_rct, m_level]).astype(float)
    for d, day in enumerate(dates):
        sel = np.flatnonzero(m_day == d)
        m = m_rct[sel]
        commission = m_levels[m_level[sel]]
        frame = pd.DataFrame(
            {
                "merchant_id": merch_ids[m],
                "treatment": commission,
                "response": m_resp[sel],
                "cost": commission * m_resp[sel],
                "propensity": np.full(sel.size, 1.0 / Km),
            }
        )
        frame = pd.concat([frame, m_feat.iloc[m].reset_index(drop=True)], axis=1)
        path = campaign_dir / "merchants" / f"{day.isoformat()}.parquet"
        frame.to_parquet(path, index=False)
        paths["merchants"].append(str(path))

    # --- populations and truth -------------------------------------------------------------
    last = dates[-1].isoformat()
    pop = pd.concat([pd.DataFrame({"user_id": cust_ids}), c_feat], axis=1)
    pop.to_parquet(campaign_dir / "population" / f"{last}.parquet", index=False)
    mpop = pd.concat([pd.DataFrame({"merchant_id": merch_ids}), m_feat], axis=1)
    mpop.to_parquet(campaign_dir / "merchant_population" / f"{last}.parquet", index=False)

    truth = pd.DataFrame(
        {
            "user_id": np.repeat(cust_ids, K),
            "level": np.tile(np.arange(K), n_cust),
            "incentive": np.tile(c_levels, n_cust),
            "expected_response": c_expected.ravel(),
            "expected_cost": (c_expected * c_levels[None, :]).ravel(),
        }
    )
    truth.to_parquet(campaign_dir / "truth" / "response.parquet", index=False)
    m_truth = pd.DataFrame(
        {
            "merchant_id": np.repeat(merch_ids, Km),
            "level": np.tile(np.arange(Km), n_merch),
            "incentive": np.tile(m_levels, n_merch),
            "commission": np.tile(m_levels, n_merch),
            "expected_response": m_expected.ravel(),
            "expected_cost": (m_expected * m_levels[None, :]).ravel(),
        }
    )
    m_truth.to_parquet(campaign_dir / "truth" / "merchant_response.parquet", index=False)

    # ratio budgets (Eq. 16: average incentive paid per redemption) spanning the feasible range
    c_ratio = (c_expected * c_levels).sum() / c_expected.sum()  # uniform random assignment
    ratio_budgets = [float(round(x, 1)) for x in (0.1 * c_levels[-1], 0.2 * c_levels[-1], 0.3 * c_levels[-1])]
    body = {
        "treatments": {"levels": [float(x) if not float(x).is_integer() else int(x) for x in c_levels]},
        "cost": "redeemed",
        "response": "binary",
        "randomized": True,
        "budget_per_capita": [float(round(x, 2)) for x in (0.1 * c_levels[-1], 0.2 * c_levels[-1], 0.3 * c_levels[-1])],
        "holdout_days": 1,
        "ratio_budget": ratio_budgets,
        "merchants": {
            "treatments": {"levels": [float(x) if not float(x).is_integer() else int(x) for x in m_levels]},
            "response": "count",
            "cost": "redeemed",
            "normalizer": "prev_shares",
            "events": "merchants/",
            "population": "merchant_population/",
            "truth": "truth/merchant_response.parquet",
        },
        "graph": {"edges": "edges/", "weight": "n_payments"},
        "simulator": {
            "preset": "bipartite",
            "seed": int(seed),
            "users": n_cust,
            "merchants": n_merch,
            "days": int(days),
            "change_point": float(change_point),
            "jump_width": float(jump_width),
            "influence": float(influence),
        },
    }
    dump_campaign_yaml(campaign_dir / "campaign.yaml", body)
    elapsed = time.perf_counter() - t0
    say(
        f"bipartite: {n_cust} customers, {n_merch} merchants, {n_edges} edges, {in_rct.size} customer "
        f"and {m_rct.size} merchant RCT events over {days} day(s) in {elapsed:.1f}s"
    )
    return {
        "preset": "bipartite",
        "campaign_dir": str(campaign_dir),
        "customers": n_cust,
        "merchants": n_merch,
        "edges": int(n_edges),
        "events": int(in_rct.size),
        "merchant_events": int(m_rct.size),
        "dates": [d.isoformat() for d in dates],
        "files": paths,
        "true_mean_response": [float(x) for x in c_expected.mean(axis=0)],
        "true_mean_merchant_response": [float(x) for x in m_expected.mean(axis=0)],
        "mean_redeemed_incentive": float(c_ratio),
        "seconds": round(elapsed, 3),
    }
