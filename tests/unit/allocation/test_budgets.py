"""Several budgets in every model's budget_dual / allocation / policy_evaluation (campaign.yaml
`constraints:`): promo_assets.allocation.budgets (the loop over the budgets, the decision at stored
multipliers, each budget's use) and the model chain wired to it."""

from __future__ import annotations


import numpy as np
import pytest

from promo_assets.allocation import solve
from promo_assets.allocation.budgets import (
    budget_matrices,
    decide_budgets_at,
    evaluate_budgets,
    solve_budgets,
    usage,
)


def _problem(n=1500, k=4, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.05, 0.3, size=(n, 1))
    slope = rng.uniform(0.0, 0.08, size=(n, 1))
    values = base + slope * np.sqrt(np.arange(k))[None, :]
    costs = np.arange(k)[None, :] * values
    group = rng.uniform(size=n) < 0.3
    return values, costs, group


SMS = {"sms": (np.array([0.0, 0.05, 0.05, 0.05]), 0.02)}


def test_every_budget_is_kept_by_the_solve_and_at_the_stored_multipliers():
    v, c, group = _problem()
    groups = {"a": (group, 0.1)}
    solved, infeasible = solve_budgets(v, c, [0.15, 0.25, 0.4], SMS, groups)
    assert not infeasible and [s.budget_per_capita for s in solved] == [0.15, 0.25, 0.4]
    n = len(v)
    for s in solved:
        assert s.names == ("budget", "sms", "group:a")
        mats, totals = budget_matrices(c, s.budget_per_capita, SMS, groups)
        assert np.allclose(totals, [s.budget_per_capita * n, 0.02 * n, 0.1 * group.sum()])
        use = usage(mats, s.levels)
        assert np.all(use <= totals * (1 + 1e-9)), (use, totals)  # every budget, predicted
        assert s.respected and np.allclose(use, s.use)
        assert s.multipliers[1] > 0  # the SMS budget binds
    # the allocation asset's decision at the stored multipliers keeps every budget too
    stored = {s.budget_per_capita: s.multipliers for s in solved}
    for b, got in decide_budgets_at(v, c, stored, SMS, groups).items():
        assert np.all(got["use"] <= got["totals"] * (1 + 1e-9)), (b, got["use"], got["totals"])
        rows = np.arange(n)
        assert np.isclose(got["use"][1], 0.05 * (got["levels"] > 0).sum())
        assert np.isclose(got["use"][2], c[rows, got["levels"]][group].sum())
    # the single-budget solve gives the SMS budget more than it has: the several budgets change the allocation
    single = solve(v, c, 0.25, per_capita=True, rounding="down")
    assert 0.05 * (np.asarray(single.levels) > 0).sum() > 0.02 * n * 1.2


def test_without_further_budgets_the_multiplier_is_the_single_budget_lambda():
    v, c, _ = _problem(seed=1)
    (got,), _ = solve_budgets(v, c, [0.25], {}, {})
    single = solve(v, c, 0.25, per_capita=True, rounding="down")
    assert got.names == ("budget",)
    assert got.lambda_ == pytest.approx(float(single.lambda_), rel=1e-6)
    assert got.response == pytest.approx(float(single.response), rel=1e-6)


def test_an_impossible_budget_is_reported_by_name_and_the_others_solved():
    v, c, group = _problem(seed=2)
    sms = {"sms": (np.array([0.01, 0.05, 0.05, 0.05]), 0.001)}  # below everybody's cheapest SMS cost
    solved, infeasible = solve_budgets(v, c, [0.25], sms, {})
    assert not solved and len(infeasible) == 1 and "budget 'sms'" in str(infeasible[0][1])


def test_evaluation_on_other_users_reports_predicted_true_and_matched_use():
    v, c, group = _problem(n=1200, seed=3)
    groups = {"a": (group, 0.1)}
    solved, _ = solve_budgets(v, c, [0.25], SMS, groups)
    rng = np.random.default_rng(9)
    true_c = c * rng.uniform(0.8, 1.2, size=c.shape)
    levels, rows = evaluate_budgets(v, c, {0.25: solved[0].multipliers}, SMS, groups, true_c)
    assert [r["constraint_name"] for r in rows] == ["budget", "sms", "group:a"]
    r0 = rows[0]
    assert r0["true_use"] == pytest.approx(float(true_c[np.arange(len(v)), levels[0.25]].sum()))
    # at matched true spend the true incentive spend is the budget (within the bisection's tolerance); the
    # SMS cost is exact, so its budget holds in truth; the group's true use is reported as it is
    assert r0["matched_scale"] is not None
    assert 0.99 * r0["budget"] <= r0["matched_true_use"] <= r0["budget"] * (1 + 1e-9)
    assert rows[1]["matched_true_use"] <= rows[1]["budget"] * (1 + 1e-9) and rows[2]["matched_true_use"] > 0
