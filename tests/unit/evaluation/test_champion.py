"""The champion's evidence checked against the simulator's truth, not only against hand-computed values:
the doubly robust value with a wrong outcome model (right propensities) and with wrong propensities
(right outcome model), the paired interval's coverage of the true difference of two policies over
redrawn holdouts, dr_q_at_budget's value, a hand-computed AUCC; then the champion rule itself."""

from __future__ import annotations

import numpy as np
import pytest

from promo_assets.evaluation.champion import (
    Candidate,
    ChampionSettings,
    Evidence,
    choose_champion,
    evaluate_candidate,
    influence,
    paired_difference,
)
from promo_assets.evaluation.eom import EvaluationError, aucc, levels_at_lambdas
from promo_assets.evaluation.honest import dr_interval, dr_q_at_budget
from promo_assets.evaluation.records import LoggedEvents, OutcomePredictions
from promo_assets.simulation.demo import LEVELS, build_pool

K = len(LEVELS)


@pytest.fixture(scope="module")
def truth():
    """The demo preset's true curves (expected response and cost, N x K) for 4,000 users."""
    pool = build_pool(4000, 7, np.asarray(LEVELS), "rct", 2.0)
    return pool.expected_response, pool.expected_cost


def draw(truth, rng, propensity=None):
    """One holdout day: each user's logged level (uniform, or from `propensity` N x K), its response
    drawn from the truth and the cost by the demo's rule (incentive x response)."""
    tv, _ = truth
    n = tv.shape[0]
    if propensity is None:
        t = rng.integers(0, K, n)
        p = np.full(n, 1.0 / K)
    else:
        u = rng.random(n)[:, None]
        t = np.minimum((u >= np.cumsum(propensity, axis=1)).sum(axis=1), K - 1)
        p = propensity[np.arange(n), t]
    y = (rng.random(n) < tv[np.arange(n), t]).astype(float)
    z = np.asarray(LEVELS)[t] * y
    return t, y, z, p


def policy(truth, seed):
    """A fixed allocation that is neither the oracle nor uniform (levels from a noisy score)."""
    tv, tc = truth
    noisy = tv + np.random.default_rng(seed).normal(0, 0.05, tv.shape)
    return levels_at_lambdas(noisy, tc, [0.08])[0]


def true_value(truth, levels):
    return float(truth[0][np.arange(len(levels)), levels].mean())


def dr_estimates(truth, levels, dm, propensity_for_estimator, logging=None, reps=150, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(reps):
        t, y, z, p = draw(truth, rng, logging)
        p_est = p if propensity_for_estimator is None else propensity_for_estimator[np.arange(len(t)), t]
        ev = Evidence(t, y, z, p_est, dm, dm * np.asarray(LEVELS), {})
        out.append(influence(ev, levels).mean())
    return np.asarray(out)


def test_dr_value_is_right_with_a_wrong_outcome_model_and_the_right_propensities(truth):
    """DR with an outcome model that is plainly wrong (every response predicted 0.9) but the logged
    propensities: its mean over redrawn holdouts is the policy's true value (within 4 standard
    errors of that mean), while the outcome model alone is far off."""
    levels = policy(truth, 3)
    wrong = np.full(truth[0].shape, 0.9)
    est = dr_estimates(truth, levels, wrong, None)
    target = true_value(truth, levels)
    assert abs(est.mean() - target) < 4 * est.std(ddof=1) / np.sqrt(est.size)
    assert abs(wrong[np.arange(len(levels)), levels].mean() - target) > 0.3  # the direct method alone is wrong


def test_dr_value_is_right_with_the_right_outcome_model_and_wrong_propensities(truth):
    """The reverse: the true curves as the outcome model and propensities that are wrong (logging is
    confounded: users who respond well at the policy's level are logged at it far more often; the
    estimator is told it was uniform): DR stays on the truth; the IPW estimate with the same wrong
    propensities (outcome model zero) is biased."""
    tv, _ = truth
    n = tv.shape[0]
    levels = policy(truth, 4)
    at_policy = tv[np.arange(n), levels]
    share = np.where(at_policy > np.median(at_policy), 0.7, 0.05)
    logging = np.repeat(((1 - share) / (K - 1))[:, None], K, axis=1)
    logging[np.arange(n), levels] = share
    told = np.full((n, K), 1.0 / K)
    target = true_value(truth, levels)
    est = dr_estimates(truth, levels, tv, told, logging=logging)
    assert abs(est.mean() - target) < 4 * est.std(ddof=1) / np.sqrt(est.size)
    ipw = dr_estimates(truth, levels, np.zeros_like(tv), told, logging=logging)
    assert abs(ipw.mean() - target) > 6 * ipw.std(ddof=1) / np.sqrt(ipw.size)


def test_paired_interval_covers_the_true_difference_of_two_policies(truth):
    """Over 300 redrawn holdouts, the 90 % paired interval of the DR difference between two
    policies covers their true difference 84-96 % of the time (binomial: 90 % +/- 3.5 SE), and it is
    much narrower than the unpaired one (the point of pairing)."""
    tv, _ = truth
    a = policy(truth, 5)
    b = np.where(np.random.default_rng(8).random(len(a)) < 0.25, policy(truth, 6), a)  # a challenger close to it
    diff = true_value(truth, a) - true_value(truth, b)
    dm = np.clip(tv + np.random.default_rng(2).normal(0, 0.05, tv.shape), 0, 1)  # a decent, imperfect model
    rng = np.random.default_rng(9)
    hits, widths, unpaired = 0, [], []
    for _ in range(300):
        t, y, z, p = draw(truth, rng)
        ev = Evidence(t, y, z, p, dm, dm * np.asarray(LEVELS), {})
        pa, pb = influence(ev, a), influence(ev, b)
        _, lo, hi = paired_difference(pa, pb, 0.9)
        hits += lo <= diff <= hi
        widths.append(hi - lo)
        unpaired.append(2 * 1.645 * np.hypot(pa.std(ddof=1), pb.std(ddof=1)) / np.sqrt(len(t)))
    assert 0.84 <= hits / 300 <= 0.96, hits / 300
    assert np.mean(widths) < 0.6 * np.mean(unpaired)


def test_dr_q_at_budget_value_matches_the_truth_of_its_allocation(truth):
    """dr_q_at_budget's VALUE (not only its cost): with the true curves as the outcome model, the DR
    value of the allocation it settles on equals that allocation's true value within its own
    interval's reach (4 standard errors), and that allocation spends the budget in truth."""
    tv, tc = truth
    rng = np.random.default_rng(21)
    t, y, z, p = draw(truth, rng)
    v = np.clip(tv + np.random.default_rng(3).normal(0, 0.03, tv.shape), 0, 1)
    c = v * np.asarray(LEVELS)
    events, outcome = LoggedEvents(t, y, z, p), OutcomePredictions(tv, tc)
    q = dr_q_at_budget((v, c), events, outcome, 1.0)
    levels = levels_at_lambdas(v, c, [q.lambda_])[0]
    lo, hi = dr_interval(levels, events, outcome)
    se = (hi - lo) / (2 * 1.96)
    assert abs(q.value - true_value(truth, levels)) < 4 * se
    assert abs(tc[np.arange(len(levels)), levels].mean() - 1.0) < 0.1


def test_aucc_hand_computed():
    """Four users, two arms, no propensities (empirical shares), every prefix k (n_bins=None).
    Ranked by score: u0 (treated, y=1, z=1), u1 (control, y=0, z=0), u2 (treated, y=0, z=1),
    u3 (control, y=1, z=0).
    k=1: no control yet -> skipped; k=2: inc_v = 2 (1 - 0) = 2, inc_c = 2 (1 - 0) = 2;
    k=3: treated mean y 1/2, control 0 -> 3 x 1/2 = 1.5, cost 3 x 1 = 3;
    k=4: y 1/2 - 1/2 = 0 -> the overall incremental value is 0: AUCC undefined (refused).
    With u3's response 0 instead: k=4: 4 (1/2 - 0) = 2, cost 4: the curve (0,0) (0.5,1) (0.75,0.75)
    (1,1); trapezoids: 0.5 x 0.5 + 0.25 x 0.875 + 0.25 x 0.875 = 0.25 + 0.4375 = 0.6875."""
    score = np.array([4.0, 3.0, 2.0, 1.0])
    logged = np.array([1, 0, 1, 0])
    cost = np.array([1.0, 0.0, 1.0, 0.0])
    with pytest.raises(EvaluationError, match="undefined"):
        aucc(score, logged, np.array([1.0, 0.0, 0.0, 1.0]), cost, n_bins=None)
    assert aucc(score, logged, np.array([1.0, 0.0, 0.0, 0.0]), cost, n_bins=None) == pytest.approx(0.6875)


# ------------------------------------------------------------------------------- the rule
def synthetic_evidence(truth, models: dict, seed=0):
    """Evidence of one uniform RCT day with the given models' coefficients (N x K value, cost)."""
    t, y, z, p = draw(truth, np.random.default_rng(seed))
    dm = np.clip(truth[0] + np.random.default_rng(99).normal(0, 0.05, truth[0].shape), 0, 1)
    return Evidence(t, y, z, p, dm, dm * np.asarray(LEVELS), models)


def model_of(truth, noise, seed):
    v = np.clip(truth[0] + np.random.default_rng(seed).normal(0, noise, truth[0].shape), 0, 1)
    return v, v * np.asarray(LEVELS)


def test_the_stacked_blend_follows_the_better_models(truth):
    """Three models, close to the truth, less close, pure noise: the champion is the stacked blend,
    the closest model has the largest weight and the noise (almost) none, and the paired decision
    loss says the noise model is worse than the champion (its pooled DR value difference too)."""
    rng = np.random.default_rng(5)
    junk = rng.random(truth[0].shape)
    models = {"good": model_of(truth, 0.02, 1), "fair": model_of(truth, 0.06, 2), "junk": (junk, junk * np.asarray(LEVELS))}
    d = choose_champion(synthetic_evidence(truth, models), [0.5, 1.5], ChampionSettings(confidence=0.9, guard="none"))
    w = dict(zip(d.champion.members, d.champion.weights))
    assert d.champion.is_blend and max(w, key=w.get) == "good" and w.get("junk", 0.0) < 0.05
    assert d.leader.name == "good"
    loss = [c for c in d.comparisons if c["candidate"] == "junk" and c["statistic"] == "loss"]
    guarded = choose_champion(synthetic_evidence(truth, models), [0.5, 1.5], ChampionSettings(guard="drop_worse"))
    assert "junk" not in guarded.champion.members and "guard drop_worse" in guarded.reason
    bagged = choose_champion(synthetic_evidence(truth, models), [0.5, 1.5])  # the default guard: bag
    w = dict(zip(bagged.champion.members, bagged.champion.weights))
    assert "guard bag" in bagged.reason and max(w, key=w.get) == "good" and w.get("junk", 0.0) < 0.05
    value = [c for c in d.comparisons if c["candidate"] == "junk" and c["statistic"] == "dr_value"
             and c["budget_per_capita"] is None]
    assert loss[0]["verdict"] == "worse" and value[0]["high"] < 0


def test_incumbent_stays_unless_the_proposal_is_better_at_the_confidence(truth):
    """Two models that are the same up to 1e-4: the first champion is (a blend of) them; an incumbent
    that is one of them alone stays (the blend, judged with weights fitted on the other half of the
    events, is not better at 90 %); a pure-noise incumbent is replaced."""
    a = model_of(truth, 0.03, 1)
    wiggle = np.random.default_rng(4).normal(0, 1e-4, a[0].shape)
    models = {"a": a, "b": (a[0] + wiggle, (a[0] + wiggle) * np.asarray(LEVELS))}
    ev = synthetic_evidence(truth, models)
    first = choose_champion(ev, [1.0])
    assert set(first.champion.members) <= {"a", "b"} and first.incumbent is None and "first champion" in first.reason
    assert first.decided_by.startswith(f"the decision loss on {ev.n} events: {first.proposal.name} has the lowest")
    kept = choose_champion(ev, [1.0], incumbent=Candidate(("a",)))
    assert kept.champion.name == "a" and not kept.changed and "stays champion" in kept.reason
    other = "b" if kept.proposal.name == "a" else "a"  # an incumbent that is not the proposal is compared with it
    stays = choose_champion(ev, [1.0], incumbent=Candidate((other,)))
    assert stays.champion.name == other and stays.proposal.name != other
    assert stays.decided_by.startswith(f"the decision loss against the incumbent {other} on {ev.n} events: ")
    assert "not distinguishable at 90%" in stays.decided_by
    junk = np.random.default_rng(3).random(truth[0].shape)
    models["junk"] = (junk, junk * np.asarray(LEVELS))
    replaced = choose_champion(synthetic_evidence(truth, models), [1.0], incumbent=Candidate(("junk",)))
    assert replaced.changed and "junk" not in replaced.champion.members and "replaces junk" in replaced.reason
    assert "against the incumbent junk" in replaced.decided_by and "better at 90%" in replaced.decided_by


def test_pin_and_candidates(truth):
    models = {"a": model_of(truth, 0.02, 1), "b": model_of(truth, 0.2, 2)}
    ev = synthetic_evidence(truth, models)
    pinned = choose_champion(ev, [1.0], ChampionSettings(pin="b"))
    assert pinned.champion.name == "b" and "pinned" in pinned.reason
    assert pinned.decided_by == "campaign.yaml champion.pin (no comparison)"
    only = choose_champion(ev, [1.0], ChampionSettings(candidates=("b",)))
    assert only.champion.name == "b"
    with pytest.raises(EvaluationError, match="champion.pin"):
        choose_champion(ev, [1.0], ChampionSettings(pin="missing"))


def test_blend_coefficients_and_version():
    v1, c1 = np.ones((3, 2)), np.full((3, 2), 2.0)
    v2, c2 = np.zeros((3, 2)), np.zeros((3, 2))
    blend = Candidate.blend(["m2", "m1"], {"m1": "v1", "m2": "v2"})
    assert blend.name == "blend(m1+m2)" and blend.weights == (0.5, 0.5) and blend.versions == ("v1", "v2")
    v, c = blend.coefficients({"m1": (v1, c1), "m2": (v2, c2)})
    assert np.allclose(v, 0.5) and np.allclose(c, 1.0)
    assert blend.version != Candidate.blend(["m1", "m2"], {"m1": "v1", "m2": "other"}).version
    assert Candidate.from_dict(blend.to_dict()) == blend


def test_evaluate_candidate_spends_the_budget_on_the_dr_cost(truth):
    models = {"a": model_of(truth, 0.02, 1)}
    ev = synthetic_evidence(truth, models)
    r = evaluate_candidate(ev, Candidate(("a",)), [0.5, 1.5])
    assert r.costs == pytest.approx([0.5, 1.5], rel=2e-3)
    assert all(lo < v < hi for v, (lo, hi) in zip(r.values, r.intervals))


def test_guards_keep_the_blend_from_leaning_on_a_worse_model(truth):
    """The worst-case guards (ChampionSettings.guard): shrink moves `guard_level` of the weight to the
    single model of lowest loss; drop_worse gives no weight to a model worse than it at the confidence;
    members falls back to that single model when the blend cannot beat a member by the required margin."""
    from promo_assets.evaluation.champion import guarded_weights, loss_terms

    rng = np.random.default_rng(5)
    junk = rng.random(truth[0].shape)
    models = {"good": model_of(truth, 0.02, 1), "fair": model_of(truth, 0.06, 2), "junk": (junk, junk * np.asarray(LEVELS))}
    ev = synthetic_evidence(truth, models)
    terms = loss_terms(ev, list(models), np.asarray([0.1]))
    w = terms.stack()
    shrunk, note = guarded_weights(terms, w, "shrink", 0.5, 0.9)
    assert np.allclose(shrunk, 0.5 * w + 0.5 * np.array([1.0, 0, 0])) and "toward good" in note
    kept, note = guarded_weights(terms, np.array([0.4, 0.3, 0.3]), "drop_worse", 0.0, 0.9)
    assert kept[2] == 0 and abs(kept.sum() - 1) < 1e-9 and "junk" in note
    single, note = guarded_weights(terms, w, "members", 5.0, 0.9)  # 5 standard errors: not shown on one day
    assert np.array_equal(single, [1.0, 0, 0]) and "good alone" in note
    d = choose_champion(ev, [1.0], ChampionSettings(guard="members", guard_level=5.0))
    assert d.champion.name == "good" and "guard members" in d.reason
    even, note = guarded_weights(terms, w, "equal", 0.5, 0.9)
    assert np.allclose(even, 0.5 * w + 0.5 / 3) and "equal weights" in note
    bagged, _ = guarded_weights(terms, w, "bag", 0.0, 0.9)
    assert bagged.min() >= 0 and abs(bagged.sum() - 1) < 1e-9 and np.argmax(bagged) == 0 and bagged[2] < 0.05
    assert np.array_equal(bagged, guarded_weights(terms, w, "bag", 0.0, 0.9)[0])  # seeded: the same every run
    # the incumbent comparison cross-fits the guarded weights: a fit that always says "good" gives good's own loss
    from promo_assets.evaluation.champion import cross_fitted_stack_loss
    assert np.allclose(cross_fitted_stack_loss(terms, fit=lambda t: np.array([1.0, 0, 0])), terms.loss([1.0, 0, 0]))
    with pytest.raises(EvaluationError, match="champion.guard must be one of"):
        guarded_weights(terms, w, "nope", 0.0, 0.9)


@pytest.mark.hostile
def test_a_shrink_guard_above_one_is_refused_naming_the_key(tmp_path):
    from promo_assets.config.campaign import CampaignConfig, CampaignConfigError

    raw = {"treatments": {"levels": [0, 1, 2]}, "budget_per_capita": 1.0,
           "champion": {"guard": "shrink", "guard_level": 1.5}}
    with pytest.raises(CampaignConfigError, match="'champion.guard_level' = 1.5 with guard shrink must be at most 1"):
        CampaignConfig.from_dict(raw, campaign="c1")
    with pytest.raises(CampaignConfigError, match="guard"):
        CampaignConfig.from_dict({**raw, "champion": {"guard": "wild"}}, campaign="c1")
    ok = CampaignConfig.from_dict({**raw, "champion": {"guard": "members", "guard_level": 1.0}}, campaign="c1")
    assert ChampionSettings.from_config(ok.champion).guard == "members"


# ------------------------------------------------------------------------------- cross-fitted evidence
def _rows(ev: Evidence, rows: slice, models) -> Evidence:
    return Evidence(ev.logged[rows], ev.response[rows], ev.cost[rows], ev.propensity[rows], ev.dm_values[rows],
                    ev.dm_costs[rows], {m: (ev.coefficients[m][0][rows], ev.coefficients[m][1][rows]) for m in models})


def test_cross_fitted_events_weigh_in_the_refitted_models_stack(truth):
    """Holdout of 300 events with three models, cross-fitted events (3,700) for two of them ('a', 'b'):
    stage 1 stacks a and b on all 4,000 events, stage 2 stacks that blend with 'n' (not refitted) on the
    holdout; the reason counts the cross-fitted events, and a and b are also compared on all of them."""
    from promo_assets.evaluation.champion import decision_lambdas, loss_terms, two_stage_weights

    models = {"a": model_of(truth, 0.02, 1), "b": model_of(truth, 0.08, 2), "n": model_of(truth, 0.04, 3)}
    full = synthetic_evidence(truth, models)
    holdout, xfit = _rows(full, slice(0, 300), models), _rows(full, slice(300, None), ["a", "b"])
    plain = ChampionSettings(guard="none")  # the stacked weights themselves (the guards are tested below)
    d = choose_champion(holdout, [1.0], plain, cross_fitted=xfit)
    assert f"300 evaluation events and {xfit.n} cross-fitted training-day events of a, b" in d.reason
    assert f"and {xfit.n} cross-fitted" in d.decided_by
    row = [c for c in d.comparisons if c["statistic"] == "loss (cross-fitted)"]
    assert len(row) == 1 and row[0]["candidate"] == "b" and row[0]["reference"] == "a" and row[0]["verdict"] == "worse"
    lams = decision_lambdas(holdout, list(models), [1.0])
    wide = loss_terms(Evidence.concat([holdout.only(["a", "b"]), xfit]), ["a", "b"], lams)
    w = two_stage_weights(loss_terms(holdout, list(models), lams), wide)
    assert w.min() >= 0 and abs(w.sum() - 1) < 1e-9
    assert w[:2] / w[:2].sum() == pytest.approx(wide.stack(), abs=1e-6)  # the refitted share as stacked on all events
    champ = dict(zip(d.champion.members, d.champion.weights))
    kept = {m: x for m, x in zip(["a", "b", "n"], w) if x >= 0.01}
    assert champ == pytest.approx({m: x / sum(kept.values()) for m, x in kept.items()})
    # every candidate refitted: the stack on all events
    both = choose_champion(holdout.only(["a", "b"]), [1.0], plain, cross_fitted=xfit)
    assert dict(zip(both.champion.members, both.champion.weights)).get("a", 0) == pytest.approx(
        loss_terms(Evidence.concat([holdout.only(["a", "b"]), xfit]), ["a", "b"],
                   decision_lambdas(holdout, ["a", "b"], [1.0])).stack()[0], abs=0.011)


def test_guards_fit_the_stack_again_through_the_given_stack(truth):
    """bag, members and drop_worse fit the stacked weights again through `stack` (with cross-fitted
    evidence: the two-stage stack on the holdout and the cross-fitted events), not on the holdout alone."""
    from promo_assets.evaluation.champion import guarded_weights, loss_terms

    junk = np.random.default_rng(5).random(truth[0].shape)
    good = model_of(truth, 0.02, 1)
    twin = np.clip(good[0] + np.random.default_rng(4).normal(0, 1e-4, good[0].shape), 0, 1)
    models = {"good": good, "fair": (twin, twin * np.asarray(LEVELS)), "junk": (junk, junk * np.asarray(LEVELS))}
    terms = loss_terms(synthetic_evidence(truth, models), list(models), np.asarray([0.1]))
    calls = []

    def stack(rows=None, keep=None):
        calls.append((None if rows is None else len(rows), None if keep is None else tuple(keep)))
        return np.array([0.7, 0.3, 0.0])

    bagged, _ = guarded_weights(terms, terms.stack(), "bag", 0.0, 0.9, stack)
    assert np.allclose(bagged, [0.7, 0.3, 0.0]) and len(calls) == 20 and all(k is None for _, k in calls)
    calls.clear()
    kept, _ = guarded_weights(terms, np.array([0.4, 0.3, 0.3]), "drop_worse", 0.0, 0.9, stack)
    assert np.allclose(kept, [0.7, 0.3, 0.0]) and calls == [(None, ("good", "fair"))]
    calls.clear()
    guarded_weights(terms, terms.stack(), "members", 0.0, 0.9, stack)
    assert len(calls) == 5 and all(n is not None and n < terms.S.shape[0] for n, _ in calls)  # one fit per fold
    full = synthetic_evidence(truth, models)
    holdout, xfit = _rows(full, slice(0, 400), models), _rows(full, slice(400, None), ["good", "fair"])
    for guard in ("bag", "drop_worse", "members"):
        d = choose_champion(holdout, [1.0], ChampionSettings(guard=guard), cross_fitted=xfit)
        assert abs(sum(d.champion.weights) - 1) < 1e-9 and "junk" not in d.champion.members
