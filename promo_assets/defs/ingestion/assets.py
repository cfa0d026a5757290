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
    md_table,
    table_metadata,
)
from promo_assets.ingestion import (
    ingest_edges_day,
    ingest_events_day,
)
from promo_assets.ingestion.checks import EventChecks
from promo_assets.ingestion.days import CampaignDays, DayLoader, ingest_campaign_days


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


def _events_metadata(days: CampaignDays, config) -> dict:
    """rct_events' metadata: the days, and what this run loaded (levels, rejections, features)."""
    distribution: dict[int, int] = {}
    for r in days.results:
        for level, n in r.level_counts.items():
            distribution[level] = distribution.get(level, 0) + n
    features = {f: k for r in days.results for f, k in r.features.items()}
    return {
        **days_metadata(days),
        "rows_rejected_now": sum(d.rejected for d in days.days if d.status == "loaded"),
        "treatment_distribution_now": md_table(
            [{"level": lvl, "incentive": config.incentives[lvl], "label": config.labels[lvl], "rows": n}
             for lvl, n in sorted(distribution.items())]),
        "rejections_now": md_table([p for r in days.results for p in r.problems]),
        "features": table_metadata([("feature", "string", "a feature column of the loaded days"),
                                    ("kind", "string", "numeric or categorical")],
                                   [{"feature": str(f), "kind": str(k)} for f, k in sorted(features.items())]),
    }


def days_table(days: CampaignDays) -> dg.MetadataValue:
    """The campaign's days as a typed table: day, status, rows, rejected, file, message."""
    schema = dg.TableSchema(columns=[
        dg.TableColumn("day", "date", description="the day of the file (its name)"),
        dg.TableColumn("status", "string", description="loaded by this run, unchanged since it was loaded, "
                       "forgotten (file gone), or failed (the day's earlier rows stay)"),
        dg.TableColumn("rows", "int", description="rows loaded (by this run or when the file was loaded)"),
        dg.TableColumn("rejected", "int", description="rows rejected (rejected_events has their reasons)"),
        dg.TableColumn("file", "string"),
        dg.TableColumn("message", "string", description="why the file failed"),
    ])
    records = [dg.TableRecord({"day": d.day.isoformat(), "status": d.status, "rows": int(d.rows or 0),
                               "rejected": int(d.rejected or 0), "file": d.file, "message": d.message or ""})
               for d in days.days]
    return dg.MetadataValue.table(records, schema=schema)


def days_metadata(days: CampaignDays) -> dict:
    loaded = [d for d in days.days if d.status in ("loaded", "unchanged")]
    return {
        "days": days_table(days),
        "days_loaded_now": days.count("loaded"),
        "days_unchanged": days.count("unchanged"),
        "days_forgotten": days.count("forgotten"),
        "days_failed": days.count("failed"),
        "rows_loaded_now": sum(d.rows for d in days.days if d.status == "loaded"),
        "first_day": loaded[0].day.isoformat() if loaded else "",
        "last_day": loaded[-1].day.isoformat() if loaded else "",
    }


CHECKS = [
    dg.AssetCheckSpec("row_count", asset="rct_events", description="the campaign holds at least one event"),
    dg.AssetCheckSpec("treatment_on_grid", asset="rct_events", description="every level is on the campaign's grid and its incentive matches"),
    dg.AssetCheckSpec("response_and_cost_range", asset="rct_events", description="responses fit the response type; costs are finite and ≥ 0"),
    dg.AssetCheckSpec("propensity_range", asset="rct_events", description="logged propensities lie in (0, 1]"),
    dg.AssetCheckSpec("day_files_loaded", asset="rct_events", description="every events day file of the campaign "
                      "(of the run's range) is loaded: none failed"),
]


def check_results(got: EventChecks, days: CampaignDays) -> list[dg.AssetCheckResult]:
    """rct_events' asset checks over every loaded day, and the day files that failed."""
    failed = days.failed
    return [
        dg.AssetCheckResult(check_name="row_count", passed=got.rows > 0, metadata={"rows": got.rows}),
        dg.AssetCheckResult(
            check_name="treatment_on_grid", passed=got.off_grid + got.incentive_mismatch == 0,
            metadata={"off_grid": got.off_grid, "incentive_mismatch": got.incentive_mismatch},
        ),
        dg.AssetCheckResult(
            check_name="response_and_cost_range", passed=got.bad_response + got.bad_cost == 0,
            metadata={"bad_response": got.bad_response, "bad_cost": got.bad_cost},
        ),
        dg.AssetCheckResult(check_name="propensity_range", passed=got.bad_propensity == 0,
                            metadata={"bad_propensity": got.bad_propensity}),
        dg.AssetCheckResult(
            check_name="day_files_loaded", passed=not failed, severity=dg.AssetCheckSeverity.ERROR,
            metadata={"failed_days": len(failed),
                      "failures": md_table([{"day": d.day.isoformat(), "file": d.file, "message": d.message}
                                            for d in failed])},
        ),
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
    return dg.MaterializeResult(metadata=_events_metadata(days, campaign_config), check_results=check_results(got, days))


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
    return dg.MaterializeResult(metadata=days_metadata(days))
