"""Jobs, the daily schedule, the landing sensor and the automation sensor (conditions.py)."""


import datetime as dt
import json

import dagster as dg

from promo_assets.ingestion import day_files, discover_campaigns, landing_changes, landing_removed, landing_scan
from promo_assets.orchestration.common import (
    LandingResource,
    campaign_partitions,
    day_campaign_partitions,
    day_partitions,
    partition_key,
    register_partitions,
)

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.groups("ingestion"),
    partitions_def=day_campaign_partitions,
    description="Load one date|campaign partition of the landing files (rct_events, payment_edges).",
)

campaign_job = dg.define_asset_job(
    "campaign_job",
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups("ingestion") - dg.AssetSelection.keys("leaderboard")
    - dg.AssetSelection.groups("decisions"),
    partitions_def=campaign_partitions,
    description="Re-materialize everything downstream of ingestion for one campaign: propensities, "
    "training frame, outcome model, and every model's chain (model, coefficients, dual, allocation, "
    "evaluation). Then leaderboard_job: a model chain that fails or is skipped would stop the "
    "leaderboard if it ran in the same run.",
)

leaderboard_job = dg.define_asset_job(
    "leaderboard_job",
    selection=dg.AssetSelection.keys("leaderboard"),
    partitions_def=campaign_partitions,
    description="Assemble the campaign's leaderboard from the latest evaluation of every model and the "
    "cost-matched random reference (after campaign_job, whatever its models' chains did).",
)

decision_job = dg.define_asset_job(
    "decision_job",
    selection=dg.AssetSelection.groups("decisions"),
    partitions_def=campaign_partitions,
    description="Choose the campaign's champion from its leaderboard, decide every user's level with the "
    "exploration share (blocking checks) and write the outbox (after leaderboard_job). A run of its own: a "
    "decision that fails a check fails this run only, never the models' evaluations.",
)


@dg.schedule(
    cron_schedule="0 3 * * *",
    job=ingest_job,
    execution_timezone="UTC",
    description="Every day at 03:00 UTC: ingest yesterday's landing file of every campaign; the "
    "automation sensor then refreshes each campaign's models and decisions.",
)
def daily_campaign_refresh(context: dg.ScheduleEvaluationContext, landing: LandingResource):
    day = (context.scheduled_execution_time.date() - dt.timedelta(days=1))
    landing = landing.path
    requests, missing = [], []
    registered = set(context.instance.get_dynamic_partitions(campaign_partitions.name))
    for campaign in discover_campaigns(landing):
        if campaign not in registered:
            missing.append(f"{campaign} (not registered yet: the landing sensor adds it)")
        elif day in day_files(landing, campaign, "events"):
            register_partitions(context.instance, days=[day.isoformat()])
            requests.append(
                dg.RunRequest(
                    run_key=f"daily:{campaign}:{day.isoformat()}",
                    partition_key=partition_key(day.isoformat(), campaign),
                    tags={"promo/campaign": campaign, "promo/trigger": "daily_campaign_refresh"},
                )
            )
        else:
            missing.append(campaign)
    if not requests:
        return dg.SkipReason(f"no landing file for {day} in any campaign ({', '.join(missing) or 'no campaigns'})")
    return requests


@dg.sensor(
    job=ingest_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Notices new campaigns and days (adds their partitions) and new or rewritten landing "
    "day files (requests their ingestion); warns once about each skipped file (bad name, future "
    "date, ...) and each removed day file (`promo run` or `promo forget` removes its rows).",
)
def landing_sensor(context: dg.SensorEvaluationContext, landing: LandingResource):
    before, skipped_before = _landing_cursor(context.cursor)
    now, skipped = landing_scan(landing.path)
    skipped_now = sorted(str(f) for f in skipped)
    _warn_landing(context.log, before, now, skipped_before, skipped_now)
    new_campaigns, changed = landing_changes(before or {}, now)
    if before is None:
        new_campaigns, changed = _not_loaded_yet(context.instance, new_campaigns, changed)
    cursor = json.dumps({"files": now, "skipped": skipped_now}, sort_keys=True)
    if not new_campaigns and not changed:
        note = f"; {len(skipped_now)} landing file(s) skipped (see the tick's log)" if skipped_now else ""
        return dg.SensorResult(skip_reason=f"no new or changed landing files{note}", cursor=cursor)
    return dg.SensorResult(run_requests=_ingest_requests(changed, now), cursor=cursor,
                           dynamic_partitions_requests=_partition_requests(context.instance, new_campaigns, changed))


# helpers of the landing sensor


def _landing_cursor(cursor: str | None) -> tuple[dict | None, list[str]]:
    """(file inventory, skipped files) of the last tick; (None, []) on the first tick."""
    state = json.loads(cursor) if cursor else None
    if state is not None and "files" not in state:  # cursor of an earlier version: the inventory only
        state = {"files": state, "skipped": []}
    return (state["files"], state["skipped"]) if state else (None, [])


def _warn_landing(log, before: dict | None, now: dict, skipped_before: list[str], skipped_now: list[str]) -> None:
    """Warn once about each newly skipped landing file and each removed day file."""
    for line in sorted(set(skipped_now) - set(skipped_before)):
        log.warning(f"skipped landing file {line}")
    for campaign, day in landing_removed(before or {}, now):
        log.warning(
            f"landing file of campaign '{campaign}' day {day} is gone; its loaded rows stay until "
            f"`promo run` or `promo forget --campaign {campaign} --day {day}`"
        )


def _not_loaded_yet(instance: dg.DagsterInstance, new_campaigns: list[str], changed: list[tuple[str, str]]):
    """First tick: files whose partition is already materialized (e.g. by `promo run`) are taken as
    seen, and campaigns already registered as not new; only the others are requested."""
    done = instance.get_materialized_partitions(dg.AssetKey("rct_events"))
    registered = set(instance.get_dynamic_partitions(campaign_partitions.name))
    return ([c for c in new_campaigns if c not in registered],
            [(c, d) for c, d in changed if str(partition_key(d, c)) not in done])


def _ingest_requests(changed: list[tuple[str, str]], now: dict) -> list[dg.RunRequest]:
    return [
        dg.RunRequest(
            run_key=f"landing:{campaign}:{day}:{now[campaign][day]}",
            partition_key=partition_key(day, campaign),
            tags={"promo/campaign": campaign, "promo/trigger": "landing_sensor"},
        )
        for campaign, day in changed
    ]


def _partition_requests(instance: dg.DagsterInstance, new_campaigns: list[str], changed: list[tuple[str, str]]) -> list:
    """Add the new campaigns and the days not registered yet as partitions."""
    registered_days = set(instance.get_dynamic_partitions(day_partitions.name))
    new_days = sorted({day for _, day in changed} - registered_days)
    requests = []
    if new_campaigns:
        requests.append(campaign_partitions.build_add_request(new_campaigns))
    if new_days:
        requests.append(day_partitions.build_add_request(new_days))
    return requests


automation_sensor = dg.AutomationConditionSensorDefinition(
    "automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    # One backfill per tick when it requests several partitions: Dagster then runs a campaign's
    # assets after the same tick's payment_edges / merchant_events reloads they read.
    emit_backfills=True,
    # Evaluated in the code server, not the daemon: the conditions use a Python operand of their own
    # (conditions.EndedUnmaterialized, a skipped or failed execution), which the daemon cannot load.
    use_user_code_server=True,
    description="Evaluates the assets' automation conditions (promo_assets/orchestration/conditions.py): "
    "payment_edges / merchant_events are reloaded with rct_events of the same date|campaign, and a "
    "campaign is refreshed downstream once after any ingestion of it (promo run, schedule, landing "
    "sensor, backfill), when none of its upstream partitions is in progress.",
)
