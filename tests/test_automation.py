"""The daily schedule, the landing sensor and the downstream-refresh sensor, evaluated directly."""

from __future__ import annotations

import datetime as dt
import json

import dagster as dg
import pytest

from promo_assets.orchestration.common import LandingResource
from tests.test_ingestion import good_frame, write_campaign


def landing_resource(root) -> dict:
    """The `landing` resource the sensor and the schedule take, on the test's landing folder."""
    return {"landing": LandingResource(root=str(root))}


@pytest.fixture
def landing(promo_env):
    folder = write_campaign(promo_env["landing"], "c1")
    for day in ("2026-03-01", "2026-03-02"):
        good_frame().to_parquet(folder / "events" / f"{day}.parquet")
    write_campaign(promo_env["landing"], "c2")
    good_frame().to_parquet(promo_env["landing"] / "c2" / "events" / "2026-03-01.parquet")
    return promo_env["landing"]


def keys(requests):
    return sorted((r.partition_key.keys_by_dimension["campaign"], r.partition_key.keys_by_dimension["date"]) for r in requests)


def test_landing_sensor_adds_campaigns_and_requests_new_files(landing):
    from promo_assets.orchestration.automation import landing_sensor

    with dg.instance_for_test() as instance:
        result = landing_sensor(dg.build_sensor_context(resources=landing_resource(landing), instance=instance))
        assert keys(result.run_requests) == [("c1", "2026-03-01"), ("c1", "2026-03-02"), ("c2", "2026-03-01")]
        assert sorted(result.dynamic_partitions_requests[0].partition_keys) == ["c1", "c2"]
        assert result.dynamic_partitions_requests[1].partition_keys == ["2026-03-01", "2026-03-02"]  # the days
        # nothing changed: skip
        again = landing_sensor(dg.build_sensor_context(resources=landing_resource(landing), instance=instance, cursor=result.cursor))
        assert again.run_requests == [] and again.skip_reason is not None
        # a new day file for c2 only
        good_frame(seed=9).to_parquet(landing / "c2" / "events" / "2026-03-02.parquet")
        third = landing_sensor(dg.build_sensor_context(resources=landing_resource(landing), instance=instance, cursor=result.cursor))
        assert keys(third.run_requests) == [("c2", "2026-03-02")]
        assert third.dynamic_partitions_requests[0].partition_keys == ["2026-03-02"]  # not added to the instance here
        assert json.loads(third.cursor)["files"]["c2"].keys() == {"2026-03-01", "2026-03-02"}


def test_landing_sensor_first_tick_skips_partitions_already_materialized(landing):
    from promo_assets.definitions import defs
    from promo_assets.orchestration.automation import landing_sensor

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1"])
        instance.add_dynamic_partitions("day", ["2026-03-01"])
        job = defs.resolve_job_def("ingest_job")
        key = dg.MultiPartitionKey({"date": "2026-03-01", "campaign": "c1"})
        assert job.execute_in_process(partition_key=key, instance=instance).success
        result = landing_sensor(dg.build_sensor_context(resources=landing_resource(landing), instance=instance))
        assert keys(result.run_requests) == [("c1", "2026-03-02"), ("c2", "2026-03-01")]
        assert result.dynamic_partitions_requests[0].partition_keys == ["c2"]
        assert result.dynamic_partitions_requests[1].partition_keys == ["2026-03-02"]  # 03-01 is registered


def test_daily_schedule_requests_yesterday_for_registered_campaigns(landing):
    from promo_assets.orchestration.automation import daily_campaign_refresh

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1", "c2"])
        when = dt.datetime(2026, 3, 3, 3, 0, tzinfo=dt.timezone.utc)
        requests = daily_campaign_refresh(dg.build_schedule_context(resources=landing_resource(landing), instance=instance, scheduled_execution_time=when))
        assert keys(requests) == [("c1", "2026-03-02")]  # c2 has no file for 2026-03-02
        assert instance.get_dynamic_partitions("day") == ["2026-03-02"]  # the schedule registers the day
        when = dt.datetime(2026, 3, 2, 3, 0, tzinfo=dt.timezone.utc)
        requests = daily_campaign_refresh(dg.build_schedule_context(resources=landing_resource(landing), instance=instance, scheduled_execution_time=when))
        assert keys(requests) == [("c1", "2026-03-01"), ("c2", "2026-03-01")]
        when = dt.datetime(2026, 4, 1, 3, 0, tzinfo=dt.timezone.utc)
        skipped = daily_campaign_refresh(dg.build_schedule_context(resources=landing_resource(landing), instance=instance, scheduled_execution_time=when))
        assert isinstance(skipped, dg.SkipReason) and "2026-03-31" in skipped.skip_message


def test_downstream_refresh_requests_the_campaign_after_the_last_ingestion(landing):
    from promo_assets.definitions import defs
    from promo_assets.orchestration.automation import downstream_refresh

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1"])
        instance.add_dynamic_partitions("day", ["2026-03-01"])
        job = defs.resolve_job_def("ingest_job")
        result = job.execute_in_process(
            partition_key=dg.MultiPartitionKey({"date": "2026-03-01", "campaign": "c1"}), instance=instance
        )
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        success_event = next(e for e in result.all_events if e.event_type_value == "PIPELINE_SUCCESS")
        context = dg.build_run_status_sensor_context(
            sensor_name="downstream_refresh", dagster_event=success_event, dagster_instance=instance, dagster_run=run
        )
        request = downstream_refresh(context)
        assert isinstance(request, dg.RunRequest) and request.partition_key == "c1"


def test_simulate_demo_job_fills_an_empty_landing_folder_only(promo_env):
    from promo_assets.definitions import defs
    from promo_assets.ingestion import day_files

    job = defs.resolve_job_def("simulate_demo_job")
    config = {"ops": {"simulate_campaign": {"config": {"days": 3, "users": 200}}}}
    with dg.instance_for_test() as instance:
        assert job.execute_in_process(run_config=config, instance=instance).success
        assert len(day_files(promo_env["landing"], "demo")) == 3
        assert instance.get_dynamic_partitions("campaign") == ["demo"]
        config["ops"]["simulate_campaign"]["config"].update(campaign="other")
        assert job.execute_in_process(run_config=config, instance=instance).success
        assert not (promo_env["landing"] / "other").exists()  # only_if_empty: the folder was not empty
