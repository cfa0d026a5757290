"""promo_assets.decisions.pacing: the plan from the budget left, λ warm-started and corrected by the
realized spend, both controllers, on synthetic coefficients with a known spend bias."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from promo_assets.config.campaign import BudgetBlock
from promo_assets.decisions.pacing import (
    PacingDay,
    PacingError,
    PeriodBudget,
    lambda_for_spend,
    pace_day,
    plan_for,
    predicted_spend,
)

START = dt.date(2026, 5, 1)


def _coefficients(n=3000, k=5, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.05, 0.3, size=(n, 1))
    gain = rng.uniform(0.0, 0.1, size=(n, 1))
    levels = np.arange(k)[None, :]
    values = base + gain * np.sqrt(levels)
    costs = np.broadcast_to(levels * 0.5, (n, k)) * (0.5 + values)
    return values, np.ascontiguousarray(costs)


def test_lambda_for_spend_meets_the_target_from_any_warm_start():
    v, c = _coefficients()
    full = predicted_spend(v, c, 0.0)
    for target in (0.1 * full, 0.5 * full, 0.9 * full):
        lams = [lambda_for_spend(v, c, target, start=s) for s in (None, 1e-3, 0.2, 50.0)]
        assert max(lams) - min(lams) <= 1e-3 * max(lams)
        assert predicted_spend(v, c, lams[0]) <= target < predicted_spend(v, c, lams[0] * 0.99)
    assert lambda_for_spend(v, c, 2 * full) == 0.0


def test_plan_spreads_the_budget_left_over_the_days_left():
    b = PeriodBudget(total=1400.0, start=START, end=START + dt.timedelta(days=13))
    assert b.days == 14 and plan_for(b, START, []) == pytest.approx(100.0)
    history = [PacingDay(START, 100.0, 0.1, 300.0, realized=130.0), PacingDay(START + dt.timedelta(days=1), 100.0, 0.1,
                                                                                 300.0, realized=None)]
    # day 3: 130 realized, day 2 not back yet (counted at its plan): 1170 over 12 days
    assert plan_for(b, START + dt.timedelta(days=2), history) == pytest.approx(1170.0 / 12)
    with pytest.raises(PacingError, match="outside the budget's period"):
        plan_for(b, START + dt.timedelta(days=14), [])
    per_day = PeriodBudget.from_config(BudgetBlock.model_validate(
        {"per_day": 50.0, "start": "2026-05-01", "end": "2026-05-10"}))
    assert per_day.total == 500 and per_day.days == 10


@pytest.mark.parametrize("controller", ["ratio", "dual"])
def test_pacing_spends_the_total_when_only_a_third_of_the_spend_comes_back(controller):
    """The events report 30 % of the predicted spend (users who do not come back, cost bias) with
    noise; solving each day at total / days underspends by 70 %, the pacer ends within 2 %."""
    v, c = _coefficients()
    rng = np.random.default_rng(1)
    b = PeriodBudget(total=14 * 0.3 * 0.4 * predicted_spend(v, c, 0.0), start=START,
                     end=START + dt.timedelta(days=13), controller=controller)
    history = []
    for d in range(b.days):
        today = pace_day(b, START + dt.timedelta(days=d), v, c, history, prior_ratio=1.0)
        today.realized = today.predicted * 0.3 * rng.uniform(0.9, 1.1)
        history.append(today)
    spent = sum(h.realized for h in history)
    assert abs(spent / b.total - 1) < 0.02
    assert history[1].lambda_ < history[0].lambda_  # the first day underspent: λ comes down
    lam_alone = lambda_for_spend(v, c, b.total / b.days)
    assert predicted_spend(v, c, lam_alone) * 0.3 * b.days < 0.35 * b.total


def test_unknown_controller_is_refused():
    v, c = _coefficients(n=10)
    b = PeriodBudget(total=10.0, start=START, end=START, controller="pid")
    with pytest.raises(PacingError, match="ratio, dual"):
        pace_day(b, START, v, c, [], 1.0)


@pytest.mark.slow
def test_promo_run_paces_a_period_budget_with_the_spend_that_came_back(promo_env, capsys):
    """campaign.yaml `budget:` over days 4-6: day 4's paced decision plans total / 3; its file answered
    by the simulator, the next run plans (total - day 4's realized spend) / 2 and the service's λ is the
    paced one."""
    import json

    import duckdb
    import pandas as pd

    from promo_assets.cli.main import main
    from promo_assets.decisions import read_manifest
    from promo_assets.decisions.pacing import stored_history
    from promo_assets.report.html import _num
    from promo_assets.serve import read_campaign

    start = dt.date(2026, 3, 1)
    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "3", "--users", "600", "--seed", "2",
                 "--start", start.isoformat()]) == 0
    d4, d5 = start + dt.timedelta(days=3), start + dt.timedelta(days=4)
    with open(promo_env["landing"] / "demo" / "campaign.yaml", "a") as f:
        f.write(f"models:\n  include: [lgbm_s_mono]\nexploration:\n  share: 0.1\n"
                f"budget:\n  total: 900\n  start: {d4}\n  end: {d4 + dt.timedelta(days=2)}\n")
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    manifest = read_manifest(promo_env["outbox"] / "demo" / d4.isoformat())
    (paced,) = [e for e in manifest["budgets"] if "pacing" in e]
    assert paced["pacing"]["plan"] == pytest.approx(300.0) and paced["pacing"]["day"] == d4.isoformat()
    assert 0 < paced["pacing"]["ratio"] <= 1  # the prior: the share of users seen on a loaded day
    assert {e["budget_per_capita"] for e in manifest["budgets"]} >= {0.5, 1.0, 1.5}
    file = promo_env["outbox"] / "demo" / d4.isoformat() / paced["file"]

    assert main(["simulate", "--respond-to", str(file), "--day", d4.isoformat(), "--campaign", "demo"]) == 0
    realized = float(pd.read_parquet(promo_env["landing"] / "demo" / "events" / f"{d4}.parquet")["cost"].sum())
    assert main(["run", "--campaign", "demo", "--no-progress"]) == 0
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        history = stored_history(con, "demo")
        state = read_campaign(con, promo_env["landing"], "demo")
    assert [h.day for h in history] == [d4, d5]
    assert history[0].realized == pytest.approx(realized) and history[1].realized is None
    assert history[1].plan == pytest.approx((900.0 - realized) / 2)
    assert history[1].ratio == pytest.approx(realized / history[0].predicted)  # corrected by what came back
    assert state.paced_budget is not None and state.pacing["day"] == d5.isoformat()
    assert state._budget(None) == state.paced_budget == state._budget("period")
    assert main(["export", "--campaign", "demo", "--out", str(promo_env["outbox"] / "again")]) == 0
    again = json.loads((promo_env["outbox"] / "again" / "demo" / d5.isoformat() / "manifest.json").read_text())
    assert any("pacing" in e for e in again["budgets"])

    # the per-day rows as each decisions run saw them (table pacing), and the report's spend per day
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        table = con.execute("SELECT * FROM pacing WHERE campaign = 'demo' ORDER BY paced_at, pacing_day").df()
    assert len(set(table["run_id"])) == 2
    last = table[table["run_id"] == table["run_id"].iloc[-1]]
    assert [d.date() for d in last["pacing_day"]] == [d4, d5]
    assert last["realized_spend"].iloc[0] == pytest.approx(realized) and pd.isna(last["realized_spend"].iloc[1])
    assert last["plan"].tolist() == pytest.approx([history[0].plan, history[1].plan])
    assert last["budget_left"].iloc[1] == pytest.approx(900 - realized - history[1].plan)
    out = promo_env["outbox"] / "report.html"
    assert main(["report", "--campaign", "demo", "--html", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    section = html[html.index("<h2>Spend per day</h2>"):]
    section = section[:section.find("<h2>", 5)] if "<h2>" in section[5:] else section
    assert 'id="plot-pacing"' in section and 'id="plot-pacing-budget-left"' in section
    assert "2 paced day(s)" in section and "1 with their spend back" in section and "total 900," in section
    for value in (300.0, realized, history[1].plan, last["budget_left"].iloc[1], last["lambda_"].iloc[1]):
        assert f">{_num(float(value))}</td>" in section, value  # the stored numbers in the per-day table
