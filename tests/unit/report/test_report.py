"""The leaderboard for people (promo_assets.evaluation.board_view) and the campaign report
(promo_assets.report): compact tables with described columns, rounded figures, and a self-contained
HTML file (plotly.js inlined, nothing fetched from the network)."""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pandas as pd
import pytest

from promo_assets.evaluation.board_view import compact_boards, full_board, not_evaluated, short_note, tidy


def _rows(truth: bool = True) -> pd.DataFrame:
    rows = []
    for b in (0.5, 1.0):
        for i, model in enumerate(["dipn", "lgbm_s", "random"]):
            v = 0.3 + 0.05 * (2 - i) + b / 10
            rows.append({"campaign": "c", "model": model, "model_version": f"v{i}", "budget_per_capita": b,
                         "eom_value": v, "eom_cost": b, "eom_ci_low": v - 0.1, "eom_ci_high": v + 0.1,
                         "dr_q_value": v + 0.011111111111, "dr_value": v, "dr_ci_low": v - 0.05, "dr_ci_high": v + 0.05,
                         "pct_oracle": (0.8 + 0.05 * (2 - i)) if truth else np.nan,
                         "true_cost": (b * (1.08 if model == "lgbm_s" else 0.95)) if truth else np.nan,
                         "note": "budget 0.5 per capita: the dearest mix costs 0.35767785331234" if model == "random" else None,
                         "evaluated_at": dt.datetime(2026, 1, 1)})
    return pd.DataFrame(rows)


def test_compact_leaderboard_one_table_per_budget_seven_described_columns():
    tables = compact_boards(_rows(), {"dipn": 0.7, "lgbm_s": 0.3})
    assert [b for b, _, _ in tables] == [0.5, 1.0]
    for _, columns, records in tables:
        assert [c.name for c in columns] == ["rank", "model", "% oracle", "spend", "gain", "★", "note"]
        assert all(c.description and c.type in ("int", "float", "string") for c in columns)
        assert [r["model"] for r in records] == ["dipn", "lgbm_s", "random"]
        assert [r["rank"] for r in records] == [1, 2, 3]
        assert records[0]["% oracle"] == "90.0%" and records[0]["gain"] == "+10.0"  # points over random
        assert records[0]["★"] == "★.70" and records[2]["★"] == ""
        assert records[1]["note"] == "over 8.0%" and records[1]["spend"] == 1.08
        assert records[2]["note"] == "see note"  # the long text is in the full table
    full_cols, full = full_board(_rows())
    assert all(c.description for c in full_cols)
    assert "0.3577" in full[2]["note"] and "0.35767785" not in full[2]["note"]  # rounded for people


def test_compact_leaderboard_without_truth_shows_the_dr_value_with_its_interval():
    (_, columns, records), _ = compact_boards(_rows(truth=False), ["dipn"])
    assert columns[2].name == "DR value [95% CI]"
    assert re.fullmatch(r"0\.\d{3} ±0\.050", records[0]["DR value [95% CI]"])
    assert records[0]["gain"].endswith("%") and records[0]["★"] == "★"
    (_, _, long), _ = compact_boards(_rows(truth=False), ["dipn"], short=False)
    assert re.fullmatch(r"0\.\d{3} \[0\.\d{3}, 0\.\d{3}\]", long[0]["DR value [95% CI]"])


def test_models_not_evaluated_say_why_and_those_off_by_default_share_a_row():
    _, records = not_evaluated([
        {"model": "gnn_hazard", "status": "skipped", "reason": "needs a customer–merchant campaign"},
        {"model": "cmnn", "status": "skipped", "reason": "off by default: list it in campaign.yaml models.include"},
        {"model": "fpm", "status": "skipped", "reason": "off by default: list it in campaign.yaml models.include"},
        {"model": "dipn", "status": "missing", "reason": "no evaluation yet (its chain failed or has not run)"}])
    assert [r["model"] for r in records] == ["gnn_hazard", "dipn", "2 more"]
    assert "cmnn, fpm" in records[-1]["reason"]
    assert short_note("OVERSPENDS the budget by 7.5% in truth as made; too small to evaluate (12 holdout users)") == \
        "over 7.5%, too small"
    assert tidy(0.1) == "0.1" and tidy(None) == ""


def test_metadata_for_people_tables_not_json():
    import dagster as dg

    from promo_assets.core.display import for_people, kv_table
    from promo_assets.defs.common import metadata

    assert for_people(np.float64(5.796634417000007)) == 5.797
    shown = metadata({"v": for_people({"b": 1, "a": {"x": 0.123456789}})})["v"]
    assert shown.value.splitlines()[-1] == "| a.x | 0.1235 |"
    assert isinstance(metadata({"t": kv_table({"train": 3})})["t"], dg.MarkdownMetadataValue)
    assert for_people(["2026-01-01", "2026-01-02"]) == "2026-01-01, 2026-01-02"


@pytest.mark.slow
def test_report_of_a_run_campaign_is_self_contained(demo_run, tmp_path, capsys):
    import dagster as dg

    from promo_assets.cli.main import main

    # the demo campaign after `promo run` with the default models, shared (conftest.py)
    event = dg.DagsterInstance.get().get_latest_materialization_event(dg.AssetKey("campaign_report"))
    meta = event.asset_materialization.metadata
    path = meta["report"].value
    html = open(path, encoding="utf-8").read()
    assert meta["plots"].value == html.count('class="plotly-graph-div"') >= 4
    for section in ("Champion", "Leaderboard", "Cost–response frontier", "Response per level", "Decisions exported",
                    "Spend per day"):
        assert f"<h2>{section}" in html, section
    assert "Pacing is not configured" in html  # no pacing table in this warehouse
    # nothing to fetch: no external script, stylesheet or image
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"https?:", html)
    out = tmp_path / "report.html"
    assert main(["report", "--campaign", "demo", "--html", str(out)]) == 0
    assert "report written to" in capsys.readouterr().out and out.stat().st_size > 1_000_000
    assert main(["report", "--campaign", "nope", "--html", str(tmp_path / "x.html")]) == 2
    assert "no leaderboard of a succeeded run for campaign 'nope'" in capsys.readouterr().err


def test_the_html_champion_headline_is_worded_by_its_interval():
    """An interval that contains 0 is 'not distinguishable', never 'better than'; the comparison that made the
    choice is shown as 'Chosen on'."""
    import pandas as pd

    from promo_assets.report.data import ReportData
    from promo_assets.report.html import _champion, _Figures

    row = {"champion": "lgbm_s", "champion_reference": "lgbm_s_mono", "champion_difference": 0.0764,
           "champion_difference_low": -0.0401, "champion_difference_high": 0.1929, "champion_confidence": 0.9,
           "champion_reason": "first champion", "champion_members": '{"members": ["lgbm_s"], "weights": [1.0]}',
           "champion_decided_by": "the decision loss on 2000 events: lgbm_s has the lowest", "pct_oracle": None}
    data = ReportData("demo", "run", None, ["a", "b"], [1.0], pd.DataFrame(), pd.DataFrame(), champion=row)
    page = _champion(data, _Figures())
    assert "better than" not in page and "not distinguishable from lgbm_s_mono: +0.0764 [-0.0401, +0.1929]" in page
    assert "90% interval" in page and "Chosen on: the decision loss on 2000 events" in page
    assert page.index("not distinguishable") < page.index("Chosen on") < page.index("Why: first champion")
