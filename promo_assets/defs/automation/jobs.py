"""Jobs, the daily schedule, the landing sensor and the automation sensor (conditions.py)."""


import datetime as dt
import hashlib
import warnings

import dagster as dg

from promo_assets.defs.common import LandingResource, campaign_partitions
from promo_assets.ingestion import (
    day_files,
    discover_campaigns,
    landing_changes,
    landing_cursor,
    landing_scan,
    landing_warnings,
    modified_seconds,
    read_landing_cursor,
)

ingest_job = dg.define_asset_job(
    "ingest_job",
    selection=dg.AssetSelection.groups("ingestion"),
    partitions_def=campaign_partitions,
    description="Load a campaign's new or changed landing day files (rct_events, payment_edges, merchant_events) "
    "in one run; run config first_day / last_day / reload choose a range of days.",
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

refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups("decisions"),
    partitions_def=campaign_partitions,
    description="A campaign's refresh in one run: its new or changed day files, then everything downstream up "
    "to the leaderboard (ingest_job, campaign_job and leaderboard_job together). `promo run` runs it with the "
    "chains of the models the campaign does not train left out (a chain that skips keeps Dagster from running "
    "the leaderboard in the same run; leaderboard_job then assembles it); launched from the UI, choose the same "
    "assets (docs: automation).",
)

decision_job = dg.define_asset_job(
    "decision_job",
    selection=dg.AssetSelection.groups("decisions"),
    partitions_def=campaign_partitions,
    description="Choose the campaign's champion from its leaderboard, decide every user's level with the "
    "exploration share (blocking checks) and write the outbox (after leaderboard_job). A run of its own: a "
    "decision that fails a check fails this run only, never the models' evaluations.",
)


# The jobs a campaign's refresh runs, in order (`promo run` runs them; the automation's conditions reach
# the same states asset by asset): the day files to the leaderboard in one run, the leaderboard again on
# its own only when a chain kept it from running, then the decisions in a run of their own (a decision
# that fails a check fails that run only).
REFRESH_ORDER = ("refresh_job", "leaderboard_job", "decision_job")


@dg.schedule(
    cron_schedule="0 3 * * *",
    job=ingest_job,
    execution_timezone="UTC",
    description="Every day at 03:00 UTC: ingest the new or changed landing files of every campaign that has "
    "a file for yesterday; the automation sensor then refreshes each campaign's models and decisions.",
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
            requests.append(
                dg.RunRequest(
                    run_key=f"daily:{campaign}:{day.isoformat()}",
                    partition_key=campaign,
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
    description="Notices new campaigns (adds their partitions) and new or rewritten landing day files "
    "(requests one ingestion run per campaign, which loads every changed file); warns once about each "
    "skipped file (bad name, future date, ...) and each removed day file (the campaign's next ingestion "
    "or `promo forget` removes its rows).",
)
def landing_sensor(context: dg.SensorEvaluationContext, landing: LandingResource):
    before, skipped_before = read_landing_cursor(context.cursor)
    now, skipped = landing_scan(landing.path)
    skipped_now = sorted(str(f) for f in skipped)
    for line in landing_warnings(before, now, skipped_before, skipped_now):
        context.log.warning(line)
    new_campaigns, changed = landing_changes(before or {}, now)
    if before is None:
        new_campaigns, changed = _not_loaded_yet(context.instance, new_campaigns, changed, now)
    cursor = landing_cursor(now, skipped_now)
    orphans = _orphan_partitions(context.instance, landing.path, context.log)
    if not new_campaigns and not changed and not orphans:
        note = f"; {len(skipped_now)} landing file(s) skipped (see the tick's log)" if skipped_now else ""
        return dg.SensorResult(skip_reason=f"no new or changed landing files{note}", cursor=cursor)
    # the new campaigns added as partitions (a campaign's days are none: defs/common.py), the orphans removed
    partitions = ([campaign_partitions.build_add_request(new_campaigns)] if new_campaigns else []) + \
        ([campaign_partitions.build_delete_request(list(orphans))] if orphans else [])
    return dg.SensorResult(run_requests=_ingest_requests(changed, now), cursor=cursor,
                           dynamic_partitions_requests=partitions)


# helpers of the landing sensor (Dagster instance queries and run requests)


def _not_loaded_yet(instance: dg.DagsterInstance, new_campaigns: list[str], changed: list[tuple[str, str]],
                    now: dict) -> tuple[list[str], list[tuple[str, str]]]:
    """First tick: files not modified since the campaign's latest rct_events materialization (e.g.
    by `promo run`) are taken as seen, and campaigns already registered as not new; only the others
    are requested."""
    registered = set(instance.get_dynamic_partitions(campaign_partitions.name))
    latest: dict[str, float] = {}
    for campaign in {c for c, _ in changed}:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("rct_events"), asset_partitions=[campaign]), limit=1).records
        latest[campaign] = records[0].timestamp if records else float("-inf")
    return ([c for c in new_campaigns if c not in registered],
            [(c, d) for c, d in changed if modified_seconds(now[c][d]) > latest[c]])


def _ingest_requests(changed: list[tuple[str, str]], now: dict) -> list[dg.RunRequest]:
    """One run per campaign with changed files: rct_events[campaign] loads every one of them."""
    by_campaign: dict[str, list[str]] = {}
    for campaign, day in changed:
        by_campaign.setdefault(campaign, []).append(f"{day}:{now[campaign][day]}")
    return [
        dg.RunRequest(
            run_key=f"landing:{campaign}:" + hashlib.sha256(",".join(sorted(files)).encode()).hexdigest()[:16],
            partition_key=campaign,
            tags={"promo/campaign": campaign, "promo/trigger": "landing_sensor"},
        )
        for campaign, files in sorted(by_campaign.items())
    ]


def _orphan_partitions(instance: dg.DagsterInstance, landing, log) -> list[str]:
    """Campaign partitions with no landing folder that never loaded a day: added with "Add partition"
    in the UI's materialize dialog (Dagster offers it for every dynamic partition set). Removed, with
    a warning; a campaign whose folder went away after it loaded days keeps its partition (its history)."""
    if not landing.is_dir():  # a landing folder that is not there (a wrong setting) removes nothing
        return []
    orphans = []
    for campaign in instance.get_dynamic_partitions(campaign_partitions.name):
        if (landing / campaign).exists() or (landing / campaign).is_symlink():
            continue
        if instance.fetch_materializations(dg.AssetRecordsFilter(
                asset_key=dg.AssetKey("rct_events"), asset_partitions=[campaign]), limit=1).records:
            continue
        log.warning(f"campaign partition '{campaign}' has no landing folder {landing / campaign} and never loaded a "
                    "day (added in the UI?): removed; create the folder to add the campaign")
        orphans.append(campaign)
    return orphans


with warnings.catch_warnings():  # use_user_code_server is in beta: its warning would print at every load of the code
    warnings.simplefilter("ignore", dg.BetaWarning)
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
        description="Evaluates the assets' automation conditions (promo_assets/defs/automation/conditions.py): "
        "payment_edges / merchant_events are reloaded with rct_events of the same campaign, and a "
        "campaign is refreshed downstream once after any ingestion of it (promo run, schedule, landing "
        "sensor, backfill), when none of its upstream partitions is in progress.",
    )
