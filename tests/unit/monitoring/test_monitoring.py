"""The outcomes of deployed decisions (promo_assets.monitoring): the effect's coverage under daily looks,
the join's refusals, drift, the checks and the monitoring block of campaign.yaml."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import CampaignConfigError
from promo_assets.config.campaign import MonitoringBlock
from promo_assets.monitoring import (Candidate, OutcomeError, choose_decision, cumulative, day_outcome, effect_terms,
                                     feature_drift, late_days, run_checks, true_effect)
from promo_assets.core.coefficients import Coefficients
from promo_assets.evaluation.records import LoggedEvents
from promo_assets.monitoring.checks import CheckOutcome
from promo_assets.monitoring.drift import exploration_after_change, stale_weights
from promo_assets.monitoring.effect import Deployment
from promo_assets.monitoring.run import MonitorResult
from tests.unit.campaign.test_hostile_config import BASE, load_yaml

INC = np.array([0.0, 1, 2, 3, 4, 5])
K = INC.size


def _day(seed: int, n: int = 2000, share: float = 0.05, noise: float = 0.03, shift: float = 0.0):
    r = np.random.default_rng(seed)
    base, sens = r.uniform(0.05, 0.3, n), r.uniform(0, 0.08, n)
    v = np.clip(base[:, None] + (sens[:, None] - shift) * np.sqrt(INC)[None, :], 0, 1)
    m = np.clip(v + shift * np.sqrt(INC)[None, :] + r.normal(0, noise, v.shape), 0.001, 1)
    pi = np.argmax(m - 0.05 * m * INC, axis=1)
    ex = np.zeros(n, bool)
    ex[r.choice(n, int(share * n), replace=False)] = True
    a = pi.copy()
    a[ex] = r.integers(0, K, ex.sum())
    y = (r.random(n) < v[np.arange(n), a]).astype(float)
    t = effect_terms(LoggedEvents(a, y, y * INC[a]), Deployment(pi, ex.mean(), np.full(K, 1 / K), ex),
                     Coefficients(m, m * INC), INC)
    return t, true_effect(v, v * INC, pi, INC)["effect"]


def _row(day, t):
    return {"day": day, "psi_n": len(t.psi), "psi_sum": t.psi.sum(), "psi_ss": ((t.psi - t.effect) ** 2).sum(),
            "cheap_sum": t.psi_cheapest.sum(), "cheap_ss": ((t.psi_cheapest - t.vs_cheapest) ** 2).sum(),
            "dm_effect": t.dm_effect, "dm_var": t.dm_se ** 2}


def test_effect_confidence_sequence_covers_under_daily_looks():
    """20 loops x 8 daily looks: the 90% sequence holds at every look in >= 90% of the loops, and the
    fixed-sample interval is narrower (the price of looking every day)."""
    ever, looks, covered = 0, 0, 0
    for rep in range(20):
        rows, truths, bad = [], [], False
        for d in range(8):
            t, truth = _day(1000 * rep + d)
            rows.append(_row(d, t))
            truths.append(truth)
            e = cumulative(rows, 0.9, 20000)[-1]
            inside = e["low"] <= np.mean(truths) <= e["high"]
            covered += inside
            looks += 1
            bad |= not inside
            assert e["fixed_high"] - e["fixed_low"] < e["high"] - e["low"]
        ever += bad
    assert covered / looks >= 0.9
    assert ever / 20 <= 0.1


def test_effect_sees_a_champion_worse_than_random():
    """Predictions that reward the dearest levels where the truth punishes them: the effect is negative."""
    rows = [_row(d, _day(d, shift=0.2)[0]) for d in range(6)]
    truth = np.mean([_day(d, shift=0.2)[1] for d in range(6)])
    e = cumulative(rows, 0.9, 20000)[-1]
    assert truth < 0 and e["high"] < 0


def _frame(users, levels, policy, prop, champion=None):
    return pd.DataFrame({"user_id": users, "level": levels, "policy": policy, "propensity": prop,
                         "champion_level": levels if champion is None else champion,
                         "predicted_response": 0.2, "predicted_cost": 0.4})


def _events(users, levels, prop, response=None):
    return pd.DataFrame({"user_id": users, "level": levels, "response": response if response is not None else
                         np.resize([0.0, 1.0], len(users)), "cost": 1.0, "propensity": prop})


USERS = [f"u{i}" for i in range(40)]
LEVELS = np.resize([0, 1, 2], 40)
POLICY = np.where(np.arange(40) % 10 == 0, "explore", "champion")
PROP = np.where(POLICY == "explore", 0.1 / 3, 0.9 + 0.1 / 3)


@pytest.mark.hostile
def test_events_of_users_never_decided_for_are_counted_not_joined():
    cand = Candidate("r1", 1.0, _frame(USERS, LEVELS, POLICY, PROP), {})
    ev = _events(USERS[:30] + ["stranger1", "stranger2"], list(LEVELS[:30]) + [2, 0], list(PROP[:30]) + [0.5, 0.5])
    out = day_outcome(dt.date(2026, 1, 5), ev, cand, None, [0.0, 1.0, 2.0], 0)
    assert out.status == "ok"
    assert out.row["undecided_events"] == 2 and out.row["undecided_incentive"] == 1 and out.row["joined"] == 30


@pytest.mark.hostile
def test_events_answering_no_decision_are_refused():
    cand = Candidate("r1", 1.0, _frame(USERS, LEVELS, POLICY, PROP), {})
    out = day_outcome(dt.date(2026, 1, 5), _events(["x1", "x2"], [0, 1], [0.5, 0.5]), cand, None, [0.0, 1.0, 2.0], 0)
    assert out.status == "refused" and "none of the day's 2 events answers the decision" in out.reason


@pytest.mark.hostile
def test_a_day_that_came_back_twice_is_refused():
    cand = Candidate("r1", 1.0, _frame(USERS, LEVELS, POLICY, PROP), {})
    ev = _events(USERS + USERS[:5], list(LEVELS) + list(LEVELS[:5]), list(PROP) + list(PROP[:5]))
    out = day_outcome(dt.date(2026, 1, 5), ev, cand, None, [0.0, 1.0, 2.0], 0)
    assert out.status == "refused" and "came back twice: 5 user(s)" in out.reason and "'u0'" in out.reason


@pytest.mark.hostile
@pytest.mark.parametrize("column, what", [("level", "decided level"), ("champion_level", "champion level")],
                         ids=["error-stored-level-out-of-range", "error-stored-champion-level-out-of-range"])
def test_a_stored_decision_with_a_level_outside_the_campaign_is_refused(column, what):
    """A stored decision tampered with (or made for another treatments block): the day is refused with its
    reason instead of failing the run on an index out of bounds."""
    frame = _frame(USERS, LEVELS, POLICY, PROP)
    frame.loc[7, column] = 9
    out = day_outcome(dt.date(2026, 1, 5), _events(USERS, LEVELS, PROP), Candidate("r1", 1.0, frame, {}), None,
                      [0.0, 1.0, 2.0], 0)
    assert out.status == "refused" and not out.row
    assert f"holds 1 {what}(s) outside the campaign's 3 levels 0-2" in out.reason and "'u7': 9" in out.reason


@pytest.mark.hostile
def test_propensities_that_differ_from_the_decision_are_refused():
    cand = Candidate("r1", 1.0, _frame(USERS, LEVELS, POLICY, PROP), {})
    prop = PROP.copy()
    prop[3] = 0.25
    out = day_outcome(dt.date(2026, 1, 5), _events(USERS, LEVELS, prop), cand, None, [0.0, 1.0, 2.0], 0)
    assert out.status == "refused"
    assert "1 event(s) log a propensity that differs" in out.reason and "'u3'" in out.reason and "0.25" in out.reason


@pytest.mark.hostile
@pytest.mark.parametrize("budget, expect", [(None, "error"), (2.0, 2.0), (3.0, "monitoring.budget 3 was not decided")],
                         ids=["error-several-budgets-none-deployed", "accepted-deployed-budget",
                              "error-deployed-budget-not-decided"])
def test_the_deployed_budget_is_known_not_guessed(budget, expect):
    """Several budgets decided for a day: the events answer the deployed one (recorded with the export, else
    campaign.yaml monitoring.budget); none known refuses the day naming the key, even where the propensities
    would tell one budget from another (a three-budget loop refused by chance before)."""
    a = Candidate("r1", 1.0, _frame(USERS, LEVELS, POLICY, PROP), {})
    other = PROP.copy()
    other[:20] = 0.5
    b = Candidate("r1", 2.0, _frame(USERS, (LEVELS + 1) % 3, POLICY, other), {})
    if expect == "error":
        with pytest.raises(OutcomeError, match=r"2 budgets were decided for this day \(1, 2\) and none is recorded as "
                           "deployed: set campaign.yaml monitoring.budget"):
            choose_decision(_events(USERS, LEVELS, PROP), [a, b], budget)
    elif isinstance(expect, str):
        with pytest.raises(OutcomeError, match=expect):
            choose_decision(_events(USERS, LEVELS, PROP), [a, b], budget)
    else:
        assert choose_decision(_events(USERS, LEVELS, PROP), [a, b], budget).budget == expect


@pytest.mark.hostile
def test_a_day_decided_twice_at_its_budget_joins_the_matching_run_and_refuses_a_tie():
    a = Candidate("r1", 1.0, _frame(USERS, LEVELS, POLICY, PROP), {})
    other = PROP.copy()
    other[:20] = 0.5
    again = Candidate("r2", 1.0, _frame(USERS, (LEVELS + 1) % 3, POLICY, other), {})
    assert choose_decision(_events(USERS, LEVELS, PROP), [a, again]).run_id == "r1"
    tie = Candidate("r3", 1.0, _frame(USERS, (LEVELS + 1) % 3, POLICY, PROP), {})
    with pytest.raises(OutcomeError, match="ambiguous join: the decisions runs r1, r3 decided this day at budget 1"):
        choose_decision(_events(USERS, LEVELS, PROP), [a, tie])


def test_compliance_counts_events_off_their_decided_level():
    cand = Candidate("r1", 1.0, _frame(USERS, LEVELS, POLICY, PROP), {})
    logged = LEVELS.copy()
    logged[:8] = 0  # the coupon system gave nothing
    out = day_outcome(dt.date(2026, 1, 5), _events(USERS, logged, PROP), cand, None, [0.0, 1.0, 2.0], 0)
    changed = int((LEVELS[:8] != 0).sum())
    incentives = int((LEVELS != 0).sum())  # compliance is over the decisions that give an incentive
    assert out.row["noncompliant_events"] == changed and out.row["compliance"] == pytest.approx(1 - changed / incentives)


def test_a_segment_whose_response_moved_fails_realized_vs_predicted():
    """One city's response to the incentive collapses while the overall mean barely moves: the check by
    segment fires, naming the city; an unchanged day passes."""
    d = [dt.date(2026, 1, i) for i in range(1, 4)]
    settings = MonitoringBlock.model_validate({})
    segs = [{"segment": f"city={c}", "events": 400, "realized": 0.4, "predicted": 0.4, "realized_cost": 1.0,
             "predicted_cost": 1.0, "se": 0.024} for c in ("a", "b", "c", "d")]
    rows = [{**_ok_row(x), "segments": segs} for x in d]
    assert all(c.passed for c in run_checks(settings, rows, [], [], [], 0.1))
    moved = [dict(s) for s in segs]
    moved[1].update(realized=0.2)
    moved[2].update(realized=0.46)
    rows[-1] = {**_ok_row(d[-1], real=0.385), "segments": moved}
    got = {c.name: c for c in run_checks(settings, rows, [], [], [], 0.1)}
    assert not got["realized_vs_predicted"].passed and "city=b" in got["realized_vs_predicted"].message
    assert "city=c" not in got["realized_vs_predicted"].message
    # the earlier days carried (their segment rows gone, their verdict kept): the change day stays the first
    react = MonitoringBlock.model_validate({"reactions": {"realized_vs_predicted": "retrain"}})
    carried = [{**_ok_row(x, real=0.385), "segments_off": n} for x, n in zip(d[:2], (0, 1))]
    got = {c.name: c for c in run_checks(react, carried + rows[-1:], [], [], [], 0.1)}
    assert got["realized_vs_predicted"].change_day == d[1] and got["realized_vs_predicted"].acts
    got = {c.name: c for c in run_checks(react, [{**r, "segments_off": 0} for r in carried] + rows[-1:], [], [], [],
                                          0.1)}
    assert got["realized_vs_predicted"].change_day == d[2]


def test_drift_flags_a_new_city_and_a_shifted_feature_only():
    r = np.random.default_rng(0)
    ref = pd.DataFrame({"age": r.normal(40, 5, 3000), "spend": r.normal(10, 2, 3000),
                        "city": r.choice(["a", "b"], 3000)})
    same = pd.DataFrame({"age": r.normal(40, 5, 2000), "spend": r.normal(10, 2, 2000), "city": r.choice(["a", "b"], 2000)})
    moved = same.assign(spend=same["spend"] + 8, city=np.where(np.arange(2000) < 300, "new_city", same["city"]))
    kw = dict(psi_threshold=0.25, range_threshold=0.02, new_category_threshold=0.01)
    assert not any(f.flagged for f in feature_drift(ref, same, ["age", "spend"], ["city"], **kw))
    flagged = {f.feature: f for f in feature_drift(ref, moved, ["age", "spend"], ["city"], **kw) if f.flagged}
    assert set(flagged) == {"spend", "city"}
    assert flagged["city"].new_categories == ("new_city",) and flagged["city"].new_share == pytest.approx(0.15)
    assert "new categories 'new_city'" in flagged["city"].describe()


def _ok_row(day, real=0.4, pred=0.4, compliance=1.0):
    return {"day": day, "realized_response": real, "predicted_response": pred, "realized_response_se": 0.005,
            "realized_cost": 1.0, "predicted_cost": 1.0, "realized_cost_se": 0.01, "compliance": compliance,
            "joined": 1000, "undecided_incentive": 0, "psi_n": 1000, "psi_sum": 30.0, "psi_ss": 100.0,
            "cheap_sum": 50.0, "cheap_ss": 100.0, "dm_effect": 0.01, "dm_var": 1e-4}


def test_checks_fire_on_their_own_cause_with_the_configured_reaction():
    d = [dt.date(2026, 1, i) for i in range(1, 6)]
    settings = MonitoringBlock.model_validate({"reactions": {"realized_vs_predicted": "retrain"}})
    quiet = run_checks(settings, [_ok_row(x) for x in d], [], [], [], 0.1)
    assert all(c.passed for c in quiet)
    rows = [_ok_row(x) for x in d[:3]] + [_ok_row(x, real=0.25) for x in d[3:]]
    got = {c.name: c for c in run_checks(settings, rows, [], [], [], 0.1)}
    assert not got["realized_vs_predicted"].passed and got["realized_vs_predicted"].change_day == d[3]
    assert got["realized_vs_predicted"].acts and got["realized_vs_predicted"].severity == "ERROR"
    assert [n for n, c in got.items() if not c.passed] == ["realized_vs_predicted"]
    low = {c.name: c for c in run_checks(settings, [_ok_row(x, compliance=0.8) for x in d], [], [], [], 0.1)}
    assert not low["compliance"].passed and not low["compliance"].acts and low["compliance"].severity == "WARN"
    stale = {c.name: c for c in run_checks(settings, [_ok_row(x) for x in d], [], [], [d[4]], 3.5)}
    assert not stale["freshness"].passed and "2026-01-05" in stale["freshness"].message and "3.5 days old" in \
        stale["freshness"].message


def test_a_failure_that_passes_a_day_now_and_then_keeps_its_change_day():
    """A retrained model still learning a change passes a day now and then: the change day (the retrain
    window's start) stays; only `settle_days` passing days in a row end the failure."""
    d = [dt.date(2026, 1, i) for i in range(1, 15)]
    settings = MonitoringBlock.model_validate({"reactions": {"realized_vs_predicted": "retrain"}, "settle_days": 3})
    real = [0.4] * 4 + [0.25, 0.25, 0.4, 0.25, 0.4, 0.4, 0.25]  # fails from d[4]; passes on d[6], d[8], d[9]
    got = {c.name: c for c in run_checks(settings, [_ok_row(x, real=r) for x, r in zip(d, real)], [], [], [], 0.1)}
    assert not got["realized_vs_predicted"].passed and got["realized_vs_predicted"].change_day == d[4]
    one = MonitoringBlock.model_validate({"reactions": {"realized_vs_predicted": "retrain"}, "settle_days": 1})
    got = {c.name: c for c in run_checks(one, [_ok_row(x, real=r) for x, r in zip(d, real)], [], [], [], 0.1)}
    assert got["realized_vs_predicted"].change_day == d[10]  # settle_days 1: every failing streak is a new change
    real = [0.4] * 4 + [0.25, 0.25, 0.4, 0.4, 0.4, 0.25, 0.25]  # three passing days: a new change on d[9]
    got = {c.name: c for c in run_checks(settings, [_ok_row(x, real=r) for x, r in zip(d, real)], [], [], [], 0.1)}
    assert got["realized_vs_predicted"].change_day == d[9]


def test_late_days_count_from_the_later_of_the_day_and_the_decision():
    now = dt.datetime(2026, 1, 10, 12)
    decided = [(dt.date(2026, 1, 5), dt.datetime(2026, 1, 4, 20)), (dt.date(2026, 1, 8), dt.datetime(2026, 1, 7, 20)),
               (dt.date(2026, 1, 2), dt.datetime(2026, 1, 10, 11))]  # a back-dated simulated day decided now
    assert late_days(decided, {dt.date(2026, 1, 4)}, now, grace_days=1) == [dt.date(2026, 1, 5)]


BAD_MONITORING = {
    "confidence-one": ("monitoring:\n  confidence: 1\n", ["'monitoring.confidence'", "(0.5, 1)"]),
    "negative-tolerance": ("monitoring:\n  realized_tolerance: -0.1\n", ["'monitoring.realized_tolerance'"]),
    "unknown-reaction": ("monitoring:\n  reactions:\n    compliance: panic\n",
                         ["'monitoring.reactions.compliance'", "'panic'", "retrain"]),
    "unknown-check": ("monitoring:\n  reactions:\n    weather: warn\n", ["monitoring.reactions", "weather"]),
    "text-threshold": ("monitoring:\n  psi_threshold: high\n", ["'monitoring.psi_threshold'", "'high'"]),
    "compliance-above-one": ("monitoring:\n  min_compliance: 1.5\n", ["'monitoring.min_compliance'"]),
    "explore-share-unbounded": ("monitoring:\n  change_explore_share: 0.9\n", ["'monitoring.change_explore_share'"]),
    "settle-days-zero": ("monitoring:\n  settle_days: 0\n", ["'monitoring.settle_days'"]),
    "unknown-stale-scope": ("monitoring:\n  stale_scope: city\n", ["'monitoring.stale_scope'", "'segments'"]),
}


@pytest.mark.hostile
@pytest.mark.parametrize("text, words", list(BAD_MONITORING.values()), ids=list(BAD_MONITORING))
def test_bad_monitoring_block_is_refused_naming_the_key(tmp_path, text, words):
    with pytest.raises(CampaignConfigError) as err:
        load_yaml(tmp_path, BASE + text)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_monitoring_defaults(tmp_path):
    m = load_yaml(tmp_path, BASE).monitoring
    assert (m.confidence, m.realized_tolerance, m.reactions.realized_vs_predicted) == (0.9, 0.15, "warn")
    assert (m.settle_days, m.change_explore_share, m.change_explore_days) == (3, None, 3)
    assert (m.stale_weight, m.stale_scope) == (0.1, "all")


def test_the_retrain_reaction_explores_more_only_on_the_days_after_the_change():
    change = dt.date(2026, 1, 12)
    off = MonitoringBlock.model_validate({})
    on = MonitoringBlock.model_validate({"change_explore_share": 0.2, "change_explore_days": 2})
    days = [change + dt.timedelta(days=i) for i in range(4)]
    assert [exploration_after_change(0.05, change, d, on) for d in days] == [0.05, 0.2, 0.2, 0.05]
    assert [exploration_after_change(0.05, change, d, off) for d in days] == [0.05] * 4
    assert exploration_after_change(0.05, None, days[1], on) == 0.05  # no retrain window: no change seen
    assert exploration_after_change(0.3, change, days[1], on) == 0.3  # never less than exploration.share


def _segments(real_b: float = 0.4) -> list[dict]:
    return [{"segment": f"city={c}", "feature": "city", "value": c, "events": 400, "realized": real_b if c == "b" else 0.4,
             "predicted": 0.4, "realized_cost": 1.0, "predicted_cost": 1.0, "se": 0.024} for c in ("a", "b", "c")]


def test_the_retrain_window_keeps_the_segments_whose_response_changed():
    """realized_vs_predicted names the segments off during its failure (from its first failing day on,
    not before); the retrain window takes them, the next runs carry them on with the window, and its
    row in monitoring_checks says them."""
    d = [dt.date(2026, 1, i) for i in range(1, 6)]
    react = MonitoringBlock.model_validate({"reactions": {"realized_vs_predicted": "retrain"}})
    rows = [{**_ok_row(x), "segments": _segments()} for x in d[:3]]
    rows += [{**_ok_row(x, real=0.36), "segments": _segments(0.2)} for x in d[3:]]
    got = {c.name: c for c in run_checks(react, rows, [], [], [], 0.1)}
    assert got["realized_vs_predicted"].change_day == d[3] and got["realized_vs_predicted"].segments == (("city", "b"),)
    assert got["compliance"].segments == ()
    quiet = {c.name: c for c in run_checks(react, rows[:3], [], [], [], 0.1)}
    assert quiet["realized_vs_predicted"].passed and quiet["realized_vs_predicted"].segments == ()

    result = MonitorResult(days=[], carried=[], effect=[], drift=[], checks=list(got.values()), decision_age_days=None,
                           late=[])
    assert [c.name for c in result.new_reactions(None, set())] == ["realized_vs_predicted"]
    assert (result.change_day, result.change_segments) == (d[3], (("city", "b"),))
    window = result.tables()["checks"].set_index("check_name").loc["training_window"]
    assert window["change_segments"] == '[["city", "b"]]' and "city=b" in window["message"]
    later = MonitorResult(days=[], carried=[], effect=[], drift=[], checks=list(quiet.values()), decision_age_days=None,
                          late=[])
    assert later.new_reactions(d[3], set(), (("city", "b"),)) == []  # passing now: the window is carried on
    assert (later.change_day, later.change_segments) == (d[3], (("city", "b"),))
    none = MonitorResult(days=[], carried=[], effect=[], drift=[], checks=[CheckOutcome(
        "effect_below_zero", False, "below", "ERROR", "retrain", d[4])], decision_age_days=None, late=[])
    none.new_reactions(d[3], set(), (("city", "b"),))  # a newer change seen by no segment: every event is stale
    assert (none.change_day, none.change_segments) == (d[4], ())


def test_stale_weights_down_weight_only_the_changed_segments_before_the_change():
    dates = pd.to_datetime(["2026-01-01", "2026-01-01", "2026-01-02", "2026-01-03", "2026-01-03"])
    feats = pd.DataFrame({"city": ["a", "b", "b", "b", None], "device": ["x", "y", "x", "x", "y"]})
    change = dt.date(2026, 1, 3)
    assert stale_weights(dates, change, 0.1).tolist() == [0.1, 0.1, 0.1, 1.0, 1.0]
    assert stale_weights(dates, change, 0.1, [("city", "b")], feats).tolist() == [1.0, 0.1, 0.1, 1.0, 1.0]
    assert stale_weights(dates, change, 0.0, [("city", "a"), ("device", "y")], feats).tolist() == [0.0, 0.0, 1.0, 1.0,
                                                                                                   1.0]
    assert stale_weights(dates, dt.date(2026, 1, 4), 0.1, [("city", "<missing>")], feats).tolist() == [1, 1, 1, 1, 0.1]
    # a segment of a feature the events no longer have: no segment known, every event before the change is stale
    assert stale_weights(dates, change, 0.1, [("region", "north")], feats).tolist() == [0.1, 0.1, 0.1, 1.0, 1.0]
    assert stale_weights(dates, None, 0.1, [("city", "b")], feats).tolist() == [1.0] * 5


def test_the_training_window_segments_are_read_back_from_the_warehouse(tmp_path):
    """The window's segments stored with its training_window row are read back for its change day, only
    from a run that succeeded; another day, no window or no row: none (every event stale)."""
    from promo_assets.store import monitoring as monitoring_store, results
    from promo_assets.store.warehouse import connect, transaction

    day = dt.date(2026, 1, 12)
    result = MonitorResult(days=[], carried=[], effect=[], drift=[], checks=[], decision_age_days=None, late=[],
                           change_day=day, change_segments=(("city", "chengdu"), ("city", "bei'jing")))
    with connect(tmp_path / "w.duckdb") as con:
        with transaction(con):
            results.start(con, "c1", "r1")
            monitoring_store.record(con, "c1", "r1", result.tables())
        assert monitoring_store.training_change_segments(con, "c1", day) == ()  # the run has not succeeded yet
        with transaction(con):
            results.finish(con, "c1", "r1", True)
        assert monitoring_store.training_change_day(con, "c1") == day
        assert monitoring_store.training_change_segments(con, "c1", day) == (("city", "chengdu"), ("city", "bei'jing"))
        assert monitoring_store.training_change_segments(con, "c1", dt.date(2026, 1, 13)) == ()
        assert monitoring_store.training_change_segments(con, "c1", None) == ()
        assert monitoring_store.training_change_segments(con, "other", day) == ()


def test_the_training_frame_reads_the_changed_segments_features_of_its_events(tmp_path):
    """The training frame's events come with the feature columns of the window's segments (a previous
    release's warehouse: the demo campaign), the same events as without; only the segment's events before
    the change day are down-weighted."""
    import gzip
    import shutil

    from promo_assets.store import frames as frames_store
    from promo_assets.store.warehouse import connect
    from tests.unit.store.test_upgrade_previous_release import FIXTURE

    path = tmp_path / "w.duckdb"
    with gzip.open(FIXTURE, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    with connect(path) as con:
        assert "city" in frames_store.feature_spec(con, "demo")[1]
        plain = frames_store.propensity_events(con, "demo")
        events = frames_store.propensity_events(con, "demo", ["city"])
    assert "city" not in plain.columns and len(events) == len(plain) > 0
    pd.testing.assert_frame_equal(events.drop(columns="city"), plain)
    days = sorted(events["event_date"].unique())
    city = str(events["city"].iloc[0])
    assert len(days) > 1 and events["city"].nunique() > 1
    w = stale_weights(events["event_date"], pd.Timestamp(days[-1]).date(), 0.05, [("city", city)], events)
    before = (pd.to_datetime(events["event_date"]) < days[-1]).to_numpy()
    assert set(w[before & (events["city"].astype(str) == city).to_numpy()]) == {0.05}
    assert set(w[~before | (events["city"].astype(str) != city).to_numpy()]) == {1.0}


def test_the_decision_in_force_is_the_newest_not_stopped_and_ages():
    """A stopped export keeps the exported decision in force: its age grows, and the stop is said with since
    when and why; with every decision stopped nothing is in force."""
    from promo_assets.monitoring.exported import DecisionRef, state_of

    t0 = dt.datetime(2026, 3, 4, 9)
    refs = [DecisionRef("r1", dt.date(2026, 3, 4), t0),
            DecisionRef("r2", dt.date(2026, 3, 5), t0 + dt.timedelta(days=1), stop_reason="compliance: 70% applied"),
            DecisionRef("r3", dt.date(2026, 3, 6), t0 + dt.timedelta(days=2), stop_reason="compliance: 68% applied")]
    state = state_of(refs)
    now = t0 + dt.timedelta(days=3)
    assert state.in_force.run_id == "r1" and [r.run_id for r in state.stopped] == ["r2", "r3"]
    assert state.age_days(now) == pytest.approx(3.0) and state.stopped_since == t0 + dt.timedelta(days=1)
    assert state.stopped_line(now) == ("EXPORT STOPPED since 2026-03-05 09:00 (2 decision(s) kept out of the outbox, the "
                                       "newest for 2026-03-06: compliance: 68% applied); serving the decision for "
                                       "2026-03-04 made 3.0 days ago")
    assert state.describe(now)["export"] == "stopped" and state.describe(now)["newest_decision_date"] == "2026-03-06"
    exported = state_of(refs[:1] + [DecisionRef("r4", dt.date(2026, 3, 5), t0 + dt.timedelta(days=1))])
    assert exported.in_force.run_id == "r4" and not exported.is_stopped and exported.stopped_line(now) is None
    none = state_of(refs[1:])
    assert none.in_force is None and none.age_days(now) is None
    assert none.stopped_line(now).endswith("no exported decision to serve")


@pytest.mark.parametrize("second, severity", [("warn", "WARN"), ("stop_export", "ERROR")])
def test_a_fallback_without_a_previous_champion_reacts_as_configured(second, severity):
    from promo_assets.monitoring.checks import CheckOutcome
    from promo_assets.monitoring.run import without_previous

    failed = CheckOutcome("compliance", False, "2026-03-04: 70.0% of 300 events", "ERROR", "fallback")
    got = without_previous(failed, second)
    assert (got.reaction, got.severity, got.acts) == (second, severity, second != "warn")
    assert "no other champion to fall back to, so " + second + " instead" in got.message
