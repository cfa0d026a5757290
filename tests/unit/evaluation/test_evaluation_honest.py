"""Issue #13: every policy compared at equal spend; the cost-matched random reference; doubly robust EOM;
the frontier area ratio; the leaderboard as Dagster table metadata. Estimators against hand-computed
values on tiny inputs."""

import numpy as np
import pandas as pd
import pytest

from promo_assets.evaluation import (
    BootstrapInterval,
    EvaluationError,
    EvaluationSettings,
    Holdout,
    InfluenceInterval,
    LevelScale,
    LoggedEvents,
    OutcomeFit,
    OutcomePredictions,
    Truth,
    area_ratio,
    bootstrap_dr,
    dr_batch,
    dr_interval,
    dr_mix,
    dr_q_at_budget,
    evaluate_policies,
    fit_outcome_model,
    format_leaderboard,
    ipw_mix,
    leaderboard,
    leaderboard_table,
    match_mix,
    matched_true_value,
    oracle_values,
    pct_oracle,
    pct_oracle_at_matched_spend,
    random_mix,
    spend_ratio,
)

# four logged events, two levels, propensity 1/2: the hand-computed DR example
T = np.array([0, 1, 0, 1])
Y = np.array([1.0, 0.0, 0.0, 1.0])
Z = np.array([0.0, 1.0, 0.0, 2.0])
MY = np.array([[0.5, 0.5], [0.2, 0.4], [0.1, 0.3], [0.6, 0.6]])
MZ = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 2.0]])
E = LoggedEvents(T, Y, Z, 0.5)
O = OutcomePredictions(MY, MZ)


# ------------------------------------------------------------------------------- the estimators
def test_dr_batch_matches_the_hand_computed_value():
    # a = (0, 0, 1, 1): events 0 and 3 match (rho = 2 each).
    # DM part: mean(0.5, 0.2, 0.3, 0.6) = 0.4; residuals at the logged level: 1 - 0.5, 1 - 0.6 -> 0.45
    v, c, m = dr_batch(np.array([0, 0, 1, 1]), E, O)
    assert v[0] == pytest.approx(0.85) and m[0] == 2
    assert c[0] == pytest.approx(0.75)  # DM cost (0 + 0 + 1 + 2) / 4, residuals 0
    # several allocations at once; one that no event matches gives NaN, not an error
    v2, _, m2 = dr_batch(np.array([[0, 0, 1, 1], [1, 0, 1, 0]]), E, O)
    assert v2[0] == pytest.approx(0.85) and np.isnan(v2[1]) and m2[1] == 0


def test_dr_with_an_exact_outcome_model_is_the_direct_method():
    rng = np.random.default_rng(0)
    n = 50
    my = rng.uniform(size=(n, 3))
    t = rng.integers(0, 3, n)
    y = my[np.arange(n), t]  # no noise: every residual is 0
    a = rng.integers(0, 3, n)
    v, _, _ = dr_batch(a, LoggedEvents(t, y, y), OutcomePredictions(my, my))
    assert v[0] == pytest.approx(my[np.arange(n), a].mean())
    lo, hi = bootstrap_dr(a, LoggedEvents(t, y, y), OutcomePredictions(my, my), n_boot=50)
    assert lo <= v[0] <= hi


def test_dr_interval_from_the_influence_function_by_hand():
    # a = (0, 0, 1, 1): rho = (2, 0, 0, 2); dm = (0.5, 0.2, 0.3, 0.6), mean 0.4; residuals at the logged
    # level r = (0.5, -0.4, -0.1, 0.4); R = (2 x 0.5 + 2 x 0.4) / 4 = 0.45; V = 0.85; mean(rho) = 1.
    # phi = (dm - 0.4) + rho (r - 0.45) = (0.2, -0.2, -0.1, 0.1): sum of squares 0.10, sd^2 = 0.1 / 3,
    # se = sqrt(0.1 / 3 / 4); ESS = 4^2 / (2^2 + 2^2) = 2 -> df 1, t_0.975 = 12.7062047
    lo, hi = dr_interval(np.array([0, 0, 1, 1]), E, O)
    half = 12.7062047 * np.sqrt(0.1 / 3 / 4)
    assert (lo, hi) == (pytest.approx(0.85 - half, abs=1e-6), pytest.approx(0.85 + half, abs=1e-6))
    # the mix (0.25, 0.75): rho_i = mix[t_i] / p = (0.5, 1.5, 0.5, 1.5); without an outcome model it is
    # the self-normalized IPW mean: V = (0.5 x 1 + 1.5 x 1) / 4 = 0.5; phi = rho (y - 0.5) / 1
    # = (0.25, -0.75, -0.25, 0.75): sd^2 = 1.25 / 3; ESS = 16 / 5 = 3.2 -> df 2.2
    from scipy.stats import t as student_t

    lo, hi = dr_interval(np.array([0.25, 0.75]), E, is_mix=True)
    half = student_t.ppf(0.975, 2.2) * np.sqrt(1.25 / 3 / 4)
    assert (lo, hi) == (pytest.approx(0.5 - half), pytest.approx(0.5 + half))


@pytest.mark.parametrize("assigned, defined", [([1, 0, 1, 0], False), ([0, 0, 0, 0], True), ([0, 0, 1, 0], False)])
def test_dr_interval_needs_two_matched_events(assigned, defined):
    # T = (0, 1, 0, 1): (1, 0, 1, 0) matches no event, (0, 0, 1, 0) only event 0: the residual variance
    # cannot be estimated, the interval is (NaN, NaN); (0, 0, 0, 0) matches events 0 and 2
    lo, hi = dr_interval(np.array(assigned), E, O)
    assert (np.isfinite(lo) and np.isfinite(hi) and lo < hi) if defined else (np.isnan(lo) and np.isnan(hi))


def test_ipw_and_dr_of_a_mix_by_hand():
    # mix (1/2, 1/2), p = 1/2: every event weighs 1 -> plain means
    v, c, m = ipw_mix([0.5, 0.5], E)
    assert (v, c, m) == (pytest.approx(0.5), pytest.approx(0.75), 4)
    # DR: DM mean over users of (m0 + m1) / 2 = (0.5 + 0.3 + 0.2 + 0.6) / 4 = 0.4; residuals
    # y - m(t): 0.5, -0.4, -0.1, 0.4 -> mean 0.1
    dv, dc, _ = dr_mix([0.5, 0.5], E, O)
    assert dv == pytest.approx(0.5) and dc == pytest.approx(0.625)  # cost residuals are all 0


def test_random_mix_moves_from_cheapest_through_uniform_to_dearest():
    lc = [1.0, 0.0, 3.0]  # cheapest = level 1, dearest = level 2
    assert random_mix(lc, 0) == pytest.approx([0, 1, 0])
    assert random_mix(lc, 0.5) == pytest.approx([1 / 6, 0.5 + 1 / 6, 1 / 6])
    assert random_mix(lc, 1) == pytest.approx([1 / 3] * 3)
    assert random_mix(lc, 1.5) == pytest.approx([1 / 6, 1 / 6, 0.5 + 1 / 6])
    assert random_mix(lc, 2) == pytest.approx([0, 0, 1])


@pytest.mark.parametrize("budget, share", [(0.5, 0.5), (1.0, 1.0), (1.5, 1.5)])
def test_match_mix_finds_the_share_whose_cost_is_the_budget(budget, share):
    lc = np.array([0.0, 1.0, 2.0])  # uniform costs 1
    match = match_mix(lambda m: float(m @ lc), lc, budget)
    assert match.share == pytest.approx(share, abs=1e-8) and match.cost == pytest.approx(budget, rel=1e-8)
    assert match.note == ""


@pytest.mark.hostile
@pytest.mark.parametrize("budget, expect", [(0.5, "below the cheapest"), (5.0, "spends at most 3")],
                         ids=["accepted-random-budget-below-cheapest-level", "accepted-random-budget-above-dearest"])
def test_match_mix_out_of_range_budget_says_why(budget, expect):
    lc = np.array([1.0, 2.0, 3.0])
    match = match_mix(lambda m: float(m @ lc), lc, budget, what="true")
    assert expect in match.note and ("true" in match.note)
    assert (match.mix is None) == (budget < 1)


def test_matched_true_value_by_hand():
    # 10 users, two levels; the model predicts an upgrade costs 1, in truth it costs 2.
    n = 10
    v = np.stack([np.zeros(n), np.linspace(1.0, 0.1, n)], axis=1)
    c = np.tile([0.0, 1.0], (n, 1))
    tc = np.tile([0.0, 2.0], (n, 1))
    # as made at budget 0.6: 6 users upgraded -> true cost 1.2 per capita, spend ratio 2
    m = matched_true_value((v, c), Truth(v, tc), 0.6, rel_tol=1e-9)
    # matched: 3 users (true cost 0.6), the 3 best: (1 + 0.9 + 0.8) / 10
    assert m.cost == pytest.approx(0.6) and m.value == pytest.approx(0.27) and m.converged and m.note == ""
    # the default tolerance (0.1 %) stops from below, the LP's split user counted by its share
    m2 = matched_true_value((v, c), Truth(v, tc), 0.6)
    assert 0.6 * 0.999 <= m2.cost <= 0.6 and m2.value == pytest.approx(0.27 - (0.6 - m2.cost) * 0.4) and m2.converged
    assert m.budget_given == pytest.approx(0.3, abs=0.1)
    assert spend_ratio(1.2, 0.6) == pytest.approx(2.0)
    assert pct_oracle(m.value, 0.27) == pytest.approx(1.0)
    assert np.isnan(pct_oracle(0.2, 0.0)) and np.isnan(spend_ratio(np.nan, 1.0))


def test_pct_oracle_at_matched_spend_by_hand():
    # the example above: the oracle knows an upgrade costs 2, so at 0.6 per capita it upgrades the 3
    # best users (0.27 per capita; at 0.2 the best one, 0.1); the model that thinks it costs 1 is
    # matched to the same true spend, so it reaches the oracle; a model that ranks the users backwards
    # upgrades the 3 worst (0.1 + 0.2 + 0.3) / 10.
    n = 10
    v = np.stack([np.zeros(n), np.linspace(1.0, 0.1, n)], axis=1)
    c = np.tile([0.0, 1.0], (n, 1))
    tc = np.tile([0.0, 2.0], (n, 1))
    assert oracle_values(Truth(v, tc), [0.2, 0.6]) == pytest.approx([0.1, 0.27])
    assert pct_oracle_at_matched_spend((v, c), Truth(v, tc), [0.2, 0.6]) == pytest.approx([1.0, 1.0], abs=2e-3)
    backwards = pct_oracle_at_matched_spend((v[::-1], c), Truth(v, tc), [0.6])
    assert backwards == pytest.approx([0.06 / 0.27], abs=2e-3)


@pytest.mark.hostile
@pytest.mark.parametrize("budget, expect", [(0.05, "cheapest allocation already costs"), (9.0, "whole frontier costs at most")],
                         ids=["accepted-matched-budget-below-cheapest", "accepted-matched-budget-above-frontier"])
def test_matched_true_value_out_of_reach_says_why(budget, expect):
    n = 4
    v = np.tile([0.0, 1.0], (n, 1))
    c = np.tile([0.5, 1.0], (n, 1))
    m = matched_true_value((v, c), Truth(v, c), budget)
    assert expect in m.note and not m.converged
    assert np.isnan(m.value) == (budget < 0.5)


def test_area_ratio_by_hand():
    # random: (0, 0) -> (1, 1): area 1/2; policy (0, 0), (0.5, 1), (1, 1): area 3/4
    assert area_ratio([0, 0.5, 1], [0, 1, 1], [0, 1], [0, 1]) == pytest.approx(1.5)
    assert area_ratio([0, 1], [0, 1], [0, 1], [0, 1]) == pytest.approx(1.0)
    assert np.isnan(area_ratio([0, 1], [0, 1], [0, 1], [0, 0]))  # random adds nothing: undefined


def test_dr_q_reaches_the_budget():
    rng = np.random.default_rng(3)
    n, k = 3000, 4
    tv = np.sort(rng.uniform(0, 0.5, (n, k)), axis=1)
    c = tv * np.arange(k)[None]
    t = rng.integers(0, k, n)
    y = (rng.uniform(size=n) < tv[np.arange(n), t]).astype(float)
    z = y * np.arange(k)[t]
    q = dr_q_at_budget((tv, c), LoggedEvents(t, y, z), OutcomePredictions(tv, c), 0.4)
    assert q.cost == pytest.approx(0.4, rel=1e-3) and q.n_matched > 0


# ------------------------------------------------------------------------------ outcome model
def test_level_means_outcome_model_by_hand():
    train = pd.DataFrame({"level": [0, 0, 1], "response": [1.0, 0.0, 1.0], "cost": [0.0, 0.0, 2.0]})
    model = fit_outcome_model(train, [], [], 3, cost_rule="column", fit=OutcomeFit(kind="level_means"))
    v, c = model.predict(pd.DataFrame({"x": [1, 2]}))
    assert v.tolist() == [[0.5, 1.0, 2 / 3]] * 2  # level 2 never seen: the overall mean
    assert c[0].tolist() == pytest.approx([0.0, 2.0, 2 / 3])
    redeemed = fit_outcome_model(train, [], [], 3, scale=LevelScale(incentives=[0, 2, 5]),
                                 fit=OutcomeFit(kind="level_means"))
    assert redeemed.predict(train)[1][0].tolist() == pytest.approx([0.0, 2.0, 10 / 3])


def test_gbm_outcome_model_learns_feature_and_level_effects():
    rng = np.random.default_rng(0)
    n = 4000
    x = rng.uniform(0, 1, n)
    city = rng.choice(["a", "b"], n)
    level = rng.integers(0, 3, n)
    p = 0.1 + 0.2 * x + 0.1 * level + 0.2 * (city == "b")
    train = pd.DataFrame({"x": x, "city": city, "level": level, "response": (rng.uniform(size=n) < p) * 1.0})
    train["cost"] = train["response"] * np.array([0.0, 1.0, 2.0])[level]
    model = fit_outcome_model(train, ["x"], ["city"], 3, scale=LevelScale(incentives=[0.0, 1.0, 2.0]))
    hold = pd.DataFrame({"x": np.tile(np.linspace(0.1, 0.9, 9), 2), "city": ["a"] * 9 + ["b"] * 9})
    v, c = model.predict(hold)
    truth = (0.1 + 0.2 * hold["x"].to_numpy() + 0.2 * (hold["city"] == "b").to_numpy())[:, None] + 0.1 * np.arange(3)
    assert np.abs(v - truth).mean() < 0.04  # binary responses, 4000 rows
    assert (v[9:] - v[:9]).mean() == pytest.approx(0.2, abs=0.05) and (v[:, 2] - v[:, 0]).mean() == pytest.approx(0.2, abs=0.05)
    assert c == pytest.approx(v * np.array([0.0, 1.0, 2.0]))


@pytest.mark.hostile
@pytest.mark.parametrize("frame, expect", [
    (pd.DataFrame({"level": [], "response": [], "cost": []}), "needs training-day events"),
    (pd.DataFrame({"level": [0], "cost": [0.0]}), "['response']"),
    (pd.DataFrame({"level": [0, 1], "response": [np.nan, 1.0], "cost": [0.0, 1.0]}), "column 'response'"),
    (pd.DataFrame({"level": [0, 7], "response": [0.0, 1.0], "cost": [0.0, 1.0]}), "level 7 outside 0..1"),
], ids=["error-outcome-no-training-events", "error-outcome-missing-response", "error-outcome-nan-response",
        "error-outcome-unknown-level"])
def test_outcome_model_refuses_bad_training_rows(frame, expect):
    with pytest.raises(EvaluationError, match="outcome model|training-day") as exc:
        fit_outcome_model(frame, [], [], 2, fit=OutcomeFit(kind="level_means"))
    assert expect in str(exc.value)


@pytest.mark.hostile
@pytest.mark.parametrize("outcome, expect", [
    (OutcomePredictions(MY, MZ[:, :1]), "dm_costs has 1 levels, expected 2"),
    (OutcomePredictions(MY[:3], MZ[:3]), "dm_values has 3 rows"),
    (OutcomePredictions(np.full((4, 2), np.nan), MZ), "dm_values contains NaN"),
], ids=["error-dr-costs-other-levels", "error-dr-wrong-rows", "error-dr-nan-predictions"])
def test_evaluate_policies_refuses_bad_outcome_predictions(outcome, expect):
    models = {"m": ("v1", MY, MZ)}
    with pytest.raises(EvaluationError) as exc:
        evaluate_policies(models, Holdout(E, outcome=outcome), EvaluationSettings([0.5], "c"))
    assert expect in str(exc.value)


# --------------------------------------------------------------------------- policy_evaluation
@pytest.fixture(scope="module")
def simulated():
    rng = np.random.default_rng(0)
    n, k = 3000, 5
    tv = np.sort(rng.uniform(0, 0.6, (n, k)), axis=1)
    inc = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    tc = tv * inc  # cost: redeemed
    t = rng.integers(0, k, n)
    y = (rng.uniform(size=n) < tv[np.arange(n), t]).astype(float)
    z = y * inc[t]
    under = np.clip(tv * 0.8 + rng.normal(0, 0.03, tv.shape), 0.0, 1.0)  # underestimates the response
    models = {"under": ("v1", under, under * inc), "noisy": ("v2", np.clip(tv + rng.normal(0, 0.1, tv.shape), 0, 1),
                                                              tc)}
    df = evaluate_policies(models, Holdout(LoggedEvents(t, y, z, 1 / k), Truth(tv, tc), OutcomePredictions(tv, tc)),
                           EvaluationSettings([0.3, 0.6], "sim", eom_interval=BootstrapInterval(n_boot=50)))
    return df


def test_every_policy_is_compared_at_equal_spend(simulated):
    df = simulated
    assert (df["pct_oracle"] <= 1).all() and df["pct_oracle"].notna().all()
    assert ((df["matched_true_cost"] / df["budget_per_capita"] - 1).abs() <= 0.005).all()
    under = df[df["model"] == "under"]
    assert (under["spend_ratio"] > 1.05).all() and under["overspend"].all()  # under-predicted cost: overspends
    rnd = df[df["model"] == "random"]
    assert np.allclose(rnd["eom_cost"], rnd["budget_per_capita"], rtol=1e-6)  # cost-matched on EOM
    assert np.allclose(rnd["dr_q_cost"], rnd["budget_per_capita"], rtol=1e-6)  # ... and on DR
    assert rnd["q_value"].notna().all() and (rnd["area_ratio_eom"] == 1).all()
    for col in ("q_value", "dr_value", "dr_cost", "dr_q_value", "dr_ci_low", "dr_ci_high", "area_ratio_true"):
        assert df[col].notna().all(), col
    assert (df["dr_ci_low"] <= df["dr_value"]).all() and (df["dr_value"] <= df["dr_ci_high"]).all()
    models = df[df["model"] != "random"]
    assert (models["area_ratio_true"] > 1).all()  # both beat random on the truth's frontier


def test_leaderboard_ranks_at_equal_spend_and_flags_overspend(simulated):
    board = leaderboard(simulated)
    assert {"rank", "% oracle", "spend ratio", "DR Q", "DR 95% CI", "area ratio"} <= set(board.columns)
    for _, g in board.groupby("budget"):
        pct = g["% oracle"].str.rstrip("%").astype(float)
        assert list(pct) == sorted(pct, reverse=True) and g["rank"].tolist()[0] == "1"
    flagged = board.loc[board["model"] == "under", "note"]
    assert flagged.str.contains("OVERSPENDS the budget by").all() and flagged.str.contains("in truth").all()
    text = format_leaderboard(simulated)
    assert "ranked by % of the oracle at matched true spend" in text and "at its own spend" in text
    # without truth: ranked by the DR value at DR cost = budget
    no_truth = simulated.assign(true_value=np.nan, true_cost=np.nan, matched_true_value=np.nan, pct_oracle=np.nan,
                                oracle_value=np.nan)
    board2 = leaderboard(no_truth)
    assert "% oracle" not in board2.columns and board2["spend ratio"].str.endswith("(EOM)").all()
    for _, g in board2.groupby("budget"):
        dq = g["DR Q"].astype(float)
        assert list(dq) == sorted(dq, reverse=True)
    assert "ranked by the doubly robust value" in format_leaderboard(no_truth)


def test_leaderboard_table_is_plain_python(simulated):
    columns, records = leaderboard_table(simulated)
    names = [c for c, _ in columns]
    assert names[:5] == ["campaign", "budget", "rank", "model", "version"] and ("rank", "int") in columns
    assert len(records) == 6 and all(type(v) in (str, int) or v is None for r in records for v in r.values())
    assert not any("np.float64" in str(v) for r in records for v in r.values())


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["budget-below-cheapest", "no-matched-events"],
                         ids=["accepted-budget-below-cheapest-allocation", "accepted-policy-without-matched-events"])
def test_bad_policy_inputs_give_an_empty_row_with_a_message(case):
    rng = np.random.default_rng(1)
    n = 400
    v = np.sort(rng.uniform(0, 0.5, (n, 3)), axis=1)
    c = np.tile([1.0, 2.0, 3.0], (n, 1))
    t = rng.integers(0, 2, n)  # level 2 is never logged on the holdout
    y = (rng.uniform(size=n) < v[np.arange(n), t]).astype(float)
    lines = []
    holdout = Holdout(LoggedEvents(t, y, c[np.arange(n), t], 0.5), Truth(v, c), OutcomePredictions(v, c))
    if case == "budget-below-cheapest":
        df = evaluate_policies({"m": ("v1", v, c)}, holdout,
                               EvaluationSettings([0.5], "c", eom_interval=BootstrapInterval(20), log=lines.append))
        row = df[df["model"] == "m"].iloc[0]
        assert "budget 0.5 per capita cannot be met" in row["note"] and "minimum feasible budget per capita = 1" in row["note"]
        rnd = df[df["model"] == "random"].iloc[0]
        assert "below the cheapest EOM cost of the random reference" in rnd["note"]
        empty = df
    else:
        always_top = np.tile([0.0, 0.1, 1.0], (n, 1))  # assigns level 2 to everyone at budget 3
        df = evaluate_policies({"m": ("v1", always_top, c)}, holdout,
                               EvaluationSettings([3.0], "c", eom_interval=BootstrapInterval(20), log=lines.append))
        row = df[df["model"] == "m"].iloc[0]
        assert "no holdout event was logged at the levels this policy assigns" in row["note"]
        assert row["n_matched"] == 0 and row["true_value"] == pytest.approx(v[:, 2].mean())  # the truth is known
        empty = df[df["model"] == "m"]
    for col in ("eom_value", "eom_ci_low", "q_value", "dr_value", "dr_q_value"):
        assert empty[col].isna().all(), col
    assert any("cannot be met" in ln or "no holdout event" in ln for ln in lines)
    assert row["note"] in format_leaderboard(df)  # the message reaches the leaderboard


# ---------------------------------------------------------------------------- the UI (Dagster)
@pytest.mark.slow
def test_policy_evaluation_materialization_carries_the_leaderboard_table(demo_run):
    import dagster as dg

    # the demo campaign after `promo run` with the default models, shared (conftest.py)
    instance = dg.DagsterInstance.get()
    event = instance.get_latest_materialization_event(dg.AssetKey("leaderboard"))
    meta = event.asset_materialization.metadata
    table = meta["leaderboard_full"]
    assert isinstance(table, dg.TableMetadataValue)
    assert all(c.description for c in table.schema.columns)  # every column explained under "Show schema"
    compact = [v for k, v in meta.items() if k.startswith("leaderboard at budget ")]
    assert compact and list(meta)[0].startswith("leaderboard at budget ")  # the compact tables come first
    for small in compact:
        assert [c.name for c in small.schema.columns] == ["rank", "model", "% oracle", "spend", "gain", "★", "note"]
        assert {c.type for c in small.schema.columns} >= {"int", "float", "string"}
        # ★: the champion deployed when the board was assembled (none yet at a campaign's first run)
        assert all(r.data["★"] == "" or r.data["★"].startswith("★") for r in small.records)
    names = [c.name for c in table.schema.columns]
    for col in ("campaign", "budget", "rank", "model", "% oracle", "matched value", "spend ratio", "DR Q",
                "DR value", "DR 95% CI", "Q(v,c)", "EOM value", "true value", "oracle", "area ratio"):
        assert col in names, col
    models = {r.data["model"] for r in table.records}
    assert {"dipn", "s_learner", "random"} <= models and "gnn_hazard" not in models  # no graph: skipped
    assert all(0 < float(r.data["% oracle"].rstrip("%")) <= 100 for r in table.records)
    outcome = instance.get_latest_materialization_event(dg.AssetKey("outcome_model"))
    assert outcome.asset_materialization.metadata["fitted"].value is True
    alloc = instance.get_latest_materialization_event(dg.AssetKey(["s_learner", "allocation"]))
    assert "share 0" in str(alloc.asset_materialization.metadata["allocations"].value)  # level labels, in order
    # no numpy repr (np.float64(0.5), np.int64(3)) in any metadata of any asset the run materialized
    keys = instance.get_asset_keys()
    assert len(keys) >= 8
    for key in keys:
        event = instance.get_latest_materialization_event(key)
        if event is None:
            continue
        for name, value in event.asset_materialization.metadata.items():
            text = str(getattr(value, "value", value))
            assert "np.float" not in text and "np.int" not in text, (key.to_user_string(), name)
            # metadata for people: no JSON blobs, no dict reprs, no 17-digit floats
            assert not isinstance(value, dg.JsonMetadataValue), (key.to_user_string(), name)
            if isinstance(value, (dg.TextMetadataValue, dg.MarkdownMetadataValue)):
                assert "{'" not in text and '{"' not in text, (key.to_user_string(), name, text[:80])
            if isinstance(value, dg.FloatMetadataValue):
                assert len(repr(value.value).lstrip("-").replace(".", "").lstrip("0")) <= 8, (key.to_user_string(), name, value.value)


# ------------------------------------------------------------------------------ the frontier plot
def test_the_frontier_plot_draws_the_cost_matched_random_reference(simulated):
    from promo_assets.evaluation import PNG_SIGNATURE, plot_frontier, policy_curves, random_reference_curve

    rng = np.random.default_rng(0)
    n, k = 3000, 5
    tv = np.sort(rng.uniform(0, 0.6, (n, k)), axis=1)  # the same draws as the `simulated` fixture
    inc = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    tc = tv * inc
    t = rng.integers(0, k, n)
    y = (rng.uniform(size=n) < tv[np.arange(n), t]).astype(float)
    z = y * inc[t]
    curve = random_reference_curve(LoggedEvents(t, y, z, 1 / k), truth=Truth(tv, tc))
    # share 0: everyone at the cheapest level (cost 0); share 1 (the 21st of 41 points): uniform; 2: dearest
    assert curve["eom_cost"].iloc[0] == pytest.approx(0.0) and curve["true_cost"].iloc[0] == pytest.approx(0.0)
    assert curve["eom_value"].iloc[20] == pytest.approx(y.mean())  # uniform propensities: the plain mean
    assert curve["true_value"].iloc[20] == pytest.approx(tv.mean())
    assert curve["eom_cost"].iloc[-1] == pytest.approx(z[t == k - 1].mean())
    assert curve["true_cost"].iloc[-1] == pytest.approx(tc[:, -1].mean())
    assert (np.diff(curve["true_cost"]) >= -1e-12).all()
    # the `random` row of evaluate_policies (EOM cost = budget) lies on this curve
    rnd = simulated[simulated["model"] == "random"]
    for cost, value in zip(rnd["eom_cost"], rnd["eom_value"]):
        assert np.interp(cost, curve["eom_cost"], curve["eom_value"]) == pytest.approx(value, abs=2e-3)
    models = {"noisy": ("v2", np.clip(tv + rng.normal(0, 0.1, tv.shape), 0, 1), tc)}
    curves = policy_curves(models, LoggedEvents(t, y, z, 1 / k), truth=Truth(tv, tc), n_points=10)
    assert np.allclose(curves.loc[curves["model"] == "random", "eom_value"], curve["eom_value"])
    png = plot_frontier(curves, simulated, title="toy", budgets=[0.3, 0.6])
    assert png[:8] == PNG_SIGNATURE


# ------------------------------------------------------------------------ the interval strategy
def test_the_interval_is_a_strategy_passed_in():
    calls = []

    class Widest:
        def interval(self, policy, events, outcome=None, *, is_mix=False, seed=0):
            calls.append((is_mix, outcome is not None, seed))
            return -1.0, 1.0

    rng = np.random.default_rng(2)
    n = 200
    v = np.sort(rng.uniform(0, 0.5, (n, 3)), axis=1)
    c = np.tile([0.0, 1.0, 2.0], (n, 1))
    t = rng.integers(0, 3, n)
    y = (rng.uniform(size=n) < v[np.arange(n), t]).astype(float)
    events = LoggedEvents(t, y, c[np.arange(n), t], 1 / 3)
    holdout = Holdout(events, outcome=OutcomePredictions(v, c))
    df = evaluate_policies({"m": ("v1", v, c)}, holdout,
                           EvaluationSettings([0.5], "c", seed=4, eom_interval=Widest(), dr_interval=Widest()))
    for col in ("eom_ci_low", "dr_ci_low"):
        assert (df[col] == -1.0).all(), col
    assert (df["eom_ci_high"] == 1.0).all() and (df["dr_ci_high"] == 1.0).all()
    # the model's allocation and the random reference's mix, each on IPW and on DR, with the run's seed
    assert sorted(calls) == [(False, False, 4), (False, True, 4), (True, False, 4), (True, True, 4)]
    # the defaults are the bootstrap (EOM) and the influence function (DR), as the functions give them
    default = evaluate_policies({"m": ("v1", v, c)}, holdout, EvaluationSettings([0.5], "c", seed=4))
    row = default[default["model"] == "m"].iloc[0]
    from promo_assets.allocation import solve
    from promo_assets.evaluation import bootstrap_eom

    levels = np.asarray(solve(v, c, 0.5, per_capita=True, seed=4).levels)
    assert (row["eom_ci_low"], row["eom_ci_high"]) == bootstrap_eom(levels, t, y, events.cost, 1 / 3, seed=4)
    assert (row["dr_ci_low"], row["dr_ci_high"]) == dr_interval(levels, events, holdout.outcome)
    assert BootstrapInterval(n_boot=50).interval(levels, events, seed=1) == bootstrap_eom(
        levels, t, y, events.cost, 1 / 3, n_boot=50, seed=1)
    assert InfluenceInterval(level=0.9).interval(levels, events, holdout.outcome) == dr_interval(
        levels, events, holdout.outcome, level=0.9)
