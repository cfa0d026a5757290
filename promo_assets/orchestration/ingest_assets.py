"""Ingestion assets: one landing day file → one date|campaign partition of the warehouse."""


import datetime as dt

import dagster as dg

from promo_assets.ingestion import (
    IngestError,
    day_files,
    ingest_edges_day,
    ingest_events_day,
    load_config,
)
from promo_assets.orchestration.conditions import INGESTION_CONDITION
from promo_assets.orchestration.common import (
    for_people,
    WAREHOUSE_POOL,
    LandingResource,
    WarehouseResource,
    day_and_campaign,
    day_campaign_partitions,
    md_table,
)

CHECKS = [
    dg.AssetCheckSpec("row_count", asset="rct_events", description="the partition holds at least one event"),
    dg.AssetCheckSpec("treatment_on_grid", asset="rct_events", description="every level is on the campaign's grid and its incentive matches"),
    dg.AssetCheckSpec("response_and_cost_range", asset="rct_events", description="responses fit the response type; costs are finite and ≥ 0"),
    dg.AssetCheckSpec("propensity_range", asset="rct_events", description="logged propensities lie in (0, 1]"),
]


def _checks(warehouse: WarehouseResource, con, config, campaign: str, day: str) -> list[dg.AssetCheckResult]:
    [stats] = warehouse.read_rows("checks", "rct_events_partition", [len(config.incentives), campaign, day], con=con)
    n, off_grid, bad_resp_binary, bad_resp_count, bad_resp, bad_cost, bad_prop = stats
    [(wrong_incentive,)] = warehouse.read_rows(
        "checks", "incentive_mismatch", [list(range(config.n_levels)), list(config.incentives), campaign, day], con=con)
    bad_response = bad_resp + (bad_resp_binary if config.response == "binary" else 0) + (
        bad_resp_count if config.response == "count" else 0
    )
    return [
        dg.AssetCheckResult(check_name="row_count", passed=n > 0, metadata={"rows": n}),
        dg.AssetCheckResult(
            check_name="treatment_on_grid", passed=off_grid + wrong_incentive == 0,
            metadata={"off_grid": off_grid, "incentive_mismatch": wrong_incentive},
        ),
        dg.AssetCheckResult(
            check_name="response_and_cost_range", passed=bad_response + bad_cost == 0,
            metadata={"bad_response": bad_response, "bad_cost": bad_cost},
        ),
        dg.AssetCheckResult(check_name="propensity_range", passed=bad_prop == 0, metadata={"bad_propensity": bad_prop}),
    ]


@dg.asset(
    partitions_def=day_campaign_partitions,
    pool=WAREHOUSE_POOL,
    code_version="1",
    group_name="ingestion",
    kinds={"duckdb"},
    check_specs=CHECKS,
    description=(
        "Validated RCT events of one campaign and day, loaded from `<landing>/<campaign>/events/<day>.parquet|csv` "
        "into the warehouse table `rct_events`. Re-materializing replaces exactly that partition; rejected rows "
        "go to `rejected_events` with their reason."
    ),
)
def rct_events(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    day, campaign = day_and_campaign(context)
    config = load_config(landing.path, campaign)
    files = day_files(landing.path, campaign, "events")
    path = files.get(dt.date.fromisoformat(day))
    if path is None:
        raise dg.Failure(f"no events file for campaign '{campaign}' on {day} under {landing.path / campaign / 'events'}")
    with warehouse.connect() as con:
        try:
            result = ingest_events_day(con, config, dt.date.fromisoformat(day), path)
        except IngestError as exc:
            raise dg.Failure(str(exc)) from None
        checks = _checks(warehouse, con, config, campaign, day)
    context.log.info(f"{campaign} {day}: loaded {result.rows_loaded} rows, rejected {result.rows_rejected} from {path}")
    distribution = [
        {"level": lvl, "incentive": config.incentives[lvl], "label": config.labels[lvl], "rows": n}
        for lvl, n in sorted(result.level_counts.items())
    ]
    return dg.MaterializeResult(
        metadata={
            "rows_loaded": result.rows_loaded,
            "rows_rejected": result.rows_rejected,
            "source_file": dg.MetadataValue.path(str(path)),
            "treatment_distribution": md_table(distribution),
            "rejections": md_table(result.problems),
            "features": for_people(result.features),
        },
        check_results=checks,
    )


@dg.asset(
    partitions_def=day_campaign_partitions,
    pool=WAREHOUSE_POOL,
    code_version="1",
    group_name="ingestion",
    kinds={"duckdb"},
    deps=["rct_events"],  # reloaded with the same date|campaign of rct_events (conditions.py)
    automation_condition=INGESTION_CONDITION,
    description="Customer–merchant payment edges of one campaign and day (`<landing>/<campaign>/edges/<day>`), "
    "table `payment_edges`. A campaign without edge files materializes an empty partition.",
)
def payment_edges(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    day, campaign = day_and_campaign(context)
    path = day_files(landing.path, campaign, "edges").get(dt.date.fromisoformat(day))
    if path is None:
        context.log.info(f"{campaign} {day}: no edges file; nothing to load")
        return dg.MaterializeResult(metadata={"rows_loaded": 0})
    with warehouse.connect() as con:
        try:
            result = ingest_edges_day(con, campaign, dt.date.fromisoformat(day), path)
        except IngestError as exc:
            raise dg.Failure(str(exc)) from None
    return dg.MaterializeResult(metadata={"rows_loaded": result.rows_loaded, "source_file": dg.MetadataValue.path(str(path))})
