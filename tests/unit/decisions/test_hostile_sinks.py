"""Hostile text on its way out and the closed loop's inputs: CSV cells that a spreadsheet would run,
Markdown that would render as a link, an image or a tag, decision files answered for the wrong day
or with nothing in them, ids with spaces, `promo export --out` into the folders the pipeline reads,
a period budget too small for a day.

`error-*` cases must be refused with the message asserted; `accepted-*` cases are accepted as
docs/data-contract.md and docs/decisions.md say (written escaped, read back exactly).
"""

from __future__ import annotations

import csv
import datetime as dt
import os

import markdown_it  # ships with dagster (rich -> markdown-it-py)
import numpy as np
import pandas as pd
import pytest

from promo_assets.core.text import FORMULA_START, markdown_text
from promo_assets.decisions.outbox import DECISION_COLUMNS, read_decision_file, write_outbox
from promo_assets.decisions.pacing import PacingError, PeriodBudget, pace_day
from promo_assets.simulation import SimulationError, SimulationRequest, respond, simulate, truth_user_ids

FORMULA_IDS = {
    "accepted-csv-equals-hyperlink": '=HYPERLINK("http://x","y")',
    "accepted-csv-plus-cmd": "+cmd|' /C calc'!A0",
    "accepted-csv-minus": "-2+3",
    "accepted-csv-at-sum": "@SUM(1+1)*cmd|' /C calc'!A0",
    "accepted-csv-tab": "\t=1+1",
    "accepted-csv-carriage-return": "\r=1+1",
    "accepted-csv-leading-quote": "'=1+1",
}


def decision_rows(ids, label="+5 off") -> pd.DataFrame:
    n = len(ids)
    return pd.DataFrame({"user_id": ids, "level": np.zeros(n, dtype=np.int32), "label": [label] * n,
                         "incentive": np.zeros(n), "predicted_response": np.full(n, -0.25), "predicted_cost": np.zeros(n),
                         "policy": ["champion"] * n, "propensity": np.ones(n), "model": ["m"] * n,
                         "model_version": ["=v1"] * n})


@pytest.mark.hostile
@pytest.mark.parametrize("user_id", list(FORMULA_IDS.values()), ids=list(FORMULA_IDS))
def test_csv_export_neutralises_formula_cells_and_reads_back_exactly(tmp_path, user_id):
    frame = decision_rows([user_id, "u2"])
    folder = write_outbox(tmp_path, "c1", "2026-03-01", {1.0: frame}, {"budgets": []}, fmt="csv")
    with open(folder / "1.csv", newline="") as f:
        cells = [cell for row in csv.reader(f) for cell in row]
    for cell in cells:  # a text cell never starts with a formula character; a number is a number
        if cell[:1] in FORMULA_START:
            float(cell)
    assert "'" + user_id in cells and "'+5 off" in cells and "'=v1" in cells
    back = read_decision_file(folder / "1.csv")
    assert list(back["user_id"]) == [user_id, "u2"] and set(back["label"]) == {"+5 off"}
    assert set(back["model_version"]) == {"=v1"} and back["predicted_response"].tolist() == [-0.25, -0.25]


MARKUP = {
    "accepted-markdown-script-tag": "<script>alert(1)</script>",
    "accepted-markdown-image": "![x](http://evil.example/p.png)",
    "accepted-markdown-javascript-link": "[x](javascript:alert(1))",
    "accepted-markdown-autolink": "<http://evil.example>",
    "accepted-markdown-bare-url": "see http://evil.example and www.evil.example",
    "accepted-markdown-img-tag": '<img src=x onerror="alert(1)">',
    "accepted-markdown-table-break": "a | b\n| c |",
}


def rendered(markdown: str) -> str:
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


@pytest.mark.hostile
@pytest.mark.parametrize("payload", list(MARKUP.values()), ids=list(MARKUP))
def test_markdown_metadata_from_data_renders_as_text(payload):
    from promo_assets.core.display import md_table
    from promo_assets.defs.common import metadata
    from promo_assets.evaluation import (
        BootstrapInterval,
        EvaluationSettings,
        Holdout,
        LoggedEvents,
        Truth,
        evaluate_policies,
        leaderboard,
        leaderboard_markdown,
    )

    shown = md_table([{payload: payload, "share": 0.5}, {payload: [payload, payload], "share": {payload: 1}}])
    table = metadata({"table": shown})["table"].value  # as the asset page receives it
    html = rendered(table)
    for tag in ("<a", "<img", "<script", "<http"):
        assert tag not in html, (tag, html)
    assert html.count("<tr>") == 3 and html.count("<td>") == 4  # the table keeps its shape
    assert markdown_text(payload).replace("\\", "").replace("&lt;", "<").replace("&gt;", ">") in (
        html.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&"))  # shown as text
    rng = np.random.default_rng(1)  # the leaderboard of a model named by the payload
    v = np.sort(rng.uniform(0, 0.5, (60, 3)), axis=1)
    c = np.broadcast_to(np.arange(3.0), v.shape).copy()
    t = rng.integers(0, 3, 60)
    y = (rng.uniform(size=60) < v[np.arange(60), t]).astype(float)
    rows = evaluate_policies({payload: ("v1", v, c)}, Holdout(LoggedEvents(t, y, c[np.arange(60), t], 1 / 3), Truth(v, c)),
                             EvaluationSettings([1.0], "c1", eom_interval=BootstrapInterval(5), min_holdout_users=1))
    html = rendered(leaderboard_markdown(rows))
    for tag in ("<a", "<img", "<script", "<http"):
        assert tag not in html, (tag, html)
    assert html.count("<tr>") == 1 + len(leaderboard(rows))  # one row per policy, none broken


# ------------------------------------------------------------------ the closed loop's inputs
@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    root = tmp_path_factory.mktemp("respond")
    simulate("demo", SimulationRequest("d", root, 2, 300, 4, start=dt.date(2026, 1, 1)))
    return root


def _copy(simulated, tmp_path):
    import shutil

    shutil.copytree(simulated / "d", tmp_path / "d")
    return tmp_path / "d"


def _decisions(campaign, n=None) -> pd.DataFrame:
    ids = truth_user_ids(campaign)[: n or None]
    return pd.DataFrame({"user_id": ids, "level": 1, "propensity": 0.9})


@pytest.mark.hostile
@pytest.mark.parametrize("fmt", ["parquet", "csv"], ids=["error-respond-header-only-parquet", "error-respond-header-only-csv"])
def test_respond_refuses_an_empty_decision_file(simulated, tmp_path, fmt):
    campaign = _copy(simulated, tmp_path)
    empty = _decisions(campaign).iloc[:0]
    path = tmp_path / f"dec.{fmt}"
    empty.to_parquet(path) if fmt == "parquet" else empty.to_csv(path, index=False)
    with pytest.raises(SimulationError, match="holds no decisions"):
        respond(campaign, path, dt.date(2026, 1, 3))
    assert not (campaign / "events" / "2026-01-03.parquet").exists()


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-respond-one-row-answers-nobody"])
def test_respond_refuses_a_file_that_would_write_a_day_without_events(simulated, tmp_path, case):
    campaign = _copy(simulated, tmp_path)
    frame = _decisions(campaign)
    for i in range(len(frame)):  # a one-row file whose user is not active that day (daily_active 0.5)
        frame.iloc[i:i + 1].to_parquet(tmp_path / "one.parquet")
        try:
            respond(campaign, tmp_path / "one.parquet", dt.date(2026, 1, 3))
        except SimulationError as exc:
            assert "would have no events; nothing was written" in str(exc)
            assert not (campaign / "events" / "2026-01-03.parquet").exists()
            return
        (campaign / "events" / "2026-01-03.parquet").unlink()
    pytest.fail("every one-row decision was answered")


@pytest.mark.hostile
@pytest.mark.parametrize("where", ["manifest", "folder"], ids=["error-respond-day-not-the-manifest-date",
                                                               "error-respond-day-not-the-folder-date"])
def test_respond_refuses_another_day_than_the_decisions(simulated, tmp_path, where):
    campaign = _copy(simulated, tmp_path)
    frame = _decisions(campaign)
    if where == "manifest":
        folder = write_outbox(tmp_path / "outbox", "d", "2026-01-03", {1.0: decision_rows(list(frame["user_id"]))},
                              {"date": "2026-01-03", "budgets": []})
        path = folder / "1.parquet"
    else:
        (tmp_path / "2026-01-03").mkdir()
        path = tmp_path / "2026-01-03" / "dec.parquet"
        frame.to_parquet(path)
    with pytest.raises(SimulationError) as err:
        respond(campaign, path, dt.date(1, 1, 1))
    assert "the decisions are for 2026-01-03" in str(err.value) and "0001-01-01" in str(err.value)
    assert not (campaign / "events" / "0001-01-01.parquet").exists()
    respond(campaign, path, dt.date(2026, 1, 3))  # its own day is answered
    assert (campaign / "events" / "2026-01-03.parquet").exists()


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["accepted-respond-ids-with-spaces-are-the-same-users"])
def test_respond_reads_ids_by_the_landing_folders_rule(simulated, tmp_path, case):
    campaign = _copy(simulated, tmp_path)
    plain = _decisions(campaign)
    spaced = plain.assign(user_id=" " + plain["user_id"] + " \t")
    spaced.to_parquet(tmp_path / "spaced.parquet")
    respond(campaign, tmp_path / "spaced.parquet", dt.date(2026, 1, 3))
    events = pd.read_parquet(campaign / "events" / "2026-01-03.parquet")
    assert set(events["user_id"]) <= set(plain["user_id"]) and len(events) > 0  # the same users, trimmed
    both = pd.concat([plain.iloc[:3], spaced.iloc[:3]])
    both.to_parquet(tmp_path / "both.parquet")
    with pytest.raises(SimulationError, match="a user more than once"):  # ' u1 ' and 'u1': one user
        respond(campaign, tmp_path / "both.parquet", dt.date(2026, 1, 4))


@pytest.mark.hostile
@pytest.mark.parametrize("bad", ["u\x001", "", "  \t"], ids=["error-respond-id-with-nul", "error-respond-empty-id",
                                                              "error-respond-blank-id"])
def test_respond_refuses_ids_the_landing_folder_refuses(simulated, tmp_path, bad):
    campaign = _copy(simulated, tmp_path)
    frame = _decisions(campaign)
    frame.loc[2, "user_id"] = bad
    frame.to_parquet(tmp_path / "dec.parquet")
    with pytest.raises(SimulationError) as err:
        respond(campaign, tmp_path / "dec.parquet", dt.date(2026, 1, 3))
    assert "1 user_id value(s) refused; the first at row 3" in str(err.value)
    assert ("control character" if "\x00" in bad else "missing") in str(err.value)


# ------------------------------------------------------------------ promo export --out
@pytest.mark.hostile
@pytest.mark.parametrize("where", ["landing", "landing-campaign", "artifacts", "warehouse-folder", "link-into-landing"],
                         ids=["error-export-out-landing", "error-export-out-inside-a-campaign",
                              "error-export-out-artefact-store", "error-export-out-warehouse-folder",
                              "error-export-out-symlink-into-landing"])
def test_export_out_is_refused_inside_the_folders_the_pipeline_reads(promo_env, capsys, tmp_path, where):
    from promo_assets.cli.main import main

    (promo_env["landing"] / "c1").mkdir()
    (promo_env["landing"] / "c1" / "campaign.yaml").write_text("treatments:\n  levels: [0, 1]\nbudget_per_capita: 1\n")
    out = {"landing": promo_env["landing"], "landing-campaign": promo_env["landing"] / "c1" / "events",
           "artifacts": promo_env["artifacts"] / "x", "warehouse-folder": promo_env["warehouse"].parent,
           "link-into-landing": tmp_path / "innocent"}[where]
    if where == "link-into-landing":
        os.symlink(promo_env["landing"], out)
    before = sorted(p for p in promo_env["landing"].rglob("*"))
    assert main(["export", "--campaign", "c1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out}" in err and "nothing was written" in err
    assert ("the warehouse's folder" if where == "warehouse-folder" else
            "the artefact store" if where == "artifacts" else "the landing folder") in err
    assert sorted(p for p in promo_env["landing"].rglob("*")) == before


# ------------------------------------------------------------------ a period budget too small for a day
@pytest.mark.hostile
@pytest.mark.parametrize("total", [0.001, 1e-9], ids=["error-period-total-too-small", "error-period-total-tiny"])
def test_a_period_total_too_small_for_a_day_is_said_plainly(total):
    rng = np.random.default_rng(0)
    cost = np.sort(rng.uniform(0.5, 3, (200, 4)), axis=1)
    cost[:, 0] = 0.0
    response = np.sort(rng.uniform(0, 1, (200, 4)), axis=1)
    budget = PeriodBudget(total=total, start=dt.date(2026, 3, 1), end=dt.date(2026, 3, 10), controller="ratio", gain=1.0)
    with pytest.raises(PacingError) as err:
        pace_day(budget, dt.date(2026, 3, 1), response, cost, [], 1.0)
    message = str(err.value)
    assert f"the period total {total:g} is too small for the decision of 2026-03-01" in message
    assert "10 day(s) left" in message and "raise 'budget.total'" in message


@pytest.mark.hostile
@pytest.mark.parametrize("share", [0.5], ids=["error-period-total-too-small-for-exploration"])
def test_a_period_total_too_small_for_the_exploration_names_budget_total(share):
    """The day's paced budget leaves too little for its explored users: the message names 'budget.total'."""
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.decisions.daily import DayPlan, DecisionInputs, Paced, decide_day
    from promo_assets.decisions.exploration import Exploration, decide_with_exploration
    from promo_assets.decisions.pacing import PacingDay

    rng = np.random.default_rng(0)
    cost = np.sort(rng.uniform(0.5, 3, (200, 4)), axis=1)
    cost[:, 0] = 0.0
    response = np.sort(rng.uniform(0, 1, (200, 4)), axis=1)
    config = CampaignConfig.from_dict({"treatments": {"levels": [0, 1, 2, 3]}, "budget_per_capita": [3.0]}, "c1")
    day = dt.date(2026, 3, 1)
    budget = PeriodBudget(total=2.0, start=day, end=dt.date(2026, 3, 10), controller="ratio", gain=1.0)
    today = PacingDay(day=day, plan=0.2, lambda_=1.0, predicted=0.2, users=200)
    inputs = DecisionInputs(pd.Series({"decided_at": None}), {"name": "m", "version": "v1"},
                            np.array([f"u{i}" for i in range(200)]), response, cost, day, [], pd.DataFrame())
    exploration = Exploration(share=share, mix=(0, 0, 0, 1))
    assert decide_with_exploration(response, cost, 3.0, exploration, day).share > 0  # the configured budget pays
    with pytest.raises(PacingError) as err:
        decide_day(inputs, DayPlan(Paced(budget, today, []), None), config, exploration, "population")
    message = str(err.value)
    assert "the period total 2 (2026-03-01 .. 2026-03-10) leaves 0.001 per capita for 2026-03-01" in message
    assert f"cannot pay for the exploration share {share:g}" in message
    assert "Raise 'budget.total' (or 'budget.per_day'), or lower exploration.share" in message


def test_decision_columns_are_what_the_csv_test_writes():
    assert tuple(decision_rows(["u"]).columns) == DECISION_COLUMNS
