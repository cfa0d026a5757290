"""Bipartite customer–merchant assets (GNN/hazard paper): merchant events → graph → GNN + hazard
model → merchant coefficients → joint customer + merchant allocation under the ratio budget.

Thin wiring around `promo_assets.graph`; a campaign without merchant files or payment edges
materializes the graph with a note and no rows, so the demo path is unaffected. The GNN + hazard
model itself is the registered model `gnn_hazard` (promo_assets.graph.gnn_hazard): its chain
(gnn_hazard/model → response_coefficients → budget_dual → allocation → policy_evaluation) comes from
the model factory (defs/models/assets.py) and is skipped, with the reason, for a campaign without a graph;
gnn_hazard/merchant_coefficients and gnn_hazard/joint_allocation extend that chain (key prefix
gnn_hazard, group graph: they succeed, skip or fail with it).
"""



import dagster as dg
import numpy as np
import pandas as pd

from promo_assets.config.campaign import CampaignConfig
from promo_assets.ingestion import merchants as ingest_merchants
from promo_assets.ingestion.merchants import MerchantConfig
from promo_assets.defs.campaign.assets import (
    _jsonable,
    coefficient_arrays,
    feature_spec,
    results_write,
    upstream,
)
from promo_assets.defs.common import (
    WAREHOUSE_POOL,
    LandingResource,
    WarehouseResource,
    campaign_partitions,
    connect,
    log_to,
    md_table,
    model_key,
)
from promo_assets.defs.automation.conditions import CAMPAIGN_CONDITION, INGESTION_CONDITION
from promo_assets.defs.ingestion.assets import DayRange, days_metadata, ingest_days
from promo_assets.store import graph as graph_store

MODEL_NAME = "gnn_hazard"  # the registered model (promo_assets.models.registry) whose chain the joint allocation reads
MODEL_KEY = model_key(MODEL_NAME, "model")
COEFFICIENTS_KEY = model_key(MODEL_NAME, "response_coefficients")
MERCHANT_COEFFICIENTS_KEY = model_key(MODEL_NAME, "merchant_coefficients")
GRAPH = dict(partitions_def=campaign_partitions, pool=WAREHOUSE_POOL, group_name="graph", automation_condition=CAMPAIGN_CONDITION)


# --------------------------------------------------------------------------------------------
# helpers


def merchant_config(landing: LandingResource, campaign: str) -> tuple[CampaignConfig, MerchantConfig]:
    """The campaign's config (`LandingResource.config`) and its `merchants:` block; a bad campaign.yaml
    fails the asset."""
    config = landing.config(campaign)
    return config, MerchantConfig(config, landing.path / campaign / "campaign.yaml")


# --------------------------------------------------------------------------------------------
# ingestion


@dg.asset(
    partitions_def=campaign_partitions,
    pool=WAREHOUSE_POOL,
    code_version="2",
    group_name="ingestion",
    kinds={"duckdb"},
    deps=["rct_events"],  # reloaded with rct_events of the same campaign (defs/automation/conditions.py)
    automation_condition=INGESTION_CONDITION,
    description="Merchant-side RCT rows of a bipartite campaign (commission level, sharing count, "
    "cost, features as JSON), loaded from its day files `<landing>/<campaign>/merchants/<day>.parquet|csv` into "
    "the table `merchant_events`: the new or changed day files, like rct_events; each day is replaced in one "
    "transaction; a file with any bad row (unknown commission, bad response/cost/propensity, missing "
    "`merchant_id`) loads nothing for its day and the error names the file, column and first row. A campaign "
    "without `merchants/` files materializes with no rows.",
)
def merchant_events(context: dg.AssetExecutionContext, config: DayRange, warehouse: WarehouseResource,
                    landing: LandingResource):
    campaign = context.partition_key
    _, mconf = merchant_config(landing, campaign)

    def load(con, day, path):
        return ingest_merchants.ingest_merchants_day(con, campaign, day, path, mconf)

    days = ingest_days(context, warehouse, landing, "merchants", load, config)
    return dg.MaterializeResult(metadata=days_metadata(days))


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
def customer_merchant_graph(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    from promo_assets.graph.tables import store_campaign_graph

    with connect(warehouse) as con:
        stored = store_campaign_graph(con, landing.path, context.partition_key)
    context.log.info(stored.message)
    return dg.MaterializeResult(metadata=stored.metadata,
                                data_version=dg.DataVersion(stored.version) if stored.version else None)


# --------------------------------------------------------------------------------------------
# model


def read_graph(con, campaign: str, normalizer: str | None):
    """The stored graph as PyG HeteroData (None when the campaign has no graph) and its version."""
    from promo_assets.graph import FeatureColumns, build_graph
    from promo_assets.graph.warehouse_io import features_frame

    c, m, edges = graph_store.graph_tables(con, campaign)
    if c.empty:
        return None, None
    numeric, categorical = feature_spec(con, campaign)
    customers = features_frame(c["user_id"], c["features"], "user_id")
    merchants = features_frame(m["merchant_id"], m["features"], "merchant_id")
    known = set(customers.columns)
    columns = FeatureColumns([f for f in numeric if f in known], [f for f in categorical if f in known])
    graph = build_graph(edges, customers, merchants, customer_columns=columns if numeric or categorical else None,
                        normalizer=normalizer)
    return graph, str(c["graph_version"].iloc[0])


def graph_inputs(con, landing: LandingResource, campaign: str):
    """(graph, graph version, merchant events) for a model that needs the graph (ResponseModel.needs_graph,
    e.g. gnn_hazard); (None, None, None) for a campaign without a merchants: block or a graph."""
    _, mconf = merchant_config(landing, campaign)
    if not mconf.present:
        return None, None, None
    graph, graph_version = read_graph(con, campaign, mconf.normalizer)
    if graph is None:
        return None, None, None
    return graph, graph_version, graph_store.merchant_events(con, campaign)


# --------------------------------------------------------------------------------------------
# coefficients and the joint allocation


@dg.asset(
    **GRAPH,
    key=MERCHANT_COEFFICIENTS_KEY,
    deps=[MODEL_KEY],
    code_version="2",
    kinds={"duckdb"},
    description="Predicted sharing count (value) and commission cost of every graph merchant × commission "
    "level from the gnn_hazard model its gnn_hazard/model asset materialized: table merchant_coefficients "
    "(history kept by model version). The customer side of the same model is scored by "
    "gnn_hazard/response_coefficients. Skipped with gnn_hazard's chain (a campaign without a graph).",
)
def merchant_coefficients(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    from promo_assets.models import registry

    campaign = context.partition_key
    _, meta, _ = upstream(context, MODEL_KEY)
    version = meta["model_version"]
    model = registry.get(MODEL_NAME).load(version).model_  # the fitted TrainedGraphModel
    with connect(warehouse) as con:
        coef_df = model.coefficients("merchant")
        with results_write(context, con, campaign, "merchant_coefficients"):
            graph_store.replace_merchant_coefficients(con, campaign, MODEL_NAME, version, coef_df)
    per_level = coef_df.groupby(["level", "incentive"], as_index=False)[["response", "cost"]].mean()
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "model_version": version,
            "merchants": len(model.merchant_ids),
            "mean_per_level": md_table(_jsonable(per_level.rename(columns={"incentive": "commission", "response": "value"}).to_dict("records"))),
        }
    )


def _joint_inputs(warehouse: WarehouseResource, campaign: str, config, mconf, version: str):
    """Customer and merchant coefficients of gnn_hazard `version` and the merchants' normalizer."""
    from promo_assets.graph import load_graph_model

    with connect(warehouse) as con:
        users, vc, cc = coefficient_arrays(con, campaign, MODEL_NAME, version, "population", config.n_levels)
        m = graph_store.merchant_coefficients(con, campaign, MODEL_NAME, version)
    model = load_graph_model(version)
    source = "response_coefficients (population)"
    if len(users) == 0:  # response_coefficients did not score gnn_hazard: every graph customer from the model
        users, (vc, cc) = model.customer_ids, model.predict_customers()
        source = "gnn_hazard model (all graph customers)"
    km = len(mconf.commissions)
    if m.empty:
        raise dg.Failure(f"no merchant_coefficients for gnn_hazard {version}: materialize merchant_coefficients first")
    merchants = m["merchant_id"].to_numpy()[::km]
    norm_idx = pd.Index(model.merchant_ids).get_indexer(merchants)  # the paper's normalizer (previous shares)
    if (norm_idx < 0).any():
        raise dg.Failure(f"merchant_coefficients list merchants that gnn_hazard {version} does not know")
    norm = np.asarray(model.merchant_normalizer, dtype=float)[norm_idx]
    return users, vc, cc, merchants, m["response"].to_numpy().reshape(-1, km), m["cost"].to_numpy().reshape(-1, km), norm, source


def _joint_truth(context, landing: LandingResource, campaign: str, config, mconf, users, merchants):
    from promo_assets.graph import JointCurves
    from promo_assets.graph.metrics import GraphMetricsError, truth_matrix
    from promo_assets.graph.warehouse_io import read_truth

    c_truth_df, m_truth_df = read_truth(landing.path, campaign, mconf.truth)
    if c_truth_df is None or m_truth_df is None:
        return None
    try:
        return JointCurves(truth_matrix(c_truth_df, "user_id", users, config.n_levels),
                           truth_matrix(m_truth_df, "merchant_id", merchants, len(mconf.commissions)))
    except GraphMetricsError as exc:
        context.log.warning(f"truth files do not cover the allocated nodes; no true values: {exc}")
        return None


def _write_joint(context, warehouse: WarehouseResource, campaign: str, version: str, rows: list[dict], levels) -> None:
    eval_df = pd.DataFrame(rows)
    alloc_df = pd.concat(levels, ignore_index=True) if levels else None
    with connect(warehouse) as con, results_write(context, con, campaign, "joint_allocation", "joint_allocation_evaluation"):
        graph_store.write_joint(con, campaign, version, context.run_id, alloc_df, eval_df)


JOINT_SHOWN = ["ratio_budget", "joint_value", "independent_value", "joint_cost", "independent_cost",
               "joint_true_value", "independent_true_value", "joint_true_cost", "independent_true_cost"]


@dg.asset(
    **GRAPH,
    key=model_key(MODEL_NAME, "joint_allocation"),
    deps=[MERCHANT_COEFFICIENTS_KEY, COEFFICIENTS_KEY],
    code_version="3",
    kinds={"duckdb"},
    description="Joint allocation of customer coupons and merchant commissions under each ratio budget of "
    "campaign.yaml (ratio_budget: average incentive paid per response, GNN/hazard paper Eq. 11–16, "
    "decision rule Eq. 19–20; merchants normalized by their previous shares as in the paper) from the "
    "gnn_hazard chain's coefficients (the model version gnn_hazard/response_coefficients scored), next to the independent allocation under the same total predicted budget "
    "(the joint policy's cost split between the sides as each side's own ratio-B solution spends). Tables joint_allocation (levels) and "
    "joint_allocation_evaluation (predicted and, for simulated campaigns, true value and cost; history kept).",
)
def joint_allocation(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    from promo_assets.graph import JointCurves, JointNodes, allocate_ratio_budgets, ratio_budgets
    from promo_assets.graph.joint import JointAllocationError

    campaign = context.partition_key
    config, mconf = merchant_config(landing, campaign)
    _, meta, _ = upstream(context, COEFFICIENTS_KEY)
    version = meta["model_version"]
    users, vc, cc, merchants, vm, cm, norm, source = _joint_inputs(warehouse, campaign, config, mconf, version)
    try:
        ratios = ratio_budgets(list(config.ratio_budget or ()))
    except JointAllocationError as exc:
        raise dg.Failure(f"campaign '{campaign}': {exc}") from None
    if not ratios:
        return dg.MaterializeResult(metadata={"skipped": True, "note": "campaign.yaml has no ratio_budget"})
    truth = _joint_truth(context, landing, campaign, config, mconf, users, merchants)
    rows, levels = allocate_ratio_budgets(JointCurves((vc, cc), (vm, cm)), ratios, JointNodes(
        users, merchants, np.asarray(config.incentives), np.asarray(mconf.commissions)), merchant_normalizer=norm,
        truth=truth, log=log_to(context))
    for row in rows:
        row.update({"campaign": campaign, "model_version": version, "n_customers": len(users),
                    "n_merchants": len(merchants), "run_id": context.run_id})
        if row["note"]:
            context.log.warning(f"ratio {row['ratio_budget']}: {row['note']}")
    _write_joint(context, warehouse, campaign, version, rows, levels)
    table = [{k: r.get(k) for k in JOINT_SHOWN if k in r} for r in rows]
    return dg.MaterializeResult(metadata={
        "model_version": version, "joint_vs_independent": md_table(_jsonable(table)), "customers": len(users),
        "merchants": len(merchants), "customer_coefficients_from": source, "ground_truth": truth is not None,
        "run_id": context.run_id}, data_version=dg.DataVersion(version))
