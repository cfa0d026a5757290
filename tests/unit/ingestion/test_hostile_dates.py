"""Day files with bad or unusual dates, deleted day files and a feature present on some days only
(issue #12 items 8 and 6): one file never blocks its campaign, the others or the landing sensor;
the warehouse and the Dagster partitions follow the landing folder; the feature set is the one of
the partitions currently loaded."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest

from promo_assets.cli.main import main
from promo_assets.ingestion import scan_day_files, today_utc
from promo_assets.defs.common import LandingResource
from tests.conftest import train_only
from tests.unit.ingestion.test_ingestion import good_frame, write_campaign


def landing_resource(root) -> dict:
    """The `landing` resource the sensor and the schedule take, on the test's landing folder."""
    return {"landing": LandingResource(root=str(root))}

DAY1, DAY2 = "2026-03-01", "2026-03-02"
TODAY = today_utc()

# (id, file name, what the skip message must say) — each file lies next to a good DAY1 file
BAD_FILES = [
    ("error-not-a-day-file", "notadate.csv", "not a day file (expected YYYY-MM-DD.parquet"),
    ("error-wrong-extension", f"{DAY2}.json", "not a day file"),
    ("error-invalid-date", "2026-13-45.parquet", "'2026-13-45' is not a valid date"),
    ("error-february-30", "2026-02-30.csv", "'2026-02-30' is not a valid date"),
    ("error-tomorrow", f"{TODAY + dt.timedelta(days=1)}.parquet", f"dated in the future (today is {TODAY}, UTC)"),
    ("error-far-future", "2999-12-31.parquet", "dated in the future"),
    ("error-before-partitions-start", "2026-02-28.parquet", "dated before PROMO_PARTITIONS_START=2026-03-01"),
]


def write_day(folder, name: str, seed: int = 0) -> None:
    path = folder / "events" / name
    if name.endswith(".csv"):
        good_frame(seed=seed).to_csv(path, index=False)
    else:
        good_frame(seed=seed).to_parquet(path)


@pytest.fixture
def two_campaigns(promo_env, monkeypatch):
    monkeypatch.setenv("PROMO_PARTITIONS_START", DAY1)
    c1 = write_campaign(promo_env["landing"], "c1")
    write_day(c1, f"{DAY1}.parquet", seed=1)
    c2 = write_campaign(promo_env["landing"], "c2")
    write_day(c2, f"{DAY1}.parquet", seed=2)
    return c1


def rct_days(promo_env) -> list[tuple[str, str]]:
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        rows = con.execute("SELECT DISTINCT campaign, CAST(event_date AS VARCHAR) FROM rct_events ORDER BY 1, 2").fetchall()
    return [tuple(r) for r in rows]


def materialized(asset: str = "rct_events") -> set[str]:
    return set(dg.DagsterInstance.get().get_materialized_partitions(dg.AssetKey(asset)))


@pytest.mark.hostile
@pytest.mark.parametrize("name,expected", [(n, e) for _, n, e in BAD_FILES], ids=[i for i, _, _ in BAD_FILES])
def test_bad_day_file_is_skipped_by_name_and_the_rest_proceeds(two_campaigns, promo_env, capfd, name, expected):
    from promo_assets.defs.automation.jobs import landing_sensor

    write_day(two_campaigns, name)
    scan = scan_day_files(promo_env["landing"], "c1")
    assert [str(s) for s in scan.skipped] == [f"{two_campaigns / 'events' / name}: {scan.skipped[0].reason}"]
    assert expected in scan.skipped[0].reason
    assert list(scan.files) == [dt.date.fromisoformat(DAY1)]

    # the landing sensor does not raise, requests every good day of both campaigns and warns by name
    with dg.instance_for_test() as instance:
        result = landing_sensor(dg.build_sensor_context(resources=landing_resource(promo_env["landing"]), instance=instance))
    assert sorted(str(r.partition_key) for r in result.run_requests) == ["c1", "c2"]  # one run per campaign
    assert [r.partition_keys for r in result.dynamic_partitions_requests] == [["c1", "c2"]]
    assert f"WARNING - skipped landing file {two_campaigns / 'events' / name}: " in capfd.readouterr().err

    # promo run: one line naming the file and the rule; the other days and campaigns are loaded
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    err = capfd.readouterr().err
    assert f"c1: skipped {two_campaigns / 'events' / name}: " in err and expected in err
    assert rct_days(promo_env) == [("c1", DAY1), ("c2", DAY1)]
    assert materialized() == {"c1", "c2"}  # campaigns are the partitions; their days are rows
    assert dg.DagsterInstance.get().get_dynamic_partitions("campaign") == ["c1", "c2"]


@pytest.mark.hostile
@pytest.mark.parametrize("suffixes", [("csv", "parquet")], ids=["error-two-files-for-one-day"])
def test_two_files_for_one_day_skip_that_day_only(two_campaigns, promo_env, capsys, suffixes):
    for suffix in suffixes:
        write_day(two_campaigns, f"{DAY2}.{suffix}")
    assert main(["run", "--campaign", "c1", "--ingest-only", "--no-progress"]) == 0
    err = capsys.readouterr().err
    for suffix in suffixes:
        assert f"{DAY2}.{suffix}: two files for {DAY2} ({DAY2}.csv and {DAY2}.parquet); keep one" in err
    assert rct_days(promo_env) == [("c1", DAY1)]


@pytest.mark.hostile
@pytest.mark.parametrize(
    "name,loaded",
    [(f"{TODAY}.parquet", True), ("1999-12-31.csv", True), (".DS_Store", False)],
    ids=["accepted-dated-today", "accepted-long-ago-without-partitions-start", "accepted-hidden-file-ignored"],
)
def test_documented_accepted_day_files(promo_env, capsys, name, loaded):
    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    if name.startswith("."):
        (folder / "events" / name).write_bytes(b"\x00junk")
    else:
        write_day(folder, name, seed=3)
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    assert "skipped" not in capsys.readouterr().err
    day = name.split(".")[0]
    assert ((("c1", day) in rct_days(promo_env)) is loaded) and ("c1", DAY1) in rct_days(promo_env)
    assert materialized() == {"c1"}


def test_bad_partitions_start_setting_is_a_usage_error(promo_env, monkeypatch, capsys):
    write_day(write_campaign(promo_env["landing"], "c1"), f"{DAY1}.parquet")
    monkeypatch.setenv("PROMO_PARTITIONS_START", "2026-3-1x")
    assert main(["run", "--ingest-only", "--no-progress"]) == 2
    assert "PROMO_PARTITIONS_START='2026-3-1x' is not a date (YYYY-MM-DD)" in capsys.readouterr().err


def test_sensor_warns_once_per_skipped_file_and_about_removed_files(promo_env, capfd):
    from promo_assets.defs.automation.jobs import landing_sensor

    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    write_day(folder, f"{DAY2}.parquet")
    (folder / "events" / "notadate.csv").write_text("x\n")
    with dg.instance_for_test() as instance:
        first = landing_sensor(dg.build_sensor_context(resources=landing_resource(promo_env["landing"]), instance=instance))
        assert capfd.readouterr().err.count("notadate.csv") == 1
        (folder / "events" / f"{DAY2}.parquet").unlink()
        second = landing_sensor(dg.build_sensor_context(resources=landing_resource(promo_env["landing"]), instance=instance, cursor=first.cursor))
    err = capfd.readouterr().err
    assert "notadate.csv" not in err  # already reported
    assert f"campaign 'c1' day {DAY2} is gone" in err and f"promo forget --campaign c1 --day {DAY2}" in err
    assert second.run_requests == [] and "1 landing file(s) skipped" in second.skip_reason.skip_message


@pytest.mark.hostile
@pytest.mark.parametrize("kind", ["edges", "population"], ids=["error-bad-edges-file-name", "error-bad-population-file-name"])
def test_bad_file_names_in_other_folders_are_named_too(promo_env, capfd, kind):
    from promo_assets.defs.automation.jobs import landing_sensor

    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    (folder / kind).mkdir()
    (folder / kind / "2026-3-1.parquet").write_text("x")
    with dg.instance_for_test() as instance:
        landing_sensor(dg.build_sensor_context(resources=landing_resource(promo_env["landing"]), instance=instance))
    assert f"skipped landing file {folder / kind / '2026-3-1.parquet'}: not a day file" in capfd.readouterr().err
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    assert f"c1: skipped {folder / kind / '2026-3-1.parquet'}: not a day file" in capfd.readouterr().err
    assert rct_days(promo_env) == [("c1", DAY1)]


def test_sensor_reads_a_cursor_of_the_earlier_format(promo_env):
    from promo_assets.ingestion import landing_inventory
    from promo_assets.defs.automation.jobs import landing_sensor

    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet")
    import json

    old_cursor = json.dumps(landing_inventory(promo_env["landing"]))
    write_day(folder, f"{DAY2}.parquet")
    with dg.instance_for_test() as instance:
        result = landing_sensor(dg.build_sensor_context(resources=landing_resource(promo_env["landing"]), instance=instance, cursor=old_cursor))
    assert [str(r.partition_key) for r in result.run_requests] == ["c1"]


# --------------------------------------------------------------------------------------------
# deleted day files: promo run forgets them, promo forget does it on demand


def with_extra(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(extra=np.linspace(0.0, 1.0, len(frame)))


def test_deleted_day_file_is_forgotten_by_promo_run(promo_env, capsys):
    folder = write_campaign(promo_env["landing"], "c1")
    write_day(folder, f"{DAY1}.parquet", seed=1)
    with_extra(good_frame(seed=2)).to_parquet(folder / "events" / f"{DAY2}.parquet")  # 'extra' on DAY2 only
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        from promo_assets.ingestion import loaded_features

        assert "extra" in loaded_features(con, "c1")
        assert con.execute("SELECT count(extra) FILTER (WHERE event_date = ?), count(extra) FROM rct_events",
                           [DAY1]).fetchone() == (0, 50)  # NULL on the day without the column
    assert materialized() == {"c1"}

    (folder / "events" / f"{DAY2}.parquet").unlink()
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"c1: forgot {DAY2} (its events file is gone from the landing folder): removed 50 rct_events" in out
    assert rct_days(promo_env) == [("c1", DAY1)]
    # the UI shows the day as forgotten in rct_events' days table
    instance = dg.DagsterInstance.get()
    days = instance.get_latest_materialization_event(dg.AssetKey("rct_events")).asset_materialization.metadata["days"]
    assert [(r.data["day"], r.data["status"]) for r in days.value.records] == [(DAY1, "unchanged"), (DAY2, "forgotten")]
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        from promo_assets.ingestion import loaded_features

        assert "extra" not in loaded_features(con, "c1")
        assert con.execute("SELECT feature FROM campaign_features WHERE feature = 'extra'").fetchall() == []
        log = con.execute("SELECT status, message FROM ingest_log WHERE event_date = ? ORDER BY ingested_at", [DAY2]).fetchall()
    assert log[-1][0] == "forgotten" and "features no longer loaded: extra" in log[-1][1]
    # the file comes back: it is loaded again like a new one
    with_extra(good_frame(seed=2)).to_parquet(folder / "events" / f"{DAY2}.parquet")
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    assert rct_days(promo_env) == [("c1", DAY1), ("c1", DAY2)]


def test_promo_forget_removes_rows_rejected_rows_and_the_partition(promo_env, capsys):
    c1 = write_campaign(promo_env["landing"], "c1")
    c2 = write_campaign(promo_env["landing"], "c2")
    for folder, seed in ((c1, 1), (c2, 2)):
        write_day(folder, f"{DAY1}.parquet", seed=seed)
        write_day(folder, f"{DAY2}.parquet", seed=seed + 10)
    bad = good_frame(seed=5)
    bad.loc[3, "treatment"] = 7  # not on the grid: DAY2 of c1 fails, its rejected row is kept
    bad.to_parquet(c1 / "events" / f"{DAY2}.parquet")
    assert main(["run", "--ingest-only", "--no-progress"]) == 1
    capsys.readouterr()
    # the file is still there: refused
    assert main(["forget", "--campaign", "c1", "--day", DAY2]) == 2
    err = capsys.readouterr().err
    assert str(c1 / "events" / f"{DAY2}.parquet") in err and "still in the landing folder" in err

    (c1 / "events" / f"{DAY2}.parquet").unlink()
    (c1 / "events" / f"{DAY1}.parquet").unlink()
    assert main(["forget", "--campaign", "c1", "--day", DAY1, "--day", DAY2]) == 0
    out = capsys.readouterr().out
    assert f"c1: forgot {DAY1} (promo forget): removed 50 rct_events, 0 rejected_events" in out
    assert f"c1: forgot {DAY2} (promo forget): removed 0 rct_events, 1 rejected_events" in out
    assert "promo run --campaign c1" in out
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM rejected_events WHERE campaign = 'c1'").fetchone()[0] == 0
    assert rct_days(promo_env) == [("c2", DAY1), ("c2", DAY2)]  # the other campaign is untouched
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:  # the ledger forgot them too
        ledger = con.execute("SELECT campaign, count(*) FROM landing_files GROUP BY 1 ORDER BY 1").fetchall()
    assert ledger == [("c2", 2)]


@pytest.mark.hostile
@pytest.mark.parametrize(
    "argv,message",
    [
        (["forget", "--campaign", "c1", "--day", "2026-02-15"], "campaign 'c1' has nothing loaded for 2026-02-15 (loaded days: 2026-03-01)"),
        (["forget", "--campaign", "nope", "--day", DAY1], "campaign 'nope' has nothing loaded for 2026-03-01 (loaded days: none)"),
        (["forget", "--campaign", "c1", "--day", DAY1], f"{DAY1}.parquet is still in the landing folder"),
    ],
    ids=["error-forget-day-not-loaded", "error-forget-unknown-campaign", "error-forget-file-still-there"],
)
def test_promo_forget_refuses_what_it_cannot_do(promo_env, capsys, argv, message):
    write_day(write_campaign(promo_env["landing"], "c1"), f"{DAY1}.parquet")
    assert main(["run", "--ingest-only", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert rct_days(promo_env) == [("c1", DAY1)]


def test_promo_forget_without_a_warehouse(promo_env, capsys):
    assert main(["forget", "--campaign", "c1", "--day", DAY1]) == 2
    assert "no warehouse at" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# the feature set follows the loaded partitions


def test_loaded_features_follow_reloaded_partitions(tmp_path):
    from promo_assets.store import warehouse
    from promo_assets.ingestion import ingest_events_day, load_config, loaded_features

    landing = tmp_path / "landing"
    folder = write_campaign(landing)
    day = dt.date.fromisoformat(DAY1)
    with_extra(good_frame()).to_parquet(folder / "events" / f"{DAY1}.parquet")
    with warehouse.connect(tmp_path / "w.duckdb") as con:
        config = load_config(landing, "c1")
        ingest_events_day(con, config, day, folder / "events" / f"{DAY1}.parquet")
        assert loaded_features(con, "c1") == {"age": "numeric", "city": "categorical", "extra": "numeric"}
        good_frame().to_parquet(folder / "events" / f"{DAY1}.parquet")  # replaced without 'extra'
        ingest_events_day(con, config, day, folder / "events" / f"{DAY1}.parquet")
        assert loaded_features(con, "c1") == {"age": "numeric", "city": "categorical"}
        # the freed name may now come back with another kind
        good_frame().assign(extra=["x"] * 50).to_parquet(folder / "events" / f"{DAY1}.parquet")
        with pytest.raises(Exception, match="extra"):  # rct_events still stores 'extra' as DOUBLE: named
            ingest_events_day(con, config, day, folder / "events" / f"{DAY1}.parquet")


def test_encoder_handles_features_null_on_some_or_all_rows():
    from promo_assets.models.encoder import FeatureEncoder

    frame = pd.DataFrame({"x": [1.0, np.nan, 3.0, np.nan], "only_later": [np.nan] * 4,
                          "c": ["a", None, "b", None], "c_none": [None] * 4})
    enc = FeatureEncoder(["x", "only_later"], ["c", "c_none"]).fit(frame)
    x_num, x_cat = enc.transform(frame)
    assert np.isfinite(x_num).all() and x_num.shape == (4, 4)  # 2 standardized + 2 missing indicators
    assert x_cat[:, 1].tolist() == [0, 0, 0, 0] and x_cat[:, 0].tolist() == [1, 0, 2, 0]
    later = pd.DataFrame({"x": [2.0], "only_later": [5.0], "c": ["a"], "c_none": ["z"]})
    assert np.isfinite(enc.transform(later)[0]).all()


def latest_s_learner_features(promo_env) -> list[str]:
    from promo_assets.models import load_model

    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        version = con.execute("SELECT arg_max(model_version, trained_at) FROM model_registry WHERE model = 's_learner'").fetchone()[0]
    return load_model(version).encoder.numeric


@pytest.mark.slow
def test_feature_on_one_day_only_then_deleted_keeps_the_campaign_running(promo_env, monkeypatch, capsys):
    """The pipeline's handling of a feature column, not what the models learn from it: the model whose
    encoder is checked (s_learner) and a LightGBM one (NULLs passed through as missing), one epoch."""
    start = dt.date(2026, 3, 1)
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")
    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "4", "--users", "300",
                 "--seed", "1", "--start", start.isoformat()]) == 0
    train_only(promo_env["landing"] / "demo" / "campaign.yaml", ("s_learner", "lgbm_s"))
    day2 = promo_env["landing"] / "demo" / "events" / f"{start + dt.timedelta(days=1)}.parquet"
    with_extra(pd.read_parquet(day2)).to_parquet(day2)
    assert main(["run", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "downstream done" in out
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        per_day = con.execute("SELECT count(extra) > 0 FROM rct_events GROUP BY event_date ORDER BY event_date").fetchall()
        assert [r[0] for r in per_day] == [False, True, False, False]
        assert con.execute("SELECT count(*) FROM response_coefficients WHERE isnan(response)").fetchone()[0] == 0
    assert "extra" in latest_s_learner_features(promo_env)
    day2.unlink()
    assert main(["run", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"demo: forgot {start + dt.timedelta(days=1)}" in out and "downstream done" in out
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        assert con.execute("SELECT count(DISTINCT event_date) FROM rct_events").fetchone()[0] == 3
    assert "extra" not in latest_s_learner_features(promo_env)


def test_a_campaign_partition_has_only_its_own_days():
    """No date dimension shared by every campaign: the ingestion assets are partitioned by campaign
    only, so a campaign never shows days as missing that only another campaign has files for."""
    from promo_assets.definitions import build_defs
    from promo_assets.defs.common import campaign_partitions

    graph = build_defs([]).resolve_asset_graph()
    for name in ("rct_events", "payment_edges", "merchant_events", "propensity"):
        assert graph.get(dg.AssetKey(name)).partitions_def == campaign_partitions, name
    assert not any(isinstance(graph.get(k).partitions_def, dg.MultiPartitionsDefinition) for k in graph.get_all_asset_keys())
