"""Tests of promo_assets.allocation: exactness against brute force and HiGHS, errors, online rule."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from promo_assets import allocation as al
from promo_assets.allocation import (
    AllocationInputError,
    InfeasibleBudgetError,
    decide,
    dual_objective,
    frontier,
    solve,
    solve_multi,
    solve_ratio,
)
from promo_assets.allocation import solver as solver_mod
from promo_assets.decisions import OnlinePolicy

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def lp_opt(v, a_rows, b_rows):
    """LP relaxation optimum with HiGHS: max v.x s.t. a_rows x <= b_rows, one level per user."""
    n, k = v.shape
    a_eq = sp.csr_matrix((np.ones(n * k), np.arange(n * k), np.arange(0, n * k + 1, k)), (n, n * k))
    res = linprog(
        -v.reshape(-1),
        A_ub=np.vstack([np.asarray(a, float).reshape(-1) for a in a_rows]),
        b_ub=np.asarray(b_rows, float),
        A_eq=a_eq,
        b_eq=np.ones(n),
        bounds=(0, None),
        method="highs",
    )
    assert res.status == 0, res.message
    return -res.fun


def brute_best(v, c, budget):
    """Best integral allocation by enumerating all K^N choices (None if none is feasible)."""
    n, k = v.shape
    best = None
    for choice in itertools.product(range(k), repeat=n):
        idx = (np.arange(n), np.array(choice))
        if c[idx].sum() <= budget + 1e-12:
            val = v[idx].sum()
            best = val if best is None or val > best else best
    return best


@st.composite
def instances(draw, max_n=4, max_k=3):
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, max_k))
    ints = draw(st.booleans())  # small integers create ties and collinear points
    if ints:
        elem = st.integers(0, 4).map(float)
    else:
        # rounded to 1e-6: HiGHS drops matrix entries below 1e-9, so a subnormal cost (seen: 1.8e-25)
        # is 0 to the reference LP but not to the exact solver
        elem = st.floats(0, 10, allow_nan=False, allow_infinity=False, width=32).map(lambda x: round(x, 6))
    v = np.array(draw(st.lists(elem, min_size=n * k, max_size=n * k)), float).reshape(n, k)
    c = np.array(draw(st.lists(elem, min_size=n * k, max_size=n * k)), float).reshape(n, k)
    frac = draw(st.floats(0, 1.2))
    lo, hi = c.min(axis=1).sum(), c.max(axis=1).sum()
    return v, c, lo + frac * (hi - lo)


def close(a, b, rel=1e-7):
    return abs(a - b) <= rel * (1 + abs(b))


@SETTINGS
@given(instances())
def test_solve_matches_brute_force_and_linprog(inst):
    v, c, budget = inst
    ref = lp_opt(v, [c], [budget])
    best = brute_best(v, c, budget)
    for rounding in ("down", "sample"):
        a = solve(v, c, budget, rounding=rounding, seed=3)
        assert close(a.lp_response, ref)
        assert close(a.dual_bound, ref)
        assert close(dual_objective(v, c, a.lambda_, budget), ref)  # strong duality at lambda*
        assert a.lambda_ >= 0
        assert math.isclose(a.response, v[np.arange(len(v)), a.levels].sum(), rel_tol=1e-12, abs_tol=1e-12)
        assert math.isclose(a.cost, c[np.arange(len(v)), a.levels].sum(), rel_tol=1e-12, abs_tol=1e-12)
        assert a.levels.shape == (len(v),) and a.levels.min() >= 0 and a.levels.max() < v.shape[1]
        if rounding == "down" or not a.rounded_up:
            assert a.cost <= budget + 1e-9 * (1 + budget)  # feasible
            assert a.feasible
            assert a.response <= best + 1e-9 * (1 + abs(best))  # no better than the integral optimum
        assert best <= a.lp_response + 1e-7 * (1 + abs(best))  # LP bound
        assert a.gap == pytest.approx(a.dual_bound - a.response)
        if a.fractional_user is not None:
            assert 0 < a.fraction < 1
            lo, up = a.fractional_levels
            assert c[a.fractional_user, up] > c[a.fractional_user, lo]


@SETTINGS
@given(instances())
def test_frontier_is_monotone_and_matches_solve(inst):
    v, c, budget = inst
    f = frontier(v, c)
    assert math.isinf(f.lambdas[0])
    assert np.all(np.diff(f.lambdas) < 0)
    assert np.all(np.diff(f.costs) >= 0) and np.all(np.diff(f.response) >= 0)
    assert close(f.costs[0], c.min(axis=1).sum())
    assert close(f.response[-1], v.max(axis=1).sum())
    a = solve(v, c, budget, seed=1)
    assert close(f.response_at(budget), a.lp_response)
    b = f.allocation(budget, seed=1)
    assert np.array_equal(b.levels, a.levels)
    assert close(b.lambda_, a.lambda_) and close(b.response, a.response)


def test_frontier_slopes_are_lambdas():
    rng = np.random.default_rng(0)
    v = rng.random((300, 6))
    c = np.sort(rng.random((300, 6)), axis=1)
    f = frontier(v, c)
    slopes = np.diff(f.response) / np.diff(f.costs)
    np.testing.assert_allclose(slopes, f.lambdas[1:], rtol=1e-6)
    mid = 0.5 * (f.costs[0] + f.costs[-1])
    assert f.lambda_at(mid) == pytest.approx(solve(v, c, mid).lambda_)


@SETTINGS
@given(instances(max_n=5, max_k=4))
def test_online_decisions_equal_offline_argmax(inst):
    v, c, budget = inst
    a = solve(v, c, budget, rounding="down")
    online = decide(v, c, a.lambda_)
    s = v - a.lambda_ * c
    tol = 1e-9 * (1 + np.abs(v).max() + a.lambda_ * np.abs(c).max())
    unique = (s >= s.max(axis=1, keepdims=True) - tol).sum(axis=1) == 1
    # users with a unique (beyond rounding) argmax at lambda* get the same level offline and online
    assert np.array_equal(online[unique], a.levels[unique])
    # and the online level is always an argmax at lambda*
    assert np.all(s[np.arange(len(v)), online] >= s.max(axis=1) - tol)


class _FakeModel:
    name, version = "fake", "v1"

    def __init__(self, k):
        self.k = k

    def predict(self, frame):
        x = frame["x"].to_numpy(float)[:, None]
        lv = np.arange(self.k)[None, :]
        values = np.log1p(lv * x) + 0.1  # efficiencies differ between users: no ties
        return values, lv * values * 0.5


def test_online_policy_batch_single_and_roundtrip():
    model = _FakeModel(5)
    frame = pd.DataFrame({"x": np.linspace(0.1, 3.0, 40)})
    v, c = model.predict(frame)
    a = solve(v, c, 0.3 * c[:, -1].sum(), rounding="down")
    pol = OnlinePolicy.from_allocation(model, a)
    batch = pol.decide(frame)
    np.testing.assert_array_equal(batch, decide(v, c, a.lambda_))
    keep = np.ones(len(frame), bool)
    if a.fractional_user is not None:
        keep[a.fractional_user] = False
    np.testing.assert_array_equal(batch[keep], a.levels[keep])
    single = pol.decide({"x": float(frame["x"].iloc[7])})
    assert single.shape == (1,) and single[0] == batch[7]
    assert pol.decide(frame.iloc[[7]])[0] == batch[7]
    again = OnlinePolicy.from_dict(pol.to_dict(), model)
    np.testing.assert_array_equal(again.decide(frame), batch)
    bad = _FakeModel(5)
    bad.version = "v2"
    with pytest.raises(AllocationInputError, match="version"):
        OnlinePolicy.from_dict(pol.to_dict(), bad)


def test_per_capita_equals_total():
    rng = np.random.default_rng(1)
    v, c = rng.random((50, 4)), rng.random((50, 4))
    a = solve(v, c, 0.4, per_capita=True)
    b = solve(v, c, 0.4 * 50)
    assert a.kind == "per_capita" and a.budget == pytest.approx(20.0)
    assert a.lp_response == pytest.approx(b.lp_response) and np.array_equal(a.levels, b.levels)


def test_free_option_not_at_level_zero_and_unsorted_costs():
    v = np.array([[1.0, 0.5, 2.0], [3.0, 0.0, 1.0]])
    c = np.array([[2.0, 0.0, 5.0], [4.0, 0.0, 1.0]])
    a = solve(v, c, 0.0)
    assert a.levels.tolist() == [1, 1] and a.cost == 0.0
    with pytest.raises(InfeasibleBudgetError):
        solve(v, c, -1.0)


@SETTINGS
@given(instances(max_n=4, max_k=3), st.floats(0.05, 3.0))
def test_ratio_form_matches_linprog(inst, ratio):
    v, c, _ = inst
    v = v + 0.5  # a positive response for every level
    shifted = c - ratio * v
    if shifted.min(axis=1).sum() > 0:
        with pytest.raises(InfeasibleBudgetError):
            solve_ratio(v, c, ratio)
        return
    ref = lp_opt(v, [shifted], [0.0])
    a = solve_ratio(v, c, ratio, rounding="down")
    assert close(a.lp_response, ref)
    assert a.kind == "ratio" and a.ratio == ratio
    assert a.cost <= ratio * a.response + 1e-9 * (1 + a.response)  # average cost per response <= ratio
    online = decide(v, c, a.lambda_, ratio=ratio)  # GNN/hazard Eq. 19 at the stored lambda
    s = v - a.lambda_ * shifted
    assert np.all(s[np.arange(len(v)), online] >= s.max(axis=1) - 1e-9 * (1 + np.abs(s).max()))


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6), st.integers(2, 3), st.integers(0, 10_000), st.booleans())
def test_multi_budget_matches_linprog(n, k, seed, use_groups):
    rng = np.random.default_rng(seed)
    v = rng.random((n, k))
    if use_groups:
        c = rng.random((n, k))
        g = rng.random((n, 2)) < 0.7
        a_rows = [c * g[:, [m]] for m in range(2)]
        costs, groups = c, g
    else:
        a_rows = [rng.random((n, k)), rng.random((n, k))]
        costs, groups = a_rows, None
    lo = np.array([a.min(axis=1).sum() for a in a_rows])
    hi = np.array([a.max(axis=1).sum() for a in a_rows])
    b = lo + rng.uniform(0.2, 0.8, 2) * (hi - lo)
    try:
        ref = lp_opt(v, a_rows, b)
    except AssertionError:  # jointly infeasible: we must say so too
        with pytest.raises(InfeasibleBudgetError):
            solve_multi(v, costs, b, groups=groups)
        return
    r = solve_multi(v, costs, b, groups=groups, rounding="down")
    assert close(r.lp_response, ref, 1e-6)
    assert close(r.dual_bound, ref, 1e-6)
    assert np.all(r.multipliers >= 0)
    assert r.response == pytest.approx(v[np.arange(n), r.levels].sum())
    assert len(r.fractional_users) <= 2 * len(b)
    if not r.fractional_users:
        assert r.feasible


def test_multi_budget_per_capita_groups():
    rng = np.random.default_rng(5)
    v, c = rng.random((40, 4)), np.sort(rng.random((40, 4)), axis=1)
    g = rng.random((40, 2)) < 0.6
    r = solve_multi(v, c, [0.4, 0.5], groups=g, per_capita=True)
    np.testing.assert_allclose(r.budgets, [0.4 * g[:, 0].sum(), 0.5 * g[:, 1].sum()])
    assert close(r.lp_response, lp_opt(v, [c * g[:, [0]], c * g[:, [1]]], r.budgets), 1e-6)


def test_multi_budget_infeasible_constraint_named():
    v = np.ones((3, 2))
    c = np.array([[1.0, 2.0]] * 3)
    with pytest.raises(InfeasibleBudgetError, match="budget 1") as e:
        solve_multi(v, [c, c], [10.0, 2.0])
    assert e.value.constraint == 1 and e.value.minimum_budget == pytest.approx(3.0)


def test_bracketed_path_is_exact(monkeypatch):
    """The large-N path (sampled bracket + greedy on the undecided users) equals the exact one."""
    rng = np.random.default_rng(7)
    n, k = 30_000, 6
    x = np.linspace(0, 1, k)
    a = rng.uniform(0.05, 0.5, (n, 1))
    x0 = rng.uniform(0.1, 0.9, (n, 1))
    v = (a + rng.uniform(0, 0.4, (n, 1)) / (1 + np.exp(-12 * (x - x0)))).astype(np.float32)
    c = (x * v).astype(np.float32)
    budget = 0.3 * float(c[:, -1].sum())
    exact = solve(v, c, budget, seed=2)
    assert exact.info["method"] == "hull-greedy"
    monkeypatch.setattr(solver_mod, "BRACKET_MIN_ELEMENTS", 1)
    monkeypatch.setattr(solver_mod, "BRACKET_MIN_USERS", 1)
    monkeypatch.setattr(solver_mod, "_SAMPLE_USERS", 2_000)
    monkeypatch.setattr(solver_mod, "_REFINE_MIN_USERS", 100)  # exercise the bracket refinement
    fast = solve(v, c, budget, seed=2)
    assert fast.info["method"] == "bracketed-hull-greedy"
    assert fast.info["active_users"] < n
    assert fast.lp_response == pytest.approx(exact.lp_response, rel=1e-12)
    assert fast.lambda_ == pytest.approx(exact.lambda_, rel=1e-12)
    assert np.mean(fast.levels == exact.levels) > 0.9999
    # a budget far from the sample's estimate forces the widening fallback
    for frac in (0.0001, 0.999):
        b2 = float(c.min(axis=1).sum() + frac * (c.max(axis=1).sum() - c.min(axis=1).sum()))
        monkeypatch.setattr(solver_mod, "BRACKET_MIN_ELEMENTS", 1 << 60)
        ref = solve(v, c, b2)
        monkeypatch.setattr(solver_mod, "BRACKET_MIN_ELEMENTS", 1)
        assert solve(v, c, b2).lp_response == pytest.approx(ref.lp_response, rel=1e-12)


def test_unconstrained_budget_and_infeasible_message():
    v = np.array([[0.0, 1.0, 3.0], [0.0, 2.0, 2.5]])
    c = np.array([[0.5, 1.0, 4.0], [1.0, 1.5, 3.0]])
    a = solve(v, c, math.inf)
    assert a.lambda_ == 0 and a.levels.tolist() == [2, 2] and a.response == 5.5
    with pytest.raises(InfeasibleBudgetError, match=r"minimum feasible budget = 1\.5") as e:
        solve(v, c, 1.0)
    assert e.value.minimum_budget == pytest.approx(1.5)
    with pytest.raises(InfeasibleBudgetError, match="per capita"):
        solve(v, c, 0.5, per_capita=True)


@pytest.mark.parametrize(
    ("response", "cost", "budget", "match"),
    [
        (np.array([[1.0, np.nan], [np.nan, 2.0]]), np.ones((2, 2)), 1.0,
         r"response has 2 non-finite .* first at user 0, level 1"),
        (np.ones((3, 2)), np.array([[1.0, 2.0], [1.0, np.inf], [0.0, 1.0]]), 1.0,
         r"cost has 1 non-finite .* first at user 1, level 1"),
        (np.ones((2, 3)), np.array([[1.0, -2.0, 0.0], [-1.0, 0.0, 0.0]]), 1.0,
         r"cost has 2 negative entries; first at user 0, level 1"),
        (np.ones((2, 3)), np.ones((3, 2)), 1.0, r"same shape .* response \(2, 3\) and cost \(3, 2\)"),
        (np.ones((0, 3)), np.ones((0, 3)), 1.0, r"response is empty"),
        (np.ones(3), np.ones(3), 1.0, r"response must be a 2-D array"),
        (np.array([["a", "b"]]), np.ones((1, 2)), 1.0, r"response must be a numeric array"),
        (np.ones((2, 2)), np.ones((2, 2)), float("nan"), r"budget must be a finite number"),
    ],
)
def test_bad_input_errors(response, cost, budget, match):
    with pytest.raises(AllocationInputError, match=match):
        solve(response, cost, budget)
    assert issubclass(AllocationInputError, ValueError)
    assert issubclass(InfeasibleBudgetError, ValueError)


def test_float32_inputs_and_public_api():
    rng = np.random.default_rng(3)
    v, c = rng.random((500, 8)), rng.random((500, 8))
    b = 0.3 * c.sum() / 8
    a64 = solve(v, c, b)
    a32 = solve(v.astype(np.float32), c.astype(np.float32), b)
    assert a32.lp_response == pytest.approx(a64.lp_response, rel=1e-5)
    for name in ("solve", "solve_multi", "solve_ratio", "frontier", "BudgetPlan", "Allocation",
                 "InfeasibleBudgetError", "AllocationInputError"):
        assert hasattr(al, name)
    assert "solve(response, cost, budget" in al.__doc__
    with pytest.raises(Exception):  # frozen dataclass
        a64.lambda_ = 1.0  # type: ignore[misc]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30), st.integers(1, 6), st.data(), st.sampled_from(["response", "cost"]),
       st.sampled_from([np.nan, np.inf, -np.inf]), st.sampled_from([np.float32, np.float64]))
def test_non_finite_entries_are_reported_exactly(n, k, data, which, bad, dtype):
    rng = np.random.default_rng(n * 7 + k)
    arrays = {"response": rng.random((n, k)).astype(dtype), "cost": rng.random((n, k)).astype(dtype)}
    cells = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, k - 1)),
                               min_size=1, max_size=5, unique=True))
    for i, j in cells:
        arrays[which][i, j] = bad
    first = min(cells)
    match = (rf"{which} has {len(cells)} non-finite .* first at user {first[0]}, "
             rf"level {first[1]}")
    with pytest.raises(AllocationInputError, match=match):
        solve(arrays["response"], arrays["cost"], 1.0)


# ---------------------------------------------------------------------------------------------
# the decision at a stored λ* (what budget_dual hands to allocation and policy_evaluation)


@pytest.mark.parametrize("tied", [False, True], ids=["distinct-users", "many-identical-users"])
def test_decide_at_the_stored_lambda_reproduces_the_lp_optimum(tied):
    """Applying (λ*, tie share) gives the solver's value and cost at the budget, also when many users
    are tied at λ* (identical users: `decide` alone would leave them all at the cheaper level)."""
    from promo_assets.allocation import decide, decide_at, tie_share

    rng = np.random.default_rng(3)
    n, k = 4000, 5
    v = rng.random((20, k)).cumsum(axis=1)[rng.integers(0, 20, n)] if tied else rng.random((n, k)).cumsum(axis=1)
    c = np.tile([0.0, 1, 2, 5, 10], (n, 1))
    rows = np.arange(n)
    for budget in (0.5, 2.0):
        res = solve(v, c, budget, per_capita=True)
        share = tie_share(v, c, res.lambda_, budget * n)
        levels = decide_at(v, c, res.lambda_, share, seed=0)
        assert 0.0 <= share <= 1.0
        assert c[rows, levels].sum() <= budget * n + c.max()  # within the one fractional user
        assert abs(v[rows, levels].sum() - res.lp_response) <= v.max()
        if tied:
            plain = decide(v, c, res.lambda_ * (1 + 1e-9))
            assert c[rows, plain].sum() < c[rows, levels].sum() - 100  # why the tie share is stored
        assert np.array_equal(levels, decide_at(v, c, res.lambda_, share, seed=0))  # deterministic


# ------------------------------------------------------------------ the one decision rule and tie rule
TIE_V = np.array([
    [0.0, 1.0, 2.0],   # lambda 1: every level's reduced value is 0 -> the cheapest, level 0
    [0.0, 1.0, 1.0],   # lambda 0.5: levels 1 and 2 tie with equal cost -> the lower index, 1
    [1.0, 1.0, 0.0],   # lambda 0: levels 0 and 1 tie, level 1 is cheaper (arms: unordered costs) -> 1
    [3.0, 2.5, 0.0],   # lambda 1: 3 - 1*1 = 2.5 - 0.5 = 2, both beat 0 - 0.1 -> the cheaper, level 1
])
TIE_C = np.array([
    [0.0, 1.0, 2.0],
    [0.0, 1.0, 1.0],
    [2.0, 1.0, 3.0],
    [1.0, 0.5, 0.1],
])
TIE_LAMBDAS = (1.0, 0.5, 0.0, 1.0)
TIE_EXPECTED = [0, 1, 1, 1]


def test_one_decision_rule_same_ties_at_every_former_call_site():
    """The solver's scans, `decide` (allocation / OnlinePolicy), the joint customer + merchant
    allocation and the EOM evaluation make identical decisions on ties, by the documented rule:
    the cheaper level, then the lower index (docs/design.md, "One decision rule")."""
    from promo_assets.allocation import decision
    from promo_assets.evaluation.eom import levels_at_lambdas
    from promo_assets.graph import joint

    assert solver_mod.choose_levels is decision.choose_levels  # the solver's scans use the one rule
    for i, lam in enumerate(TIE_LAMBDAS):
        v, c = TIE_V[i:i + 1], TIE_C[i:i + 1]
        got = {
            "allocation.decide": int(decide(v, c, lam)[0]),
            "solver scan": int(solver_mod.choose_levels(v, c, lam)[0]),
            "graph.joint.decide": int(joint.decide(v, c, lam, ratio=0.0)[0]),
            "eom.levels_at_lambdas": int(levels_at_lambdas(v, c, [lam])[0, 0]),
            "decide_at_lambdas": int(al.decide_at_lambdas(v, c, [0.0, lam])[1, 0]),
        }
        assert set(got.values()) == {TIE_EXPECTED[i]}, (i, got)
    # the ratio form (GNN/hazard Eq. 19): c - ratio*v, ties again to the cheaper (reduced) cost
    v = np.array([[0.0, 1.0, 2.0]])
    c = np.array([[0.0, 3.0, 6.0]])  # c - 2v = [0, 1, 2]; at lambda 1 all reduced values are 0
    assert int(decide(v, c, 1.0, ratio=2.0)[0]) == int(joint.decide(v, c, 1.0, ratio=2.0)[0]) == 0
    # lambda = inf: the cheapest level, then the more valuable, then the lower index
    v = np.array([[1.0, 2.0, 2.0, 5.0]])
    c = np.array([[1.0, 0.5, 0.5, 3.0]])
    assert int(decide(v, c, math.inf)[0]) == int(al.decide_at_lambdas(v, c, [math.inf])[0, 0]) == 1


def test_one_user_rule_in_plain_floats_equals_the_array_rule():
    """`decision.choose_level` (one user as Python floats, what `decide` uses for one row) picks the
    level `choose_levels` picks, ties included (values and costs on a coarse grid, so that many
    reduced values tie), at finite and infinite multipliers; it declines non-finite values and
    negative costs (decide's checked path then names them)."""
    from promo_assets.allocation import decision

    rng = np.random.default_rng(7)
    for _ in range(3000):
        k = int(rng.integers(1, 7))
        v = rng.integers(0, 4, k) / 2.0
        c = rng.integers(0, 4, k) / 4.0
        for lam in (0.0, 0.5, 1.0, 2.0, 3.0, math.inf):
            want = int(decision.choose_levels(v[None, :], c[None, :], lam)[0])
            assert decision.choose_level(v.tolist(), c.tolist(), lam) == want, (v, c, lam)
            assert int(decide(v[None, :], c[None, :], lam)[0]) == want
    assert decision.choose_level([1.0, math.nan], [0.0, 1.0], 1.0) is None
    assert decision.choose_level([1.0, 2.0], [0.0, -1.0], 1.0) is None
    with pytest.raises(AllocationInputError):
        decide(np.array([[1.0, math.inf]]), np.array([[0.0, 1.0]]), 1.0)


def test_solve_and_online_policy_follow_the_tie_rule():
    """An offline solve and its OnlinePolicy keep the cheaper of two equally good levels."""
    n = 50
    v = np.tile([0.0, 1.0, 1.0], (n, 1))
    c = np.tile([0.0, 1.0, 0.5], (n, 1))  # levels 1 and 2 are worth the same: 2 is cheaper
    a = solve(v, c, budget=float(n))
    assert np.all(a.levels == 2) and a.cost == pytest.approx(0.5 * n)

    class Model:
        def predict(self, frame):
            return v[: len(frame)], c[: len(frame)]

    pol = OnlinePolicy.from_allocation(Model(), a)
    np.testing.assert_array_equal(pol.decide(pd.DataFrame({"x": np.zeros(n)})), a.levels)


def test_bracketed_scan_fixes_users_at_the_rules_choice(monkeypatch):
    """The bracket scans keep the first best level (settle_ties=False); every user they fix still
    gets the rule's level at lambda*: with duplicated levels (equal value and cost) and levels that
    tie only at some lambda, the bracketed solve equals `decide` at its lambda* but for the one
    fractional user, and equals the exact path."""
    rng = np.random.default_rng(3)
    n = 20_000
    v = np.sort(rng.uniform(0, 1, (n, 4)), axis=1)
    c = np.tile([0.0, 1.0, 2.0, 3.0], (n, 1))
    v = np.concatenate([v[:, :2], v[:, 1:2], v[:, 2:]], axis=1)  # level 2 duplicates level 1
    c = np.concatenate([c[:, :2], c[:, 1:2], c[:, 2:]], axis=1)
    budget = 0.4 * float(c[:, -1].sum())
    exact = solve(v, c, budget, seed=1, rounding="down")
    monkeypatch.setattr(solver_mod, "BRACKET_MIN_ELEMENTS", 1)
    monkeypatch.setattr(solver_mod, "BRACKET_MIN_USERS", 1)
    monkeypatch.setattr(solver_mod, "_SAMPLE_USERS", 2_000)
    monkeypatch.setattr(solver_mod, "_REFINE_MIN_USERS", 100)
    fast = solve(v, c, budget, seed=1, rounding="down")
    assert fast.info["method"] == "bracketed-hull-greedy"
    rule = decide(v, c, fast.lambda_)
    assert int(np.sum(fast.levels != rule)) <= 1 and not np.any(fast.levels == 2)  # the duplicate never
    assert np.sum(fast.levels != exact.levels) <= 1 and fast.lp_response == pytest.approx(exact.lp_response, rel=1e-12)
