"""The automation conditions of the asset graph, in one place (Dagster's declarative automation).

They replace the hand-written `downstream_refresh` run-status sensor, which watched `ingest_job`
only. The `automation` sensor (automation.py) evaluates them in the daemon (`dagster dev` runs it);
the UI's Automation page shows every evaluation, node by node, with the labels below.

- `INGESTION_CONDITION` (payment_edges, merchant_events): reload a date|campaign partition when
  `rct_events` of that partition was materialized by a run that did not load it too (a backfill of
  `rct_events` alone from its asset page), once that partition is no longer in progress.
- `CAMPAIGN_CONDITION` (every campaign-level asset, through `COMMON` / `GRAPH`): refresh a campaign
  when any upstream partition of it was updated, by any run (`promo run` excepted: it refreshes
  downstream itself), once none of its upstream partitions is in progress (a run or a backfill not
  past it yet); a 3-day backfill therefore refreshes the campaign once, after its last day, and all
  the campaign's assets are requested on the same tick, with that tick's reloads of
  payment_edges / merchant_events (one backfill: Dagster runs the reloads before the graph assets
  that read them). Updates made by a run that also targeted the asset do not count (Dagster's
  `executed_with_root_target`), and an update seen on the same tick as the asset's own later
  materialization does not either: a campaign_job run launched from the UI triggers nothing more.
  An asset also waits while an upstream is due for a refresh but not requested on this tick
  (`any_deps_waiting`: the graph assets wait for a payment_edges reload still running, and with them
  the gnn_hazard chain, the joint allocation and the leaderboard), so that nothing runs first on a
  stale upstream and again after it.
  It also fires when an upstream was updated after the asset was last requested, the asset did not
  materialize since, and another upstream's latest execution failed (`gathered_unhandled`): an asset
  that gathers several independent chains (the campaign's leaderboard over every model's evaluation)
  is requested alone on the next tick when the run that requested it skipped it because one chain
  failed. A model that failed by itself is not retried (its upstreams did not fail).
  No dependency has to be present (a campaign without a day of some file, a model that failed or
  does not apply): `AutomationCondition.eager()` would wait for all of them forever.

Runs of `promo run` carry the tag `REFRESHED_BY_CLI`: the CLI materializes the campaign downstream
itself in the same call, so their updates trigger nothing here, also when a tick falls between the
CLI's ingestion runs and its campaign run. (After the CLI has finished, nothing is left to do anyway:
every downstream asset was materialized after its deps.)
"""

from __future__ import annotations

import dagster as dg

AC = dg.AutomationCondition

# Tag on `promo run`'s runs: the CLI refreshes the campaign downstream itself (`--ingest-only` runs
# do not carry it, so the automation refreshes after them).
REFRESHED_BY_CLI = {"promo/downstream": "cli"}


def _updated_elsewhere() -> dg.AutomationCondition:
    """A partition updated since the previous tick, by a run that did not target the asset this
    condition belongs to and was not a `promo run` run."""
    return (
        AC.newly_updated()
        & ~AC.executed_with_root_target()
        # per partition updated since the previous tick (executed_with_tags covers the first tick of a
        # fresh instance, where Dagster has no event cursor yet, for the latest partition)
        & ~(
            AC.all_new_updates_have_run_tags(tag_values=REFRESHED_BY_CLI)
            | AC.executed_with_tags(tag_values=REFRESHED_BY_CLI)
        ).with_label("updated_by_promo_run")
    ).with_label("newly_updated_elsewhere")


def _any_deps_updated() -> dg.AutomationCondition:
    return AC.any_deps_match(_updated_elsewhere() | AC.will_be_requested()).with_label("any_deps_updated")


def _handled() -> dg.AutomationCondition:
    return (AC.newly_requested() | AC.newly_updated() | AC.initial_evaluation()).with_label("handled")


def _gathered_unhandled() -> dg.AutomationCondition:
    """An upstream partition was updated after this asset was last requested, and this asset has not
    materialized since that update (timestamps decide when both are seen on the same tick), and
    another upstream's latest execution failed: the asset was skipped for that upstream's failure,
    its other upstreams are new. Not while an upstream's latest update is from `promo run`."""
    dep_updated_since_request = (
        AC.any_deps_match(AC.newly_updated()).since(AC.newly_requested()).with_label("dep_updated_since_requested")
    )
    updated_after_deps = (
        AC.newly_updated().since(AC.any_deps_match(AC.newly_updated())).with_label("updated_after_deps")
    )
    return (
        dep_updated_since_request
        & ~updated_after_deps
        & AC.any_deps_match(AC.execution_failed()).with_label("any_deps_failed")
        & ~AC.any_deps_match(AC.executed_with_tags(tag_values=REFRESHED_BY_CLI)).with_label("any_deps_from_promo_run")
    ).with_label("gathered_unhandled")


INGESTION_CONDITION = (
    _any_deps_updated().since(_handled())
    & ~AC.any_deps_in_progress()
    & ~AC.in_progress()
).with_label("reload_with_rct_events")

def _refresh_due() -> dg.AutomationCondition:
    return _any_deps_updated().since(_handled()).with_label("refresh_due")


def _any_deps_waiting() -> dg.AutomationCondition:
    """An upstream asset is due for a refresh but not requested on this tick (it waits for one of
    its own upstreams in progress, e.g. the graph for a running payment_edges reload): this asset
    waits with it, so that it does not run now on the stale upstream and again after it. Through
    each asset's own condition, the wait reaches everything downstream."""
    return AC.any_deps_match(_refresh_due() & ~AC.will_be_requested()).with_label("any_deps_waiting")


CAMPAIGN_CONDITION = (
    (_refresh_due() | _gathered_unhandled())
    & ~AC.any_deps_in_progress()
    & ~AC.in_progress()
    & ~_any_deps_waiting()
).with_label("refresh_campaign")
