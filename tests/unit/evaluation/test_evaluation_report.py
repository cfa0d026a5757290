"""policy_evaluation rows, the oracle, curves, leaderboard and plots (uses the real allocator)."""

import numpy as np
import pandas as pd
import pytest

import promo_assets.allocation as allocation
from promo_assets.core.coefficients import Coefficients
from promo_assets.evaluation import (
    PNG_SIGNATURE,
    POLICY_EVALUATION_COLUMNS,
    BootstrapInterval,
    EvaluationError,
    EvaluationSettings,
    Holdout,
    LoggedEvents,
    Truth,
    eom,
    eom_curve,
    evaluate_policies,
    format_leaderboard,
    leaderboard,
    leaderboard_markdown,
    oracle_policy,
    plot_frontier,
    plot_response_by_level,
    policy_curves,
    true_policy_value,
)


@pytest.fixture(scope="module")
def campaign():
    rng = np.random.default_rng(0)
    n = 4000
    v1 = rng.uniform(0, 0.1, n)
    k = -np.sort(-rng.uniform(0, 0.2, (n, 3)), axis=1)
    v = np.concatenate([v1[:, None], v1[:, None] + np.cumsum(k, axis=1)], axis=1)
    c = np.broadcast_to(np.arange(1.0, 5.0), v.shape).copy()
    t = rng.integers(0, 4, n)
    y = (rng.uniform(size=n) < v[np.arange(n), t]).astype(float)
    z = c[np.arange(n), t]
    noisy = np.sort(np.clip(v + rng.normal(0, 0.05, v.shape), 0.001, 0.999), axis=1)
    bad = np.clip(v[:, ::-1] + rng.normal(0, 0.02, v.shape), 0.001, 0.999)  # decreasing curves
    models = {"noisy": ("v-noisy", noisy, c), "reversed": ("v-rev", bad, c)}
    return dict(v=v, c=c, t=t, y=y, z=z, models=models)


@pytest.fixture(scope="module")
def evaluation(campaign):
    d = campaign
    return evaluate_policies(d["models"], Holdout(LoggedEvents(d["t"], d["y"], d["z"], 0.25), Truth(d["v"], d["c"])),
                             EvaluationSettings([1.5, 2.0], "toy", seed=0, eom_interval=BootstrapInterval(n_boot=100)))


def test_oracle_beats_every_policy_on_the_truth(campaign):
    d = campaign
    for b in (1.5, 2.0, 3.0):
        ov, oc = true_policy_value(oracle_policy(d["v"], d["c"], b), d["v"], d["c"])
        assert oc <= b + d["c"].max() / len(d["v"])  # the rounded fractional user may add one cost
        for _, vals, csts in d["models"].values():
            lv = np.asarray(allocation.solve(vals, csts, b, per_capita=True).levels)
            mv, _ = true_policy_value(lv, d["v"], d["c"])
            assert mv <= ov + 1e-9


def test_policy_evaluation_rows(campaign, evaluation):
    df = evaluation
    assert list(df.columns) == POLICY_EVALUATION_COLUMNS
    assert len(df) == 3 * 2  # (2 models + random) x 2 budgets
    assert sorted(df["model"].unique()) == ["noisy", "random", "reversed"]
    assert (df["campaign"] == "toy").all() and df["evaluated_at"].nunique() == 1
    for _, r in df.iterrows():
        assert r["eom_ci_low"] <= r["eom_value"] <= r["eom_ci_high"]
        assert r["true_value"] <= r["oracle_value"] + 1e-9
    noisy = df[df["model"] == "noisy"].set_index("budget_per_capita")
    rev = df[df["model"] == "reversed"].set_index("budget_per_capita")
    rnd = df[df["model"] == "random"].set_index("budget_per_capita")
    assert (noisy["true_value"] > rev["true_value"]).all()
    assert (noisy["true_value"] > rnd["true_value"]).all()
    assert (noisy["rpr"] == 0).all() and (rev["rpr"] > 0.9).all()
    assert rnd["logloss"].isna().all()
    # the random reference is cost-matched: its EOM cost is the budget, its Q(v, c) its EOM value
    assert np.allclose(rnd["eom_cost"], rnd.index, rtol=1e-6) and np.allclose(rnd["q_value"], rnd["eom_value"])
    # the model rows' EOM is the EOM of the allocator's allocation
    d = campaign
    lv = np.asarray(allocation.solve(d["models"]["noisy"][1], d["c"], 2.0, per_capita=True).levels)
    assert noisy.loc[2.0, "eom_value"] == pytest.approx(eom(lv, d["t"], d["y"], d["z"], 0.25)[0])
    assert (df["aucc"].isna()).all()  # four levels: AUCC does not apply


def test_policy_evaluation_rejects_bad_input(campaign):
    d = campaign
    events, settings = LoggedEvents(d["t"], d["y"], d["z"]), EvaluationSettings([2.0], "c")
    with pytest.raises(EvaluationError, match="reserved"):
        evaluate_policies({"random": ("x", d["v"], d["c"])}, Holdout(events), settings)
    with pytest.raises(EvaluationError, match="rows"):
        evaluate_policies({"m": ("x", d["v"][:10], d["c"][:10])}, Holdout(events), settings)
    with pytest.raises(EvaluationError, match="true_costs has 2 levels, expected 4"):
        evaluate_policies({}, Holdout(events, Truth(d["v"], d["c"][:, :2])), settings)


def test_infeasible_budget_leaves_the_row_empty_instead_of_failing(campaign):
    d = campaign
    lines = []
    df = evaluate_policies({"noisy": d["models"]["noisy"]},
                           Holdout(LoggedEvents(d["t"], d["y"], d["z"], 0.25), Truth(d["v"], d["c"])),
                           EvaluationSettings([0.5, 2.0], "toy", eom_interval=BootstrapInterval(20), log=lines.append))
    low = df[df["budget_per_capita"] == 0.5]
    assert len(low) == 2 and low["eom_value"].isna().all() and low["oracle_value"].isna().all()
    assert low.loc[low["model"] == "noisy", "rpr"].notna().all()  # curve metrics do not need a budget
    assert df[df["budget_per_capita"] == 2.0]["eom_value"].notna().all()
    assert sum("cannot be met" in ln or "below the cheapest" in ln for ln in lines) == 3


def test_two_arm_campaign_gets_aucc():
    rng = np.random.default_rng(1)
    n = 6000
    base = rng.uniform(0.05, 0.2, n)
    up = rng.uniform(0, 0.2, n)
    v = np.stack([base, base + up], axis=1)
    c = np.stack([np.zeros(n), np.full(n, 1.0)], axis=1) * v
    t = rng.integers(0, 2, n)
    y = (rng.uniform(size=n) < v[np.arange(n), t]).astype(float)
    df = evaluate_policies({"truth-model": ("v1", v, c)}, Holdout(LoggedEvents(t, y, c[np.arange(n), t], 0.5)),
                           EvaluationSettings([0.15], "two", eom_interval=BootstrapInterval(50)))
    assert df.loc[df["model"] == "truth-model", "aucc"].iloc[0] > 0.55
    assert np.isnan(df.loc[df["model"] == "random", "aucc"].iloc[0])


def test_leaderboard_has_one_row_per_model_and_budget(evaluation):
    text = format_leaderboard(evaluation)
    lines = text.strip().splitlines()
    assert len(lines) == 2 + 6 + 2  # header, rule, 3 policies x 2 budgets, what it is ranked by, the spend caveat
    assert lines[-2] == "toy: ranked by % of the oracle at matched true spend."
    assert sum("random" in ln for ln in lines) == 2
    md = leaderboard_markdown(evaluation)
    md_lines = md.strip().splitlines()
    assert md_lines[0].startswith("| campaign") and sum(ln.startswith("| ") for ln in md_lines) == 2 + 6
    # history: an older evaluation of the same (model, budget) is not shown twice
    old = evaluation.assign(evaluated_at=evaluation["evaluated_at"] - pd.Timedelta(days=1), eom_value=0.0)
    assert format_leaderboard(pd.concat([old, evaluation])) == text
    # the best true value comes first within a budget, the random reference is there
    board = leaderboard(evaluation)
    assert list(board.loc[board["budget"] == "2", "model"]) == ["noisy", "random", "reversed"]


def test_compact_leaderboard_and_records_follow_the_full_board(evaluation):
    """`promo report`'s default columns and its CSV / JSON rows: the same rows in the same order as the
    full board; `vs random` is the ranking figure minus the random policy's at the same budget."""
    from promo_assets.evaluation import leaderboard_compact, leaderboard_records

    board, compact, records = leaderboard(evaluation), leaderboard_compact(evaluation), leaderboard_records(evaluation)
    assert list(compact.columns) == ["campaign", "budget", "rank", "model", "% oracle", "EOM value [95% CI]",
                                     "spend ratio", "vs random", "note"]
    assert list(compact["model"]) == list(board["model"]) == [r["model"] for r in records]
    assert list(compact["rank"]) == list(board["rank"]) == [str(r["rank"]) for r in records]
    assert list(compact["% oracle"]) == list(board["% oracle"])
    by = {(r["model"], r["budget_per_capita"]): r for r in records}
    for r in records:
        assert r["ranked_by"] == "pct_oracle" and r["ranking_value"] == r["pct_oracle"]
        random = by[("random", r["budget_per_capita"])]
        if r["model"] == "random":
            assert np.isnan(r["vs_random"])
        else:
            assert r["vs_random"] == pytest.approx(r["pct_oracle"] - random["pct_oracle"])
    for row, r in zip(compact.to_dict(orient="records"), records):
        assert row["EOM value [95% CI]"].startswith(f"{r['eom_value']:.4f} [{r['eom_ci_low']:.4f}, ")
        assert row["vs random"] == ("" if r["model"] == "random" else f"{100 * r['vs_random']:+.1f} pt")


def test_report_lines_fit_120_columns_unless_wide(evaluation):
    from promo_assets.cli.main import REPORT_COLUMNS, _board_lines

    noted = evaluation.assign(note=["a long note " * 12 if m == "reversed" else None for m in evaluation["model"]])
    lines = _board_lines(noted, wide=False)
    assert max(map(len, lines)) <= REPORT_COLUMNS and sum("a long note" in ln for ln in lines) > 2
    assert lines[0].split()[:4] == ["budget", "rank", "model", "%"]
    wide = _board_lines(noted, wide=True)
    assert max(map(len, wide)) > REPORT_COLUMNS and "matched value" in wide[0] and "oracle" in wide[0]
    # a too small holdout: flagged in the note and under the table, no % oracle and no vs random
    small = _board_lines(evaluation.assign(too_small=True, n_users=80), wide=False)
    flat = " ".join(" ".join(small).split())
    assert "too small to evaluate (80 holdout users)" in flat and "min_holdout_users" in flat
    assert small[0].split()[:4] == ["budget", "rank", "model", "EOM"]  # no % oracle, no vs random column
    assert " pt" not in " ".join(small) and "vs random" not in small[0]


def test_leaderboard_reads_metrics_from_a_json_column(evaluation):
    import json

    from promo_assets.evaluation import CURVE_METRIC_NAMES

    packed = evaluation.drop(columns=list(CURVE_METRIC_NAMES)).assign(
        metrics=[json.dumps({m: r[m] for m in CURVE_METRIC_NAMES if r[m] == r[m]}) for _, r in evaluation.iterrows()])
    assert format_leaderboard(packed) == format_leaderboard(evaluation)


def test_curves_and_plots_are_valid_pngs(campaign, evaluation):
    d = campaign
    events = LoggedEvents(d["t"], d["y"], d["z"], 0.25)
    curve = eom_curve((d["models"]["noisy"][1], d["c"]), events, n_points=20, truth=Truth(d["v"], d["c"]))
    assert len(curve) >= 10
    assert np.all(np.diff(curve["predicted_cost"]) >= -1e-12)
    assert curve["predicted_cost"].iloc[0] == pytest.approx(1.0) and curve["predicted_cost"].iloc[-1] == pytest.approx(4.0)
    # the whole frontier: exactly the allocator's breakpoints (per capita)
    small_v, small_c = d["models"]["noisy"][1][:300], d["c"][:300]
    full = eom_curve(Coefficients(small_v, small_c), LoggedEvents(d["t"][:300], d["y"][:300], d["z"][:300], 0.25),
                     n_points=None)
    fr = allocation.frontier(small_v, small_c)
    assert np.allclose(np.unique(np.round(full["predicted_cost"] * 300, 6)), np.unique(np.round(fr.costs, 6)))
    at_budgets = eom_curve((d["models"]["noisy"][1], d["c"]), events, budgets=[1.5, 2.0])
    assert (at_budgets["predicted_cost"] <= at_budgets["budget_per_capita"] + 1e-9).all()
    curves = policy_curves(d["models"], events, truth=Truth(d["v"], d["c"]), n_points=15)
    assert set(curves["model"]) == {"noisy", "reversed", "oracle", "random"}
    for png in (plot_frontier(curves, evaluation, title="toy"),
                plot_frontier(curves.assign(true_value=np.nan, true_cost=np.nan)),
                plot_response_by_level({m: s[1] for m, s in d["models"].items()}, true_values=d["v"],
                                       logged=d["t"], response=d["y"], propensity=0.25, incentives=[1, 2, 3, 4])):
        assert png[:8] == PNG_SIGNATURE
        assert len(png) > 5000
