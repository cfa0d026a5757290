"""A campaign partition made with "Add partition" in the UI's materialize dialog (Dagster offers it for
every dynamic partition set and has no setting to hide it): a run of it fails at its first step with a
message naming the missing landing folder, and the landing sensor removes such a partition once it
has no folder and never loaded a day (docs/automation.md, "Partitions")."""

from __future__ import annotations

import dagster as dg

from tests.defs.test_automation import landing, sensor_context  # noqa: F401  (the fixture)


def test_a_run_of_a_campaign_without_landing_folder_names_the_folder(landing):  # noqa: F811
    from promo_assets.definitions import build_defs

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["bogus"])
        result = build_defs(models=[]).resolve_job_def("ingest_job").execute_in_process(
            partition_key="bogus", instance=instance, raise_on_error=False)
        assert not result.success
        [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
        message = failure.step_failure_data.user_failure_data.description  # a dg.Failure: no traceback
        assert failure.step_key == "rct_events"  # the first step, before any file or warehouse work
        assert f"campaign 'bogus' has no landing folder {landing / 'bogus'}" in message, message
        assert "a partition added in the UI creates none" in message
        assert not instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey("rct_events")),
                                                   limit=1).records


def test_the_landing_sensor_removes_partitions_without_folder_that_never_loaded_a_day(landing):  # noqa: F811
    from promo_assets.defs.automation.jobs import landing_sensor

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1", "c2", "bogus", "gone"])
        # `gone` loaded days once, then its folder was removed: it keeps its partition (its history)
        instance.report_runless_asset_event(dg.AssetMaterialization("rct_events", partition="gone"))
        result = landing_sensor(sensor_context(instance, landing))
        removed = [r for r in result.dynamic_partitions_requests if isinstance(r, dg.DeleteDynamicPartitionsRequest)]
        assert [r.partition_keys for r in removed] == [["bogus"]]
        again = landing_sensor(sensor_context(instance, landing, result.cursor))  # not applied here: asked again
        assert [r.partition_keys for r in again.dynamic_partitions_requests
                if isinstance(r, dg.DeleteDynamicPartitionsRequest)] == [["bogus"]]
        instance.delete_dynamic_partition("campaign", "bogus")
        quiet = landing_sensor(sensor_context(instance, landing, result.cursor))
        assert quiet.skip_reason is not None and quiet.dynamic_partitions_requests == []


def test_no_partition_is_removed_when_the_landing_folder_itself_is_missing(promo_env):
    from promo_assets.defs.automation.jobs import landing_sensor

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1"])
        result = landing_sensor(sensor_context(instance, promo_env["landing"] / "not-there"))
        assert not result.dynamic_partitions_requests
