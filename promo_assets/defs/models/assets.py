"""One chain of assets per registered model, generated from `promo_assets.models.registry`.

For model `M` (key prefix = the model's name, group = the model's name; a model off by default
has the key prefix `optional/M` and the group `optional_models`):

    M/<phase> ...  (M/model, or dipn/bias_net -> dipn/uplift_net)  the fitted model, registered
      -> M/response_coefficients   v, c per user x level of the population and the holdout users
      -> M/budget_dual             λ* (and the tie share) per budget
      -> M/allocation              the population's levels at the stored λ* (no second solve)
      -> M/policy_evaluation       the same λ* applied to the holdout users, evaluated at equal spend

and the campaign-level `leaderboard` assembles the latest evaluation of every model with the
cost-matched random reference. A model that does not apply is *skipped*: its first phase asset
materializes nothing (output_required=False), records the reason (table model_skips, an
AssetObservation) and Dagster skips the rest of its chain. A model that raises fails its own chain
only. Every asset reads "the model of this chain" from the materialization Dagster recorded for its
upstream asset (its run and versions), never "the latest" of a table; each names the exact upstream
versions in its metadata and its data version. The logic lives in the domain packages; the
warehouse is read and written through the named functions of promo_assets.store.
"""


import json

import dagster as dg
import pandas as pd

from promo_assets.allocation.stored_plan import (
    ModelRun,
    decide_and_store,
    multiplier_rows,
    population_source,
    read_stored,
    solve_and_store,
)
from promo_assets.core.display import Markdown, jsonable, md_table
from promo_assets.decisions.plans import holdout_run, population_plan
from promo_assets.defs.automation.conditions import COMMON, model_condition
from promo_assets.defs.common import (
    LandingResource,
    WarehouseResource,
    domain_errors,
    evaluation_inputs,
    metadata,
    model_key,
    results_write,
    upstream,
    writing,
)
from promo_assets.defs.evaluation.leaderboard import leaderboard_asset
from promo_assets.defs.resources import DaskResource
from promo_assets.evaluation import evaluate_models, leaderboard_markdown
from promo_assets.evaluation.board_view import segment_metadata
from promo_assets.evaluation.inputs import budget_use_rows, segment_outputs
from promo_assets.ingestion.targets import scoring_targets
from promo_assets.models import ResponseModel, registry
from promo_assets.models.display import fitted_metadata
from promo_assets.models.inputs import training_data
from promo_assets.models.phase_run import train_phase
from promo_assets.models.scoring import Scoring, score_users
from promo_assets.store import models as models_store
from promo_assets.store.artifacts import version_of

CHAIN = ("response_coefficients", "budget_dual", "allocation", "policy_evaluation")
OPTIONAL_GROUP = "optional_models"  # the chains of the models off by default (docs/automation.md)


# --------------------------------------------------------------------------------------------
# wiring helpers of the chains


def chain_kwargs(model: ResponseModel) -> dict:
    """The asset kwargs of every asset of `model`'s chain: its group (the model's name; the models off
    by default share `OPTIONAL_GROUP`) and its condition (refreshed only for the campaigns that train it)."""
    return {**COMMON, "group_name": model.name if model.default else OPTIONAL_GROUP,
            "automation_condition": model_condition(model.name)}


def chain_keys(model: ResponseModel) -> list[dg.AssetKey]:
    """Every asset key of `model`'s chain, in order."""
    phases = ["model"] if len(model.phases) == 1 else list(model.phases)
    return [model_key(model.name, p) for p in phases + list(CHAIN)]


def model_run(context, model: str, version: str) -> ModelRun:
    """`model` `version` of this run's campaign, as the chain's budget steps work on it."""
    return ModelRun(context.partition_key, model, version, context.run.run_id,
                    model_key(model, "budget_dual").to_user_string())


def record_skip(context, warehouse: WarehouseResource, model: str, reason: str) -> dg.AssetObservation:
    """The skip, stored (table model_skips) and as an observation of every asset of the chain (the
    phase asset and those Dagster then skips), so that each asset's page says why."""
    campaign = context.partition_key
    with writing(context, warehouse, "model_skips") as con:
        models_store.record_skip(con, campaign, model, reason, context.run.run_id)
    context.log.warning(f"{campaign}: {model} skipped: {reason}")
    own, others = context.asset_key, [k for k in chain_keys(registry.get(model)) if k != context.asset_key]
    for other in others:
        context.log_event(skip_observation(other, campaign, model, reason))
    return skip_observation(own, campaign, model, reason)


def skip_observation(asset_key: dg.AssetKey, campaign: str, model: str, reason: str) -> dg.AssetObservation:
    return dg.AssetObservation(asset_key=asset_key, partition=campaign,
                               metadata={"skipped_reason": reason, "model": model, "status": "skipped"})


def record_left_out(instance: dg.DagsterInstance, campaign: str, left_out: dict[str, str]) -> None:
    """`promo run` leaves the chains of the models the campaign does not train out of its run: an
    observation of each of their assets (this campaign's partition) says why on the asset's page."""
    for model, reason in left_out.items():
        for asset_key in chain_keys(registry.get(model)):
            instance.report_runless_asset_event(skip_observation(asset_key, campaign, model, reason))


def fit_phase(context, warehouse, landing, model: type[ResponseModel], phase: str, previous_key: dg.AssetKey | None):
    """Train one phase of `model` built with campaign.yaml's `models.params.<model>`; returns (fitted,
    metadata) or (None, reason) when the model does not apply."""
    campaign = context.partition_key
    config = landing.config(campaign)
    reason = registry.skip_reason(model.name, config)
    if reason is not None:
        return None, reason
    previous = None
    if previous_key is not None:
        _, meta, _ = upstream(context, previous_key)
        with domain_errors():  # a missing or tampered artefact: its message
            previous = model.load(meta["model_version"])
    with warehouse.connect() as con, domain_errors():
        data = training_data(con, landing.path, campaign, config)
        if model.needs_graph:  # the graph code imports torch_geometric: only for a model that needs it
            from promo_assets.graph.inputs import graph_inputs

            data.graph, data.graph_version, data.merchant_events = graph_inputs(con, landing.path, campaign, config)
    with domain_errors():
        got = train_phase(model.name, phase, data, previous, log=context.log.info)
    if got.fitted is None:
        return None, got.reason
    fitted = got.fitted
    shown = {**fitted_metadata(fitted, got.seconds), **data.input_versions}
    if previous is not None:
        shown[f"{previous_key.path[-1]}_version"] = previous.version_
    return fitted, metadata(shown)


# --------------------------------------------------------------------------------------------
# the chain's assets


def phase_asset(model: type[ResponseModel], i: int) -> dg.AssetsDefinition:
    phase = model.phases[i]
    name = phase if len(model.phases) > 1 else "model"
    previous_key = model_key(model.name, model.phases[i - 1]) if i else None
    deps = ["training_frame"] + (["customer_merchant_graph"] if model.needs_graph else []) + \
        ([previous_key] if previous_key else [])

    @dg.asset(key=model_key(model.name, name), deps=deps, output_required=False,
              code_version="1", kinds=set(model.kinds), **chain_kwargs(model),
              description=f"{model.title} ({model.source}). Phase '{phase}' of model '{model.name}' "
              f"({i + 1} of {len(model.phases)}); content-addressed artefact registered in model_registry. "
              "A campaign it does not apply to skips this model's chain with the reason.")
    def _phase(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
        fitted, out = fit_phase(context, warehouse, landing, model, phase, previous_key)
        if fitted is None:
            yield record_skip(context, warehouse, model.name, out)
            return
        with writing(context, warehouse, "model_registry") as con:  # the saved artefact, for this run
            models_store.register_model(con, context.partition_key, fitted.fitted_name_, fitted.version_,
                                        out.get("graph_version") or out.get("frame_version"),
                                        json.dumps(jsonable(fitted.metrics_)), context.run.run_id)
        yield dg.MaterializeResult(metadata=out, data_version=dg.DataVersion(fitted.version_))

    return _phase


def coefficients_asset(model: type[ResponseModel]) -> dg.AssetsDefinition:
    fitted_key = model_key(model.name, "model" if len(model.phases) == 1 else model.phases[-1])

    @dg.asset(key=model_key(model.name, "response_coefficients"), deps=[fitted_key, "training_frame"],
              code_version="2", kinds={"duckdb"}, **chain_kwargs(model),
              description=f"Predicted response (value) and cost of every target user × level by {model.name}'s "
              "fitted model (the version its upstream asset materialized): the target population (latest "
              "population/ file, else the holdout users) and the holdout users (for evaluation). Scored in "
              "chunks; table response_coefficients, history kept by model version.")
    def _coefficients(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource,
                      dask: DaskResource):
        campaign = context.partition_key
        config = landing.config(campaign)
        _, meta, _ = upstream(context, fitted_key)
        with domain_errors():
            fitted = model.load(meta["model_version"])
            with warehouse.connect() as con:
                targets = scoring_targets(con, landing.path, campaign)
                if targets.absent:  # a feature of some loaded days only: NULL, like on the days without it
                    context.log.warning(f"{targets.source}: no column {', '.join(map(repr, targets.absent))}; "
                                        "NULL for every user")
                scoring = Scoring(campaign, model.name, config, dask.client(), dask.chunk_rows, context.log.info)
                with results_write(context, con, campaign, "response_coefficients"):
                    n_pop = score_users(con, scoring, fitted, "population", targets.population)
                    n_hold = score_users(con, scoring, fitted, "holdout", targets.holdout)
        return dg.MaterializeResult(
            metadata={"model_version": fitted.version_, "frame_version": targets.frame_version,
                      "population_source": targets.source, "population_users": n_pop, "holdout_users": n_hold,
                      "levels": config.n_levels},
            data_version=dg.DataVersion(version_of(fitted.version_, targets.frame_version, targets.source, n_pop)))

    return _coefficients


# --------------------------------------------------------------------------------------------
# decisions: the campaign's BudgetPlan (promo_assets.allocation.plan) solves, decides and evaluates;
# promo_assets.allocation.stored_plan stores what it returns and reads it back


def dual_asset(model: type[ResponseModel]) -> dg.AssetsDefinition:
    coef_key = model_key(model.name, "response_coefficients")

    @dg.asset(key=model_key(model.name, "budget_dual"), deps=[coef_key], code_version="2",
              kinds={"duckdb"}, **chain_kwargs(model),
              description=f"λ* of the multiple-choice knapsack for {model.name} × every configured per-capita "
              "budget on the target population (exact LP optimum), with the share of the users tied at λ* that "
              "the optimum moves up, the dual bound and the budget–value frontier. Table budget_dual (history "
              "kept per model, PROMO_KEEP_RUNS). A budget below the cheapest allocation is skipped with a "
              "warning and recorded in infeasible_budget; the other budgets are solved. With campaign.yaml "
              "`constraints:` every budget is solved together with the further cost types and group caps "
              "(solve_multi): each budget's multiplier and use in table budget_multipliers.")
    def _dual(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource,
              dask: DaskResource):
        config = landing.config(context.partition_key)
        _, meta, coef_version = upstream(context, coef_key)
        run = model_run(context, model.name, meta["model_version"])
        with warehouse.connect() as con, domain_errors():
            pop = population_plan(con, landing.path, run, config)
        tables = ["budget_dual", "infeasible_budget", *(["budget_multipliers"] if pop.plan.several else [])]
        with writing(context, warehouse, *tables) as con, domain_errors():
            source = population_source(con, run, config.n_levels, dask.chunk_rows)
            got = solve_and_store(con, run, pop.plan, source, pop.population, client=dask.client(), log=context.log.info)
        for warning in got.warnings:
            context.log.warning(warning)
        return dg.MaterializeResult(
            metadata=metadata({"model_version": run.version, "coefficients_version": coef_version,
                               "duals": md_table(got.duals),
                               **({"multipliers": md_table(got.multipliers)} if got.multipliers else {}),
                               "frontier": md_table(got.frontier), "run_id": context.run.run_id,
                               "dask_scheduler": dask.spec or "in-process",
                               **({"infeasible_budgets": md_table(got.infeasible)} if got.infeasible else {})}),
            data_version=dg.DataVersion(version_of(coef_version, json.dumps(jsonable(got.duals)),
                                                   *([json.dumps(jsonable(got.multipliers))] if got.multipliers else []))))

    return _dual


def allocation_asset(model: type[ResponseModel]) -> dg.AssetsDefinition:
    dual_key = model_key(model.name, "budget_dual")

    @dg.asset(key=model_key(model.name, "allocation"), deps=[dual_key], code_version="2",
              kinds={"duckdb"}, **chain_kwargs(model),
              description=f"The incentive level of every target user for {model.name} × budget: the decision at "
              "the λ* budget_dual stored (no second solve; users tied at λ* take the dearer level up to the "
              "stored share, the one fractional user by seeded sampling). Table allocation (history kept per "
              "model, PROMO_KEEP_RUNS), one transaction. An infeasible budget is listed (infeasible_budgets). With "
              "campaign.yaml `constraints:` the levels at the stored multipliers of every budget, each budget's use "
              "shown.")
    def _allocation(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource,
                    dask: DaskResource):
        config = landing.config(context.partition_key)
        dual_run, meta, dual_version = upstream(context, dual_key)
        run = model_run(context, model.name, meta["model_version"])
        with warehouse.connect() as con, domain_errors():
            pop = population_plan(con, landing.path, run, config)
        with writing(context, warehouse, "allocation") as con, domain_errors():
            got = read_stored(con, run, dual_run, dual_version, pop.plan)
            source = population_source(con, run, config.n_levels, dask.chunk_rows)
            rows = decide_and_store(con, run, pop.plan, got.stored, source, pop.population, config=config,
                                    client=dask.client())
        infeasible = [{"budget_per_capita": b, "message": f"budget {b:g} per capita cannot be met: {m}"}
                      for b, m in got.infeasible]
        # 12 digits: the cost is summed chunk by chunk, its last bits follow the chunking (the workers)
        version = version_of(dual_version, *(f"{r['cost_per_capita']:.12g}" for r in rows))
        return dg.MaterializeResult(
            metadata=metadata({**got.lineage, "lambdas": md_table(got.lambdas),
                               **({"multipliers": md_table(multiplier_rows(pop.plan, got.stored))} if pop.plan.several else {}),
                               "allocations": md_table(rows), "run_id": context.run.run_id,
                               **({"infeasible_budgets": md_table(infeasible)} if infeasible else {})}),
            data_version=dg.DataVersion(version))

    return _allocation


# --------------------------------------------------------------------------------------------
# evaluation


def evaluation_asset(model: type[ResponseModel]) -> dg.AssetsDefinition:
    alloc_key = model_key(model.name, "allocation")

    @dg.asset(key=model_key(model.name, "policy_evaluation"), deps=[alloc_key, model_key(model.name, "response_coefficients"),
              "outcome_model", "training_frame"], code_version="3", kinds={"duckdb", "sklearn"}, **chain_kwargs(model),
              description=f"Offline evaluation of {model.name}'s stored decision on the holdout RCT days: the λ* "
              "its allocation applied, applied to the holdout users' coefficients, evaluated at equal spend (EOM "
              "and doubly robust EOM with the outcome_model asset's predictions, bootstrap 95% intervals, Q(v, c), "
              "frontier area ratio, curve metrics; the truth, spend ratio, matched true value and % of the "
              "oracle for simulated campaigns). Table policy_evaluation (history kept per model). With campaign.yaml "
              "`constraints:` the stored multipliers applied, each budget's use predicted, true and at matched "
              "true spend (table budget_multipliers).")
    def _evaluation(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource,
                    dask: DaskResource):
        campaign = context.partition_key
        config = landing.config(campaign)
        _, made, alloc_version = upstream(context, alloc_key)  # the decision the allocation applied
        run = model_run(context, model.name, made["model_version"])
        with warehouse.connect() as con:
            ev = evaluation_inputs(context, con, landing, campaign, config)
            with domain_errors():
                applied = holdout_run(con, run, config, ev, made)
        with domain_errors():
            hold = applied.evaluate(client=dask.client(), chunk_rows=dask.chunk_rows(len(applied.holdout.response)))
        rows = evaluate_models({model.name: (run.version, hold.response, hold.cost)}, ev.evaluated_on(),
                               ev.settings(config, campaign, context.log.info), decisions={model.name: hold.decisions})
        rows["run_id"] = context.run.run_id
        segments = segment_outputs(ev, config, model.name, run.version, hold.response, hold.decisions)
        with writing(context, warehouse, "policy_evaluation", *(["budget_multipliers"] if hold.use_rows else [])) as con:
            models_store.write_evaluation(con, rows, segments.table, campaign, context.run.run_id)
            if hold.use_rows:
                models_store.record_multipliers(con, campaign, model.name, run.version, "holdout",
                                                pd.DataFrame(hold.use_rows), context.run.run_id)
        versions = {**applied.stored.lineage, "allocation_version": alloc_version, **ev.versions}
        return dg.MaterializeResult(
            metadata=metadata({**versions, "lambdas": md_table(applied.stored.lambdas),
                               "evaluation": Markdown(leaderboard_markdown(rows)), "holdout_events": ev.n,
                               "ground_truth": ev.true_values is not None, **segment_metadata(segments),
                               **({"budgets_kept": md_table(budget_use_rows(hold.use_rows))} if hold.use_rows else {})}),
            data_version=dg.DataVersion(version_of(*(versions[k] for k in sorted(versions)))))

    return _evaluation


# --------------------------------------------------------------------------------------------
# the factory


def model_chain(name: str) -> list[dg.AssetsDefinition]:
    """Every asset of model `name`'s chain."""
    model = registry.get(name)
    phases = [phase_asset(model, i) for i in range(len(model.phases))]
    return phases + [coefficients_asset(model), dual_asset(model), allocation_asset(model), evaluation_asset(model)]


def model_assets(names=None) -> list[dg.AssetsDefinition]:
    """The chains of every registered model (or of `names`) and the campaign-level leaderboard."""
    names = list(registry.names() if names is None else names)
    return [a for n in names for a in model_chain(n)] + [leaderboard_asset(names)]
