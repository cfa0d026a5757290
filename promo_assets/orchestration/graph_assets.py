"""Bipartite customer–merchant assets (GNN/hazard paper): merchant events → graph → GNN + hazard
model → merchant coefficients → joint customer + merchant allocation under the ratio budget.

Thin wiring around `promo_assets.graph`; a campaign without merchant files or payment edges
materializes every asset here with a note and no rows, so the demo path is unaffected. The
customer side of the model is scored and evaluated by the common chain (response_coefficients →
budget_dual → allocation → policy_evaluation) under the model name "gnn_hazard".
"""


import datetime as dt
import time

import dagster as dg
import numpy as np
import pandas as pd
from dagster_duckdb import DuckDBResource

from promo_assets import settings
from promo_assets.artifacts import content_version
from promo_assets.campaign import CampaignConfig, CampaignConfigError
from promo_assets.ingestion import IngestError, day_files
from promo_assets.ingestion import merchants as ingest_merchants
from promo_assets.ingestion.merchants import MerchantConfig
from promo_assets.orchestration.campaign_assets import (
    _jsonable,
    _model_metadata,
    _register,
    coefficient_arrays,
    feature_spec,
    png_md,
    read_training_frame,
    results_write,
)
from promo_assets.orchestration.common import (
    WAREHOUSE_POOL,
    LandingResource,
    campaign_partitions,
    connect,
    day_and_campaign,
    day_campaign_partitions,
    md_table,
)
from promo_assets.orchestration.conditions import CAMPAIGN_CONDITION, INGESTION_CONDITION
from promo_assets.warehouse import quote_ident, registered, sql, transaction

MODEL_NAME = "gnn_hazard"  # model_registry / response_coefficients name of the GNN + hazard model
GRAPH = dict(partitions_def=campaign_partitions, pool=WAREHOUSE_POOL, group_name="graph", automation_condition=CAMPAIGN_CONDITION)


# --------------------------------------------------------------------------------------------
# helpers


def merchant_config(landing: LandingResource, campaign: str) -> tuple[CampaignConfig, MerchantConfig]:
    """`promo_assets.ingestion.merchants.merchant_config`; a bad campaign.yaml fails the asset."""
    try:
        return ingest_merchants.merchant_config(landing.path, campaign)
    except CampaignConfigError as exc:
        raise dg.Failure(str(exc)) from None


def latest_model_version(con, campaign: str, run_id: str) -> str | None:
    """The latest gnn_hazard version registered by a succeeded run or by `run_id`."""
    row = con.execute(sql("frames", "latest_models"), [campaign, [MODEL_NAME], run_id, campaign]).fetchone()
    return row[1] if row else None


def _log(context):
    return lambda msg: context.log.info(msg)


# --------------------------------------------------------------------------------------------
# ingestion


@dg.asset(
    partitions_def=day_campaign_partitions,
    pool=WAREHOUSE_POOL,
    code_version="1",
    group_name="ingestion",
    kinds={"duckdb"},
    deps=["rct_events"],  # reloaded with the same date|campaign of rct_events (conditions.py)
    automation_condition=INGESTION_CONDITION,
    description="Merchant-side RCT rows of a bipartite campaign and day (commission level, sharing count, "
    "cost, features as JSON), loaded from `<landing>/<campaign>/merchants/<day>.parquet|csv` into the table "
    "`merchant_events`. The partition is replaced in one transaction; a file with any bad row (unknown "
    "commission, bad response/cost/propensity, missing `merchant_id`) loads nothing and the error names the "
    "file, column and first row. A campaign without `merchants/` files materializes an empty partition.",
)
def merchant_events(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    day, campaign = day_and_campaign(context)
    config, mconf = merchant_config(landing, campaign)
    path = day_files(landing.path, campaign, "merchants").get(dt.date.fromisoformat(day))
    if path is None:
        with connect(warehouse) as con:
            ingest_merchants.clear_merchants_day(con, campaign, day)
        context.log.info(f"{campaign} {day}: no merchants file; empty partition")
        return dg.MaterializeResult(metadata={"rows_loaded": 0, "note": "no merchants/ file for this day"})
    with connect(warehouse) as con:
        try:
            result = ingest_merchants.ingest_merchants_day(con, campaign, day, path, mconf)
        except IngestError as exc:
            raise dg.Failure(str(exc)) from None
    context.log.info(f"{campaign} {day}: loaded {result.rows_loaded} merchant rows from {path}")
    return dg.MaterializeResult(
        metadata={
            "rows_loaded": result.rows_loaded,
            "source_file": dg.MetadataValue.path(str(path)),
            "commission_distribution": md_table(
                [{"level": lvl, "commission": float(mconf.commissions[lvl]), "rows": k}
                 for lvl, k in sorted(result.level_counts.items())]),
            "features": dg.MetadataValue.json(list(result.features)),
        }
    )


# --------------------------------------------------------------------------------------------
# graph


@dg.asset(
    **GRAPH,
    deps=["rct_events", "payment_edges", "merchant_events"],
    code_version="1",
    kinds={"duckdb"},
    description="The customer–merchant bipartite graph of a campaign: payment edges summed over the days "
    "(graph_edges: n_payments, weight = log1p(n_payments)) and the node tables graph_customers / "
    "graph_merchants (degree, payments, RCT rows, features as JSON; features from the latest population/ "
    "and merchant_population/ files, else the latest RCT row). Replaced per run. A campaign without "
    "payment edges or merchant events materializes with a note and no rows.",
)
def customer_merchant_graph(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.graph import aggregate_edges
    from promo_assets.graph.warehouse_io import features_frame, latest_landing_file, node_stats, node_table

    campaign = context.partition_key
    population, pop_source = latest_landing_file(landing.path, campaign, "population")
    merchant_pop, mpop_source = latest_landing_file(landing.path, campaign, "merchant_population")
    with connect(warehouse) as con:
        raw_edges = con.execute(sql("graph", "campaign_edges"), [campaign]).df()
        m_events = con.execute(sql("graph", "campaign_merchant_events"), [campaign]).df()
        if raw_edges.empty or m_events.empty:
            with transaction(con):
                for table in ("graph_edges", "graph_customers", "graph_merchants"):
                    con.execute(sql("graph", "delete_graph", table=table), [campaign])
            note = f"campaign '{campaign}' has no " + ("payment edges" if raw_edges.empty else "merchant events") + \
                "; no graph (not a bipartite campaign)"
            context.log.info(note)
            return dg.MaterializeResult(metadata={"note": note, "customers": 0, "merchants": 0, "edges": 0})
        numeric, categorical = feature_spec(con, campaign)
        cols = "".join(f", {quote_ident(c)}" for c in numeric + categorical)
        rct_features = con.execute(sql("graph", "latest_customer_features", columns=cols), [campaign]).df()
        n_events = con.execute(sql("graph", "customer_event_counts"), [campaign]).df()
    edges = aggregate_edges(raw_edges)
    m_feats = features_frame(m_events["merchant_id"], m_events["features"], "merchant_id")
    c_ids = np.unique(np.concatenate([edges["user_id"].to_numpy(dtype=str), rct_features["user_id"].to_numpy(dtype=str),
                                      [] if population is None else population["user_id"].astype(str).to_numpy()]))
    m_ids = np.unique(np.concatenate([edges["merchant_id"].to_numpy(dtype=str), m_events["merchant_id"].to_numpy(dtype=str),
                                      [] if merchant_pop is None else merchant_pop["merchant_id"].astype(str).to_numpy()]))
    customers = node_table(c_ids, "user_id", population, rct_features)
    merchants = node_table(m_ids, "merchant_id", merchant_pop, m_feats)

    c_nodes = node_stats(customers, "user_id", edges, n_events)
    m_nodes = node_stats(merchants, "merchant_id", edges, m_events)
    version = content_version(
        pd.util.hash_pandas_object(edges, index=False).to_numpy().tobytes()
        + "\n".join(c_nodes["features"]).encode() + "\n".join(m_nodes["features"]).encode()
    )
    with connect(warehouse) as con, transaction(con):
        for table in ("graph_edges", "graph_customers", "graph_merchants"):
            con.execute(sql("graph", "delete_graph", table=table), [campaign])
        with registered(con, "edges_df", edges):
            con.execute(sql("graph", "insert_graph_edges"), [campaign, version])
        with registered(con, "nodes_df", c_nodes):
            con.execute(sql("graph", "insert_graph_customers"), [campaign, version])
        with registered(con, "nodes_df", m_nodes):
            con.execute(sql("graph", "insert_graph_merchants"), [campaign, version])
    context.log.info(f"{campaign}: graph {version}: {len(c_nodes)} customers, {len(m_nodes)} merchants, {len(edges)} edges")
    return dg.MaterializeResult(
        metadata={
            "graph_version": version,
            "customers": len(c_nodes),
            "merchants": len(m_nodes),
            "edges": len(edges),
            "payment_rows": len(raw_edges),
            "isolated_customers": int((c_nodes["degree"] == 0).sum()),
            "isolated_merchants": int((m_nodes["degree"] == 0).sum()),
            "mean_customer_degree": float(c_nodes["degree"].mean()),
            "mean_merchant_degree": float(m_nodes["degree"].mean()),
            "customer_features_from": pop_source or "latest RCT row per customer",
            "merchant_features_from": mpop_source or "latest merchant RCT row",
        },
        data_version=dg.DataVersion(version),
    )


# --------------------------------------------------------------------------------------------
# model


def read_graph(con, campaign: str, normalizer: str | None):
    """The stored graph as PyG HeteroData (None when the campaign has no graph) and its version."""
    from promo_assets.graph import build_graph
    from promo_assets.graph.warehouse_io import features_frame

    c = con.execute(sql("graph", "graph_customers"), [campaign]).df()
    if c.empty:
        return None, None
    m = con.execute(sql("graph", "graph_merchants"), [campaign]).df()
    edges = con.execute(sql("graph", "graph_edges"), [campaign]).df()
    numeric, categorical = feature_spec(con, campaign)
    customers = features_frame(c["user_id"], c["features"], "user_id")
    merchants = features_frame(m["merchant_id"], m["features"], "merchant_id")
    known = set(customers.columns)
    graph = build_graph(
        edges, customers, merchants,
        customer_numeric=[f for f in numeric if f in known] if numeric or categorical else None,
        customer_categorical=[f for f in categorical if f in known] if numeric or categorical else None,
        normalizer=normalizer,
    )
    return graph, str(c["graph_version"].iloc[0])


@dg.asset(
    **GRAPH,
    deps=["customer_merchant_graph", "training_frame"],
    code_version="1",
    kinds={"pytorch"},
    description="GNN + piecewise hazard model (GNN/hazard paper Eq. 7–10): a 2-layer heterogeneous "
    "GraphSAGE over the customer–merchant graph, the hazard head with fused lasso for customers "
    "(trained on the training_frame split) and the linear mapping head for merchants (normalized by "
    "prev_shares), full-graph training with per-side early stopping. Registered in model_registry as "
    "'gnn_hazard' (content-addressed). Metadata: AUC_c, MAE_c, MSE_c, MAE_m, MSE_m (and errors vs the "
    "truth when simulated), predicted vs true response per level, the Fig. 4 uplift-quintile plot. "
    "A campaign without a graph is skipped with a note.",
)
def gnn_hazard_model(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.graph import (
        holdout_uplift_quintiles, level_curve, train_gnn_hazard, truth_matrix, truth_metrics,
    )
    from promo_assets.graph.warehouse_io import read_truth

    campaign = context.partition_key
    config, mconf = merchant_config(landing, campaign)
    with connect(warehouse) as con:
        graph, graph_version = read_graph(con, campaign, mconf.normalizer) if mconf.present else (None, None)
        if graph is None:
            note = f"campaign '{campaign}' has no customer–merchant graph (or no merchants: block); gnn_hazard skipped"
            context.log.info(note)
            return dg.MaterializeResult(metadata={"skipped": True, "note": note})
        frame, _, _ = read_training_frame(con, campaign)
        m_events = con.execute(sql("graph", "campaign_merchant_events"), [campaign]).df()
    customer_events = frame[["user_id", "level", "response", "split"]]
    context.log.info(f"{campaign}: training gnn_hazard on graph {graph_version}: {graph['customer'].num_nodes} customers, "
                     f"{graph['merchant'].num_nodes} merchants, {len(customer_events)} customer and {len(m_events)} merchant events")
    start = time.perf_counter()
    try:
        trained = train_gnn_hazard(graph, customer_events, m_events[["merchant_id", "level", "response"]],
                                   config.incentives, mconf.commissions, seed=0, max_epochs=settings.max_epochs(),
                                   log=_log(context), save=False)
    except ValueError as exc:
        raise dg.Failure(f"gnn_hazard for campaign '{campaign}': {exc}") from None
    seconds = time.perf_counter() - start
    c_truth_df, m_truth_df = read_truth(landing.path, campaign, mconf.truth)
    ct = mt = None
    if c_truth_df is not None and m_truth_df is not None:
        try:
            ct = truth_matrix(c_truth_df, "user_id", trained.customer_ids, config.n_levels)
            mt = truth_matrix(m_truth_df, "merchant_id", trained.merchant_ids, len(mconf.commissions))
            trained.metrics.update(truth_metrics(trained.customer_values, trained.merchant_values, ct[0], mt[0],
                                                 trained.merchant_normalizer))
        except ValueError as exc:
            context.log.warning(f"truth files do not cover the graph; no truth metrics: {exc}")
            ct = mt = None
    with connect(warehouse) as con:
        _register(context, con, campaign, trained, graph_version)
    curve = level_curve(trained.customer_values, None if ct is None else ct[0], config.incentives)
    png, uplift = holdout_uplift_quintiles(trained.customer_ids, trained.customer_sensitivity(), frame,
                                           None if ct is None else ct[0], config.n_levels)
    headline = ["auc_c", "mae_c", "mse_c", "mae_m", "mse_m", "mae_c_truth", "mse_c_truth", "mae_m_truth", "mse_m_truth"]
    meta = _model_metadata(trained, seconds)
    meta.update({
        "graph_version": graph_version,
        "offline_metrics": md_table([{k: trained.metrics[k] for k in headline if k in trained.metrics}]),
        "response_per_level": md_table(_jsonable(curve.to_dict("records"))),
        "merchant_response_per_level": md_table([
            {"level": j, "commission": float(mconf.commissions[j]),
             "predicted": float(trained.merchant_values[:, j].mean()),
             **({"true": float(mt[0][:, j].mean())} if mt is not None else {})}
            for j in range(len(mconf.commissions))]),
        "ground_truth": ct is not None,
    })
    if png is not None:
        title = "Uplift (two highest minus two lowest levels) per predicted-sensitivity quintile, holdout customers"
        meta["uplift_quintiles_plot"] = dg.MetadataValue.md(png_md(png, title))
        meta["uplift_quintiles"] = md_table(_jsonable(uplift))
    else:
        meta["uplift_quintiles"] = uplift
    return dg.MaterializeResult(metadata=meta, data_version=dg.DataVersion(trained.version))


# --------------------------------------------------------------------------------------------
# coefficients and the joint allocation


@dg.asset(
    **GRAPH,
    deps=["gnn_hazard_model"],
    code_version="1",
    kinds={"duckdb"},
    description="Predicted sharing count (value) and commission cost of every graph merchant × commission "
    "level from the latest gnn_hazard model: table merchant_coefficients (history kept by model version). "
    "The customer side of the same model is scored by response_coefficients (model 'gnn_hazard').",
)
def merchant_coefficients(context: dg.AssetExecutionContext, warehouse: DuckDBResource):
    from promo_assets.graph import load_graph_model

    campaign = context.partition_key
    with connect(warehouse) as con:
        version = latest_model_version(con, campaign, context.run_id)
        if version is None:
            return dg.MaterializeResult(metadata={"skipped": True, "note": f"no gnn_hazard model for campaign '{campaign}'"})
        model = load_graph_model(version)
        coef_df = model.coefficients("merchant")
        with results_write(context, con, campaign, "merchant_coefficients"), registered(con, "coef_df", coef_df):
            con.execute(sql("graph", "delete_merchant_coefficients"), [campaign, MODEL_NAME, version])
            con.execute(sql("graph", "insert_merchant_coefficients"), [campaign, MODEL_NAME, version])
    per_level = coef_df.groupby(["level", "incentive"], as_index=False)[["response", "cost"]].mean()
    return dg.MaterializeResult(
        metadata={
            "model_version": version,
            "merchants": len(model.merchant_ids),
            "mean_per_level": md_table(_jsonable(per_level.rename(columns={"incentive": "commission", "response": "value"}).to_dict("records"))),
        }
    )


@dg.asset(
    **GRAPH,
    deps=["merchant_coefficients", "response_coefficients"],
    code_version="2",
    kinds={"duckdb"},
    description="Joint allocation of customer coupons and merchant commissions under each ratio budget of "
    "campaign.yaml (ratio_budget: average incentive paid per response, GNN/hazard paper Eq. 11–16, "
    "decision rule Eq. 19–20; merchants normalized by their previous shares as in the paper) from the "
    "gnn_hazard coefficients, next to the independent allocation under the same total predicted budget "
    "(the joint policy's cost split between the sides as each side's own ratio-B solution spends). Tables joint_allocation (levels) and "
    "joint_allocation_evaluation (predicted and, for simulated campaigns, true value and cost; history kept).",
)
def joint_allocation(context: dg.AssetExecutionContext, warehouse: DuckDBResource, landing: LandingResource):
    from promo_assets.graph import allocate_ratio_budgets, load_graph_model, ratio_budgets, truth_matrix
    from promo_assets.graph.warehouse_io import read_truth

    campaign = context.partition_key
    config, mconf = merchant_config(landing, campaign)
    with connect(warehouse) as con:
        version = latest_model_version(con, campaign, context.run_id)
        if version is None:
            return dg.MaterializeResult(metadata={"skipped": True, "note": f"no gnn_hazard model for campaign '{campaign}'"})
        users, vc, cc = coefficient_arrays(con, campaign, MODEL_NAME, version, "population", config.n_levels)
        m = con.execute(sql("graph", "merchant_coefficients"), [campaign, MODEL_NAME, version]).df()
    customer_source = "response_coefficients (population)"
    if len(users) == 0:  # response_coefficients did not score gnn_hazard: every graph customer from the model
        model = load_graph_model(version)
        users, (vc, cc) = model.customer_ids, model.predict_customers()
        customer_source = "gnn_hazard model (all graph customers)"
    km = len(mconf.commissions)
    if m.empty:
        raise dg.Failure(f"no merchant_coefficients for gnn_hazard {version}: materialize merchant_coefficients first")
    merchants = m["merchant_id"].to_numpy()[::km]
    vm, cm = m["value"].to_numpy().reshape(-1, km), m["cost"].to_numpy().reshape(-1, km)
    model = load_graph_model(version)  # the paper's merchant normalizer (previous shares), per merchant
    norm_idx = pd.Index(model.merchant_ids).get_indexer(merchants)
    if (norm_idx < 0).any():
        raise dg.Failure(f"merchant_coefficients list merchants that gnn_hazard {version} does not know")
    norm = np.asarray(model.merchant_normalizer, dtype=float)[norm_idx]
    try:
        ratios = ratio_budgets(config.extra.get("ratio_budget"))
    except ValueError as exc:
        raise dg.Failure(f"campaign '{campaign}': {exc}") from None
    if not ratios:
        return dg.MaterializeResult(metadata={"skipped": True, "note": "campaign.yaml has no ratio_budget"})
    c_truth_df, m_truth_df = read_truth(landing.path, campaign, mconf.truth)
    truth = None
    if c_truth_df is not None and m_truth_df is not None:
        try:
            truth = (truth_matrix(c_truth_df, "user_id", users, config.n_levels),
                     truth_matrix(m_truth_df, "merchant_id", merchants, km))
        except ValueError as exc:
            context.log.warning(f"truth files do not cover the allocated nodes; no true values: {exc}")
    rows, levels = allocate_ratio_budgets(
        vc, cc, vm, cm, ratios, customer_ids=users, merchant_ids=merchants, incentives=np.asarray(config.incentives),
        commissions=np.asarray(mconf.commissions), merchant_normalizer=norm, truth=truth, log=_log(context))
    for row in rows:
        row.update({"campaign": campaign, "model_version": version, "n_customers": len(users),
                    "n_merchants": len(merchants), "run_id": context.run_id})
        if row["note"]:
            context.log.warning(f"ratio {row['ratio_budget']}: {row['note']}")
    eval_df = pd.DataFrame(rows)
    alloc_df = pd.concat(levels, ignore_index=True) if levels else None
    with connect(warehouse) as con, results_write(context, con, campaign, "joint_allocation", "joint_allocation_evaluation"):
        if alloc_df is not None:
            with registered(con, "alloc_df", alloc_df):
                con.execute(sql("graph", "insert_joint_allocation"), [campaign, version, context.run_id])
        with registered(con, "eval_df", eval_df):
            con.execute(sql("graph", "insert_joint_evaluation"))
    shown = ["ratio_budget", "joint_value", "independent_value", "joint_cost", "independent_cost",
             "joint_true_value", "independent_true_value", "joint_true_cost", "independent_true_cost"]
    table = [{k: r.get(k) for k in shown if k in r} for r in rows]
    return dg.MaterializeResult(
        metadata={
            "model_version": version,
            "joint_vs_independent": md_table(_jsonable(table)),
            "customers": len(users),
            "merchants": len(merchants),
            "customer_coefficients_from": customer_source,
            "ground_truth": truth is not None,
            "run_id": context.run_id,
        }
    )
