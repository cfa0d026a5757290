"""The deployed days as evidence of the champion (promo_assets.decisions.deployed): a decided day's
events join the evidence with the decision's own propensities and each candidate's coefficients at the
version that decided the day; days and events that cannot be used are left out with the reason."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pandas as pd
import pytest

from promo_assets.decisions.champion_run import ChampionInputs, choose, with_deployed_days
from promo_assets.decisions.deployed import day_evidence, evidence_words, read_deployed_days, source_rows
from promo_assets.evaluation.champion import Evidence, pseudo_outcomes
from promo_assets.monitoring.outcomes import Candidate as Decision

DAY = dt.date(2026, 1, 5)
USERS = ["u0", "u1", "u2", "u3"]
# the champion's levels, who was explored and the level given: share 1/2, mix uniform over 2 levels, so
# P = 1/2 + 1/4 = 0.75 for the champion's level and 1/4 for the other
CHAMPION = [1, 1, 0, 0]
POLICY = ["champion", "explore", "champion", "explore"]
GIVEN = [1, 0, 0, 1]
PROP = [0.75, 0.25, 0.75, 0.25]


def _decision(prop=PROP, policy=POLICY, mix=None) -> Decision:
    frame = pd.DataFrame({"user_id": USERS, "level": GIVEN, "policy": policy, "propensity": prop,
                          "champion_level": CHAMPION, "predicted_response": 0.0, "predicted_cost": 0.0})
    return Decision("run-decided", 1.0, frame, {"exploration": {"share": 0.5, "mix": mix or [0.5, 0.5]}})


def _events(users=USERS, levels=GIVEN, prop=PROP, response=(1.0, 0.0, 1.0, 1.0)) -> pd.DataFrame:
    return pd.DataFrame({"user_id": users, "level": levels, "response": list(response),
                         "cost": [2.0 * x for x in levels], "propensity": prop})


def _constant(v, c, users=USERS):
    n = len(users)
    return (np.asarray(users), np.tile(np.asarray(v, dtype=float), (n, 1)), np.tile(np.asarray(c, dtype=float), (n, 1)))


MODELS = {"a": _constant([0.2, 0.6], [0.0, 1.0]), "b": _constant([0.4, 0.4], [0.0, 1.2])}


def test_a_deployed_day_uses_the_decisions_propensities_and_a_known_dr_value():
    got = day_evidence(DAY, _events(), _decision(), MODELS, 2)
    assert got.reason == "" and got.used == 4 and got.evidence is not None
    ev = got.evidence
    np.testing.assert_allclose(ev.propensity, PROP)          # the deployment's, not 1/2 of an RCT over 2 levels
    np.testing.assert_array_equal(ev.logged, GIVEN)
    np.testing.assert_allclose(ev.dm_values, np.tile([0.3, 0.5], (4, 1)))   # the candidates' equal-weight mean
    gv, gc = pseudo_outcomes(ev)
    # by hand: G_ik = m_k + 1{t_i = k} (y_i - m_k) / p_i with m = (0.3, 0.5)
    want = np.array([[0.3, 0.5 + 0.5 / 0.75], [0.3 - 0.3 / 0.25, 0.5], [0.3 + 0.7 / 0.75, 0.5], [0.3, 0.5 + 0.5 / 0.25]])
    np.testing.assert_allclose(gv, want)
    # the DR value of giving everyone level 1: mean of G_i1 = (1.1667 + 0.5 + 0.5 + 2.5) / 4
    assert gv[:, 1].mean() == pytest.approx((0.5 + 0.5 / 0.75 + 0.5 + 0.5 + 0.5 + 0.5 / 0.25) / 4)
    np.testing.assert_allclose(gc[:, 1], [1.1 + (2.0 - 1.1) / 0.75, 1.1, 1.1, 1.1 + (2.0 - 1.1) / 0.25])
    assert set(ev.source) == {"deployed 2026-01-05"}


def test_each_event_gets_its_own_users_coefficients_at_the_deciding_version():
    order = ["u3", "x9", "u0", "u2", "u1"]  # stored in another order, with a user who did not come back
    v = np.array([[3.0, 3.5], [9.0, 9.5], [0.0, 0.5], [2.0, 2.5], [1.0, 1.5]])
    got = day_evidence(DAY, _events(), _decision(), {"a": (np.asarray(order), v, v / 10), "b": MODELS["b"]}, 2)
    np.testing.assert_allclose(got.evidence.coefficients["a"][0][:, 0], [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(got.evidence.coefficients["a"][1][:, 1], [0.05, 0.15, 0.25, 0.35])


def test_the_deployed_events_join_the_champions_evidence_and_are_counted():
    rng = np.random.default_rng(0)
    n, k = 300, 2
    v = {m: (rng.uniform(0, 1, (n, k)), np.tile([0.0, 1.0], (n, 1))) for m in ("a", "b")}
    holdout = Evidence(rng.integers(0, k, n), rng.uniform(0, 1, n), rng.uniform(0, 1, n), np.full(n, 0.5),
                       np.full((n, k), 0.5), np.tile([0.0, 1.0], (n, 1)), v, np.full(n, "holdout"))
    day = day_evidence(DAY, _events(), _decision(), MODELS, 2)
    both = Evidence.concat([holdout, day.evidence])
    assert both.n == 304 and evidence_words(both, [day]) == (
        "304 events: 300 holdout, 4 from 1 deployed day(s) at the decisions' propensities")
    rows = source_rows(both, [day])
    assert dict(zip(rows["champion_candidate"], rows["value"])) == {"holdout": 300.0, "deployed 2026-01-05": 4.0}
    assert set(rows["evidence_kind"]) == {"evidence_events"}
    assert evidence_words(holdout, []) == ""


def test_a_deployed_day_in_the_evidence_is_not_cross_fitted_again(monkeypatch):
    """With cross-fitted evidence on, the training days handed to the cross-fitting leave out every
    deployed day that joined the evidence (its events would otherwise count twice), and only those."""
    import types

    from promo_assets.decisions import champion_run, crossfit
    from promo_assets.decisions.deployed import DeployedDay

    seen = {}

    def fake(learn, numeric, categorical, config, models, **kw):
        seen["days"] = set(pd.to_datetime(learn["event_date"]).dt.date)
        return crossfit.CrossFit(None, list(models), kw["folds"].by, kw["folds"].count)

    monkeypatch.setattr(crossfit, "cross_fitted_evidence", fake)
    days = [DAY - dt.timedelta(days=d) for d in (3, 2, 1, 0)]
    frame = pd.DataFrame({"user_id": [f"u{i}" for i in range(8)], "event_date": [d for d in days for _ in (0, 1)],
                          "split": "train"})
    used = DeployedDay(DAY, 2, 2, "", day_evidence(DAY, _events(), _decision(), MODELS, 2).evidence)
    refused = DeployedDay(days[2], 2, 0, "no exploration", None)
    inputs = ChampionInputs(None, used.evidence, {"a": "v1", "b": "v1"}, None, frozenset(), deployed=(used, refused))
    config = types.SimpleNamespace(champion=types.SimpleNamespace(candidates=None, folds=3, fold_by="day", refit=None))
    champion_run.with_cross_fitted(inputs, champion_run.Learning(frame, [], []), config)
    assert seen["days"] == {days[0], days[1], days[2]}   # DAY is evidence already; the refused day is not


@pytest.mark.hostile
def test_events_of_users_never_decided_for_are_left_out_with_the_reason():
    ev = _events(USERS + ["stranger"], GIVEN + [1], PROP + [0.25], (1.0, 0.0, 1.0, 1.0, 1.0))
    got = day_evidence(DAY, ev, _decision(), MODELS, 2)
    assert got.used == 4 and got.evidence.n == 4 and "1 event(s) of users the decision does not list" in got.reason
    only = day_evidence(DAY, _events(["x1", "x2"], [0, 1], [0.5, 0.5], (1.0, 0.0)), _decision(), MODELS, 2)
    assert only.evidence is None and "none of the day's 2 events answers the decision" in only.reason


@pytest.mark.hostile
def test_events_without_a_logged_propensity_or_off_their_decided_level_are_left_out():
    ev = _events(prop=[0.75, np.nan, 0.75, 0.25])
    ev.loc[3, "level"] = 0  # the coupon system gave u3 the cheapest level instead of the decided one
    got = day_evidence(DAY, ev, _decision(), MODELS, 2)
    assert got.used == 2 and list(got.evidence.logged) == [1, 0]
    assert "1 event(s) without a logged propensity" in got.reason and "1 event(s) not at the decided level" in got.reason


@pytest.mark.hostile
def test_propensities_that_are_not_the_decisions_refuse_the_day():
    got = day_evidence(DAY, _events(prop=[0.75, 0.5, 0.75, 0.25]), _decision(), MODELS, 2)
    assert got.evidence is None and got.used == 0
    assert "log a propensity that differs from the decision's" in got.reason and "'u1'" in got.reason


@pytest.mark.hostile
@pytest.mark.parametrize("policy, mix, words", [
    (["champion"] * 4, None, "exploration share 0"),
    (POLICY, [1.0, 0.0], "level(s) 1 only to users whose champion level it was"),
])
def test_a_day_whose_decision_never_randomized_a_level_is_left_out(policy, mix, words):
    got = day_evidence(DAY, _events(), _decision(policy=policy, mix=mix), MODELS, 2)
    assert got.evidence is None and words in got.reason and "cannot compare candidates there without bias" in got.reason


@pytest.mark.hostile
def test_a_candidate_without_coefficients_for_the_decided_users_refuses_the_day():
    short = {"a": _constant([0.2, 0.6], [0.0, 1.0], USERS[:2]), "b": MODELS["b"]}
    got = day_evidence(DAY, _events(), _decision(), short, 2)
    assert got.evidence is None and "a has no coefficients for 2 of the day's decided users" in got.reason


def test_without_outcomes_of_decided_days_nothing_changes(tmp_path):
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.store import warehouse

    class _Ev:  # the evaluation inputs as the champion reads them: the holdout's days
        holdout = pd.DataFrame({"event_date": [dt.date(2026, 1, 3)]})
        true_values = None

    config = CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "budget_per_capita": [0.5]}, "c")
    rng = np.random.default_rng(1)
    n = 200
    coefs = {m: (rng.uniform(0, 1, (n, 2)), np.tile([0.0, 1.0], (n, 1))) for m in ("a", "b")}
    evidence = Evidence(rng.integers(0, 2, n), rng.uniform(0, 1, n), rng.uniform(0, 1, n), np.full(n, 0.5),
                        np.full((n, 2), 0.5), np.tile([0.0, 1.0], (n, 1)), coefs, np.full(n, "holdout"))
    inputs = ChampionInputs(_Ev(), evidence, {"a": "1", "b": "1"}, None, frozenset())
    with warehouse.connect(tmp_path / "wh.duckdb") as con:
        assert read_deployed_days(con, "c", config, ["a", "b"], {dt.date(2026, 1, 3)}) == []
        same = with_deployed_days(con, "c", config, inputs)
    assert same.evidence is evidence and same.deployed == ()
    before, after = choose(inputs, config, "board"), choose(same, config, "board")
    assert after.decision.decided_by == before.decision.decided_by and "deployed" not in after.decision.decided_by
    assert after.decision.champion == before.decision.champion
    off = config.model_copy(update={"champion": config.champion.model_copy(update={"deployed_days": False})})
    assert dataclasses.asdict(with_deployed_days(None, "c", off, inputs))["deployed"] == ()


def test_the_proposal_against_the_incumbent_on_the_deployed_days_alone_is_reported():
    from promo_assets.decisions.deployed import deployed_comparisons
    from promo_assets.evaluation.champion import Candidate, ChampionSettings, choose_champion

    rng = np.random.default_rng(3)
    n, k = 600, 3
    cost = np.tile([0.0, 1.0, 2.0], (n, 1))
    truth = rng.uniform(0.1, 0.9, (n, k))
    coefs = {"a": (truth[:, ::-1].copy(), cost), "b": (truth + rng.normal(0, 0.02, (n, k)), cost)}
    t = rng.integers(0, k, n)
    y = (rng.uniform(size=n) < truth[np.arange(n), t]).astype(float)
    source = np.where(np.arange(n) < 400, "holdout", "deployed 2026-01-05")

    def decided(response):
        ev = Evidence(t, response, cost[np.arange(n), t] * response, np.full(n, 1 / 3), np.full((n, k), 0.5),
                      np.full((n, k), 0.5), coefs, source)
        d = choose_champion(ev, [0.6], ChampionSettings(blends=False), incumbent=Candidate(("a",)))
        return ev, d, deployed_comparisons(ev, d, [0.6])

    ev, d, rows = decided(y)
    assert d.proposal.name == "b" and d.incumbent.name == "a"
    assert [r["statistic"] for r in rows] == ["loss (deployed days)", "dr_value (deployed days)"]
    assert all(r["candidate"] == "b" and r["reference"] == "a" for r in rows)
    assert rows[0]["difference"] < 0  # b's reduced values are the truth's, a's are reversed
    moved_holdout, moved_deployed = y.copy(), y.copy()
    moved_holdout[:400] *= 0.8
    moved_deployed[400:] *= 0.8
    same, other = decided(moved_holdout), decided(moved_deployed)
    assert same[1].proposal.name == other[1].proposal.name == "b"
    for a, b in zip(same[2], rows):  # the holdout's events do not enter
        assert a["difference"] == pytest.approx(b["difference"]) and a["low"] == pytest.approx(b["low"])
    assert all(a["difference"] != pytest.approx(b["difference"]) for a, b in zip(other[2], rows))
    without = Evidence(t, y, cost[np.arange(n), t] * y, np.full(n, 1 / 3), np.full((n, k), 0.5), np.full((n, k), 0.5),
                       coefs, np.full(n, "holdout"))
    assert deployed_comparisons(without, d, [0.6]) == []
