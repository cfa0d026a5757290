"""Merchant-side ingestion (promo_assets.ingestion.merchants): the merchants: block of campaign.yaml
and the validated, atomic, idempotent load of one merchants/<day> file into merchant_events."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promo_assets.store import warehouse
from promo_assets.config.campaign import CampaignConfigError
from promo_assets.ingestion import IngestError
from promo_assets.ingestion.merchants import (
    clear_merchants_day,
    ingest_merchants_day,
    merchant_config,
)

DAY1, DAY2 = dt.date(2026, 3, 1), dt.date(2026, 3, 2)
COMMISSIONS = [0, 25, 50, 75, 100]
YAML = ("treatments:\n  levels: [0, 1, 2]\nresponse: binary\n"
        "merchants:\n  treatments:\n    levels: [0, 25, 50, 75, 100]\n{extra}")


def write_campaign(landing: Path, extra: str = "", body: str | None = None) -> Path:
    folder = landing / "shop"
    (folder / "merchants").mkdir(parents=True, exist_ok=True)
    (folder / "campaign.yaml").write_text(body if body is not None else YAML.format(extra=extra))
    return folder


def merchant_frame(n: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "merchant_id": [f"m{i:03d}" for i in range(n)],
        "treatment": rng.choice(COMMISSIONS, n).astype(float),
        "response": rng.poisson(2.0, n).astype(float),
        "prev_shares": rng.poisson(5.0, n).astype(float),
        "region": rng.choice(["north", "south"], n),
    })


@pytest.fixture
def shop(tmp_path):
    landing = tmp_path / "landing"
    folder = write_campaign(landing)
    path = folder / "merchants" / f"{DAY1}.parquet"
    merchant_frame().to_parquet(path)
    return landing, folder, path, tmp_path / "w.duckdb"


def load(landing: Path, db: Path, day, path: Path):
    _, mconf = merchant_config(landing, "shop")
    with warehouse.connect(db) as con:
        return ingest_merchants_day(con, "shop", day, path, mconf)


def table(db: Path) -> pd.DataFrame:
    with warehouse.connect(db) as con:
        return con.execute("SELECT * FROM merchant_events ORDER BY event_date, source_row").df()


def log(db: Path) -> list[tuple]:
    with warehouse.connect(db) as con:
        return con.execute("SELECT event_date, rows_loaded, rows_rejected, status, message FROM ingest_log "
                           "WHERE table_name = 'merchant_events' ORDER BY ingested_at").fetchall()


def test_good_file_loads_with_levels_cost_and_features(shop):
    landing, _, path, db = shop
    frame = merchant_frame()
    result = load(landing, db, DAY1, path)
    assert result.rows_loaded == len(frame) and result.rows_rejected == 0 and result.event_date == DAY1
    assert list(result.features) == ["prev_shares", "region"]
    expected_levels = pd.Series(frame["treatment"].map({float(c): i for i, c in enumerate(COMMISSIONS)}))
    assert result.level_counts == expected_levels.value_counts().sort_index().to_dict()
    rows = table(db)
    assert len(rows) == len(frame)
    assert (rows["merchant_id"].to_numpy() == frame["merchant_id"].to_numpy()).all()
    assert (rows["level"].to_numpy() == expected_levels.to_numpy()).all()
    assert np.allclose(rows["incentive"], frame["treatment"])
    assert np.allclose(rows["cost"], frame["treatment"] * frame["response"])  # merchants.cost: redeemed (default)
    assert rows["propensity"].isna().all()
    first = json.loads(rows["features"].iloc[0])
    assert first == {"prev_shares": frame["prev_shares"].iloc[0], "region": frame["region"].iloc[0]}
    assert log(db) == [(DAY1, len(frame), 0, "loaded", None)]


def test_reloading_replaces_the_partition(shop):
    landing, folder, path, db = shop
    load(landing, db, DAY1, path)
    other = folder / "merchants" / f"{DAY2}.parquet"
    merchant_frame(n=10, seed=1).to_parquet(other)
    load(landing, db, DAY2, other)
    before = table(db)
    load(landing, db, DAY1, path)
    after = table(db)
    assert len(after) == len(before) == 50
    pd.testing.assert_frame_equal(after, before)
    assert [r[3] for r in log(db)] == ["loaded", "loaded", "loaded"]


@pytest.mark.parametrize(
    "mutate, column, words",
    [
        (lambda f: f.assign(treatment=f["treatment"].where(f.index != 3, 33.0)), "'treatment'",
         ["commission level", "'33.0'", "first at row 4"]),
        (lambda f: f.drop(columns="response"), "'response'", ["missing required column"]),
        (lambda f: f.assign(response=f["response"].where(f.index != 0, -1.0)), "'response'", ["negative", "row 1"]),
        (lambda f: f.assign(merchant_id=f["merchant_id"].where(f.index != 5, None)), "'merchant_id'", ["missing"]),
    ],
    ids=["unknown_commission", "missing_column", "negative_response", "missing_merchant_id"],
)
def test_bad_file_fails_names_file_and_column_and_leaves_table_unchanged(shop, mutate, column, words):
    landing, folder, path, db = shop
    load(landing, db, DAY1, path)
    before = table(db)
    bad = folder / "merchants" / f"{DAY1}.parquet"
    mutate(merchant_frame()).to_parquet(bad)
    with pytest.raises(IngestError) as err:
        load(landing, db, DAY1, bad)
    message = str(err.value)
    assert str(bad) in message and column in message, message
    for word in words:
        assert word in message, message
    pd.testing.assert_frame_equal(table(db), before)
    last = log(db)[-1]
    assert last[1] == 0 and last[3] == "failed" and last[4] == message


def test_cost_column_rule_requires_the_column(tmp_path):
    landing = tmp_path / "landing"
    folder = write_campaign(landing, extra="  cost: column\n")
    path = folder / "merchants" / f"{DAY1}.csv"
    merchant_frame().to_csv(path, index=False)
    with pytest.raises(IngestError, match=r"missing column 'cost' \(campaign.yaml says merchants.cost: column\)"):
        load(landing, tmp_path / "w.duckdb", DAY1, path)
    frame = merchant_frame().assign(cost=1.5)
    frame.to_csv(path, index=False)
    result = load(landing, tmp_path / "w.duckdb", DAY1, path)
    assert result.rows_loaded == len(frame)
    assert np.allclose(table(tmp_path / "w.duckdb")["cost"], 1.5)


def test_empty_file_and_clear_day(shop):
    landing, folder, path, db = shop
    load(landing, db, DAY1, path)
    empty = folder / "merchants" / f"{DAY2}.parquet"
    merchant_frame().iloc[:0].to_parquet(empty)
    with pytest.raises(IngestError, match="the file has no rows"):
        load(landing, db, DAY2, empty)
    assert len(table(db)) == 40
    with warehouse.connect(db) as con:
        clear_merchants_day(con, "shop", DAY1.isoformat())
    assert table(db).empty


def test_campaign_without_merchants_block(tmp_path):
    landing = tmp_path / "landing"
    folder = write_campaign(landing, body="treatments:\n  levels: [0, 1, 2]\n")
    path = folder / "merchants" / f"{DAY1}.parquet"
    merchant_frame().to_parquet(path)
    config, mconf = merchant_config(landing, "shop")
    assert not mconf.present and mconf.commissions is None and config.n_levels == 3
    with pytest.raises(IngestError, match="has no merchants: block"):
        load(landing, tmp_path / "w.duckdb", DAY1, path)


@pytest.mark.parametrize(
    "block, words",
    [
        ("merchants:\n  treatments:\n    levels: [50, 25]\n", "merchants.treatments.levels"),
        ("merchants:\n  treatments:\n    levels: [10]\n", "merchants.treatments.levels"),
        ("merchants:\n  treatments:\n    levels: [0, 5]\n  cost: free\n", "merchants.cost"),
    ],
)
def test_bad_merchants_block_raises_campaign_config_error(tmp_path, block, words):
    landing = tmp_path / "landing"
    write_campaign(landing, body="treatments:\n  levels: [0, 1, 2]\n" + block)
    with pytest.raises(CampaignConfigError, match=words) as err:
        merchant_config(landing, "shop")
    assert "campaign.yaml" in str(err.value)
    assert not isinstance(err.value, IngestError)
