"""Ingestion assets: a campaign's landing day files → its rows in the warehouse, in one run.

Partitioned by campaign only: a run of `rct_events[campaign]` loads every new or changed day file of
the campaign, leaves the unchanged ones alone and forgets the days whose file is gone
(`promo_assets.ingestion.days`; the ledger `landing_files` knows each file's content hash), so the
cost of a run grows with the rows that changed, not with the days the campaign has, and no
partition exists that no file will ever fill. Run config `first_day` / `last_day` limit the days
loaded, `reload: true` loads them again whatever the ledger says.
"""


import datetime as dt
from typing import Optional

import dagster as dg
from pydantic import Field

from promo_assets.defs.automation.conditions import INGESTION_CONDITION
from promo_assets.defs.common import (
    WAREHOUSE_POOL,
    LandingResource,
    WarehouseResource,
    campaign_partitions,
    check_results,
    metadata,
)
from promo_assets.ingestion import (
    ingest_edges_day,
    ingest_events_day,
)
from promo_assets.ingestion.checks import EventChecks
from promo_assets.ingestion.days import CampaignDays, DayLoader, ingest_campaign_days
from promo_assets.ingestion.display import days_metadata, event_check_results, events_metadata


class DayRange(dg.Config):
    """Which day files a run of an ingestion asset loads (every new or changed one by default)."""

    first_day: Optional[str] = Field(default=None, description="first day to load, YYYY-MM-DD [the first file]")
    last_day: Optional[str] = Field(default=None, description="last day to load, YYYY-MM-DD [the last file]")
    reload: bool = Field(default=False, description="load the days of the range again even when their file "
                         "and campaign.yaml are unchanged since they were loaded")

    def bounds(self) -> tuple[dt.date | None, dt.date | None]:
        try:
            return tuple(dt.date.fromisoformat(d) if d else None for d in (self.first_day, self.last_day))
        except ValueError as exc:
            raise dg.Failure(f"run config first_day / last_day: not a date (YYYY-MM-DD): {exc}") from None


def ingest_days(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource,
                kind: str, load_day: DayLoader, config: DayRange) -> CampaignDays:
    """The asset's call of `ingest_campaign_days` for its campaign, logged line by line."""
    campaign = context.partition_key
    with warehouse.connect() as con:
        days = ingest_campaign_days(con, landing.path, campaign, kind, load_day, config.bounds(), config.reload,
                                    log=context.log.info)
    for skipped in days.skipped:
        context.log.warning(f"skipped {skipped}")
    for day in days.failed:  # recorded in the ledger and the days table; the other days are loaded
        context.log.error(f"{campaign} {day.day}: {day.message}")
    context.log.info(days.summary())
    return days


CHECKS = [
    dg.AssetCheckSpec("row_count", asset="rct_events", description="the campaign holds at least one event"),
    dg.AssetCheckSpec("treatment_on_grid", asset="rct_events", description="every level is on the campaign's grid and its incentive matches"),
    dg.AssetCheckSpec("response_and_cost_range", asset="rct_events", description="responses fit the response type; costs are finite and ≥ 0"),
    dg.AssetCheckSpec("propensity_range", asset="rct_events", description="logged propensities lie in (0, 1]"),
    dg.AssetCheckSpec("day_files_loaded", asset="rct_events", description="every events day file of the campaign "
                      "(of the run's range) is loaded: none failed"),
]


@dg.asset(
    partitions_def=campaign_partitions,
    pool=WAREHOUSE_POOL,
    code_version="2",
    group_name="ingestion",
    kinds={"duckdb"},
    check_specs=CHECKS,
    description=(
        "Validated RCT events of one campaign, loaded from its day files `<landing>/<campaign>/events/<day>.parquet|csv` "
        "into the warehouse table `rct_events`: one run loads every new or changed day file (run config "
        "`first_day` / `last_day` / `reload` choose a range) and forgets the days whose file is gone; rejected rows "
        "go to `rejected_events` with their reason. The `days` table shows each day's file, rows and status."
    ),
)
def rct_events(context: dg.AssetExecutionContext, config: DayRange, warehouse: WarehouseResource,
               landing: LandingResource):
    campaign = context.partition_key
    campaign_config = landing.config(campaign)  # no landing folder (a partition added in the UI): fails naming it

    def load(con, day, path):
        return ingest_events_day(con, campaign_config, day, path)

    days = ingest_days(context, warehouse, landing, "events", load, config)
    with warehouse.connect() as con:
        got = EventChecks.read(con, campaign, campaign_config)
    if got.rows == 0:  # nothing to learn from: downstream does not run on an empty campaign
        why = (f"every events day file failed ({len(days.failed)}: see the check day_files_loaded)" if days.failed
               else f"no events day file under {landing.path / campaign / 'events'}")
        raise dg.Failure(f"campaign '{campaign}' has no events loaded: {why}")
    return dg.MaterializeResult(metadata=metadata(events_metadata(days, campaign_config)),
                                check_results=check_results(event_check_results(got, days)))


@dg.asset(
    partitions_def=campaign_partitions,
    pool=WAREHOUSE_POOL,
    code_version="2",
    group_name="ingestion",
    kinds={"duckdb"},
    deps=["rct_events"],  # reloaded with rct_events of the same campaign (defs/automation/conditions.py)
    automation_condition=INGESTION_CONDITION,
    description="Customer–merchant payment edges of one campaign (`<landing>/<campaign>/edges/<day>`), "
    "table `payment_edges`: the new or changed day files, like rct_events (a file that fails is a `failed` day "
    "of the `days` table; the other days load). A campaign without edge files materializes with no rows.",
)
def payment_edges(context: dg.AssetExecutionContext, config: DayRange, warehouse: WarehouseResource,
                  landing: LandingResource):
    campaign = context.partition_key

    def load(con, day, path):
        return ingest_edges_day(con, campaign, day, path)

    days = ingest_days(context, warehouse, landing, "edges", load, config)
    return dg.MaterializeResult(metadata=metadata(days_metadata(days)))
