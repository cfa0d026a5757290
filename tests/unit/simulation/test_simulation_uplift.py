"""The `uplift_two_arm` preset (CRITEO-UPLIFT v2 shape): labels, truth and the logging policy."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import CampaignConfig
from promo_assets.simulation import PRESETS, SimulationError, SimulationRequest, simulate, truth_arrays

START = dt.date(2024, 3, 1)


@pytest.fixture(scope="module")
def two_arm(tmp_path_factory):
    root = tmp_path_factory.mktemp("landing")
    return simulate("uplift_two_arm", SimulationRequest("u2", root, days=2, users=20000, seed=4, start=START))


def test_uplift_two_arm_is_a_two_arm_rct_with_visit_cost_and_conversion_value(two_arm):
    assert "uplift_two_arm" in PRESETS and callable(PRESETS["uplift_two_arm"].run)
    d = two_arm.campaign_dir
    config = CampaignConfig.load(d)
    assert config.incentives == (0.0, 1.0) and config.cost == "column" and config.randomized
    values, costs = truth_arrays(d)
    assert values.shape == costs.shape == (20000, 2)
    # conversion implies a visit: P(conv) <= P(visit) at both levels; targeting raises visits
    assert (values <= costs).all() and (costs[:, 1] > costs[:, 0]).all()
    uplift_v, uplift_c = values[:, 1] - values[:, 0], costs[:, 1] - costs[:, 0]
    assert uplift_v.mean() > 0.03 and 0.0 < (uplift_v < 0).mean() < 0.1  # heterogeneous, a few negative
    ratio = uplift_v / uplift_c
    assert np.percentile(ratio, 90) > 2.0 * np.percentile(ratio, 10)  # the ranking target varies
    budgets = config.budget_per_capita
    assert all(costs[:, 0].mean() < b < costs[:, 1].mean() for b in budgets)
    events = pd.concat(pd.read_parquet(f) for f in sorted((d / "events").glob("*.parquet")))
    assert len(events) == 40000
    assert set(events["cost"]) == {0.0, 1.0} and set(events["response"]) == {0.0, 1.0}
    assert not ((events["response"] == 1) & (events["cost"] == 0)).any()  # a conversion is a visit
    assert abs(events["treatment"].mean() - 0.85) < 0.01
    np.testing.assert_allclose(events["propensity"], np.where(events["treatment"] == 1, 0.85, 0.15))
    assert [c for c in events.columns if c.startswith("f")] == [f"f{j}" for j in range(12)]
    # the labels follow the truth: the empirical visit / conversion rates per arm match
    pop = pd.Series(np.arange(20000), index=[f"u{i:07d}" for i in range(20000)])
    level = events["treatment"].astype(int).to_numpy()
    rows = pop.loc[events["user_id"]].to_numpy()
    for arm in (0, 1):
        m = level == arm
        assert abs(events["cost"][m].mean() - costs[rows[m], arm].mean()) < 0.02
        assert abs(events["response"][m].mean() - values[rows[m], arm].mean()) < 0.01


@pytest.mark.hostile
@pytest.mark.parametrize("share", [0.0, 1.0, 1.5], ids=["error-none-treated", "error-all-treated", "error-above-one"])
def test_uplift_two_arm_refuses_a_treated_share_outside_0_1(tmp_path, share):
    with pytest.raises(SimulationError, match="treated_share"):
        simulate("uplift_two_arm", SimulationRequest("u", tmp_path, days=1, users=10, seed=0, start=START),
                 treated_share=share)
