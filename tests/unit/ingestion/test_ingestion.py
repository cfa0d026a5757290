"""Ingestion of landing day files: validation messages, atomicity, idempotent partitions."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promo_assets.store import warehouse
from promo_assets.config.campaign import CampaignConfig, CampaignConfigError
from promo_assets.ingestion import (
    IngestError,
    day_files,
    discover_campaigns,
    ingest_events_day,
    landing_changes,
    landing_inventory,
    load_config,
)

DAY1, DAY2 = dt.date(2026, 3, 1), dt.date(2026, 3, 2)


def write_campaign(landing: Path, name: str = "c1", yaml_text: str | None = None) -> Path:
    folder = landing / name
    (folder / "events").mkdir(parents=True)
    (folder / "campaign.yaml").write_text(
        yaml_text
        or "treatments:\n  levels: [0, 1, 2, 5]\ncost: redeemed\nresponse: binary\nbudget_per_capita: [1.0]\n"
    )
    return folder


def good_frame(n: int = 50, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user_id": [f"u{i:04d}" for i in range(n)],
            "treatment": rng.choice([0, 1, 2, 5], n),
            "response": rng.integers(0, 2, n).astype(float),
            "propensity": np.full(n, 0.25),
            "age": rng.normal(40, 10, n),
            "city": rng.choice(["a", "b", "c"], n),
        }
    )


@pytest.fixture
def setup(tmp_path):
    landing = tmp_path / "landing"
    folder = write_campaign(landing)
    good_frame(seed=1).to_parquet(folder / "events" / f"{DAY1}.parquet")
    db = tmp_path / "w.duckdb"
    return landing, folder, db


def snapshot(db: Path) -> pd.DataFrame:
    with warehouse.connect(db, read_only=True) as con:
        return con.execute("SELECT * FROM rct_events ORDER BY campaign, event_date, source_row").df()


def load(landing, db, day, path):
    with warehouse.connect(db) as con:
        return ingest_events_day(con, load_config(landing, "c1"), day, path)


def test_load_and_reload_is_idempotent(setup):
    landing, folder, db = setup
    path = folder / "events" / f"{DAY1}.parquet"
    first = load(landing, db, DAY1, path)
    assert first.rows_loaded == 50 and first.rows_rejected == 0
    assert sum(first.level_counts.values()) == 50
    before = snapshot(db)
    load(landing, db, DAY1, path)
    after = snapshot(db)
    assert len(after) == len(before) == 50
    assert set(after.columns) >= {"campaign", "event_date", "user_id", "level", "incentive", "response", "cost",
                                  "propensity", "age", "city"}
    # cost rule 'redeemed': incentive x response
    assert np.allclose(after["cost"], after["incentive"] * after["response"])
    assert after["level"].between(0, 3).all()


@pytest.mark.parametrize(
    "mutate, column, problem",
    [
        (lambda f: f.drop(columns=["response"]), "response", "missing required column"),
        (lambda f: f.assign(treatment=f["treatment"].where(f.index != 3, 7)), "treatment", "unknown treatment"),
        (lambda f: f.assign(response=f["response"].where(f.index != 4, np.nan)), "response", "NaN"),
        (lambda f: f.assign(cost=np.where(f.index == 5, -1.0, 0.0)), "cost", "negative"),
        (lambda f: f.assign(age=f["age"].astype(object).where(f.index != 6, "old")), "age", "not a number"),
        (lambda f: f.assign(response=f["response"].astype(object).where(f.index != 7, "yes")), "response", "not a number"),
        (lambda f: f.assign(propensity=f["propensity"].where(f.index != 8, 1.5)), "propensity", "outside 0 < p <= 1"),
    ],
    ids=["missing-column", "unknown-treatment", "nan-response", "negative-cost", "text-in-numeric-feature",
         "text-in-response", "propensity-out-of-range"],
)
def test_malformed_day_file_fails_and_keeps_warehouse(setup, mutate, column, problem):
    landing, folder, db = setup
    load(landing, db, DAY1, folder / "events" / f"{DAY1}.parquet")
    before = snapshot(db)
    bad = mutate(good_frame(seed=2))
    path = folder / "events" / f"{DAY2}.csv"
    bad.to_csv(path, index=False, na_rep="NaN")
    with pytest.raises(IngestError) as err:
        load(landing, db, DAY2, path)
    message = str(err.value)
    assert str(path) in message and f"'{column}'" in message and problem in message, message
    pd.testing.assert_frame_equal(snapshot(db), before)
    # re-loading DAY1 after the failure still works and the failed day holds nothing
    with warehouse.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM rct_events WHERE event_date = ?", [DAY2]).fetchone()[0] == 0


def test_rejected_rows_are_kept_with_their_reason(setup):
    landing, folder, db = setup
    bad = good_frame(seed=3)
    bad.loc[2, "treatment"] = 9
    bad.loc[9, "response"] = np.nan
    bad.to_parquet(folder / "events" / f"{DAY2}.parquet")
    with pytest.raises(IngestError):
        load(landing, db, DAY2, folder / "events" / f"{DAY2}.parquet")
    with warehouse.connect(db, read_only=True) as con:
        rows = con.execute("SELECT source_row, reason, raw FROM rejected_events ORDER BY source_row").fetchall()
    assert [r[0] for r in rows] == [3, 10]  # 1-based row numbers in the file
    assert "treatment: unknown treatment (9" in rows[0][1]
    assert rows[1][1] == "response: missing"  # pandas NaN is written to parquet as null
    assert '"user_id":"u0002"' in rows[0][2]


def test_tolerated_rejections_load_the_valid_rows(tmp_path):
    landing = tmp_path / "landing"
    folder = write_campaign(
        landing, yaml_text="treatments:\n  levels: [0, 1, 2, 5]\nmax_rejected_fraction: 0.1\n"
    )
    frame = good_frame(seed=4)
    frame.loc[0, "treatment"] = 3
    path = folder / "events" / f"{DAY1}.parquet"
    frame.to_parquet(path)
    result = load(landing, tmp_path / "w.duckdb", DAY1, path)
    assert (result.rows_loaded, result.rows_rejected) == (49, 1)


def test_arms_campaign_and_unknown_arm(tmp_path):
    landing = tmp_path / "landing"
    folder = write_campaign(
        landing, yaml_text='treatments:\n  arms: {"No E-Mail": 0, "Mens E-Mail": 1}\ncost: assigned\nresponse: continuous\n'
    )
    frame = pd.DataFrame({"user_id": ["a", "b", "c"], "treatment": ["No E-Mail", "Mens E-Mail", "Mens E-Mail"],
                          "response": [0.0, 12.5, 3.0]})
    frame.to_csv(folder / "events" / f"{DAY1}.csv", index=False)
    result = load(landing, tmp_path / "w.duckdb", DAY1, folder / "events" / f"{DAY1}.csv")
    assert result.level_counts == {0: 1, 1: 2}
    frame.loc[1, "treatment"] = "Womens E-Mail"
    frame.to_csv(folder / "events" / f"{DAY2}.csv", index=False)
    with pytest.raises(IngestError, match="unknown treatment .*Womens E-Mail"):
        load(landing, tmp_path / "w.duckdb", DAY2, folder / "events" / f"{DAY2}.csv")


def test_unreadable_file_and_bad_config(tmp_path):
    landing = tmp_path / "landing"
    folder = write_campaign(landing)
    path = folder / "events" / f"{DAY1}.parquet"
    path.write_bytes(b"this is not parquet")
    with pytest.raises(IngestError, match="cannot be read as parquet"):
        load(landing, tmp_path / "w.duckdb", DAY1, path)
    with pytest.raises(CampaignConfigError, match="strictly ascending"):
        CampaignConfig.from_dict({"treatments": {"levels": [0, 2, 1]}}, campaign="x")
    with pytest.raises(CampaignConfigError, match="budget_per_capita.*greater than 0"):
        CampaignConfig.from_dict({"treatments": {"levels": [0, 1]}, "budget_per_capita": -1}, campaign="x")


def test_discovery_and_change_detection(setup):
    landing, folder, _ = setup
    assert discover_campaigns(landing) == ["c1"]
    assert list(day_files(landing, "c1")) == [DAY1]
    before = landing_inventory(landing)
    assert landing_changes({}, before) == (["c1"], [("c1", DAY1.isoformat())])
    good_frame(seed=5).to_parquet(folder / "events" / f"{DAY2}.parquet")
    assert landing_changes(before, landing_inventory(landing)) == ([], [("c1", DAY2.isoformat())])
    (folder / "events" / f"{DAY2}.csv").write_text("user_id,treatment,response\n")
    assert list(day_files(landing, "c1")) == [DAY1]  # two files for DAY2: that day is skipped, DAY1 stays
