"""The code location's resources against a temporary warehouse, landing folder and artefact store,
and the ingestion asset materialized with test resources (no settings involved)."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pandas as pd
import pytest

from promo_assets.store import artifacts
from promo_assets.store import warehouse
from promo_assets.defs.resources import ArtifactStoreResource, LandingResource, WarehouseResource
from promo_assets.store.warehouse import WarehouseError, quote_ident
from tests.unit.ingestion.test_ingestion import good_frame, write_campaign

CAMPAIGN = "c1"
DAY = "2026-03-01"


def propensity_frame(n: int = 3) -> pd.DataFrame:
    """Rows of the `propensity` table after its campaign / version columns (sql/frames.sql insert_propensity)."""
    return pd.DataFrame({
        "event_date": [dt.date(2026, 3, 1)] * n,
        "source_row": list(range(n)),
        "propensity": [0.25, 0.5, 1.0][:n],
        "source": ["logged"] * n,
    })


def stored(res: WarehouseResource) -> pd.DataFrame:
    return res.read_df("meta", "campaign_rows", [CAMPAIGN], table=quote_ident("propensity"))


@pytest.fixture
def res(tmp_path) -> WarehouseResource:
    return WarehouseResource(path=str(tmp_path / "w.duckdb"))


def test_typed_write_then_read_round_trip(res):
    res.write_df("frames", "insert_propensity", propensity_frame(), [CAMPAIGN, "v1"])
    back = stored(res)
    assert list(back.columns) == ["campaign", "propensity_version", "event_date", "source_row", "propensity", "source", "created_at"]
    expected = propensity_frame()
    assert back["source_row"].tolist() == expected["source_row"].tolist()
    assert back["propensity"].tolist() == expected["propensity"].tolist()
    assert [d.date() for d in pd.to_datetime(back["event_date"])] == expected["event_date"].tolist()
    assert set(back["campaign"]) == {CAMPAIGN} and set(back["propensity_version"]) == {"v1"}
    rows = res.read_rows("meta", "campaign_rows", [CAMPAIGN], table=quote_ident("propensity"))
    assert [r[:6] for r in rows] == [(CAMPAIGN, "v1", dt.date(2026, 3, 1), i, p, "logged")
                                     for i, p in enumerate(expected["propensity"])]


def test_transaction_commits_every_statement_of_the_block(res):
    with res.transaction() as con:
        res.write_df("frames", "insert_propensity", propensity_frame(2), [CAMPAIGN, "v1"], con=con)
        res.write_df("frames", "insert_propensity", propensity_frame(1), [CAMPAIGN, "v2"], con=con)
    assert sorted(stored(res)["propensity_version"]) == ["v1", "v1", "v2"]


def test_transaction_rolls_back_when_the_block_raises(res):
    res.write_df("frames", "insert_propensity", propensity_frame(1), [CAMPAIGN, "kept"])
    with pytest.raises(RuntimeError, match="stop here"):
        with res.transaction() as con:
            res.write_df("frames", "insert_propensity", propensity_frame(3), [CAMPAIGN, "lost"], con=con)
            res.read_rows("frames", "delete_campaign", [CAMPAIGN], table=quote_ident("propensity"), con=con)
            raise RuntimeError("stop here")
    assert stored(res)["propensity_version"].tolist() == ["kept"]  # neither the insert nor the delete stayed


def test_a_write_that_fails_midway_stores_nothing(res):
    bad = propensity_frame()
    bad.loc[2, "propensity"] = None  # NOT NULL column: the statement fails after reading two good rows
    with pytest.raises(WarehouseError, match=r"sql/frames.sql insert_propensity: .*propensity"):
        res.write_df("frames", "insert_propensity", bad, [CAMPAIGN, "v1"])
    assert stored(res).empty


@pytest.mark.hostile
@pytest.mark.parametrize("case", [
    "error-frame-name-is-a-table", "error-frame-name-already-registered", "error-missing-table",
    "error-missing-statement", "error-missing-parameter", "error-read-only-before-the-warehouse-exists",
])
def test_bad_use_is_refused_by_name(res, case):
    frame = propensity_frame()
    if case == "error-frame-name-is-a-table":
        # registered as `propensity`, the frame would hide the table it is meant to be inserted into
        with pytest.raises(WarehouseError, match="cannot register a data frame as 'propensity': the warehouse already has a table"):
            res.write_df("frames", "insert_propensity", frame, [CAMPAIGN, "v1"], frame_name="propensity")
    elif case == "error-frame-name-already-registered":
        with res.connect() as con, warehouse.registered(con, "frame_df", frame):
            with pytest.raises(WarehouseError, match="cannot register a data frame as 'frame_df'"):
                res.write_df("frames", "insert_propensity", frame, [CAMPAIGN, "v1"], con=con)
    elif case == "error-missing-table":
        with pytest.raises(WarehouseError, match=r"sql/meta.sql campaign_rows: .*no_such_table does not exist"):
            res.read_df("meta", "campaign_rows", [CAMPAIGN], table=quote_ident("no_such_table"))
    elif case == "error-missing-statement":
        with pytest.raises(KeyError, match=r"no statement '-- name: no_such_statement' in sql/meta.sql"):
            res.read_rows("meta", "no_such_statement")
    elif case == "error-missing-parameter":
        with pytest.raises(WarehouseError, match=r"sql/meta.sql campaign_rows: .*parameters"):
            res.read_rows("meta", "campaign_rows", [], table=quote_ident("propensity"))
    else:
        with pytest.raises(FileNotFoundError, match=f"warehouse {res.path} does not exist yet"):
            with res.connect(read_only=True):
                pass
    if case != "error-read-only-before-the-warehouse-exists":
        assert stored(res).empty  # nothing half-written


def test_unset_locations_follow_the_settings_when_the_run_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMO_WAREHOUSE", str(tmp_path / "first.duckdb"))
    monkeypatch.setenv("PROMO_LANDING_DIR", str(tmp_path / "landing"))
    monkeypatch.setenv("PROMO_ARTIFACTS_DIR", str(tmp_path / "store"))
    configured = WarehouseResource(path=str(tmp_path / "configured.duckdb"))
    with dg.build_resources({"warehouse": WarehouseResource(), "landing": LandingResource(),
                             "artifacts": ArtifactStoreResource(), "configured": configured}) as r:
        monkeypatch.setenv("PROMO_WAREHOUSE", str(tmp_path / "second.duckdb"))  # changed mid-run: not followed
        assert r.warehouse.database == str(tmp_path / "first.duckdb")
        assert r.landing.path == tmp_path / "landing" and r.artifacts.path == tmp_path / "store"
        assert r.configured.database == str(tmp_path / "configured.duckdb")
    assert WarehouseResource().database == str(tmp_path / "second.duckdb")  # the next run reads it again


def test_artifact_store_resource_saves_and_loads_under_its_root(tmp_path):
    store = ArtifactStoreResource(root=str(tmp_path / "store"))
    version, path = store.save_object({"weights": [1.0, 2.0]}, "test_model")
    assert path == tmp_path / "store" / "test_model" / f"{version}.bin"
    assert store.load_object("test_model", version) == {"weights": [1.0, 2.0]}
    assert store.save_bytes(b"abc", "raw") == (artifacts.content_version(b"abc"), tmp_path / "store" / "raw" / f"{artifacts.content_version(b'abc')}.bin")
    assert store.load_bytes("raw", artifacts.content_version(b"abc")) == b"abc"
    with pytest.raises(FileNotFoundError, match=f"artefact {tmp_path / 'store' / 'raw' / '0000000000000000.bin'} not found"):
        store.load_bytes("raw", "0000000000000000")


# --------------------------------------------------------------------------------------------
# rct_events with test resources


@pytest.fixture
def test_resources(tmp_path, promo_env):
    """Resources on a folder of their own: the settings (promo_env's PROMO_* paths) must not be used."""
    landing = tmp_path / "own_landing"
    folder = write_campaign(landing, CAMPAIGN)
    good_frame(n=40, seed=1).to_parquet(folder / "events" / f"{DAY}.parquet")
    return {"warehouse": WarehouseResource(path=str(tmp_path / "own.duckdb")), "landing": LandingResource(root=str(landing))}


def materialize_rct_events(resources, instance) -> dg.ExecuteInProcessResult:
    from promo_assets.defs.ingestion.assets import rct_events

    instance.add_dynamic_partitions("campaign", [CAMPAIGN])
    return dg.materialize([rct_events], resources=resources, instance=instance, raise_on_error=False,
                          partition_key=CAMPAIGN)


def test_rct_events_materialized_with_test_resources(test_resources, promo_env):
    with dg.instance_for_test() as instance:
        for loaded in (1, 0):  # the second run finds the file unchanged: nothing loaded again
            result = materialize_rct_events(test_resources, instance)
            assert result.success
            [mat] = result.asset_materializations_for_node("rct_events")
            assert mat.metadata["days_loaded_now"].value == loaded and mat.metadata["days_unchanged"].value == 1 - loaded
            assert mat.metadata["rows_loaded_now"].value == 40 * loaded and mat.metadata["rows_rejected_now"].value == 0
            [day] = [r.data for r in mat.metadata["days"].value.records]
            assert day["file"].endswith(f"own_landing/{CAMPAIGN}/events/{DAY}.parquet") and day["rows"] == 40
            checks = result.get_asset_check_evaluations()
            assert len(checks) == 5 and all(c.passed for c in checks)
            rows = test_resources["warehouse"].read_df("meta", "campaign_rows", [CAMPAIGN], table=quote_ident("rct_events"))
            assert len(rows) == 40 and set(rows["user_id"]) == {f"u{i:04d}" for i in range(40)}
    assert not promo_env["warehouse"].exists()  # PROMO_WAREHOUSE was never opened


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-no-file-for-the-day"])
def test_rct_events_without_a_day_file_fails_naming_it(test_resources, case):
    (test_resources["landing"].path / CAMPAIGN / "events" / f"{DAY}.parquet").unlink()
    with dg.instance_for_test() as instance:
        result = materialize_rct_events(test_resources, instance)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert f"campaign '{CAMPAIGN}' has no events loaded: no events day file under" in message
    assert str(test_resources["landing"].path / CAMPAIGN / "events") in message
