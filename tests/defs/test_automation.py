"""The daily schedule and the landing sensor evaluated directly; the automation conditions evaluated
with `dg.evaluate_automation_conditions` (what the `automation` sensor runs in the daemon)."""

from __future__ import annotations

import datetime as dt
import functools
import json
from unittest import mock

import dagster as dg
import pytest

from promo_assets.simulation import REFERENCE_START
from tests.unit.ingestion.test_ingestion import good_frame, write_campaign


@pytest.fixture
def landing(promo_env):
    folder = write_campaign(promo_env["landing"], "c1")
    for day in ("2026-03-01", "2026-03-02"):
        good_frame().to_parquet(folder / "events" / f"{day}.parquet")
    write_campaign(promo_env["landing"], "c2")
    good_frame().to_parquet(promo_env["landing"] / "c2" / "events" / "2026-03-01.parquet")
    return promo_env["landing"]


def sensor_context(instance, landing, cursor=None):
    from promo_assets.defs.common import LandingResource

    return dg.build_sensor_context(instance=instance, cursor=cursor, resources={"landing": LandingResource(root=str(landing))})


def schedule_context(instance, landing, when):
    from promo_assets.defs.common import LandingResource

    return dg.build_schedule_context(
        instance=instance, scheduled_execution_time=when, resources={"landing": LandingResource(root=str(landing))}
    )


def keys(requests):
    return sorted(r.partition_key for r in requests)


def test_landing_sensor_adds_campaigns_and_requests_new_files(landing):
    from promo_assets.defs.automation.jobs import landing_sensor

    with dg.instance_for_test() as instance:
        result = landing_sensor(sensor_context(instance, landing))
        assert keys(result.run_requests) == ["c1", "c2"]  # one run per campaign loads all its new files
        [added] = result.dynamic_partitions_requests  # the campaigns; days are no partitions
        assert sorted(added.partition_keys) == ["c1", "c2"]
        # nothing changed: skip
        again = landing_sensor(sensor_context(instance, landing, result.cursor))
        assert again.run_requests == [] and again.skip_reason is not None
        # a new day file for c2 only
        good_frame(seed=9).to_parquet(landing / "c2" / "events" / "2026-03-02.parquet")
        third = landing_sensor(sensor_context(instance, landing, result.cursor))
        assert keys(third.run_requests) == ["c2"]
        assert third.dynamic_partitions_requests == []  # c2 is no new campaign
        # the same file rewritten: a new run (its run key names the file's new fingerprint)
        fourth = landing_sensor(sensor_context(instance, landing, third.cursor))
        assert fourth.run_requests == []
        good_frame(seed=10).to_parquet(landing / "c2" / "events" / "2026-03-02.parquet")
        fifth = landing_sensor(sensor_context(instance, landing, third.cursor))
        assert keys(fifth.run_requests) == ["c2"] and fifth.run_requests[0].run_key != third.run_requests[0].run_key
        assert json.loads(third.cursor)["files"]["c2"].keys() == {"2026-03-01", "2026-03-02"}


def test_landing_sensor_first_tick_skips_partitions_already_materialized(landing):
    from promo_assets.definitions import defs
    from promo_assets.defs.automation.jobs import landing_sensor

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1"])
        job = defs.resolve_job_def("ingest_job")
        assert job.execute_in_process(partition_key="c1", instance=instance).success  # both days of c1
        result = landing_sensor(sensor_context(instance, landing))
        assert keys(result.run_requests) == ["c2"]  # c1's files are older than its materialization
        [added] = result.dynamic_partitions_requests
        assert added.partition_keys == ["c2"]


def test_daily_schedule_requests_yesterday_for_registered_campaigns(landing):
    from promo_assets.defs.automation.jobs import daily_campaign_refresh

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1", "c2"])
        when = dt.datetime(2026, 3, 3, 3, 0, tzinfo=dt.timezone.utc)
        requests = daily_campaign_refresh(schedule_context(instance, landing, when))
        assert keys(requests) == ["c1"]  # c2 has no file for 2026-03-02
        assert requests[0].run_key == "daily:c1:2026-03-02"
        when = dt.datetime(2026, 3, 2, 3, 0, tzinfo=dt.timezone.utc)
        requests = daily_campaign_refresh(schedule_context(instance, landing, when))
        assert keys(requests) == ["c1", "c2"]
        when = dt.datetime(2026, 4, 1, 3, 0, tzinfo=dt.timezone.utc)
        skipped = daily_campaign_refresh(schedule_context(instance, landing, when))
        assert isinstance(skipped, dg.SkipReason) and "2026-03-31" in skipped.skip_message


def test_simulate_demo_job_fills_an_empty_landing_folder_only(promo_env):
    from promo_assets.definitions import defs
    from promo_assets.ingestion import day_files

    job = defs.resolve_job_def("simulate_demo_job")
    config = {"ops": {"simulate_campaign": {"config": {"days": 3, "users": 200, "start": REFERENCE_START.isoformat()}}}}
    with dg.instance_for_test() as instance:
        assert job.execute_in_process(run_config=config, instance=instance).success
        assert min(day_files(promo_env["landing"], "demo")) == REFERENCE_START  # the start it was given
        assert len(day_files(promo_env["landing"], "demo")) == 3
        assert instance.get_dynamic_partitions("campaign") == ["demo"]
        config["ops"]["simulate_campaign"]["config"].update(campaign="other")
        assert job.execute_in_process(run_config=config, instance=instance).success
        assert not (promo_env["landing"] / "other").exists()  # only_if_empty: the folder was not empty


# --------------------------------------------------------------------------------------------
# declarative automation (promo_assets/defs/automation/conditions.py)

DAYS = ("2026-03-01", "2026-03-02", "2026-03-03")
INGESTION = {"rct_events", "payment_edges", "merchant_events"}


@pytest.fixture
def three_days(promo_env):
    import pandas as pd

    folder = write_campaign(promo_env["landing"], "c1")
    (folder / "edges").mkdir()
    for i, day in enumerate(DAYS):
        good_frame(seed=i).to_parquet(folder / "events" / f"{day}.parquet")
        pd.DataFrame({"user_id": ["u0000", "u0001"], "merchant_id": ["m1", "m2"], "weight": [1.0, 2.0]}).to_parquet(
            folder / "edges" / f"{day}.parquet"
        )
    return promo_env


# The conditions are the same for every model's chain (one factory, model_assets.model_chain): the
# tests that evaluate the conditions tick by tick build the Definitions with three chains, one of
# each shape (one phase, two phases, the graph model that skips without a graph), not all registered
# models' (86 assets): each evaluation of the graph is about three times cheaper.
CHAINS = ("s_learner", "dipn", "gnn_hazard")


@functools.cache
def chain_defs() -> dg.Definitions:
    from promo_assets.definitions import build_defs

    return build_defs(CHAINS)


class Ticks:
    """The automation sensor's ticks, evaluated in the test (cursor carried from tick to tick)."""

    def __init__(self, defs, instance):
        self.defs, self.instance, self.cursor = defs, instance, None

    def __call__(self) -> dict[str, set[str]]:
        # The sensor's context reads dynamic partitions through Dagster's CachingDynamicPartitionsLoader
        # (one query per partitions definition and tick); the tester asks the instance again for every
        # subset it writes into the cursor: 22,720 sqlite queries, 94% of the reload test's time
        # (cProfile). The same per-tick cache here; nothing adds partitions during an evaluation.
        with mock.patch.object(self.instance, "get_dynamic_partitions",
                               functools.cache(self.instance.get_dynamic_partitions)):
            result = dg.evaluate_automation_conditions(defs=self.defs, instance=self.instance, cursor=self.cursor)
        self.cursor = result.cursor
        graph = self.defs.resolve_asset_graph()
        return {
            key.to_user_string(): set(result.get_requested_partitions(key))
            for key in graph.get_all_asset_keys()
            if result.get_num_requested(key)
        }


def materialize(defs, instance, names, partition_key, tags=None, must_succeed=True, run_config=None):
    """One run of `names` as Dagster launches one (UI, sensor, backfill): the run records its asset
    selection, which the conditions read (`executed_with_root_target`; `dg.materialize`'s ephemeral
    job would record none)."""
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        asset_selection=[dg.AssetKey.from_user_string(n) for n in names], partition_key=partition_key,
        instance=instance, tags=tags or {}, raise_on_error=False, run_config=run_config or {},
    )
    assert result.success or not must_succeed, [e.message for e in result.all_events if e.is_failure]
    return result


def row_counts(warehouse) -> dict[str, int]:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as con:
        return {
            table: con.execute(f"select count(*) from {table} where campaign = 'c1'").fetchone()[0]
            for table in ("rct_events", "rejected_events", "payment_edges")
        }


def in_progress_backfill(defs, instance, backfill_id: str, names, partitions) -> None:
    """An asset backfill of `names` x `partitions` that has not finished: Dagster counts its
    partitions as in progress (what a running reload looks like to the conditions)."""
    from dagster._core.execution.backfill import PartitionBackfill

    instance.add_backfill(PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id, asset_graph=defs.resolve_asset_graph(), partition_names=[str(p) for p in partitions],
        asset_selection=[dg.AssetKey.from_user_string(n) for n in names], backfill_timestamp=0.0, tags={},
        dynamic_partitions_store=instance, all_partitions=False, title=None, description=None, run_config=None,
    ))


def refresh_as_requested(defs, instance, tick, campaign: set[str], reloads: list[str]) -> set[str]:
    """Execute the refresh a tick requested (the campaign's assets and the reloads) as
    Dagster's asset backfill runs it, the backfill in progress meanwhile (a tick then requests
    nothing): first the reloads and every campaign asset that does not read them, then the graph
    assets and everything downstream of them in one run, the leaderboard with them. Returns the
    assets that last run materialized."""
    from dagster._core.execution.backfill import BulkActionStatus

    graph = defs.resolve_asset_graph()
    after_reload, todo = set(), [dg.AssetKey.from_user_string(n) for n in reloads]
    while todo:
        for child in graph.get(todo.pop()).child_keys:
            after_reload.add(child.to_user_string())
            todo.append(child)
    in_progress_backfill(defs, instance, "refresh_days", reloads, ["c1"])
    in_progress_backfill(defs, instance, "refresh_c1", sorted(campaign), ["c1"])
    materialize(defs, instance, reloads, "c1")
    materialize(defs, instance, sorted(campaign - after_reload), "c1")
    assert tick() == {}, "nothing while the backfill runs"
    last = materialize(defs, instance, sorted(campaign & after_reload), "c1", must_succeed=False)
    for backfill_id in ("refresh_days", "refresh_c1"):
        instance.update_backfill(instance.get_backfill(backfill_id).with_status(BulkActionStatus.COMPLETED_SUCCESS))
    return {e.asset_key.to_user_string() for e in last.get_asset_materialization_events()}


def chain_tables(warehouse) -> dict[str, list[tuple]]:
    """Per table of the model chains, the (model, model_version, ...) groups with their row counts
    and distinct keys for campaign c1: equal counts mean no duplicated rows."""
    import duckdb

    queries = {
        "model_registry": "SELECT model, count(*), count(DISTINCT model_version) FROM model_registry WHERE campaign = 'c1' GROUP BY 1",
        "response_coefficients": "SELECT model, model_version, target, count(*), count(DISTINCT (user_id, level)) "
                                 "FROM response_coefficients WHERE campaign = 'c1' GROUP BY ALL",
        "budget_dual": "SELECT model, model_version, count(*), count(DISTINCT budget_per_capita) FROM budget_dual "
                       "WHERE campaign = 'c1' GROUP BY ALL",
        "allocation": "SELECT model, model_version, count(*), count(DISTINCT (budget_per_capita, user_id)), "
                      "count(DISTINCT user_id) FROM allocation WHERE campaign = 'c1' GROUP BY ALL",
        "policy_evaluation": "SELECT model, count(*), count(DISTINCT budget_per_capita), count(DISTINCT run_id) "
                             "FROM policy_evaluation WHERE campaign = 'c1' GROUP BY ALL",
        "outcome_predictions": "SELECT count(*), count(DISTINCT (event_date, source_row, level)) FROM outcome_predictions "
                               "WHERE campaign = 'c1'",
        "holdout_users": "SELECT count(DISTINCT r.user_id) FROM training_frame t JOIN rct_events r USING (campaign, event_date, "
                         "source_row) WHERE t.campaign = 'c1' AND t.split = 'holdout'",
    }
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return {name: sorted(con.execute(q).fetchall()) for name, q in queries.items()}


@pytest.mark.slow  # the ingestion, the campaign's whole refresh (PROMO_MAX_EPOCHS=3) and 7 evaluations of the graph
def test_backfill_of_three_days_from_the_asset_page_refreshes_the_campaign_once(three_days):
    """Catalog → rct_events → Materialize… → campaign c1 (run config: its 3 days, reload) → Launch
    backfill: the UI creates an asset backfill of rct_events alone, whose one run loads the 3 days.
    The automation then reloads payment_edges / merchant_events of the campaign and requests every
    campaign-level asset for c1 exactly once, after the backfill; nothing while it is in progress,
    and not the gnn_hazard chain: the campaign does not train it (no `merchants:` block), so the
    refresh holds only chains that run and ends in success. The refresh it requested is then
    executed for real, as Dagster's asset backfill runs it: every requested asset materializes, the
    leaderboard, the champion, the decisions, the outbox and the report included, and nothing is
    requested after it. Every model chain's tables hold one set of rows for c1 (no duplicates)."""
    from dagster._core.execution.backfill import BulkActionStatus

    defs = chain_defs()

    campaign_assets = {
        k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()
    } - INGESTION
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1"])
        tick = Ticks(defs, instance)
        materialize(defs, instance, INGESTION, "c1")
        assert tick() == {}  # first evaluation: nothing (Dagster's initial_evaluation)
        before = row_counts(three_days["warehouse"])
        assert before["rct_events"] == 150 and before["payment_edges"] == 6

        in_progress_backfill(defs, instance, "uibackfill", ["rct_events"], ["c1"])
        assert tick() == {}, "the backfill is in progress: nothing yet"
        reload = {"ops": {"rct_events": {"config": {"first_day": DAYS[0], "last_day": DAYS[-1], "reload": True}}}}
        materialize(defs, instance, ["rct_events"], "c1", tags={"dagster/backfill": "uibackfill"}, run_config=reload)
        assert tick() == {}, "the backfill is in progress: nothing yet"
        instance.update_backfill(instance.get_backfill("uibackfill").with_status(BulkActionStatus.COMPLETED_SUCCESS))

        requested = tick()
        assert requested.pop("payment_edges") == {"c1"}
        assert requested.pop("merchant_events") == {"c1"}
        not_trained = {a for a in campaign_assets if a.startswith("gnn_hazard/")}
        assert not_trained  # its phases and its chain
        assert requested == {name: {"c1"} for name in campaign_assets - not_trained}  # the whole campaign, once
        assert tick() == {}  # requested: not again on the next tick

        # The tick's backfill, executed for real (the reloads first: the graph assets read them)
        last = refresh_as_requested(defs, instance, tick, set(requested), ["payment_edges", "merchant_events"])
        assert {"customer_merchant_graph", "leaderboard", "champion", "decisions", "outbox", "campaign_report"} <= last
        assert not {a for a in last if a.startswith("gnn_hazard/")}  # not requested: the campaign has no graph
        assert tick() == {}, "the reloads were requested with the refresh: no second refresh"
        assert tick() == {}
        assert row_counts(three_days["warehouse"]) == before  # partitions replaced, nothing duplicated

        tables = chain_tables(three_days["warehouse"])
        models = {"s_learner", "dipn"}  # gnn_hazard: skipped (no graph)
        assert {m for m, _, _ in tables["model_registry"]} == models | {"dipn_bias"}  # DIPN's first phase too
        assert all(n == 1 and versions == 1 for _, n, versions in tables["model_registry"])
        assert [(m, target) for m, _, target, _, _ in tables["response_coefficients"]] == [
            (m, t) for m in sorted(models) for t in ("holdout", "population")]
        assert all(n == distinct > 0 for *_, n, distinct in tables["response_coefficients"])
        assert [(m, n, budgets) for m, _, n, budgets in tables["budget_dual"]] == [(m, 1, 1) for m in sorted(models)]
        (holdout_users,), = tables["holdout_users"]
        assert [(m, n, distinct, users) for m, _, n, distinct, users in tables["allocation"]] == [
            (m, holdout_users, holdout_users, holdout_users) for m in sorted(models)]  # holdout users x 1 budget
        assert tables["policy_evaluation"] == [(m, 1, 1, 1) for m in sorted(models | {"random"})]
        (n, distinct), = tables["outcome_predictions"]
        assert n == distinct > 0


def test_ingestion_of_another_campaign_requests_only_that_campaign(three_days):
    defs = chain_defs()

    folder = write_campaign(three_days["landing"], "c2")
    good_frame().to_parquet(folder / "events" / f"{DAYS[0]}.parquet")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("campaign", ["c1", "c2"])
        tick = Ticks(defs, instance)
        tick()
        job = defs.resolve_job_def("ingest_job")  # the daily schedule / landing sensor's job: all three assets
        assert job.execute_in_process(partition_key="c2", instance=instance).success
        requested = tick()
        assert not INGESTION & set(requested)  # loaded together: no reload
        assert set(requested) and all(parts == {"c2"} for parts in requested.values())
        # a chain the campaign does not train (gnn_hazard: no merchants: block) is not requested at all
        assert "s_learner/model" in requested and not {k for k in requested if k.startswith("gnn_hazard/")}


def toy_campaign(skip: bool = False):
    """Toy assets with the project's conditions, no warehouse: frame -> features -> good_model,
    bad_model (raises), graph_model (also reads graph; yields nothing with `skip`: a model that does
    not apply) -> graph_coef, and the leaderboard gathering the three chains. Returns
    (defs, run(instance, names, tags=None))."""
    from promo_assets.defs.automation.conditions import CAMPAIGN_CONDITION, GATHER_CONDITION

    parts = dg.StaticPartitionsDefinition(["c1"])

    @dg.asset(partitions_def=parts)
    def frame(): ...

    @dg.asset(deps=[frame], partitions_def=parts, automation_condition=CAMPAIGN_CONDITION)
    def features(): ...

    @dg.asset(deps=[features], partitions_def=parts, automation_condition=CAMPAIGN_CONDITION)
    def good_model(): ...

    @dg.asset(deps=[features], partitions_def=parts, automation_condition=CAMPAIGN_CONDITION)
    def bad_model():
        raise dg.Failure("bad_model: domain error")

    @dg.asset(deps=[frame], partitions_def=parts, automation_condition=CAMPAIGN_CONDITION)
    def graph(): ...

    @dg.asset(deps=[graph, features], partitions_def=parts, automation_condition=CAMPAIGN_CONDITION,
              output_required=False)
    def graph_model():
        if not skip:
            yield dg.Output(None)

    @dg.asset(deps=[graph_model, features], partitions_def=parts, automation_condition=CAMPAIGN_CONDITION)
    def graph_coef(): ...

    @dg.asset(deps=[good_model, bad_model, graph_coef], partitions_def=parts, automation_condition=GATHER_CONDITION)
    def leaderboard(): ...

    defs = dg.Definitions(assets=[frame, features, good_model, bad_model, graph, graph_model, graph_coef, leaderboard])

    def run(instance, names, tags=None):
        return materialize(defs, instance, names, "c1", tags=tags, must_succeed=False).success

    return defs, run


def test_an_asset_gathering_chains_refreshes_when_another_chain_failed():
    """The campaign's leaderboard gathers every model's evaluation: when one model's chain fails in the
    refresh run, the run skips the leaderboard; the next tick requests it alone (once), and a failed
    model itself is not retried."""
    defs, run = toy_campaign()
    chains = ["features", "good_model", "bad_model", "graph", "graph_model", "graph_coef"]
    with dg.instance_for_test() as instance:
        run(instance, ["frame"])
        tick = Ticks(defs, instance)
        assert tick() == {}
        run(instance, ["frame"])
        assert tick() == {name: {"c1"} for name in chains + ["leaderboard"]}
        assert not run(instance, chains + ["leaderboard"])  # the refresh run: bad_model fails
        assert tick() == {"leaderboard": {"c1"}}  # the skipped leaderboard, alone; bad_model not retried
        assert tick() == {}
        assert run(instance, ["leaderboard"])
        assert tick() == {}
        # promo run: one run of the ingestion and every chain triggers nothing of what it targeted;
        # with a chain failed in it, only the leaderboard (which `promo run` then runs on its own)
        assert not run(instance, ["frame", *chains, "leaderboard"])
        assert tick() == {"leaderboard": {"c1"}}
        assert run(instance, ["leaderboard"])
        assert tick() == {}


@pytest.mark.parametrize("split", [False, True], ids=["one-run", "backfill-split"])
def test_a_skipped_chain_is_not_requested_again(split):
    """A model that does not apply yields nothing: Dagster skips its chain and, in the same run, the
    leaderboard. The next tick requests the leaderboard alone, never the skipped chain again: also
    when, as in an asset backfill, the chain's upstream was refreshed by an earlier run than the one
    that skipped it (the chain never materializes, so only its skipped execution can count as
    handled). A later upstream update refreshes the skipped chain like every other asset."""
    defs, run = toy_campaign(skip=True)
    everything = ["features", "good_model", "bad_model", "graph", "graph_model", "graph_coef", "leaderboard"]
    with dg.instance_for_test() as instance:
        run(instance, ["frame"])
        tick = Ticks(defs, instance)
        assert tick() == {}
        run(instance, ["frame"])
        assert set(tick()) == set(everything)
        if split:  # first the assets that do not wait for a reload, then the graph side with the leaderboard
            run(instance, ["features", "good_model", "bad_model"])
            run(instance, ["graph", "graph_model", "graph_coef", "leaderboard"])
        else:
            run(instance, everything)
        assert instance.get_latest_materialization_event(dg.AssetKey("leaderboard")) is None  # skipped with the chain
        assert tick() == {"leaderboard": {"c1"}}
        assert tick() == {}
        assert run(instance, ["leaderboard"])
        assert tick() == {}
        run(instance, ["frame"])  # new data: everything again, the skipped chain included
        assert set(tick()) == set(everything)


@pytest.mark.slow  # the whole campaign graph is materialized twice: minutes on 2 cores
def test_rct_events_landing_while_a_reload_runs_refreshes_each_asset_once(promo_env):
    """A *Materialize* of rct_events lands while a reload of payment_edges is still running. The
    assets that do not read the edges are refreshed at once; payment_edges is not requested again
    (its running reload loads whatever edge files changed), and the graph assets wait for the
    reload, and so does everything downstream of them (the gnn_hazard chain, the joint allocation,
    the leaderboard), instead of running first on the stale graph and again after it: over all ticks
    every campaign asset is requested exactly once. Materializations are recorded, not computed (this
    is about what the conditions request; the refresh itself runs in test_backfill_of_three_days_...)."""
    from collections import Counter

    from dagster._core.execution.backfill import BulkActionStatus

    defs = chain_defs()
    graph = defs.resolve_asset_graph()
    campaign_assets = {k.to_user_string() for k in graph.get_all_asset_keys()} - INGESTION
    waits, todo = set(), [dg.AssetKey("customer_merchant_graph")]
    while todo:  # the graph and everything downstream of it
        key = todo.pop()
        waits.add(key.to_user_string())
        todo += graph.get(key).child_keys
    assert {"customer_merchant_graph", "gnn_hazard/joint_allocation", "leaderboard"} <= waits
    with dg.instance_for_test() as instance:

        def record(name, partition):
            instance.report_runless_asset_event(dg.AssetMaterialization(name, partition=str(partition)))

        instance.add_dynamic_partitions("campaign", ["c1"])
        tick = Ticks(defs, instance)
        for name in INGESTION:  # loaded earlier (seen by the first tick: nothing to do)
            record(name, "c1")
        assert tick() == {}
        in_progress_backfill(defs, instance, "reload1", ["payment_edges"], ["c1"])
        record("rct_events", "c1")  # a *Materialize* of rct_events

        counts: Counter = Counter()
        first = tick()
        assert first.pop("merchant_events") == {"c1"}
        assert set(first) == campaign_assets - waits  # the graph and its downstream wait for the reload
        counts.update(list(first))
        for name in sorted(first - {"monitoring_reaction"} if isinstance(first, set) else
                           [n for n in first if n != "monitoring_reaction"]):  # only when a reaction acts
            record(name, "c1")
        record("merchant_events", "c1")
        counts.update(list(tick()))  # the reload still runs

        # the reload lands
        record("payment_edges", "c1")
        instance.update_backfill(instance.get_backfill("reload1").with_status(BulkActionStatus.COMPLETED_SUCCESS))
        second = tick()
        assert set(second) == waits
        counts.update(list(second))
        for name in sorted(n for n in second if n != "monitoring_reaction"):  # materialized only when a reaction acts
            record(name, "c1")
        counts.update(list(tick()))
        counts.update(list(tick()))
        assert counts == Counter({name: 1 for name in campaign_assets})

        # a monitoring reaction that acts (monitoring_reaction materialized: retrain, fallback) refreshes the
        # training frame, and so every chain, and the champion at once
        record("monitoring_reaction", "c1")
        reacted = tick()
        assert {"training_frame", "champion", "decisions", "outcomes"} <= set(reacted)  # a refresh of the campaign
