"""`BudgetPlan`: one budget or several behind one object; what it solves, decides and evaluates is
what the direct calls give (the one-budget path chunk by chunk, the several-budget path together)."""

from __future__ import annotations

import numpy as np
import pytest

from promo_assets.allocation import AllocationInputError, decide_at, solve, tie_share
from promo_assets.allocation.budgets import decide_budgets_at, evaluate_budgets, solve_budgets
from promo_assets.allocation.chunked import ArraySource
from promo_assets.allocation.plan import BudgetPlan, Holdout, Stored


def _problem(n=1200, k=4, seed=3):
    rng = np.random.default_rng(seed)
    values = rng.uniform(0.05, 0.3, size=(n, 1)) + rng.uniform(0.0, 0.08, size=(n, 1)) * np.sqrt(np.arange(k))[None, :]
    return values, np.arange(k)[None, :] * values, rng.uniform(size=n) < 0.3


def _collect():
    got = {}

    def sink_for(b):
        def sink(i, first, levels, ids):  # ids: a streamed source's (None for arrays: rows from `first`)
            ids = np.arange(first, first + len(levels)) if ids is None else ids
            got.setdefault(b, {}).update(zip(np.asarray(ids).tolist(), np.asarray(levels).tolist()))
        return sink
    return got, sink_for


def test_one_budget_is_solved_and_decided_as_the_direct_calls():
    v, c, _ = _problem()
    plan = BudgetPlan.of([0.1, 0.2])
    assert not plan.several and plan.names() == ["budget"]
    solution = plan.solve(ArraySource(v, c, rows=500))
    assert [s.budget_per_capita for s in solution.solved] == [0.1, 0.2] and not solution.infeasible
    for s in solution.solved:
        ref = solve(v, c, s.budget_per_capita * len(v))
        assert s.result.lambda_ == ref.lambda_ and s.tie_share == pytest.approx(
            tie_share(v, c, ref.lambda_, s.budget_per_capita * len(v)), abs=1e-12)
        assert list(s.row()) == ["budget_per_capita", "lambda_", "tie_share", "response_per_capita", "cost_per_capita",
                                 "dual_gap"]
    stored = Stored({s.budget_per_capita: (s.result.lambda_, s.tie_share) for s in solution.solved})
    written, sink_for = _collect()
    decided = plan.decide(stored, ArraySource(v, c, rows=500), sink_for=sink_for)
    for b, (lam, share) in stored.duals.items():
        want = decide_at(v, c, lam, share, seed=0)
        assert [written[b][i] for i in range(len(v))] == want.tolist() and decided[b]["users"] == len(v)
    # the holdout: decided per user, then mapped to the events
    events = np.r_[np.arange(len(v)), np.arange(10)]
    levels, rows = plan.evaluate(stored, Holdout(v, c, v[events], c[events], lambda lv: np.asarray(lv)[events]))
    assert rows == [] and np.array_equal(levels[0.1], decide_at(v, c, *stored.duals[0.1], seed=0)[events])


def test_several_budgets_are_solved_decided_and_evaluated_together():
    v, c, group = _problem()
    costs, groups = {"sms": (np.array([0.0, 0.05, 0.05, 0.05]), 0.02)}, {"a": (group, 0.1)}

    class Constraints:  # what promo_assets.decisions.Constraints hands over
        pass
    cons = Constraints()
    cons.costs, cons.groups = costs, groups
    plan = BudgetPlan.of([0.15, 0.25], cons)
    assert plan.several and plan.names() == ["budget", "sms", "group:a"]
    users = np.arange(len(v))
    solution = plan.solve(ArraySource(v, c), (users, v, c))
    ref, _ = solve_budgets(v, c, [0.15, 0.25], costs, groups)
    assert [s.result.multipliers.tolist() for s in solution.solved] == [r.multipliers.tolist() for r in ref]
    assert "every_budget_kept" in solution.solved[0].row() and len(solution.solved[0].multiplier_rows()) == 3
    stored = Stored({s.budget_per_capita: (s.result.lambda_, 0.0) for s in solution.solved},
                    {s.budget_per_capita: s.result.multipliers.tolist() for s in solution.solved})
    written, sink_for = _collect()
    decided = plan.decide(stored, None, (users, v, c), sink_for=sink_for)
    want = decide_budgets_at(v, c, stored.multipliers, costs, groups)
    for b in stored.multipliers:
        assert [written[b][i] for i in range(len(v))] == want[b]["levels"].tolist()
        assert decided[b]["resolved"] == want[b]["resolved"]
    levels, rows = plan.evaluate(stored, Holdout(v, c, v, c, lambda lv: lv))
    ref_levels, ref_rows = evaluate_budgets(v, c, stored.multipliers, costs, groups)
    assert rows == ref_rows and all(np.array_equal(levels[b], ref_levels[b]) for b in ref_levels)


def test_a_campaign_without_budgets_is_named():
    with pytest.raises(AllocationInputError, match="'demo' has no budget_per_capita"):
        BudgetPlan.of([], None, "demo")
