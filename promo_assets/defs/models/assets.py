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
import time

import dagster as dg
import numpy as np
import pandas as pd

from promo_assets.allocation.chunked import map_frame_stream, predict_chunk
from promo_assets.allocation.plan import BudgetPlan, Holdout, Stored
from promo_assets.allocation.stored import StoredCoefficients
from promo_assets.causal.checks import cannot_learn, frame_checks
from promo_assets.decisions import Constraints
from promo_assets.defs.automation.conditions import model_condition
from promo_assets.defs.campaign.assets import (
    COMMON,
    _jsonable,
    _model_metadata,
    coefficient_arrays,
    evaluation_inputs,
    feature_spec,
    png_md,
    read_holdout_events,
    read_training_frame,
    results_write,
    upstream,
)
from promo_assets.defs.common import (
    LandingResource,
    WarehouseResource,
    connect,
    group_features,
    domain_errors,
    for_people,
    log_to,
    md_table,
    model_key,
    population,
    rows_table,
    use_table,
)
from promo_assets.defs.decisions.assets import decision_constraints
from promo_assets.defs.evaluation.leaderboard import leaderboard_asset
from promo_assets.defs.graph.assets import graph_inputs
from promo_assets.defs.resources import DaskResource
from promo_assets.evaluation import Truth, evaluate_models, leaderboard_markdown
from promo_assets.evaluation.segments import SEGMENT_COLUMNS, plot_segment_curves, segment_curves, segment_evaluation
from promo_assets.ingestion.frames import FrameUsers, PopulationFile
from promo_assets.models import ModelSkipped, ResponseModel, TrainingData, registry
from promo_assets.models.base import negative_cost_problem
from promo_assets.store import frames as frames_store, models as models_store, results
from promo_assets.store.artifacts import content_version

SCORING_CHUNK = 50_000
CHAIN = ("response_coefficients", "budget_dual", "allocation", "policy_evaluation")


# --------------------------------------------------------------------------------------------
# helpers


def key(model: str, step: str) -> dg.AssetKey:
    return model_key(model, step)


def _version(*parts) -> str:
    return content_version("|".join(str(p) for p in parts).encode())


OPTIONAL_GROUP = "optional_models"  # the chains of the models off by default (docs/automation.md)


def chain_kwargs(model: ResponseModel) -> dict:
    """The asset kwargs of every asset of `model`'s chain: its group (the model's name; the models off
    by default share `OPTIONAL_GROUP`) and its condition (refreshed only for the campaigns that train it)."""
    return {**COMMON, "group_name": model.name if model.default else OPTIONAL_GROUP,
            "automation_condition": model_condition(model.name)}


def chain_keys(model: ResponseModel) -> list[dg.AssetKey]:
    """Every asset key of `model`'s chain, in order."""
    phases = ["model"] if len(model.phases) == 1 else list(model.phases)
    return [key(model.name, p) for p in phases + list(CHAIN)]


# --------------------------------------------------------------------------------------------
# phases


def training_data(con, landing: LandingResource, campaign: str, model: type[ResponseModel], config) -> TrainingData:
    """The campaign's training frame (and, for a model that needs it, the customer–merchant graph)."""
    frame, numeric, categorical = read_training_frame(con, campaign)
    data = TrainingData(config=config, frame=frame, numeric=numeric, categorical=categorical,
                        frame_version=frames_store.frame_version(con, campaign),
                        campaign_dir=landing.path / campaign)
    if model.needs_graph:
        data.graph, data.graph_version, data.merchant_events = graph_inputs(con, landing, campaign)
    return data


def record_skip(context, warehouse: WarehouseResource, model: str, reason: str) -> dg.AssetObservation:
    """The skip, stored (table model_skips) and as an observation of every asset of the chain (the
    phase asset and those Dagster then skips), so that each asset's page says why."""
    campaign = context.partition_key
    with connect(warehouse) as con, results_write(context, con, campaign, "model_skips"):
        models_store.record_skip(con, campaign, model, reason, context.run_id)
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


def register_model(context, warehouse: WarehouseResource, fitted: ResponseModel, data_version: str | None) -> None:
    """Register the saved artefact for this run (one transaction)."""
    campaign = context.partition_key
    with connect(warehouse) as con, results_write(context, con, campaign, "model_registry"):
        models_store.register_model(con, campaign, fitted.fitted_name_, fitted.version_, data_version,
                                    json.dumps(_jsonable(fitted.metrics_)), context.run_id)


def report_metadata(report: dict) -> dict:
    """A fitted model's own `report` (rows, PNG bytes, values) as Dagster metadata."""
    out = {}
    for k, v in (report or {}).items():
        if isinstance(v, bytes):
            out[k] = dg.MetadataValue.md(png_md(v, k.replace("_", " ")))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            out[k] = md_table(_jsonable(v))
        elif v is not None:
            out[k] = for_people(_jsonable(v))
    return out


def fit_phase(context, warehouse, landing, model: type[ResponseModel], phase: str, previous_key: dg.AssetKey | None):
    """Train one phase of `model` built with campaign.yaml's `models.params.<model>`; returns (fitted,
    metadata) or (None, reason) when the model does not apply."""
    campaign = context.partition_key
    config = landing.config(campaign)
    reason = registry.skip_reason(model.name, config)
    if reason is not None:
        return None, reason
    previous = meta = None
    if previous_key is not None:
        _, meta, _ = upstream(context, previous_key)
        with domain_errors():  # a missing or tampered artefact: its message
            previous = model.load(meta["model_version"])
    with connect(warehouse) as con:
        data = training_data(con, landing, campaign, model, config)
    blocked = cannot_learn(frame_checks(data.frame, config))  # training_frame's data checks: nothing to learn
    if blocked is not None:
        return None, blocked
    start = time.perf_counter()
    try:
        with domain_errors():
            fitted = registry.for_campaign(model.name, config).fit_phase(data, phase, previous, log=log_to(context))
            fitted.save()  # content-addressed: the same weights always get the same version
    except ModelSkipped as exc:
        return None, str(exc)
    metadata = _model_metadata(fitted.model_, time.perf_counter() - start)
    metadata.update({**data.input_versions, **report_metadata(fitted.report_)})
    if previous is not None:
        metadata[f"{previous_key.path[-1]}_version"] = previous.version_
    return fitted, metadata


def phase_asset(model: type[ResponseModel], i: int) -> dg.AssetsDefinition:
    phase = model.phases[i]
    name = phase if len(model.phases) > 1 else "model"
    previous_key = key(model.name, model.phases[i - 1]) if i else None
    deps = ["training_frame"] + (["customer_merchant_graph"] if model.needs_graph else []) + \
        ([previous_key] if previous_key else [])

    @dg.asset(key=key(model.name, name), deps=deps, output_required=False,
              code_version="1", kinds=set(model.kinds), **chain_kwargs(model),
              description=f"{model.title} ({model.source}). Phase '{phase}' of model '{model.name}' "
              f"({i + 1} of {len(model.phases)}); content-addressed artefact registered in model_registry. "
              "A campaign it does not apply to skips this model's chain with the reason.")
    def _phase(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
        fitted, out = fit_phase(context, warehouse, landing, model, phase, previous_key)
        if fitted is None:
            yield record_skip(context, warehouse, model.name, out)
            return
        register_model(context, warehouse, fitted, out.get("graph_version") or out.get("frame_version"))
        yield dg.MaterializeResult(metadata=out, data_version=dg.DataVersion(fitted.version_))

    return _phase


# --------------------------------------------------------------------------------------------
# coefficients


def score(con, context, campaign: str, model_name: str, fitted, target: str, users, config,
          dask: DaskResource) -> int:
    """Score `users` (a PopulationFile or FrameUsers) chunk by chunk as they are read (as Dask tasks
    when the run has a Dask scheduler) and store their coefficients (replacing this version's rows)."""
    k = config.n_levels
    models_store.clear_coefficients(con, campaign, model_name, fitted.version_, target)
    n, done = users.n_users, 0
    client = dask.client()
    rows = SCORING_CHUNK if client is None else dask.chunk_rows(n)
    with domain_errors():
        for part, (response, cost) in map_frame_stream(predict_chunk, fitted, users.frames(rows), client=client):
            problem = negative_cost_problem(model_name, config, cost, part["user_id"].to_numpy())
            if problem:
                raise dg.Failure(problem)
            chunk_df = pd.DataFrame({
                "user_id": np.repeat(part["user_id"].to_numpy(), k),
                "level": np.tile(np.arange(k, dtype=np.int32), len(part)),
                "response": np.asarray(response, dtype=np.float64).ravel(),
                "cost": np.asarray(cost, dtype=np.float64).ravel(),
            })
            models_store.add_coefficients(con, campaign, model_name, fitted.version_, target, chunk_df)
            done += len(part)
            context.log.info(f"{model_name} [{target}]: scored {done}/{n} users")
    return done


def scoring_targets(con, context, landing, campaign: str) -> tuple[PopulationFile | FrameUsers, FrameUsers, str, str]:
    """(population users, holdout users, population source, frame version); the population's features
    absent from its file are NULL columns."""
    numeric, categorical = feature_spec(con, campaign)
    holdout = FrameUsers(read_holdout_events(con, campaign).drop_duplicates("user_id", keep="first"))
    pop = population(con, landing, campaign, numeric + categorical)
    source = "holdout users (no population file)" if pop is None else str(pop.path)
    if pop is not None and pop.absent:  # a feature of some loaded days only: NULL, like on the days without it
        context.log.warning(f"{source}: no column {', '.join(map(repr, pop.absent))}; NULL for every user")
    return holdout if pop is None else pop, holdout, source, frames_store.frame_version(con, campaign)


def coefficients_asset(model: type[ResponseModel]) -> dg.AssetsDefinition:
    fitted_key = key(model.name, "model" if len(model.phases) == 1 else model.phases[-1])

    @dg.asset(key=key(model.name, "response_coefficients"), deps=[fitted_key, "training_frame"],
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
            with connect(warehouse) as con:
                pop, holdout, source, frame_version = scoring_targets(con, context, landing, campaign)
                with results_write(context, con, campaign, "response_coefficients"):
                    n_pop = score(con, context, campaign, model.name, fitted, "population", pop, config, dask)
                    n_hold = score(con, context, campaign, model.name, fitted, "holdout", holdout, config, dask)
        version = _version(fitted.version_, frame_version, source, n_pop)
        return dg.MaterializeResult(
            metadata={"model_version": fitted.version_, "frame_version": frame_version, "population_source": source,
                      "population_users": n_pop, "holdout_users": n_hold, "levels": config.n_levels},
            data_version=dg.DataVersion(version))

    return _coefficients


# --------------------------------------------------------------------------------------------
# decisions: the campaign's BudgetPlan (promo_assets.allocation.plan) solves, decides and evaluates;
# these helpers read its inputs and store what it returns


def budget_plan(warehouse: WarehouseResource, landing: LandingResource, campaign: str, config, users=None) -> BudgetPlan:
    """The campaign's budgets, with campaign.yaml `constraints:` for `users` (the decisions' reading of
    the users' group features) when it has some."""
    constraints = (decision_constraints(warehouse, landing, campaign, config, [str(u) for u in users])
                   if config.constraints is not None else None)
    with domain_errors():
        return BudgetPlan.of(config.budget_per_capita, constraints, campaign)


def population_arrays(warehouse: WarehouseResource, campaign: str, model: str, version: str, config):
    """(user ids, response, cost) of the population's stored coefficients, in memory: what several
    budgets are solved over (None for one budget, solved chunk by chunk from the store)."""
    if config.constraints is None:
        return None
    with connect(warehouse) as con:
        return coefficient_arrays(con, campaign, model, version, "population", config.n_levels)


def population_source(con, campaign: str, model: str, version: str, config, dask: DaskResource):
    """(the run's Dask client or None, the population's stored coefficients as a streamed chunk source)."""
    client = dask.client()
    source = StoredCoefficients(con, campaign, model, version, "population", config.n_levels)
    source.rows = dask.chunk_rows(source.n_users)
    return client, source


def store_solution(context, con, campaign: str, model: str, version: str, config, plan: BudgetPlan, population,
                   dask: DaskResource) -> tuple[list, list, list, list]:
    """Solve every budget (`plan.solve`) and store it: λ* and the tie share per budget in budget_dual,
    every multiplier and its predicted use in budget_multipliers (several budgets), the infeasible
    budgets in infeasible_budget. Returns (the duals' rows, the frontier points, the infeasible budgets,
    the multipliers' rows)."""
    client, source = population_source(con, campaign, model, version, config, dask)
    with domain_errors():
        solution = plan.solve(source, population, client=client, log=context.log.info)
    rows, table, infeasible = [], [], []
    for got in solution.solved:
        b = got.budget_per_capita
        models_store.record_dual(con, campaign, model, version, got, context.run_id)
        rows.append(got.row())
        if plan.several:
            models_store.record_multipliers(con, campaign, model, version, "population",
                                            pd.DataFrame(got.multiplier_rows()), context.run_id)
            table += [{"budget_per_capita": b, "budget": r["constraint_name"], "multiplier": float(f"{r['multiplier']:.6g}"),
                       "use / budget": round(r["use_over_budget"], 4)} for r in got.multiplier_rows()]
    for b, exc in solution.infeasible:
        context.log.warning(f"{model}: budget_per_capita {b:g} skipped: {exc}; the other budgets are solved")
        infeasible.append(results.record_infeasible(con, campaign, model, version, b, exc, context.run_id))
    return rows, solution.frontier, infeasible, table


def stored_solution(con, campaign: str, model: str, run_id: str, version: str, dual_version: str | None,
                    plan: BudgetPlan) -> tuple[Stored, list, dict]:
    """What budget_dual stored in run `run_id` for model `version`: the solution (λ* and tie share per
    budget; the multipliers for several budgets), the infeasible budgets and the lineage."""
    duals, infeasible = models_store.duals_of_run(con, campaign, model, version, run_id)
    if not duals and not infeasible:
        raise dg.Failure(f"{key(model, 'budget_dual').to_user_string()} of run {run_id} left no λ* for {model} "
                         f"{version} (its run failed and its rows were removed): re-materialize it")
    lineage = {"model_version": version, "budget_dual_run": run_id, "budget_dual_version": dual_version,
               "lambdas": md_table([{"budget_per_capita": float(b), "lambda_": float(f"{lam:.6g}"), "tie_share": round(float(s), 4)}
                                    for b, lam, s in duals])}
    multipliers = stored_multipliers(con, campaign, model, version, run_id, plan.names()) if plan.several else {}
    return (Stored({float(b): (lam, s) for b, lam, s in duals}, multipliers), [(float(b), m) for b, m in infeasible],
            lineage)


def stored_multipliers(con, campaign: str, model: str, version: str, run_id: str, names: list[str]) -> dict:
    """{budget: multipliers in `names` order} that budget_dual stored in run `run_id` (several budgets)."""
    out: dict[float, dict] = {}
    for b, name, mu in models_store.multipliers_of_run(con, campaign, model, version, run_id):
        out.setdefault(float(b), {})[name] = float(mu)
    for b, got in out.items():
        if list(got) != names:
            raise dg.Failure(f"{key(model, 'budget_dual').to_user_string()} of run {run_id} solved the budgets "
                             f"{', '.join(got)}, campaign.yaml now has {', '.join(names)}: re-materialize it")
    return {b: [got[n] for n in names] for b, got in out.items()}


def decide_and_store(context, con, campaign: str, model: str, version: str, config, plan: BudgetPlan, stored: Stored,
                     population, dask: DaskResource) -> list[dict]:
    """The population's levels at the stored solution (`plan.decide`), written to allocation chunk by
    chunk; the metadata rows (users, cost and level shares per budget; each budget's use for several)."""
    client, source = population_source(con, campaign, model, version, config, dask)
    incentives = np.asarray(config.incentives, dtype=np.float64)

    def sink_for(b: float):
        def sink(i, first, levels, ids):
            models_store.add_allocation(con, [campaign, model, version, b, context.run_id], pd.DataFrame(
                {"user_id": ids, "level": levels.astype(np.int32), "incentive": incentives[levels]}))
        return sink

    with domain_errors():
        decided = plan.decide(stored, source, population, sink_for=sink_for, client=client)
    rows = []
    for b, got in decided.items():
        n = max(got["users"], 1)
        uses = ({f"{name} use / budget": round(float(u / t), 4) if t > 0 else 0.0
                 for name, u, t in zip(plan.names(), got["use"], got["totals"])} | {"solved again": got["resolved"]}
                if plan.several else {})
        rows.append({"budget_per_capita": b, "users": got["users"], "cost_per_capita": got["cost"] / n, **uses,
                     **{f"share {lab}": round(float(s), 3) for lab, s in zip(config.labels, got["level_counts"] / n)}})
    return rows


def dual_asset(model: type[ResponseModel]) -> dg.AssetsDefinition:
    coef_key = key(model.name, "response_coefficients")

    @dg.asset(key=key(model.name, "budget_dual"), deps=[coef_key], code_version="2",
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
        campaign = context.partition_key
        config = landing.config(campaign)
        _, meta, coef_version = upstream(context, coef_key)
        version = meta["model_version"]
        population = population_arrays(warehouse, campaign, model.name, version, config)
        plan = budget_plan(warehouse, landing, campaign, config, None if population is None else population[0])
        with connect(warehouse) as con, results_write(context, con, campaign, "budget_dual", "infeasible_budget",
                                                      *(["budget_multipliers"] if plan.several else [])):
            rows, curve, infeasible, several = store_solution(context, con, campaign, model.name, version, config, plan,
                                                              population, dask)
        return dg.MaterializeResult(
            metadata={"model_version": version, "coefficients_version": coef_version, "duals": md_table(rows),
                      **({"multipliers": md_table(several)} if several else {}),
                      "frontier": md_table(curve), "run_id": context.run_id, "dask_scheduler": dask.spec or "in-process",
                      **({"infeasible_budgets": md_table(infeasible)} if infeasible else {})},
            data_version=dg.DataVersion(_version(coef_version, json.dumps(_jsonable(rows)),
                                                 *([json.dumps(_jsonable(several))] if several else []))))

    return _dual


def allocation_asset(model: type[ResponseModel]) -> dg.AssetsDefinition:
    dual_key = key(model.name, "budget_dual")

    @dg.asset(key=key(model.name, "allocation"), deps=[dual_key], code_version="2",
              kinds={"duckdb"}, **chain_kwargs(model),
              description=f"The incentive level of every target user for {model.name} × budget: the decision at "
              "the λ* budget_dual stored (no second solve; users tied at λ* take the dearer level up to the "
              "stored share, the one fractional user by seeded sampling). Table allocation (history kept per "
              "model, PROMO_KEEP_RUNS), one transaction. An infeasible budget is listed (infeasible_budgets). With "
              "campaign.yaml `constraints:` the levels at the stored multipliers of every budget, each budget's use "
              "shown.")
    def _allocation(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource,
                    dask: DaskResource):
        campaign = context.partition_key
        config = landing.config(campaign)
        run_id, meta, dual_version = upstream(context, dual_key)
        version = meta["model_version"]
        population = population_arrays(warehouse, campaign, model.name, version, config)
        plan = budget_plan(warehouse, landing, campaign, config, None if population is None else population[0])
        with connect(warehouse) as con, results_write(context, con, campaign, "allocation"):
            stored, infeasible, lineage = stored_solution(con, campaign, model.name, run_id, version, dual_version, plan)
            rows = decide_and_store(context, con, campaign, model.name, version, config, plan, stored, population, dask)
        if plan.several:
            lineage["multipliers"] = md_table([{"budget_per_capita": b, **{n: float(f"{m:.6g}") for n, m in zip(plan.names(), mu)}}
                                               for b, mu in stored.multipliers.items()])
        infeasible = [{"budget_per_capita": b, "message": f"budget {b:g} per capita cannot be met: {m}"}
                      for b, m in infeasible]
        # 12 digits: the cost is summed chunk by chunk, its last bits follow the chunking (the workers)
        version = _version(lineage["budget_dual_version"], *(f"{r['cost_per_capita']:.12g}" for r in rows))
        return dg.MaterializeResult(
            metadata={**lineage, "allocations": md_table(rows), "run_id": context.run_id,
                      **({"infeasible_budgets": md_table(infeasible)} if infeasible else {})},
            data_version=dg.DataVersion(version))

    return _allocation


# --------------------------------------------------------------------------------------------
# evaluation


def evaluation_asset(model: type[ResponseModel]) -> dg.AssetsDefinition:
    alloc_key = key(model.name, "allocation")

    @dg.asset(key=key(model.name, "policy_evaluation"), deps=[alloc_key, key(model.name, "response_coefficients"),
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
        ev, (v, c), hold, lineage, use_rows = holdout_decisions(context, warehouse, landing, campaign, config,
                                                                model.name, made, dask)
        rows = evaluate_models({model.name: (lineage["model_version"], v, c)}, ev.evaluated_on(),
                               ev.settings(config, campaign, log_to(context)), decisions=hold)
        rows["run_id"] = context.run_id
        segments, segment_meta = segment_outputs(ev, config, model.name, lineage["model_version"], v, hold[model.name])
        with connect(warehouse) as con, results_write(context, con, campaign, "policy_evaluation",
                                                      *(["budget_multipliers"] if use_rows else [])):
            models_store.write_evaluation(con, rows, segments, campaign, context.run_id)
            if use_rows:
                models_store.record_multipliers(con, campaign, model.name, lineage["model_version"], "holdout",
                                                pd.DataFrame(use_rows), context.run_id)
        versions = {**lineage, "allocation_version": alloc_version, **ev.versions}
        return dg.MaterializeResult(
            metadata={**versions, "evaluation": dg.MetadataValue.md(leaderboard_markdown(rows)),
                      "holdout_events": ev.n, "ground_truth": ev.true_values is not None, **segment_meta,
                      **({"budgets_kept": md_table(use_table(use_rows))} if use_rows else {})},
            data_version=dg.DataVersion(_version(*(versions[k] for k in sorted(versions) if k != "lambdas"))))

    return _evaluation


def holdout_decisions(context, warehouse, landing, campaign: str, config, model: str, made, dask: DaskResource):
    """(evaluation inputs, (values, costs) of the holdout events, {model: {budget: levels or the reason}},
    lineage, budget_multipliers rows): the solution the allocation applied, applied to the holdout by
    the campaign's BudgetPlan (several budgets: each budget's use measured)."""
    with connect(warehouse) as con:
        ev = evaluation_inputs(context, con, landing, campaign, config)
        users, values, costs = coefficient_arrays(con, campaign, model, made["model_version"], "holdout", config.n_levels)
        plan = holdout_plan(con, campaign, config, ev)
        stored, infeasible, lineage = stored_solution(con, campaign, model, made["budget_dual_run"], made["model_version"],
                                                      made["budget_dual_version"], plan)
    v, c = ev.align(users, values, costs, model)
    holdout = Holdout(values, costs, v, c, lambda levels: ev.align_levels(users, levels), ev.true_costs)
    with domain_errors():
        levels, use_rows = plan.evaluate(stored, holdout, client=dask.client(), chunk_rows=dask.chunk_rows(len(values)))
    hold = {model: {**levels, **{b: f"budget {b:g} per capita cannot be met: {m}" for b, m in infeasible}}}
    return ev, (v, c), hold, lineage, use_rows


def holdout_plan(con, campaign: str, config, ev) -> BudgetPlan:
    """The campaign's budgets, with campaign.yaml `constraints:` over the holdout events (their group
    features read from the warehouse) when it has some."""
    constraints = None
    if config.constraints is not None:
        features = group_features(con, campaign, config)
        frame = frames_store.holdout_segments(con, campaign, features) if features else pd.DataFrame(index=pd.RangeIndex(ev.n))
        with domain_errors():
            constraints = Constraints.build(config.constraints, frame, config.n_levels)
    with domain_errors():
        return BudgetPlan.of(config.budget_per_capita, constraints, campaign)


def segment_outputs(ev, config, model: str, version: str, response, decisions) -> tuple[pd.DataFrame, dict]:
    """The segment_evaluation rows of a model (empty without campaign.yaml segments or truth) and
    their metadata: the table and the per-segment plot of predicted vs true mean response per level."""
    if ev.segments is None or ev.true_values is None:
        return pd.DataFrame(columns=list(SEGMENT_COLUMNS)), {}
    table = segment_evaluation(model, version, ev.segments, response, Truth(ev.true_values, ev.true_costs), decisions,
                               binary=config.response == "binary")
    curves = {c: segment_curves(ev.segments, response, ev.true_values, c) for c in ev.segments.columns}
    png = plot_segment_curves(curves, config.labels, title=f"{model}: predicted (solid) vs true (dashed) per segment")
    shown = table[table["budget_per_capita"].isna() | (table["budget_per_capita"] == table["budget_per_capita"].min())]
    return table, {"segment_evaluation": rows_table(shown.to_dict("records")),
                   "segment_plot": dg.MetadataValue.md(png_md(png, "Mean response per level by segment: predicted vs true"))}


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

