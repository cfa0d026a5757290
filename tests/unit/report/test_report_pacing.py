"""Spend per day of a paced campaign: the decisions run stores its per-day pacing rows in table
pacing, and the campaign report draws them (spend per day against the plan, the budget left) with
the real numbers. End to end (two `promo run`s, the first day's events back in between):
tests/unit/decisions/test_pacing.py::test_promo_run_paces_a_period_budget_with_the_spend_that_came_back."""

from __future__ import annotations

import datetime as dt

import duckdb
import pandas as pd
import pytest

from promo_assets.decisions.pacing import PacingDay, PeriodBudget, pacing_table, store_pacing
from promo_assets.report.data import ReportData
from promo_assets.report.html import _Figures, _num, _pacing
from promo_assets.store.warehouse import ensure_schema, sql

START = dt.date(2026, 3, 4)


def _report(rows: pd.DataFrame | None, budget: dict | None, run: str = "run-b") -> ReportData:
    return ReportData("demo", "board", None, ["0", "1"], [1.0], pd.DataFrame(), pd.DataFrame(), period_budget=budget,
                      decisions_run=run, pacing=rows)


def _cell(html: str, value: float) -> bool:
    return f">{_num(value)}</td>" in html


def test_pacing_rows_round_trip_through_the_table_and_into_the_report():
    budget = PeriodBudget(total=900.0, start=START, end=START + dt.timedelta(days=2), controller="ratio")
    history = [PacingDay(START, plan=300.0, lambda_=0.071, predicted=512.25, realized=287.5, ratio=0.55, users=600),
               PacingDay(START + dt.timedelta(days=1), plan=306.25, lambda_=0.066, predicted=540.0, ratio=0.5613, users=600)]
    rows = pacing_table(budget, history)
    con = duckdb.connect(":memory:")
    ensure_schema(con)
    store_pacing(con, "demo", "run-a", START, budget, rows[:1])
    store_pacing(con, "demo", "run-b", START + dt.timedelta(days=1), budget, rows)
    got = con.execute(sql("report", "pacing_of_run"), ["demo", "run-b"]).df()
    assert [str(d.date()) for d in got["pacing_day"]] == [START.isoformat(), (START + dt.timedelta(days=1)).isoformat()]
    assert got["plan"].tolist() == [300.0, 306.25] and got["lambda_"].tolist() == [0.071, 0.066]
    assert got["realized_spend"].iloc[0] == 287.5 and pd.isna(got["realized_spend"].iloc[1])  # not back yet
    assert got["budget_left"].tolist() == pytest.approx([900 - 287.5, 900 - 287.5 - 306.25])
    assert set(got["controller"]) == {"ratio"} and set(got["period_total"]) == {900.0}
    assert len(con.execute(sql("report", "pacing_of_run"), ["demo", "run-a"]).fetchall()) == 1  # per run

    figs = _Figures()
    html = _pacing(_report(got, {"total": 900, "start": START, "end": START + dt.timedelta(days=2)}), figs)
    assert html.startswith("<h2>Spend per day</h2>") and figs.n == 2
    assert 'id="plot-pacing"' in html and 'id="plot-pacing-budget-left"' in html
    for value in (300.0, 306.25, 287.5, 512.25, 540.0, 900 - 287.5, 900 - 287.5 - 306.25, 0.071, 0.066):
        assert _cell(html, value), value  # the stored numbers, in the per-day table
    assert "2 paced day(s)" in html and "1 with their spend back" in html and "realized so far 287.5" in html

    # the decisions asset's page: the same rows as a table with described columns, and the plot
    from promo_assets.decisions.display import pacing_metadata
    from promo_assets.defs.common import metadata

    meta = metadata(pacing_metadata(budget, history[-1], rows))
    table = meta["pacing"]
    assert [c.name for c in table.schema.columns] == list(rows[0]) and all(c.description for c in table.schema.columns)
    assert [r.data["realized spend"] for r in table.records] == [287.5, None]
    assert [r.data["plan"] for r in table.records] == [300.0, 306.2]  # four significant digits, for people
    assert "data:image/png;base64," in meta["pacing_plot"].value


def test_the_report_says_why_there_is_no_spend_per_day():
    figs = _Figures()
    assert "Pacing is not configured" in _pacing(_report(None, None), figs)
    empty = _pacing(_report(pd.DataFrame(columns=["pacing_day"]), {"total": 9, "start": "2026-03-04", "end": "2026-03-06"}), figs)
    assert "run-b" in empty and "outside the period 2026-03-04 .. 2026-03-06" in empty and figs.n == 0


def test_the_pacing_history_outlives_the_decisions_runs_retention_deletes():
    """A paced day whose decisions run retention has deleted (PROMO_KEEP_RUNS) is still part of the
    history the next day is planned from: it comes from the pacing rows of the latest visible run."""
    from promo_assets.decisions.pacing import stored_history
    from promo_assets.store import results

    budget = PeriodBudget(total=900.0, start=START, end=START + dt.timedelta(days=2), controller="ratio")
    history = [PacingDay(START, plan=300.0, lambda_=0.071, predicted=512.25, realized=287.5, ratio=0.55, users=600),
               PacingDay(START + dt.timedelta(days=1), plan=306.25, lambda_=0.066, predicted=540.0, ratio=0.5613,
                         users=600)]
    con = duckdb.connect(":memory:")
    ensure_schema(con)
    assert stored_history(con, "demo") == []
    # run-a paced day 1 and was deleted; run-b (day 2) is visible and wrote the period so far
    store_pacing(con, "demo", "run-b", START + dt.timedelta(days=1), budget, pacing_table(budget, history))
    assert stored_history(con, "demo") == []  # run-b not finished: its rows are not read
    results.start(con, "demo", "run-b")
    results.finish(con, "demo", "run-b", succeeded=True)
    got = stored_history(con, "demo")
    assert [h.day for h in got] == [START, START + dt.timedelta(days=1)]
    assert got[0].realized == 287.5 and got[0].plan == 300.0 and got[0].lambda_ == 0.071 and got[0].ratio == 0.55
    assert got[1].realized is None and got[1].predicted == 540.0
