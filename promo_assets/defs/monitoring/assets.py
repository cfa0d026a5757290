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
import math

import dagster as dg
import pandas as pd

from promo_assets.defs.campaign.assets import COMMON, read_holdout_events, results_write
from promo_assets.defs.common import LandingResource, WarehouseResource, connect, population, table_metadata
from promo_assets.monitoring import CHECKS
from promo_assets.monitoring.run import effect_headline, monitor
from promo_assets.store import frames as frames_store, monitoring as monitoring_store

OUTCOME_TABLES = ("outcomes", "outcome_levels", "outcome_effect", "population_drift", "monitoring_checks")
DAY_COLUMNS = (  # the `days` metadata table: name in the outcomes row, type, description
    ("day", "date", "the decided day"),
    ("status", "string", "ok, or refused (the reason in the table outcomes)"),
    ("joined", "int", "events joined to the day's decision"),
    ("compliance", "float", "share of joined events at their decided level"),
    ("realized_response", "float", "realized response per event"),
    ("predicted_response", "float", "the champion's prediction for those users and levels"),
    ("realized_cost", "float", "realized spend per event"),
    ("predicted_cost", "float", "the champion's predicted spend per event"),
    ("within_manifest", "string", "realized response inside the manifest's interval (yes / no / -)"),
    ("effect", "float", "the day's effect against random levels at equal spend, per user"),
)
EFFECT_COLUMNS = (
    ("day", "date", "as of this deployed day"),
    ("days", "int", "deployed days so far"),
    ("events", "int", "events so far"),
    ("effect", "float", "champion minus random levels at equal spend, per user"),
    ("low", "float", "confidence sequence, lower end"),
    ("high", "float", "confidence sequence, upper end"),
    ("vs_cheapest", "float", "champion minus the cheapest level, per user"),
    ("dm_effect", "float", "plain difference of means, champion minus explore group"),
)


def _population(con, landing: LandingResource, campaign: str, features: list[str]) -> pd.DataFrame | None:
    pop = population(con, landing, campaign, features)
    if pop is not None:
        return pd.concat(list(pop.frames(65536)))

    return read_holdout_events(con, campaign)


def _value(v):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    if isinstance(v, (dt.date, pd.Timestamp)):
        return str(pd.Timestamp(v).date())
    if isinstance(v, bool):
        return "yes" if v else "no"
    return float(f"{v:.4g}") if isinstance(v, float) else v


def _records(columns, rows: list[dict]) -> list[dict]:
    return [{name: (("-" if r.get(name) is None else _value(r.get(name))) if kind == "string" else _value(r.get(name)))
             for name, kind, _ in columns} for r in rows]


def outcome_metadata(result, confidence: float) -> dict:
    day_rows = [{"day": d.day, "status": d.status, **d.row} for d in result.days]
    effect_rows = [dict(e) for e in result.effect]
    drift = [{"feature": f.feature, "kind": f.kind, "psi": f.psi, "out of range": f.out_of_range_share,
              "new share": f.new_share, "new categories": ", ".join(f.new_categories[:5]), "flagged": f.flagged}
             for f in result.drift]
    return {
        "effect": effect_headline(result.effect, confidence),
        "deployed_days": len(result.ok_rows), "refused_days": len(result.refused),
        "decision_age_days": None if result.decision_age_days is None else round(result.decision_age_days, 3),
        "late_days": ", ".join(map(str, result.late)) or "none",
        "days": table_metadata(list(DAY_COLUMNS), _records(DAY_COLUMNS, day_rows)),
        "effect_over_days": table_metadata(list(EFFECT_COLUMNS), _records(EFFECT_COLUMNS, effect_rows)),
        "drift": table_metadata([("feature", "string"), ("kind", "string"), ("psi", "float"), ("out of range", "float"),
                                 ("new share", "float"), ("new categories", "string"), ("flagged", "bool")],
                                [{k: (_value(v) if not isinstance(v, (bool, str)) else v) for k, v in r.items()}
                                 for r in drift]),
    }


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
    with connect(warehouse) as con:
        numeric, categorical = frames_store.feature_spec(con, campaign)
        features = numeric + categorical
        reference = frames_store.training_frame(con, campaign, features)
        population = _population(con, landing, campaign, features)
        last = monitoring_store.latest_run(con, campaign)
        previous = monitoring_store.of_run(con, campaign, last, "outcomes") if last else None
        before = monitoring_store.training_change_day(con, campaign)
        before_segments = monitoring_store.training_change_segments(con, campaign, before)
        acted_before = {(r.check_name, r.reaction) for r in monitoring_store.active_reactions(con, campaign).itertuples()}
        result = monitor(con, campaign, config, population=population, reference=reference, numeric=numeric,
                         categorical=categorical, now=dt.datetime.now(), previous=previous, log=context.log.info)
    new = result.new_reactions(before, acted_before, before_segments)
    with connect(warehouse) as con, results_write(context, con, campaign, *OUTCOME_TABLES):
        monitoring_store.record(con, campaign, context.run_id, result.tables())
    yield dg.MaterializeResult(asset_key="outcomes", metadata=outcome_metadata(result, config.monitoring.confidence))
    for c in result.checks:
        yield dg.AssetCheckResult(asset_key="outcomes", check_name=c.name, passed=c.passed,
                                  severity=dg.AssetCheckSeverity(c.severity),
                                  metadata={"message": c.message, "reaction": c.reaction,
                                            **({"change_day": str(c.change_day)} if c.change_day else {})})
    if new:
        yield dg.MaterializeResult(asset_key="monitoring_reaction", metadata={
            "reactions": json.dumps([{"check": c.name, "reaction": c.reaction, "change_day": str(c.change_day)}
                                     for c in new])})
