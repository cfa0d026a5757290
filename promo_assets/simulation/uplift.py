"""The `uplift_two_arm` preset: a two-arm uplift campaign shaped like CRITEO-UPLIFT v2.

What the end-to-end paper (§4.1, §4.3) uses CRITEO-UPLIFT v2 for: an RCT with one binary treatment
(targeted by advertising or not), 12 dense features and two binary labels, *visit* and *conversion*;
following DRP, the visit label is the **cost** and the conversion label the **value** of a user, the
methods rank users by (conversion uplift) / (visit uplift) and are compared by AUCC. The data set
itself cannot be shipped, so this preset writes a simulated campaign of that shape with the ground
truth of both labels:

- features f0..f11 ~ N(0, 1) i.i.d. (the real ones are anonymised dense floats);
- visit:       P(visit | x, t)          = sigmoid(a_v + x.w_v + t * tau_v(x)),
               tau_v(x) = 0.2 + 1.0 * sigmoid(x.u_v)           (visit uplift > 0 on the logit scale);
- conversion:  P(conv | visit, x, t)    = sigmoid(a_c + x.w_c + t * tau_c(x)),
               tau_c(x) = 1.6 * sigmoid(x.u_c) - 0.4           (negative for some users),
               P(conv | x, t) = P(visit | x, t) * P(conv | visit, x, t)  (a conversion implies a visit);
- the weight vectors w_v, u_v, w_c, u_c are drawn once per seed, N(0, 1/12) per entry (so x.w ~
  N(0, 1)); u_c shares half of its direction with u_v, so the two uplifts are correlated but their
  ratio, the quantity to rank by, is heterogeneous;
- treatment: levels [0, 1] (0 = control, 1 = targeted), logged with P(t = 1) = `treated_share`
  (0.85, CRITEO's share), the propensity written in the events;
- cost rule 'column': the events' `cost` is the visit label, the `response` the conversion label,
  drawn from one uniform u per event (visit = u < P(visit), conversion = u < P(conv)), so conversion
  implies visit as in the real data;
- truth: expected_response = P(conv | x, t), expected_cost = P(visit | x, t) for both levels.

Choices ours (documented): base rates a_v = -1.0, a_c = -1.5 give about 30% visits and 7%
conversions, far above CRITEO's 4.7% / 0.29%, so that the paper's comparisons are measurable on
tens of thousands of simulated events instead of 14 million; per-capita budgets (in visits)
default to the 25/50/75% points between the all-control and the all-treated visit rate.
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

N_FEATURES = 12
LEVELS = (0, 1)
DESCRIPTION = (
    "Two-arm uplift RCT shaped like CRITEO-UPLIFT v2: binary treatment (85% treated), 12 dense "
    "features, binary cost label (visit) and value label (conversion), heterogeneous uplift of both."
)
DEFAULTS: dict[str, Any] = {
    "daily_active": 1.0,
    "treated_share": 0.85,
    "budget_per_capita": None,
}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def uplift_truth(x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """True (P(conversion), P(visit)) for users x (n x 12) at levels 0, 1: two (n x 2) arrays."""
    scale = 1.0 / np.sqrt(N_FEATURES)
    w_v, u_v, w_c, u_raw = (scale * rng.standard_normal(N_FEATURES) for _ in range(4))
    u_c = (u_v + u_raw) / np.sqrt(2.0)
    tau_v = 0.2 + 1.0 * _sigmoid(x @ u_v)
    tau_c = 1.6 * _sigmoid(x @ u_c) - 0.4
    t = np.asarray(LEVELS, dtype=np.float64)[None, :]
    visit = _sigmoid(-1.0 + (x @ w_v)[:, None] + t * tau_v[:, None])
    conv_given_visit = _sigmoid(-1.5 + (x @ w_c)[:, None] + t * tau_c[:, None])
    return visit * conv_given_visit, visit


def simulate_uplift_two_arm(
    request: SimulationRequest,
    *,
    daily_active: float = DEFAULTS["daily_active"],
    treated_share: float = DEFAULTS["treated_share"],
    budget_per_capita: list[float] | None = None,
    log: Log = None,
) -> SimulationSummary:
    """Write an `uplift_two_arm` campaign as `request` asks (see the module docstring)."""
    users, seed = request.users, request.seed
    if not 0.0 < float(treated_share) < 1.0:
        raise SimulationError(f"uplift_two_arm: treated_share must be in (0, 1), got {treated_share!r}")
    rng = rng_pool(seed)
    x = rng.standard_normal((users, N_FEATURES))
    conversion, visit = uplift_truth(x, rng)
    share = float(treated_share)
    pool = Pool(
        features={f"f{j}": x[:, j] for j in range(N_FEATURES)},
        categories={},
        expected_response=conversion,
        expected_cost=visit,
        assignment=np.broadcast_to(np.array([1.0 - share, share]), conversion.shape).copy(),
    )
    budgets = budgets_within([] if budget_per_capita is None else list(budget_per_capita), pool)
    options = {"daily_active": float(daily_active), "treated_share": share}
    config = rct_config({"levels": list(LEVELS)}, "column", budgets)
    design = CampaignDesign("uplift_two_arm", config, list(map(float, LEVELS)), "bernoulli", options,
                            float(daily_active))
    return write_campaign(request, design, pool, log=log)
