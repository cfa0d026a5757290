"""Several budgets in the champion's decision (campaign.yaml `constraints:`): a further cost type and a
group cap kept with the incentive budget by solve_multi, with the exploration share and propensities."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import ConstraintsBlock
from promo_assets.decisions import Constraints, DecisionError, Exploration, decide_with_exploration

DAY = dt.date(2026, 4, 1)


def _problem(n=2000, k=4, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.05, 0.3, size=(n, 1))
    slope = rng.uniform(0.0, 0.08, size=(n, 1))
    values = base + slope * np.sqrt(np.arange(k))[None, :]
    costs = np.arange(k)[None, :] * values
    city = np.where(rng.uniform(size=n) < 0.3, "a", "b")
    return values, costs, pd.DataFrame({"city": city})


def test_every_budget_is_kept_and_the_single_budget_path_is_unchanged():
    v, c, feats = _problem()
    block = {"costs": {"sms": {"levels": [0.0, 0.05, 0.05, 0.05], "budget_per_capita": 0.02}},
             "groups": {"a": {"feature": "city", "equals": "a", "budget_per_capita": 0.1}}}
    cons = Constraints.build(ConstraintsBlock.model_validate(block), feats, 4)
    exp = Exploration(share=0.1, seed=3)
    got = decide_with_exploration(v, c, 0.25, exp, DAY, cons)
    rows = np.arange(len(v))
    n, in_a = len(v), feats["city"].eq("a").to_numpy()
    sms = np.array([0.0, 0.05, 0.05, 0.05])[got.levels]
    assert c[rows, got.levels].sum() <= 0.25 * n + c.max()  # + one user's dearest level, as the single path
    assert sms.sum() <= 0.02 * n + 0.05
    assert c[rows, got.levels][in_a].sum() <= 0.1 * in_a.sum() + c.max()
    assert set(got.multipliers) == {"budget", "sms", "group:a"} and got.lambda_ == got.multipliers["budget"]
    assert got.multipliers["sms"] > 0 and got.budget_use["sms"] <= 1 + 1e-9
    follows = got.levels == got.policy_levels
    assert np.allclose(got.propensity, np.where(follows, 0.9 + 0.1 / 4, 0.1 / 4)) and got.explore.sum() == 200
    plain = decide_with_exploration(v, c, 0.25, exp, DAY)
    # the SMS budget binds: the constrained decision gives fewer non-zero levels than the single budget
    assert (plain.levels > 0).sum() > (got.levels > 0).sum() and plain.multipliers is None
    assert (decide_with_exploration(v, c, 0.25, exp, DAY, Constraints({}, {})).levels == plain.levels).all()


def test_a_constraint_the_exploration_cannot_pay_for_is_refused_by_name():
    v, c, feats = _problem()
    block = {"costs": {"sms": {"levels": [0.0, 1.0, 1.0, 1.0], "budget_per_capita": 0.05}}, "groups": {}}
    with pytest.raises(DecisionError, match="budget 'sms' cannot pay for the exploration share.*lower exploration.share"):
        decide_with_exploration(v, c, 0.25, Exploration(share=0.2, seed=1), DAY, Constraints.build(ConstraintsBlock.model_validate(block), feats, 4))
    after_change = Exploration(share=0.2, seed=1, share_key="monitoring.change_explore_share")
    with pytest.raises(DecisionError, match="lower monitoring.change_explore_share or raise"):
        decide_with_exploration(v, c, 0.25, after_change, DAY, Constraints.build(ConstraintsBlock.model_validate(block), feats, 4))
    with pytest.raises(DecisionError, match="no feature 'town'"):
        Constraints.build(ConstraintsBlock.model_validate(
            {"costs": {}, "groups": {"x": {"feature": "town", "equals": "a", "budget_per_capita": 1.0}}}),
                          feats, 4)


@pytest.mark.slow
def test_promo_run_keeps_a_cost_type_and_a_group_cap_and_the_service_decides_alike(promo_env):
    """campaign.yaml `constraints:` on a demo campaign: every budget's decision keeps the SMS budget and
    the Shanghai cap as predicted, the multipliers are in the manifest, and the service's champion
    levels at those multipliers are the stored ones."""
    import duckdb

    from promo_assets.cli.main import main
    from promo_assets.decisions import read_manifest
    from promo_assets.serve import read_campaign

    start = dt.date(2026, 3, 1)
    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "3", "--users", "600", "--seed", "4",
                 "--start", start.isoformat()]) == 0
    with open(promo_env["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write("models:\n  include: [lgbm_s_mono]\nexploration:\n  share: 0.05\nconstraints:\n  costs:\n    sms:\n"
                "      levels: [0, 0.05, 0.05, 0.05, 0.05, 0.05]\n      budget_per_capita: 0.02\n  groups:\n"
                "    shanghai:\n      feature: city\n      equals: shanghai\n      budget_per_capita: 0.4\n")
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    day = (start + dt.timedelta(days=3)).isoformat()
    folder = promo_env["outbox"] / "demo" / day
    manifest = read_manifest(folder)
    pop = pd.read_parquet(sorted((promo_env["landing"] / "demo" / "population").glob("*.parquet"))[-1])
    city = pop.set_index(pop["user_id"].astype(str))["city"]
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        state = read_campaign(con, promo_env["landing"], "demo")
    for entry in manifest["budgets"]:
        assert set(entry["multipliers"]) == {"budget", "sms", "group:shanghai"}
        assert entry["lambda_"] == entry["multipliers"]["budget"]
        frame = pd.read_parquet(folder / entry["file"])
        n, in_group = len(frame), city.loc[frame["user_id"]].eq("shanghai").to_numpy()
        assert (frame["level"] > 0).sum() * 0.05 <= 0.02 * n + 0.05 + 1e-9
        assert frame["predicted_cost"][in_group].sum() <= 0.4 * in_group.sum() + frame["predicted_cost"].max()
        assert entry["budget_use"]["sms"] <= 1 + 1e-9
        # the service at the same multipliers: the champion users' levels are the stored ones
        users = pop.assign(user_id=pop["user_id"].astype(str)).set_index("user_id").loc[frame["user_id"]].reset_index()
        body = {"users": [{"user_id": r["user_id"], "features": {f: (None if pd.isna(r[f]) else r[f])
                                                                 for f in state.features}}
                          for r in users.to_dict("records")], "budget": entry["budget_per_capita"]}
        b, ids, feats = state.parse(body)
        out = pd.DataFrame(state.decide(b, ids, feats)["decisions"])
        on = (frame["policy"] == "champion").to_numpy() & (out["policy"] == "champion").to_numpy()
        assert (out["level"].to_numpy()[on] == frame["level"].to_numpy()[on]).mean() > 0.97
