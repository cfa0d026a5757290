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
import pandas as pd

from promo_assets.core.display import jsonable, md_table
from promo_assets.defs.automation.conditions import CAMPAIGN_CONDITION, INGESTION_CONDITION
from promo_assets.defs.common import (
    WAREHOUSE_POOL,
    LandingResource,
    WarehouseResource,
    campaign_partitions,
    domain_errors,
    metadata,
    model_key,
    upstream,
    writing,
)
from promo_assets.defs.ingestion.assets import DayRange, ingest_days
from promo_assets.ingestion import merchants as ingest_merchants
from promo_assets.ingestion.display import days_metadata
from promo_assets.ingestion.merchants import MerchantConfig
from promo_assets.store import graph as graph_store

MODEL_NAME = "gnn_hazard"  # the registered model (promo_assets.models.registry) whose chain the joint allocation reads
MODEL_KEY = model_key(MODEL_NAME, "model")
COEFFICIENTS_KEY = model_key(MODEL_NAME, "response_coefficients")
MERCHANT_COEFFICIENTS_KEY = model_key(MODEL_NAME, "merchant_coefficients")
GRAPH = dict(partitions_def=campaign_partitions, pool=WAREHOUSE_POOL, group_name="graph", automation_condition=CAMPAIGN_CONDITION)


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
    mconf = MerchantConfig(landing.config(campaign), landing.path / campaign / "campaign.yaml")

    def load(con, day, path):
        return ingest_merchants.ingest_merchants_day(con, campaign, day, path, mconf)

    days = ingest_days(context, warehouse, landing, "merchants", load, config)
    return dg.MaterializeResult(metadata=metadata(days_metadata(days)))


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

    with warehouse.connect() as con:
        stored = store_campaign_graph(con, landing.path, context.partition_key)
    context.log.info(stored.message)
    return dg.MaterializeResult(metadata=stored.metadata,
                                data_version=dg.DataVersion(stored.version) if stored.version else None)


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
    coef_df = model.coefficients("merchant")
    with writing(context, warehouse, "merchant_coefficients") as con:
        graph_store.replace_merchant_coefficients(con, campaign, MODEL_NAME, version, coef_df)
    per_level = coef_df.groupby(["level", "incentive"], as_index=False)[["response", "cost"]].mean()
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata=metadata({
            "model_version": version,
            "merchants": len(model.merchant_ids),
            "mean_per_level": md_table(jsonable(per_level.rename(columns={"incentive": "commission", "response": "value"}).to_dict("records"))),
        })
    )


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
    from promo_assets.graph.inputs import allocate_joint, campaign_ratios, joint_inputs, joint_truth, merchant_block

    campaign = context.partition_key
    config = landing.config(campaign)
    mconf = merchant_block(config, landing.path, campaign)
    _, meta, _ = upstream(context, COEFFICIENTS_KEY)
    version = meta["model_version"]
    with warehouse.connect() as con, domain_errors():
        got = joint_inputs(con, campaign, config, mconf, version, MODEL_NAME)
    with domain_errors():
        ratios = campaign_ratios(config, campaign)
    if not ratios:
        return dg.MaterializeResult(metadata={"skipped": True, "note": "campaign.yaml has no ratio_budget"})
    truth = joint_truth(landing.path, campaign, config, mconf, got, log=context.log.warning)
    rows, levels = allocate_joint(got, ratios, config, mconf, truth, log=context.log.info,
                                  tags={"campaign": campaign, "model_version": version, "run_id": context.run.run_id})
    for row in (r for r in rows if r["note"]):
        context.log.warning(f"ratio {row['ratio_budget']}: {row['note']}")
    with writing(context, warehouse, "joint_allocation", "joint_allocation_evaluation") as con:
        graph_store.write_joint(con, campaign, version, context.run.run_id, pd.concat(levels, ignore_index=True) if levels
                                else None, pd.DataFrame(rows))
    return dg.MaterializeResult(metadata=metadata({
        "model_version": version, "joint_vs_independent": md_table(jsonable([{k: r.get(k) for k in JOINT_SHOWN if k in r}
                                                                             for r in rows])),
        "customers": len(got.users), "merchants": len(got.merchants), "customer_coefficients_from": got.source,
        "ground_truth": truth is not None, "run_id": context.run.run_id}), data_version=dg.DataVersion(version))
