"""The automation conditions of the asset graph, in one place (Dagster's declarative automation).

They replace the hand-written `downstream_refresh` run-status sensor, which watched `ingest_job`
only. The `automation` sensor (jobs.py) evaluates them in the code server (`use_user_code_server`:
one operand is Python code of this module; `dagster dev` runs the sensor);
the UI's Automation page shows every evaluation, node by node, with the labels below.

- `INGESTION_CONDITION` (payment_edges, merchant_events): load a campaign's new or changed side files
  when its `rct_events` was materialized by a run that did not load them too (a materialization or
  backfill of `rct_events` alone from its asset page), once that campaign is no longer in progress.
- `CAMPAIGN_CONDITION` (every campaign-level asset, through `COMMON` / `GRAPH`): refresh a campaign
  when any upstream partition of it was updated, by any run that did not also target the asset, once none of its upstream partitions is in progress (a run or a backfill not
  past it yet); a backfill of several campaigns' ingestion therefore refreshes each campaign once, after its ingestion, and all
  the campaign's assets are requested on the same tick, with that tick's reloads of
  payment_edges / merchant_events (one backfill: Dagster runs the reloads before the graph assets
  that read them). Updates made by a run that also targeted the asset do not count (Dagster's
  `executed_with_root_target`), and an update seen on the same tick as the asset's own later
  materialization does not either: a campaign_job run launched from the UI triggers nothing more.
  An asset also waits while an upstream is due for a refresh but not requested on this tick
  (`any_deps_waiting`: the graph assets wait for a payment_edges reload still running, and with them
  the gnn_hazard chain, the joint allocation and the leaderboard), so that nothing runs first on a
  stale upstream and again after it.
  A *skipped* execution counts as handled like a materialization (`EndedUnmaterialized`, a Python
  operand of this module: the latest run that targeted the partition ended without materializing
  it): a model that does not apply yields nothing and Dagster skips its chain, which therefore never
  materializes; without this, the chain would be requested again whenever its upstream was
  refreshed by another run than the one that skipped it (an asset backfill runs the campaign's
  assets before the graph side that waits for the reloads). A failed execution counts too: a model
  that failed by itself is not retried for the same upstream updates.
- `GATHER_CONDITION` (the leaderboard, which gathers every model's chain): the same, and it also
  fires when an upstream was updated after the asset was last requested, the asset did not
  materialize since, and another upstream's latest execution failed or was skipped
  (`gathered_unhandled`): the run that requested the leaderboard skipped it because one chain
  failed or did not apply in that run, so it is requested alone on the next tick.
  No dependency has to be present (a campaign without a day of some file, a model that failed or
  does not apply): `AutomationCondition.eager()` would wait for all of them forever.

`promo run` needs no case of its own: it ingests and refreshes a campaign in one run that targets
every asset it updates (`executed_with_root_target`), as a materialization from the UI does. Only
when a chain failed or was skipped does it run the leaderboard (and then the decisions) in runs of
their own, exactly what these conditions request; a tick that falls between its refresh run and its
leaderboard run (the daemon running beside `promo run`) requests the leaderboard too, which
re-assembles the same rows.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg

from promo_assets.config import settings
from promo_assets.defs.common import WAREHOUSE_POOL, campaign_partitions, model_of_key
from promo_assets.ingestion import cached_config

AC = dg.AutomationCondition

def _updated_elsewhere() -> dg.AutomationCondition:
    """A partition updated since the previous tick, by a run that did not target the asset this
    condition belongs to."""
    return (AC.newly_updated() & ~AC.executed_with_root_target()).with_label("newly_updated_elsewhere")


def _any_deps_updated() -> dg.AutomationCondition:
    return AC.any_deps_match(_updated_elsewhere() | AC.will_be_requested()).with_label("any_deps_updated")


class EndedUnmaterialized(dg.AutomationCondition):
    """The latest run that targeted the asset partition (its latest planned materialization) has
    ended without materializing it: the step was skipped (a model that does not apply yields
    nothing, and Dagster skips the rest of its chain in that run) or failed. With `newly`, only when
    that run ended after the previous tick. Dagster's operands cannot say this: an asset that is
    skipped never materializes, so `newly_updated` never resets its refresh, and
    `executed_with_root_target` only covers upstream updates made by the same run (an asset backfill
    updates a chain's upstreams in one run and executes the chain in the next)."""

    def __init__(self, newly: bool = False, label: str | None = None):
        self.newly, self.label = newly, label

    def with_label(self, label: str | None) -> "EndedUnmaterialized":
        return EndedUnmaterialized(self.newly, label)

    @property
    def name(self) -> str:
        return "newly_ended_unmaterialized" if self.newly else "ended_unmaterialized"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        since = context.previous_evaluation_time
        empty = dg.AutomationResult(context, true_subset=context.get_empty_subset())
        if context.candidate_subset.is_empty or (self.newly and since is None):
            return empty
        instance = context.asset_graph_view.instance
        if self.newly and not self.may_have_targeted(self.runs_ended_since(instance, since.timestamp()), context.key):
            return empty  # no run that could have targeted the asset ended since the previous tick
        keys = context.candidate_subset.expensively_compute_partition_keys()
        ended = {pk for pk in keys if self.ended_unmaterialized(instance, context.key, pk, since if self.newly else None)}
        return dg.AutomationResult(context, true_subset=context.candidate_subset.compute_intersection_with_partition_keys(ended))

    @staticmethod
    def runs_ended_since(instance, since: float) -> list:
        """The runs that ended since `since` (a timestamp): one query per tick, not per asset."""
        cache_key = (id(instance), since)
        if cache_key not in _ENDED:
            _ENDED.clear()
            ended = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
            records = instance.get_run_records(
                dg.RunsFilter(updated_after=dt.datetime.fromtimestamp(since, dt.timezone.utc), statuses=ended))
            _ENDED[cache_key] = [r for r in records if r.end_time is not None and r.end_time > since]
        return _ENDED[cache_key]

    @staticmethod
    def may_have_targeted(records: list, key: dg.AssetKey) -> bool:
        """A run's asset selection names the asset, or the run records none (a job's whole selection)."""
        return any(not r.dagster_run.asset_selection or key in r.dagster_run.asset_selection for r in records)

    @staticmethod
    def ended_unmaterialized(instance, key: dg.AssetKey, partition: str | None, since) -> bool:
        """The latest planned materialization of `key` / `partition` is of a run that has ended (after
        `since`, when given) without materializing it."""
        planned = instance.get_latest_planned_materialization_info(key, partition)
        if planned is None:
            return False
        record = instance.get_run_record_by_id(planned.run_id)
        if record is None or not record.dagster_run.is_finished or (since is not None and (
                record.end_time is None or record.end_time <= since.timestamp())):
            return False
        partitions = None if partition is None else [partition]
        latest = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=partitions), limit=1).records
        return not latest or latest[0].run_id != planned.run_id


_ENDED: dict = {}  # (instance, previous tick) -> the runs that ended since: one query per tick, not per asset


def _handled() -> dg.AutomationCondition:
    """Requested, materialized, or executed by a run that ended without materializing it (skipped
    or failed: not retried for the same upstream updates), since the previous tick."""
    return (AC.newly_requested() | AC.newly_updated() | AC.initial_evaluation()
            | EndedUnmaterialized(newly=True)).with_label("handled")


def _gathered_unhandled() -> dg.AutomationCondition:
    """An upstream partition was updated after this asset was last requested, and this asset has not
    materialized since that update (timestamps decide when both are seen on the same tick), and
    another upstream's latest execution failed or ended without materializing it (skipped): the asset
    was not executed for that upstream's failure or skip, its other upstreams are new."""
    dep_updated_since_request = (
        AC.any_deps_match(AC.newly_updated()).since(AC.newly_requested()).with_label("dep_updated_since_requested")
    )
    updated_after_deps = (
        AC.newly_updated().since(AC.any_deps_match(AC.newly_updated())).with_label("updated_after_deps")
    )
    return (
        dep_updated_since_request
        & ~updated_after_deps
        & AC.any_deps_match(AC.execution_failed() | EndedUnmaterialized()).with_label("any_deps_failed_or_skipped")
    ).with_label("gathered_unhandled")


INGESTION_CONDITION = (
    _any_deps_updated().since(_handled())
    & ~AC.any_deps_in_progress()
    & ~AC.in_progress()
).with_label("reload_with_rct_events")

def _refresh_due() -> dg.AutomationCondition:
    return _any_deps_updated().since(_handled()).with_label("refresh_due")


class TrainedForCampaign(dg.AutomationCondition):
    """The campaign (partition key) trains model `model` (default: the model whose chain the asset
    is in, `<model>/<step>`; any other asset is true): its campaign.yaml selects it and it applies
    (`registry.skip_reason` is None). A chain skipped by design is then never requested, so an
    automation backfill holds only the chains that run, and shows success when they all succeed;
    an asset gathering the chains (the leaderboard) does not wait for the chains not trained. A
    campaign.yaml that cannot be read counts as training it (the campaign's own assets then fail
    with the reason)."""

    def __init__(self, model: str | None = None, label: str | None = None):
        self.model, self.label = model, label

    def with_label(self, label: str | None) -> "TrainedForCampaign":
        return TrainedForCampaign(self.model, label)

    @property
    def name(self) -> str:
        return f"trained_for_campaign({self.model or 'its chain'})"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        model = self.model or model_of_key(context.key)
        if model is None or context.candidate_subset.is_empty:
            return dg.AutomationResult(context, true_subset=context.candidate_subset)
        keys = context.candidate_subset.expensively_compute_partition_keys()
        trained = {k for k in keys if self.skip_reason(model, k) is None}
        return dg.AutomationResult(context, true_subset=context.candidate_subset.compute_intersection_with_partition_keys(trained))

    @staticmethod
    def skip_reason(model: str, campaign: str) -> str | None:
        """Why `campaign` does not train `model` (from its campaign.yaml alone), None when it does or
        the campaign.yaml cannot be read."""
        from promo_assets.models import registry

        try:  # cached_config parses a campaign.yaml once per content (a hit reads and hashes the file: ~0.2 ms)
            return registry.skip_reason(model, cached_config(settings.landing_dir(), campaign))
        except Exception:  # noqa: BLE001 (a refused campaign.yaml fails the campaign's own assets, with its reason)
            return None


def _any_deps_waiting() -> dg.AutomationCondition:
    """An upstream asset is due for a refresh but not requested on this tick (it waits for one of
    its own upstreams in progress, e.g. the graph for a running payment_edges reload), unless it is
    the chain of a model the campaign does not train (never requested for it): this asset waits with it, so that it does not run now on the stale upstream and again after it. Through
    each asset's own condition, the wait reaches everything downstream."""
    return AC.any_deps_match(_refresh_due() & ~AC.will_be_requested() & TrainedForCampaign().with_label(
        "trained_for_campaign")).with_label("any_deps_waiting")


def _campaign_condition(trigger: dg.AutomationCondition, label: str) -> dg.AutomationCondition:
    return (
        trigger
        & ~AC.any_deps_in_progress()
        & ~AC.in_progress()
        & ~_any_deps_waiting()
    ).with_label(label)


CAMPAIGN_CONDITION = _campaign_condition(_refresh_due(), "refresh_campaign")

# The leaderboard gathers every model's chain: also requested alone when the run that requested it
# did not execute it because one chain was skipped or failed in it.
GATHER_CONDITION = _campaign_condition(_refresh_due() | _gathered_unhandled(), "refresh_gathered")


def model_condition(model: str) -> dg.AutomationCondition:
    """A model chain's condition: the campaign's refresh, only for the campaigns that train the model."""
    return (CAMPAIGN_CONDITION & TrainedForCampaign(model).with_label("trained_for_campaign")).with_label("refresh_trained_model")


# A monitoring reaction that acted (`monitoring_reaction` updated: retrain or fallback, campaign.yaml
# monitoring.reactions) refreshes the training frame, and so every model chain, and the champion, at once.
REACTION_CONDITION = _campaign_condition(
    _refresh_due() | AC.asset_matches(dg.AssetKey("monitoring_reaction"), AC.newly_updated()).with_label(
        "monitoring_reaction_updated"), "refresh_or_react")

# the asset kwargs every campaign-level and per-model asset shares: the campaign partitions, the
# warehouse pool and the campaign's refresh
COMMON = dict(partitions_def=campaign_partitions, pool=WAREHOUSE_POOL, automation_condition=CAMPAIGN_CONDITION)
