"""EOM, Q(v, c), bootstrap, AUCC and the random policy on simulated RCTs with a known truth."""

import numpy as np
import pytest

from promo_assets.evaluation import (
    EvaluationError,
    LoggedEvents,
    aucc,
    bootstrap_eom,
    eom,
    eom_batch,
    inverse_propensity,
    lambda_upper_bound,
    levels_at_lambdas,
    q_at_budget,
    q_at_budget_bisection,
    random_policy,
    roi_score,
    true_policy_value,
)


def e2e_truth(n, rng):
    """The end-to-end paper's K = 4 synthetic curves (§4.1): v1 ~ U(0, 0.1) plus sorted increments."""
    v1 = rng.uniform(0, 0.1, n)
    k = -np.sort(-rng.uniform(0, 0.2, (n, 3)), axis=1)
    v = np.concatenate([v1[:, None], v1[:, None] + np.cumsum(k, axis=1)], axis=1)
    c = np.broadcast_to(np.arange(1.0, 5.0), v.shape).copy()
    return v, c


def draw_rct(v, c, rng, propensity=None):
    """One RCT: a level per user (uniform, or from an N x K propensity matrix) and its outcome."""
    n, k = v.shape
    if propensity is None:
        t = rng.integers(0, k, n)
        p = np.full(n, 1.0 / k)
    else:
        u = rng.uniform(size=(n, 1))
        t = (u > np.cumsum(propensity, axis=1)).sum(axis=1)
        p = propensity[np.arange(n), t]
    rows = np.arange(n)
    y = (rng.uniform(size=n) < v[rows, t]).astype(float)
    return t, y, c[rows, t], p


def greedy_levels(v, c, lam):
    return levels_at_lambdas(v, c, [lam])[0]


def test_eom_is_unbiased_for_the_true_value_on_a_uniform_rct():
    rng = np.random.default_rng(1)
    v, c = e2e_truth(3000, rng)
    assigned = greedy_levels(v, c, 0.12)
    true_v, true_c = true_policy_value(assigned, v, c)
    est = np.array([eom(assigned, *draw_rct(v, c, rng)) for _ in range(300)])
    se = est[:, 0].std() / np.sqrt(len(est))
    assert abs(est[:, 0].mean() - true_v) < 4 * se + 1e-4
    assert abs(est[:, 1].mean() - true_c) < 0.01


def test_eom_with_logged_propensities_corrects_confounded_logging():
    rng = np.random.default_rng(2)
    v, c = e2e_truth(3000, rng)
    # users with a high baseline are logged mostly at the top level: naive means would be biased
    high = v[:, 0] > 0.05
    prop = np.where(high[:, None], [0.1, 0.1, 0.1, 0.7], [0.4, 0.3, 0.2, 0.1])
    assigned = greedy_levels(v, c, 0.12)
    true_v, _ = true_policy_value(assigned, v, c)
    ipw, naive = [], []
    for _ in range(200):
        t, y, z, p = draw_rct(v, c, rng, prop)
        ipw.append(eom(assigned, t, y, z, p)[0])
        naive.append(eom(assigned, t, y, z, 0.25)[0])
    ipw, naive = np.array(ipw), np.array(naive)
    assert abs(ipw.mean() - true_v) < 4 * ipw.std() / np.sqrt(len(ipw)) + 1e-4
    assert abs(naive.mean() - true_v) > 3 * abs(ipw.mean() - true_v)  # the correction matters


def test_eom_is_self_normalized_and_matches_eq6_by_hand():
    assigned = np.array([0, 1, 1, 2, 0])
    logged = np.array([0, 1, 0, 2, 1])  # users 0, 1, 3 match
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    z = np.array([0.0, 2.0, 9.0, 4.0, 9.0])
    # equal propensities: the plain mean over S (end-to-end paper Eq. 6)
    assert eom(assigned, logged, y, z, 1 / 3) == pytest.approx((2 / 3, 2.0))
    # IPW, self-normalized: weights 1/p over S
    p = np.array([0.5, 0.25, 0.9, 0.5, 0.9])
    w = np.array([2.0, 4.0, 2.0])
    assert eom(assigned, logged, y, z, p) == pytest.approx(
        (np.dot(w, [1, 0, 1]) / w.sum(), np.dot(w, [0, 2, 4]) / w.sum()))
    # scaling every propensity by a constant changes nothing
    assert eom(assigned, logged, y, z, p * 0.5) == pytest.approx(eom(assigned, logged, y, z, p))
    # a constant response is estimated exactly, whatever the weights
    assert eom(assigned, logged, np.full(5, 0.3), z, p)[0] == pytest.approx(0.3)
    # no match: NaN, not an error
    assert np.isnan(eom(np.array([1, 0, 1, 0, 2]), logged, y, z, p)[0])


def test_missing_propensity_uses_empirical_level_shares():
    logged = np.array([0, 0, 0, 1])
    assert inverse_propensity(logged) == pytest.approx([4 / 3, 4 / 3, 4 / 3, 4.0])
    with pytest.raises(EvaluationError, match=r"\(0, 1\]"):
        inverse_propensity(logged, np.array([0.5, 0.0, 0.5, 0.5]))
    with pytest.raises(EvaluationError, match="one value per user"):
        eom([0, 0, 0, 1], logged, [1, 0, 1, 0], [0, 0, 0, 0], [0.5, 0.5])
    with pytest.raises(EvaluationError, match="one per user"):
        eom([0, 0], logged, [1, 0, 1, 0], [0, 0, 0, 0])


def test_eom_batch_and_chunked_levels_agree_with_a_plain_loop():
    rng = np.random.default_rng(3)
    v, c = e2e_truth(500, rng)
    lams = np.array([0.0, 0.05, 0.1, 0.2, 1.0])
    levels = levels_at_lambdas(v, c, lams)
    for lam, row in zip(lams, levels):
        assert np.array_equal(row, np.argmax(v - lam * c, axis=1))
    t, y, z, p = draw_rct(v, c, rng)
    vals, costs, nm = eom_batch(levels, t, y, z, p)
    for i, row in enumerate(levels):
        assert (vals[i], costs[i]) == pytest.approx(eom(row, t, y, z, p))
        assert nm[i] == np.sum(row == t)
    # lambda_upper_bound puts every user on the cheapest level
    assert np.all(levels_at_lambdas(v, c, [lambda_upper_bound(v, c)])[0] == 0)


def test_q_by_bisection_follows_algorithm_1_and_the_n_ary_variant_agrees():
    rng = np.random.default_rng(4)
    v, c = e2e_truth(20000, rng)
    t, y, z, p = draw_rct(v, c, rng)
    ev = LoggedEvents(t, y, z, p)
    q2 = q_at_budget((v, c), ev, 2.0)
    assert q2 == q_at_budget_bisection((v, c), ev, 2.0)
    assert q2.converged and abs(q2.cost - 2.0) <= 1e-4
    # the value reported is the EOM of the allocation at the multiplier found
    assert (q2.value, q2.cost) == pytest.approx(eom(greedy_levels(v, c, q2.lambda_), t, y, z, p))
    for arity in (3, 8, 32):
        qn = q_at_budget((v, c), ev, 2.0, arity=arity)
        assert abs(qn.cost - 2.0) <= 1e-4
        assert qn.value == pytest.approx(q2.value, abs=0.003)
    # a larger budget buys a larger response
    assert q_at_budget((v, c), ev, 3.0).value > q2.value + 0.03


def test_q_without_exact_hit_returns_the_last_midpoint_near_the_cost_jump():
    rng = np.random.default_rng(5)
    v, c = e2e_truth(2000, rng)
    t, y, _, p = draw_rct(v, c, rng)
    z = c[np.arange(2000), t] * rng.uniform(0.9, 1.1, 2000)  # continuous costs: no exact hit
    q = q_at_budget((v, c), LoggedEvents(t, y, z, p), 2.0, tol=1e-9, max_iter=60)
    assert not q.converged and q.n_iter == 60
    lam = q.lambda_
    below = eom(greedy_levels(v, c, lam * (1 + 1e-6) + 1e-12), t, y, z, p)[1]
    above = eom(greedy_levels(v, c, max(lam * (1 - 1e-6) - 1e-12, 0)), t, y, z, p)[1]
    assert min(below, above) <= 2.0 + 0.01 and max(below, above) >= 2.0 - 0.01


def test_bootstrap_interval_contains_the_estimate_and_shrinks_with_n():
    rng = np.random.default_rng(6)
    widths = []
    for n in (2000, 32000):
        v, c = e2e_truth(n, rng)
        assigned = greedy_levels(v, c, 0.12)
        t, y, z, p = draw_rct(v, c, rng)
        point = eom(assigned, t, y, z, p)[0]
        lo, hi = bootstrap_eom(assigned, t, y, z, p, n_boot=200, seed=0)
        assert lo <= point <= hi
        widths.append(hi - lo)
        assert bootstrap_eom(assigned, t, y, z, p, n_boot=200, seed=0) == (lo, hi)  # seeded
    # the width scales like 1 / sqrt(N): 16x the users, about a quarter of the width
    assert 0.15 < widths[1] / widths[0] < 0.4


def test_bootstrap_interval_covers_the_truth_most_of_the_time():
    rng = np.random.default_rng(7)
    v, c = e2e_truth(4000, rng)
    assigned = greedy_levels(v, c, 0.12)
    true_v, _ = true_policy_value(assigned, v, c)
    hits = []
    for s in range(40):
        t, y, z, p = draw_rct(v, c, rng)
        lo, hi = bootstrap_eom(assigned, t, y, z, p, n_boot=200, seed=s)
        hits.append(lo <= true_v <= hi)
    assert np.mean(hits) >= 0.8


def test_random_policy_respects_the_budget():
    rng = np.random.default_rng(8)
    v, c = e2e_truth(20000, rng)
    for budget in (1.0, 1.5, 2.0, 2.4):
        lv = random_policy(20000, 4, [1.0, 2.0, 3.0, 4.0], budget, seed=1)
        _, cost = true_policy_value(lv, v, c)
        assert cost <= budget + 0.02 and cost >= min(budget, 2.5) - 0.05
    # above the uniform cost (2.5): plain uniform levels
    lv = random_policy(20000, 4, [1.0, 2.0, 3.0, 4.0], 10.0, seed=1)
    assert np.allclose(np.bincount(lv, minlength=4) / 20000, 0.25, atol=0.015)
    # below the cheapest level's cost: everyone on the cheapest level
    assert np.all(random_policy(100, 4, [1.0, 2.0, 3.0, 4.0], 0.5) == 0)
    # per-user costs: each user's cheapest level is the fallback
    per_user = np.tile([3.0, 1.0, 2.0], (50, 1))
    assert np.all(random_policy(50, 3, per_user, 0.0) == 1)
    with pytest.raises(EvaluationError, match="levels"):
        random_policy(10, 4, [1.0, 2.0], 1.0)


def test_aucc_ranks_by_roi_better_than_random():
    rng = np.random.default_rng(9)
    n = 40000
    base = rng.uniform(0.05, 0.2, n)
    uplift = rng.uniform(0.0, 0.2, n) ** 2 * 5
    cost_up = rng.uniform(0.5, 1.5, n)
    v = np.stack([base, base + uplift], axis=1)
    c = np.stack([np.zeros(n), cost_up * (base + uplift)], axis=1)
    t = rng.integers(0, 2, n)
    y = (rng.uniform(size=n) < v[np.arange(n), t]).astype(float)
    z = c[np.arange(n), t]
    good = aucc(roi_score(v, c), t, y, z, 0.5)
    rand = aucc(rng.uniform(size=n), t, y, z, 0.5)
    worst = aucc(-roi_score(v, c), t, y, z, 0.5)
    assert good > 0.6 and worst < 0.4
    assert abs(rand - 0.5) < 0.1
    with pytest.raises(EvaluationError, match="two-arm"):
        aucc(np.zeros(4), [0, 1, 2, 0], [0, 1, 1, 0], [0, 1, 1, 0])
