"""The `e2e_synthetic` preset: the end-to-end paper's synthetic K=4 RCT data set (§4.1).

Paper (end-to-end marketing-goal regularizer, §4.1 "Synthetic dataset"): K = 4 treatments, each RCT
user gets one of them with equal probability. User i's ground-truth value vector v_gt_i in [0, 1]^4:
  1) v_i1 ~ U(0, 0.1);
  2) three i.i.d. U(0, 0.2) numbers sorted in descending order, 0.2 >= k1 >= k2 >= k3 >= 0;
  3) v_ij = v_i(j-1) + k_(j-1) for j = 2, 3, 4 (increasing, concave in j).
The response y_i ~ Bernoulli(v_gt_i(t_i)). The cost of treatment j is j for every user
(c_gt_ij = j, j = 1..4), whatever the response: cost rule 'assigned', levels (amounts) [1, 2, 3, 4].
The paper evaluates Q(v_gt, c_gt) at per-capita budget 2.0 on 10,000 users (0.2123).

Choices the text leaves open (ours, documented):
- The paper's users have no features. Option `features`: 'latent' (default) writes the four
  generating draws as numeric features x1 = v_i1, x2 = k1, x3 = k2, x4 = k3 so that a response
  model has something to learn from (they determine v_gt exactly); 'none' writes no feature
  column, exactly as the paper.
- Draw order per user: v_i1 first, then the three increments (one (users x 4) uniform block).
- Each of the `users` appears every day (daily_active 1.0) and gets a fresh uniform treatment;
  with days=1 the events are exactly the paper's data set of `users` RCT samples.
- §4.3 mentions a cost matrix in R^{10000 x 5} next to K = 4 in §4.1; we follow §4.1 (K = 4).
"""

from __future__ import annotations

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
    rct_config,
    rng_pool,
    write_campaign,
)

LEVELS = (1, 2, 3, 4)
DESCRIPTION = (
    "End-to-end paper §4.1 synthetic K=4 RCT: v1 ~ U(0,0.1), sorted U(0,0.2) increments, "
    "cost of treatment j = j (assigned), binary response; budget 2.0 per capita."
)
DEFAULTS: dict[str, Any] = {
    "daily_active": 1.0,
    "features": "latent",
    "budget_per_capita": [1.5, 2.0, 2.5],
}


def e2e_values(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From a (users x 4) block of U(0,1) draws: (v_gt users x 4, latent users x 4 = [v1, k1, k2, k3])."""
    v1 = 0.1 * draws[:, 0]
    k = -np.sort(-0.2 * draws[:, 1:4], axis=1)  # descending: k1 >= k2 >= k3
    v = np.concatenate([v1[:, None], v1[:, None] + np.cumsum(k, axis=1)], axis=1)
    return v, np.concatenate([v1[:, None], k], axis=1)


def simulate_e2e(
    request: SimulationRequest,
    *,
    daily_active: float = DEFAULTS["daily_active"],
    features: str = DEFAULTS["features"],
    budget_per_capita: list[float] | None = None,
    log: Log = None,
) -> SimulationSummary:
    """Write an `e2e_synthetic` campaign as `request` asks (see the module docstring)."""
    users, seed = request.users, request.seed
    if features not in ("latent", "none"):
        raise SimulationError(f"e2e_synthetic: features must be 'latent' or 'none', got {features!r}")
    rng = rng_pool(seed)
    v, latent = e2e_values(rng.uniform(size=(users, 4)))
    cost = np.broadcast_to(np.asarray(LEVELS, dtype=np.float64), v.shape).copy()
    feats = {} if features == "none" else {f"x{j + 1}": latent[:, j] for j in range(4)}
    pool = Pool(features=feats, categories={}, expected_response=v, expected_cost=cost)
    budgets = budgets_within(list(DEFAULTS["budget_per_capita"] if budget_per_capita is None else budget_per_capita), pool)
    options = {"daily_active": float(daily_active), "features": features}
    config = rct_config({"levels": list(LEVELS)}, "assigned", budgets)
    design = CampaignDesign("e2e_synthetic", config, list(map(float, LEVELS)), "assigned", options, float(daily_active))
    return write_campaign(request, design, pool, log=log)
