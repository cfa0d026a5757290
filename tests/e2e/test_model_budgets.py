"""Several budgets through `promo run` (campaign.yaml `constraints:`): every model chain's budget_dual,
allocation and policy_evaluation keep every budget (the domain functions: tests/unit/allocation/test_budgets.py)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest


@pytest.mark.slow
def test_every_model_chain_solves_allocates_and_evaluates_under_the_several_budgets(promo_env):
    """`promo run` with campaign.yaml `constraints:`: each model's budget_dual stores the multipliers,
    its allocation keeps every budget (predicted), its evaluation reports each budget's use in truth."""
    import duckdb

    from promo_assets.cli.main import main

    start = dt.date(2026, 3, 1)
    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "3", "--users", "600", "--seed", "4",
                 "--start", start.isoformat()]) == 0
    with open(promo_env["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write("models:\n  include: [lgbm_s_mono, lgbm_s]\nexploration:\n  share: 0.05\nconstraints:\n  costs:\n"
                "    sms:\n      levels: [0, 0.05, 0.05, 0.05, 0.05, 0.05]\n      budget_per_capita: 0.02\n  groups:\n"
                "    shanghai:\n      feature: city\n      equals: shanghai\n      budget_per_capita: 0.4\n")
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    pop = pd.read_parquet(sorted((promo_env["landing"] / "demo" / "population").glob("*.parquet"))[-1])
    city = pop.set_index(pop["user_id"].astype(str))["city"]
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        mult = con.execute("SELECT * FROM budget_multipliers").df()
        alloc = con.execute("SELECT a.model, a.budget_per_capita, a.user_id, a.level, c.cost FROM allocation a "
                            "JOIN response_coefficients c ON c.campaign = a.campaign AND c.model = a.model AND "
                            "c.model_version = a.model_version AND c.user_id = a.user_id AND c.level = a.level AND "
                            "c.target = 'population'").df()
        duals = con.execute("SELECT model, budget_per_capita, lambda_ FROM budget_dual").df()
    for model in ("lgbm_s_mono", "lgbm_s"):
        pop_rows = mult[(mult["model"] == model) & (mult["target"] == "population")]
        assert set(pop_rows["constraint_name"]) == {"budget", "sms", "group:shanghai"}
        for b, got in alloc[alloc["model"] == model].groupby("budget_per_capita"):
            n = len(got)
            in_group = city.loc[got["user_id"].astype(str)].eq("shanghai").to_numpy()
            assert got["cost"].sum() <= b * n * (1 + 1e-9)
            assert (got["level"] > 0).sum() * 0.05 <= 0.02 * n * (1 + 1e-9)
            assert got["cost"][in_group].sum() <= 0.4 * in_group.sum() * (1 + 1e-9)
            lam = pop_rows[(pop_rows["budget_per_capita"] == b) & (pop_rows["constraint_name"] == "budget")]["multiplier"]
            dual = duals[(duals["model"] == model) & (duals["budget_per_capita"] == b)]["lambda_"]
            assert float(lam.iloc[0]) == pytest.approx(float(dual.iloc[0]))
        hold = mult[(mult["model"] == model) & (mult["target"] == "holdout")]
        assert len(hold) == 3 * len(pop_rows["budget_per_capita"].unique())
        assert hold["true_use"].notna().all() and (hold["predicted_use"] > 0).any()
        matched = hold.dropna(subset=["matched_true_use"])
        sms = matched[matched["constraint_name"] == "sms"]
        assert len(sms) and (sms["matched_true_use"] <= sms["budget"] * (1 + 1e-9)).all()
