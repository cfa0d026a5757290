"""The `outcomes` asset (Dagster wiring; the logic is in `promo_assets.monitoring`).

    decisions ─► outcomes (+ checks) ─► outbox, campaign_report
                      └─► monitoring_reaction (only when a failed check's reaction acts)

`outcomes` reads every decided day whose events came back and writes tables outcomes,
outcome_levels, outcome_effect, population_drift and monitoring_checks. Its checks report each
monitoring check with the severity of its reaction (WARN for `warn`). A reaction that acts
materializes `monitoring_reaction`, whose update the automation conditions of the training frame
(retrain) and the champion (fallback) react to; `stop_export` keeps the outbox from writing.
"""

import datetime as dt
import json

import dagster as dg

from promo_assets.defs.automation.conditions import COMMON
from promo_assets.defs.common import LandingResource, WarehouseResource, check_results, metadata, writing
from promo_assets.ingestion.targets import population_rows
from promo_assets.monitoring import CHECKS
from promo_assets.monitoring.display import outcome_check_results, outcome_summary, outcome_tables
from promo_assets.monitoring.drift import DriftFrames
from promo_assets.monitoring.run import monitor
from promo_assets.store import frames as frames_store, monitoring as monitoring_store

OUTCOME_TABLES = ("outcomes", "outcome_levels", "outcome_effect", "population_drift", "monitoring_checks")


@dg.multi_asset(
    # deps: the decisions only; the events and the training frame it also reads are upstream of them, so that a
    # campaign refresh requests it once, after its decisions (the automation's wait reaches it through them)
    specs=[dg.AssetSpec("outcomes", deps=["decisions"], group_name="decisions",
                        code_version="1", kinds={"duckdb"}, automation_condition=COMMON["automation_condition"],
                        description="The outcome of every deployed decision: each decided day's events joined to the "
                        "decision they answer (user_id, the day), compliance, realized against predicted (overall, per "
                        "group, per level, per decile of predicted uplift, against the manifest's interval), the "
                        "champion's effect against random levels at equal spend with a confidence sequence (valid "
                        "under daily looks) and against the cheapest level, population drift and freshness. Tables "
                        "outcomes, outcome_levels, outcome_effect, population_drift, monitoring_checks "
                        "(docs/monitoring.md)."),
           dg.AssetSpec("monitoring_reaction", deps=["outcomes"], group_name="decisions", skippable=True,
                        kinds={"duckdb"}, description="Materialized only when a failed monitoring check's reaction "
                        "acts (campaign.yaml monitoring.reactions: retrain, fallback, stop_export): the training "
                        "frame and the champion react to its update (docs/monitoring.md).")],
    check_specs=[dg.AssetCheckSpec(n, asset="outcomes", description=t) for n, t in CHECKS.items()],
    partitions_def=COMMON["partitions_def"], pool=COMMON["pool"], can_subset=False,
)
def outcomes(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    campaign = context.partition_key
    config = landing.config(campaign)
    with warehouse.connect() as con:
        numeric, categorical = frames_store.feature_spec(con, campaign)
        features = numeric + categorical
        reference = frames_store.training_frame(con, campaign, features)
        population = population_rows(con, landing.path, campaign, features)
        last = monitoring_store.latest_run(con, campaign)
        previous = monitoring_store.of_run(con, campaign, last, "outcomes") if last else None
        before = monitoring_store.training_change_day(con, campaign)
        before_segments = monitoring_store.training_change_segments(con, campaign, before)
        acted_before = {(r.check_name, r.reaction) for r in monitoring_store.active_reactions(con, campaign).itertuples()}
        result = monitor(con, campaign, config, drift=DriftFrames(population, reference, numeric, categorical),
                         now=dt.datetime.now(), previous=previous, log=context.log.info, own_run=context.run.run_id)
    new = result.new_reactions(before, acted_before, before_segments)
    with writing(context, warehouse, *OUTCOME_TABLES) as con:
        monitoring_store.record(con, campaign, context.run.run_id, result.tables())
    yield dg.MaterializeResult(asset_key="outcomes", metadata=metadata(
        {**outcome_summary(result, config.monitoring.confidence), **outcome_tables(result)}))
    yield from check_results(outcome_check_results(result), "outcomes")
    if new:
        yield dg.MaterializeResult(asset_key="monitoring_reaction", metadata={
            "reactions": json.dumps([{"check": c.name, "reaction": c.reaction, "change_day": str(c.change_day)}
                                     for c in new])})
