"""Campaign-level assets: propensity → training frame → models → coefficients → duals/allocations →
policy evaluation. Each function reads the warehouse, calls domain code and writes the result back;
the logic lives in the domain packages."""


import base64
import json
import time
from contextlib import contextmanager

import dagster as dg
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from promo_assets import results, settings
from promo_assets.artifacts import content_version
from promo_assets.ingestion import day_files, load_config, loaded_features
from promo_assets.orchestration.common import (
    WAREHOUSE_POOL,
    LandingResource,
    campaign_partitions,
    connect,
    md_table,
)
from promo_assets.orchestration.conditions import CAMPAIGN_CONDITION
from promo_assets.warehouse import quote_ident, registered, sql, transaction

MODEL_ASSETS = ("s_learner", "dipn_uplift_net", "gnn_hazard_model")  # assets whose trained model is scored and allocated
MODEL_NAMES = {"dipn_uplift_net": "dipn", "gnn_hazard_model": "gnn_hazard"}  # asset -> model_registry name (default: same)
SCORING_CHUNK = 50_000
COMMON = dict(partitions_def=campaign_partitions, pool=WAREHOUSE_POOL, automation_condition=CAMPAIGN_CONDITION)


# --------------------------------------------------------------------------------------------
# helpers


def feature_spec(con, campaign: str) -> tuple[list[str], list[str]]:
    """(numeric, categorical) feature columns of the campaign's currently loaded partitions."""
    kinds = loaded_features(con, campaign)
    return [f for f, k in kinds.items() if k == "numeric"], [f for f, k in kinds.items() if k == "categorical"]


def _columns(numeric: list[str], categorical: list[str], prefix: str = "e.") -> str:
    """', <prefix>"feature"' for every feature column, appended to a SELECT list."""
    return "".join(f", {prefix}{quote_ident(c)}" for c in numeric + categorical)


def read_training_frame(con, campaign: str) -> tuple[pd.DataFrame, list[str], list[str]]:
    numeric, categorical = feature_spec(con, campaign)
    frame = con.execute(sql("frames", "training_frame", columns=_columns(numeric, categorical)), [campaign]).df()
    if frame.empty:
        raise dg.Failure(f"campaign '{campaign}' has no training frame: materialize rct_events and training_frame first")
    return frame, numeric, categorical


def png_md(png: bytes, title: str) -> str:
    return f"**{title}**\n\n![{title}](data:image/png;base64,{base64.b64encode(png).decode()})"


def _log(context):
    return lambda msg: context.log.info(msg)


_RUN_ENDED = {dg.DagsterRunStatus.SUCCESS: True, dg.DagsterRunStatus.FAILURE: False, dg.DagsterRunStatus.CANCELED: False}


def ended_runs(instance: dg.DagsterInstance, run_ids) -> dict[str, bool]:
    """Dagster's own verdict on runs: run id -> succeeded, for the runs that have ended (a run this
    instance does not know counts as failed); runs still queued or in progress are left out."""
    out = {}
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        if run is None or run.status in _RUN_ENDED:
            out[run_id] = run is not None and _RUN_ENDED[run.status]
    return out


@contextmanager
def results_write(context, con, campaign: str, *tables: str):
    """One transaction for all of an asset's results rows (all or none): the campaign's earlier runs
    that have ended are marked from their Dagster status (a failed run's rows deleted), this run is
    recorded in result_runs, and the retention rule (PROMO_KEEP_RUNS) is applied to `tables`."""
    try:
        keep = settings.keep_runs()
    except ValueError as exc:
        raise dg.Failure(str(exc)) from None
    with transaction(con):
        results.reconcile(con, campaign, ended_runs(context.instance, results.unfinished(con, campaign, context.run_id)))
        results.start(con, campaign, context.run_id)
        yield con
        results.retain(con, campaign, context.run_id, tables, keep)


# --------------------------------------------------------------------------------------------
# causal


@dg.asset(
    **COMMON,
    deps=["rct_events"],  # multi → single dimension mapping on "campaign" (inferred)
    code_version="1",
    group_name="causal",
    kinds={"duckdb", "sklearn"},
    description="Propensity of each event's logged level: the logged one, or the empirical assignment "
    "frequency per day for randomized campaigns; a calibrated multinomial model P(level | features) for "
    "observational ones (randomized: false), with overlap diagnostics. Table propensity.",
)
def propensity(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.causal import fit_propensity, propensity_diagnostics, propensity_plot, randomized_propensity

    campaign = context.partition_key
    config = load_config(landing.path, campaign)
    with connect(warehouse) as con:
        numeric, categorical = feature_spec(con, campaign)
        events = con.execute(
            sql("frames", "events", columns=_columns(numeric, categorical, prefix="")), [campaign]
        ).df()
        if events.empty:
            raise dg.Failure(f"no rct_events for campaign '{campaign}'")
        metadata = {"events": len(events)}
        if config.randomized:
            p = randomized_propensity(events, config.n_levels)
            source = np.where(events["propensity"].notna(), "logged", "empirical")
            proba = None
        else:
            model = fit_propensity(events, numeric, categorical, config.n_levels, seed=0, log=_log(context))
            proba = model.predict_proba(events)
            p = proba[np.arange(len(events)), events["level"].to_numpy()]
            source = np.full(len(events), "estimated")
        frame_df = pd.DataFrame(
            {"event_date": events["event_date"], "source_row": events["source_row"], "propensity": p, "source": source}
        )
        version = content_version(frame_df[["propensity"]].to_numpy().tobytes())
        with transaction(con), registered(con, "frame_df", frame_df):
            con.execute(sql("frames", "delete_campaign", table="propensity"), [campaign])
            con.execute(sql("frames", "insert_propensity"), [campaign, version])
    if proba is not None:
        from promo_assets.causal import ips_weights

        w = ips_weights(p, clip=config.ips_clip)
        diag = propensity_diagnostics(proba, events["level"].to_numpy(), w)
        metadata["diagnostics"] = dg.MetadataValue.json(_jsonable(diag))
        metadata["plot"] = dg.MetadataValue.md(png_md(propensity_plot(proba, events["level"].to_numpy()), "Estimated propensities per level"))
    metadata.update(
        {
            "propensity_version": version,
            "source": dg.MetadataValue.json(pd.Series(source).value_counts().to_dict()),
            "min_propensity": float(np.min(p)),
            "mean_propensity": float(np.mean(p)),
        }
    )
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(version))


@dg.asset(
    **COMMON,
    deps=["propensity"],
    code_version="1",
    group_name="causal",
    kinds={"duckdb"},
    description="Train / validation / holdout split by date window (last `holdout_days` days are the "
    "holdout; earlier days split by a hash of the user id) and clipped, self-normalized IPS weights "
    "per event. Table training_frame.",
)
def training_frame(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.causal import assign_split, ips_weights

    campaign = context.partition_key
    config = load_config(landing.path, campaign)
    with connect(warehouse) as con:
        events = con.execute(
            "SELECT e.event_date, e.source_row, e.user_id, e.level, p.propensity FROM rct_events e "
            "JOIN propensity p USING (campaign, event_date, source_row) WHERE e.campaign = ? "
            "ORDER BY e.event_date, e.source_row",
            [campaign],
        ).df()
        split = assign_split(events, holdout_days=config.holdout_days, validation_fraction=config.validation_fraction)
        weights = ips_weights(events["propensity"].to_numpy(), clip=config.ips_clip)
        frame_df = pd.DataFrame(
            {"event_date": events["event_date"], "source_row": events["source_row"], "split": split, "ips_weight": weights}
        )
        version = content_version(frame_df[["ips_weight"]].to_numpy().tobytes() + "".join(split).encode())
        with transaction(con), registered(con, "frame_df", frame_df):
            con.execute(sql("frames", "delete_campaign", table="training_frame"), [campaign])
            con.execute(sql("frames", "insert_training_frame"), [campaign, version])
    counts = pd.Series(split).value_counts().to_dict()
    ess = float(weights.sum() ** 2 / np.square(weights).sum())
    days = sorted(set(events["event_date"].astype(str)))
    return dg.MaterializeResult(
        metadata={
            "frame_version": version,
            "rows_per_split": dg.MetadataValue.json({k: int(v) for k, v in counts.items()}),
            "holdout_days": dg.MetadataValue.json(days[-config.holdout_days:]),
            "effective_sample_size": ess,
            "ess_fraction": ess / len(weights),
            "max_ips_weight": float(weights.max()),
        },
        data_version=dg.DataVersion(version),
    )


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


# --------------------------------------------------------------------------------------------
# models


def _register(context, con, campaign: str, trained, data_version: str | None) -> None:
    """Save the content-addressed artefact and register it for this run (one transaction)."""
    trained.save()  # content-addressed: the same weights always get the same version
    with results_write(context, con, campaign, "model_registry"):
        con.execute(
            sql("frames", "insert_model"),
            [campaign, trained.name, trained.version, data_version, json.dumps(_jsonable(trained.metrics)), context.run_id],
        )


def _model_metadata(trained, seconds: float) -> dict:
    history = getattr(trained, "history", None) or []
    meta = {
        "model_version": trained.version,
        "metrics": dg.MetadataValue.json(_jsonable(trained.metrics)),
        "training_seconds": round(seconds, 2),
    }
    if history:
        meta["epochs"] = md_table([_jsonable(h) if isinstance(h, dict) else {"epoch": i, "loss": h} for i, h in enumerate(history)])
    return meta


def _train_asset(context, warehouse: DuckDBResource, landing: LandingResource, train) -> dg.MaterializeResult:
    """Read the campaign's training frame, call `train(frame, config, numeric, categorical, seed=,
    max_epochs=, log=)`, store the content-addressed artefact and register it with the version of
    the training frame it learned from."""
    campaign = context.partition_key
    config = load_config(landing.path, campaign)
    with connect(warehouse) as con:
        frame, numeric, categorical = read_training_frame(con, campaign)
        frame_version = con.execute(sql("frames", "frame_version"), [campaign]).fetchone()[0]
    start = time.perf_counter()
    trained = train(frame, config, numeric, categorical, seed=0, max_epochs=settings.max_epochs(), log=_log(context))
    seconds = time.perf_counter() - start
    with connect(warehouse) as con:
        _register(context, con, campaign, trained, frame_version)
    meta = _model_metadata(trained, seconds)
    meta["frame_version"] = frame_version
    return dg.MaterializeResult(metadata=meta, data_version=dg.DataVersion(trained.version))


@dg.asset(
    **COMMON,
    deps=["training_frame"],
    code_version="1",
    group_name="models",
    kinds={"pytorch"},
    description="DNN S-learner (TSM-SL): shared MLP with one response and one cost head per level, "
    "IPS-weighted losses, early stopping on the validation split. Content-addressed artefact.",
)
def s_learner(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.models import train_s_learner

    return _train_asset(context, warehouse, landing, train_s_learner)


@dg.asset(
    **COMMON,
    deps=["training_frame"],
    code_version="2",
    group_name="models",
    kinds={"pytorch"},
    description="DIPN phase 1 (bias-net learning): the bias net trained on the lowest-level samples only.",
)
def dipn_bias_net(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.models import train_dipn_bias

    return _train_asset(context, warehouse, landing, train_dipn_bias)


@dg.asset(
    **COMMON,
    deps=["dipn_bias_net", "training_frame"],
    code_version="2",
    group_name="models",
    kinds={"pytorch"},
    description="DIPN phase 2 (uplift-net learning): all samples, bias net frozen; isotonic embedding, "
    "non-negative uplift weights, smoothness loss. Monotone in the level by construction.",
)
def dipn_uplift_net(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.models import load_model, train_dipn_uplift

    campaign = context.partition_key
    with connect(warehouse) as con:
        row = con.execute(sql("frames", "latest_models"), [campaign, ["dipn_bias"], context.run_id, campaign]).fetchone()
    if row is None:
        raise dg.Failure(f"no trained dipn_bias_net for campaign '{campaign}': materialize dipn_bias_net first")
    bias = load_model(row[1])
    result = _train_asset(
        context, warehouse, landing,
        lambda frame, config, numeric, categorical, **kw: train_dipn_uplift(bias, frame, **kw),
    )
    result.metadata["bias_net_version"] = dg.MetadataValue.text(bias.version)
    return result


# --------------------------------------------------------------------------------------------
# coefficients


def _population(landing: LandingResource, campaign: str) -> tuple[pd.DataFrame | None, str]:
    files = day_files(landing.path, campaign, "population")
    if not files:
        return None, "holdout users (no population file)"
    day = max(files)
    path = files[day]
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    if "user_id" not in frame.columns:
        raise dg.Failure(f"{path}: missing required column 'user_id'")
    frame["user_id"] = frame["user_id"].astype(str)
    return frame.drop_duplicates("user_id", keep="last"), str(path)


def _score(con, context, campaign: str, model_name: str, model, target: str, users: pd.DataFrame, k: int) -> int:
    """Score `users` in chunks and store their coefficients (replacing this version's rows)."""
    con.execute(sql("frames", "delete_coefficients"), [campaign, model_name, model.version, target])
    n = len(users)
    for start in range(0, n, SCORING_CHUNK):
        part = users.iloc[start:start + SCORING_CHUNK]
        values, costs = model.predict(part)
        chunk_df = pd.DataFrame(
            {
                "user_id": np.repeat(part["user_id"].to_numpy(), k),
                "level": np.tile(np.arange(k, dtype=np.int32), len(part)),
                "value": np.asarray(values, dtype=np.float64).ravel(),
                "cost": np.asarray(costs, dtype=np.float64).ravel(),
            }
        )
        with registered(con, "chunk_df", chunk_df):
            con.execute(sql("frames", "insert_coefficients"), [campaign, model_name, model.version, target])
        context.log.info(f"{model_name} [{target}]: scored {min(start + SCORING_CHUNK, n)}/{n} users")
    return n


def latest_models(con, campaign: str, run_id: str) -> list[tuple[str, str]]:
    """The latest version of every scored model, registered by a succeeded run or by `run_id`."""
    names = [MODEL_NAMES.get(m, m) for m in MODEL_ASSETS]
    return con.execute(sql("frames", "latest_models"), [campaign, names, run_id, campaign]).fetchall()


@dg.asset(
    **COMMON,
    deps=[*MODEL_ASSETS],
    code_version="1",
    group_name="decisions",
    kinds={"duckdb"},
    description="Predicted response (value) and cost of every target user × level, for the latest "
    "version of every trained model: the target population (latest population/ file, else the holdout "
    "users) and the holdout users (for evaluation). Scored in chunks; history kept by model version.",
)
def response_coefficients(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.graph import load_graph_model
    from promo_assets.models import load_model

    campaign = context.partition_key
    config = load_config(landing.path, campaign)
    population, population_source = _population(landing, campaign)
    rows = []
    with connect(warehouse) as con:
        numeric, categorical = feature_spec(con, campaign)
        holdout = con.execute(sql("frames", "holdout_events", columns=_columns(numeric, categorical)), [campaign]).df()
        holdout_users = holdout.drop_duplicates("user_id", keep="first")
        if population is None:
            population = holdout_users
        absent = [c for c in numeric + categorical if c not in population.columns]
        if absent:  # a feature of some loaded days only: NULL for these users, like on the days without it
            context.log.warning(f"{population_source}: no column {', '.join(map(repr, absent))}; NULL for every user")
            population = population.assign(**{c: np.nan for c in absent})
        with results_write(context, con, campaign, "response_coefficients"):  # every model's rows, or none
            for model_name, version in latest_models(con, campaign, context.run_id):
                model = load_graph_model(version) if model_name == "gnn_hazard" else load_model(version)
                n_pop = _score(con, context, campaign, model_name, model, "population", population, config.n_levels)
                n_hold = _score(con, context, campaign, model_name, model, "holdout", holdout_users, config.n_levels)
                mean = con.execute(
                    "SELECT level, avg(value), avg(cost) FROM response_coefficients WHERE campaign = ? AND model = ? "
                    "AND model_version = ? AND target = 'population' GROUP BY level ORDER BY level",
                    [campaign, model_name, version],
                ).fetchall()
                rows.append({"model": model_name, "model_version": version, "population_users": n_pop,
                             "holdout_users": n_hold, "mean_value_per_level": [round(v, 4) for _, v, _ in mean]})
            if not rows:
                raise dg.Failure(f"no trained model for campaign '{campaign}'")
    return dg.MaterializeResult(
        metadata={"models": md_table(rows), "population_source": population_source, "levels": config.n_levels}
    )


# --------------------------------------------------------------------------------------------
# decisions


def coefficient_arrays(con, campaign: str, model: str, version: str, target: str, k: int):
    df = con.execute(sql("frames", "coefficients"), [campaign, model, version, target]).df()
    n = len(df) // k
    users = df["user_id"].to_numpy()[::k]
    return users, df["value"].to_numpy().reshape(n, k), df["cost"].to_numpy().reshape(n, k)


def _budgets(config) -> list[float]:
    if not config.budgets_per_capita:
        raise dg.Failure(f"campaign '{config.campaign}' has no budget_per_capita in campaign.yaml")
    return list(config.budgets_per_capita)


def solve_budgets(context, model: str, values, costs, budgets: list[float]) -> list[tuple[float, object]]:
    """(budget, solution) for every budget; a budget below the model's cheapest allocation gives
    (budget, InfeasibleBudgetError) and a warning instead of failing the other budgets."""
    from promo_assets.allocation import InfeasibleBudgetError, solve

    out = []
    for b in budgets:
        try:
            out.append((b, solve(values, costs, b, per_capita=True)))
        except InfeasibleBudgetError as exc:
            context.log.warning(f"{model}: budget_per_capita {b:g} skipped: {exc}; the other budgets are solved")
            out.append((b, exc))
    return out


def _infeasible_metadata(infeasible: list[dict]) -> dict:
    return {"infeasible_budgets": md_table(infeasible)} if infeasible else {}


@dg.asset(
    **COMMON,
    deps=["response_coefficients"],
    code_version="1",
    group_name="decisions",
    kinds={"duckdb"},
    description="λ* of the multiple-choice knapsack for every model × configured per-capita budget on "
    "the target population (exact LP optimum), with the dual bound and the budget–value frontier. Table "
    "budget_dual (history kept by run, PROMO_KEEP_RUNS). A budget below a model's cheapest allocation is "
    "skipped with a warning and recorded in infeasible_budget (metadata infeasible_budgets); the other "
    "budgets are solved.",
)
def budget_dual(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.allocation import frontier

    campaign = context.partition_key
    config = load_config(landing.path, campaign)
    rows, curves, infeasible = [], {}, []
    with connect(warehouse) as con, results_write(context, con, campaign, "budget_dual", "infeasible_budget"):
        for model, version in latest_models(con, campaign, context.run_id):
            _, values, costs = coefficient_arrays(con, campaign, model, version, "population", config.n_levels)
            n = len(values)
            fr = frontier(values, costs)
            idx = np.unique(np.linspace(0, len(fr.costs) - 1, 12).round().astype(int))
            for i in idx:
                curves.setdefault(model, []).append(
                    {"lambda_": float(fr.lambdas[i]), "cost_per_capita": float(fr.costs[i]) / n,
                     "value_per_capita": float(fr.values[i]) / n})
            for b, res in solve_budgets(context, model, values, costs, _budgets(config)):
                if isinstance(res, Exception):
                    infeasible.append(results.record_infeasible(con, campaign, model, version, b, res, context.run_id))
                    continue
                con.execute(sql("frames", "insert_dual"), [campaign, model, version, b, float(res.lambda_), float(res.value),
                                                           float(res.cost), float(res.dual_bound), n, context.run_id])
                rows.append({"model": model, "budget_per_capita": b, "lambda_": float(res.lambda_),
                             "value_per_capita": res.value / n, "cost_per_capita": res.cost / n,
                             "dual_gap": float(res.dual_bound - res.value)})
    return dg.MaterializeResult(
        metadata={
            "duals": md_table(rows),
            **{f"frontier_{model}": md_table(points) for model, points in curves.items()},
            **_infeasible_metadata(infeasible),
        }
    )


@dg.asset(
    **COMMON,
    deps=["budget_dual"],
    code_version="1",
    group_name="decisions",
    kinds={"duckdb"},
    description="The incentive level of every target user for every model × budget (the allocation at "
    "λ*; the one fractional user resolved by seeded sampling). Table allocation (history kept by run, "
    "PROMO_KEEP_RUNS), written in one transaction: every model × budget or nothing. An infeasible budget "
    "is skipped with a warning (metadata infeasible_budgets).",
)
def allocation(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    campaign = context.partition_key
    config = load_config(landing.path, campaign)
    rows, infeasible = [], []
    incentives = np.asarray(config.incentives)
    with connect(warehouse) as con, results_write(context, con, campaign, "allocation"):
        for model, version in latest_models(con, campaign, context.run_id):
            users, values, costs = coefficient_arrays(con, campaign, model, version, "population", config.n_levels)
            for b, res in solve_budgets(context, model, values, costs, _budgets(config)):
                if isinstance(res, Exception):
                    infeasible.append({"model": model, "budget_per_capita": b, "message": str(res)})
                    continue
                alloc_df = pd.DataFrame({"user_id": users, "level": res.levels.astype(np.int32), "incentive": incentives[res.levels]})
                with registered(con, "alloc_df", alloc_df):
                    con.execute(sql("frames", "insert_allocation"), [campaign, model, version, b, context.run_id])
                share = np.bincount(res.levels, minlength=config.n_levels) / len(users)
                rows.append({"model": model, "budget_per_capita": b, "users": len(users),
                             "cost_per_capita": float(res.cost) / len(users),
                             "share_per_level": {str(lab): round(float(s), 3) for lab, s in zip(config.labels, share)}})
    return dg.MaterializeResult(
        metadata={"allocations": md_table(rows), "run_id": context.run_id, **_infeasible_metadata(infeasible)})


# --------------------------------------------------------------------------------------------
# evaluation


def _holdout_arrays(con, campaign: str, config, models: list[tuple[str, str]], columns: str = ""):
    """Holdout events (with the feature `columns`) joined with every model's holdout coefficients,
    aligned row by row."""
    holdout = con.execute(sql("frames", "holdout_events", columns=columns), [campaign]).df()
    specs = {}
    for model, version in models:
        users, values, costs = coefficient_arrays(con, campaign, model, version, "holdout", config.n_levels)
        pos = pd.Series(np.arange(len(users)), index=users)
        idx = pos.reindex(holdout["user_id"]).to_numpy()
        if np.isnan(idx).any():
            raise dg.Failure(f"{model} {version}: holdout coefficients are missing users; re-materialize response_coefficients")
        idx = idx.astype(int)
        specs[model] = (version, values[idx], costs[idx])
    return holdout, specs


def _outcome_predictions(context, config, train: pd.DataFrame, holdout: pd.DataFrame, numeric, categorical):
    """The DR outcome model fitted on the training days, its predictions for the holdout events
    (N x K each, or None when it cannot be fitted: the DR columns then stay empty) and metadata."""
    from promo_assets.evaluation import EvaluationError, fit_outcome_model

    try:
        model = fit_outcome_model(train, numeric, categorical, config.n_levels, ordered=config.ordered,
                                  incentives=list(config.incentives), cost_rule=config.cost, seed=0)
        dm_values, dm_costs = model.predict(holdout)
    except EvaluationError as exc:
        context.log.warning(f"doubly robust EOM skipped: {exc}")
        return None, None, {"fitted": False, "reason": str(exc)}
    context.log.info(f"outcome model ({model.kind}) fitted on {model.n_train} training-day events")
    return dm_values, dm_costs, {"fitted": True, "kind": model.kind, "training_events": int(model.n_train)}


def _table(columns: list[tuple[str, str]], records: list[dict]) -> dg.MetadataValue:
    """Dagster table metadata (renders inline in the UI) from plain columns and records."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord(r) for r in records],
        schema=dg.TableSchema(columns=[dg.TableColumn(name, type_) for name, type_ in columns]),
    )


@dg.asset(
    **COMMON,
    deps=["allocation"],
    code_version="2",
    group_name="evaluation",
    kinds={"duckdb", "matplotlib", "sklearn"},
    description="Offline policy evaluation on the holdout RCT days, every policy compared at equal spend: "
    "for every model × budget the EOM and the doubly robust EOM (outcome model fitted on the training "
    "days) of its allocation with bootstrap 95% intervals, Q(v, c) and the DR value at cost = budget, "
    "the frontier area ratio (AUCC for K > 2; AUCC for two-arm campaigns), the response-curve metrics, "
    "and for simulated campaigns the true value, the spend ratio, the true value at matched true spend "
    "and its % of the oracle. A cost-matched random reference is always included. Table "
    "policy_evaluation (the last PROMO_KEEP_RUNS runs kept); the leaderboard (a table) and plots in the metadata.",
)
def policy_evaluation(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.evaluation import (
        evaluate_policies,
        leaderboard_markdown,
        leaderboard_table,
        plot_frontier,
        plot_response_by_level,
        policy_curves,
    )
    from promo_assets.simulation import truth_arrays

    campaign = context.partition_key
    config = load_config(landing.path, campaign)
    with connect(warehouse) as con:
        models = latest_models(con, campaign, context.run_id)
        if not models:
            raise dg.Failure(f"no trained model for campaign '{campaign}'")
        numeric, categorical = feature_spec(con, campaign)
        columns = _columns(numeric, categorical)
        holdout, specs = _holdout_arrays(con, campaign, config, models, columns)
        train = con.execute(sql("frames", "outcome_training_events", columns=columns), [campaign]).df()
    dm_values, dm_costs, outcome_meta = _outcome_predictions(context, config, train, holdout, numeric, categorical)
    truth_dir = landing.path / campaign
    true_values = true_costs = None
    if (truth_dir / "truth" / "response.parquet").exists():
        true_values, true_costs = truth_arrays(truth_dir, holdout["user_id"].tolist())
        context.log.info(f"ground truth found for {len(holdout)} holdout users")
    logged = holdout["level"].to_numpy()
    response, cost, prop = (holdout[c].to_numpy(dtype=float) for c in ("response", "cost", "propensity"))
    rows = evaluate_policies(
        specs, logged, response, cost, prop, budgets=_budgets(config), campaign=campaign,
        true_values=true_values, true_costs=true_costs, dm_values=dm_values, dm_costs=dm_costs,
        incentives=list(config.incentives),
        ordered=config.ordered, binary=config.response == "binary", log=_log(context),
        min_holdout_users=config.min_holdout_users,
    )
    rows["run_id"] = context.run_id
    curves = policy_curves(specs, logged, response, cost, prop, true_values=true_values, true_costs=true_costs,
                           log=_log(context))
    with connect(warehouse) as con, results_write(context, con, campaign, "policy_evaluation"), \
            registered(con, "eval_df", rows):
        con.execute(sql("frames", "insert_evaluation"))
    frontier_png = plot_frontier(curves, rows, title=f"{campaign}: cost–response frontier on the holdout days")
    levels_png = plot_response_by_level(
        {m: s[1] for m, s in specs.items()}, true_values=true_values, logged=logged, response=response,
        propensity=prop, incentives=list(config.incentives) if config.ordered else None,
        labels=None if config.ordered else list(config.labels), title=f"{campaign}: average response per level",
    )
    return dg.MaterializeResult(
        metadata={
            "leaderboard": _table(*leaderboard_table(rows)),
            "leaderboard_markdown": dg.MetadataValue.md(leaderboard_markdown(rows)),
            "outcome_model": dg.MetadataValue.json(outcome_meta),
            "frontier_plot": dg.MetadataValue.md(png_md(frontier_png, "Cost–response frontier (EOM on holdout; truth where simulated)")),
            "response_per_level_plot": dg.MetadataValue.md(png_md(levels_png, "Average response per level: models vs truth")),
            "holdout_events": len(holdout),
            "models": dg.MetadataValue.json({m: v for m, v in models}),
            "ground_truth": true_values is not None,
        }
    )

