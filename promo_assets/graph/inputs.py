"""What the graph's stages read from the warehouse and the landing folder: the stored
customer–merchant graph as PyG data (`read_graph`), the graph, its version and the merchant events a
model that needs the graph trains on (`graph_inputs`), and the joint allocation's coefficients and
truth (`joint_inputs`, `joint_truth`). No dagster here (domain code).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.graph.data import FeatureColumns, build_graph
from promo_assets.graph.joint import (
    JointAllocationError,
    JointCurves,
    JointNodes,
    allocate_ratio_budgets,
    ratio_budgets,
)
from promo_assets.graph.metrics import GraphMetricsError, truth_matrix
from promo_assets.graph.train import load_graph_model
from promo_assets.graph.warehouse_io import features_frame, read_truth
from promo_assets.ingestion.merchants import MerchantConfig
from promo_assets.store import frames as frames_store, graph as graph_store, models as models_store


def merchant_block(config, landing: Path, campaign: str) -> MerchantConfig:
    """campaign.yaml's `merchants:` block of `config`, the campaign's config."""
    return MerchantConfig(config, Path(landing) / campaign / "campaign.yaml")


def read_graph(con, campaign: str, normalizer: str | None):
    """The stored graph as PyG HeteroData (None when the campaign has no graph) and its version."""
    c, m, edges = graph_store.graph_tables(con, campaign)
    if c.empty:
        return None, None
    numeric, categorical = frames_store.feature_spec(con, campaign)
    customers = features_frame(c["user_id"], c["features"], "user_id")
    merchants = features_frame(m["merchant_id"], m["features"], "merchant_id")
    known = set(customers.columns)
    columns = FeatureColumns([f for f in numeric if f in known], [f for f in categorical if f in known])
    graph = build_graph(edges, customers, merchants, customer_columns=columns if numeric or categorical else None,
                        normalizer=normalizer)
    return graph, str(c["graph_version"].iloc[0])


def graph_inputs(con, landing: Path, campaign: str, config):
    """(graph, graph version, merchant events) for a model that needs the graph (`ResponseModel.needs_graph`,
    e.g. gnn_hazard); (None, None, None) for a campaign without a merchants: block or a graph."""
    mconf = merchant_block(config, landing, campaign)
    if not mconf.present:
        return None, None, None
    graph, graph_version = read_graph(con, campaign, mconf.normalizer)
    if graph is None:
        return None, None, None
    return graph, graph_version, graph_store.merchant_events(con, campaign)


@dataclass(frozen=True)
class JointInputs:
    """The joint allocation's inputs of one gnn_hazard version: the customers with their coefficients
    (`customer_response`, `customer_cost`, N x K), the merchants with theirs (M x commission levels),
    the merchants' normalizer (their previous shares) and where the customers' coefficients came from."""

    users: np.ndarray
    customer_response: np.ndarray
    customer_cost: np.ndarray
    merchants: np.ndarray
    merchant_response: np.ndarray
    merchant_cost: np.ndarray
    normalizer: np.ndarray
    source: str


def joint_inputs(con, campaign: str, config, mconf: MerchantConfig, version: str, model: str = "gnn_hazard") -> JointInputs:
    """Customer and merchant coefficients of `model` `version` (the customers from response_coefficients,
    else every graph customer from the model) and the merchants' normalizer; JointAllocationError
    naming what to materialize."""
    users, vc, cc = models_store.coefficient_arrays(con, campaign, model, version, "population", config.n_levels)
    m = graph_store.merchant_coefficients(con, campaign, model, version)
    fitted = load_graph_model(version)
    source = "response_coefficients (population)"
    if len(users) == 0:  # response_coefficients did not score gnn_hazard: every graph customer from the model
        users, (vc, cc) = fitted.customer_ids, fitted.predict_customers()
        source = "gnn_hazard model (all graph customers)"
    km = len(mconf.commissions)
    if m.empty:
        raise JointAllocationError(f"no merchant_coefficients for gnn_hazard {version}: materialize merchant_coefficients "
                                   "first")
    merchants = m["merchant_id"].to_numpy()[::km]
    norm_idx = pd.Index(fitted.merchant_ids).get_indexer(merchants)  # the paper's normalizer (previous shares)
    if (norm_idx < 0).any():
        raise JointAllocationError(f"merchant_coefficients list merchants that gnn_hazard {version} does not know")
    norm = np.asarray(fitted.merchant_normalizer, dtype=float)[norm_idx]
    return JointInputs(users, vc, cc, merchants, m["response"].to_numpy().reshape(-1, km),
                       m["cost"].to_numpy().reshape(-1, km), norm, source)


def joint_truth(landing: Path, campaign: str, config, mconf: MerchantConfig, inputs: JointInputs, log=None):
    """(customer truth, merchant truth) matrices of a simulated campaign for the allocated nodes, or
    None (no truth files, or files that do not cover the nodes: logged)."""
    c_truth_df, m_truth_df = read_truth(landing, campaign, mconf.truth)
    if c_truth_df is None or m_truth_df is None:
        return None
    try:
        return JointCurves(truth_matrix(c_truth_df, "user_id", inputs.users, config.n_levels),
                           truth_matrix(m_truth_df, "merchant_id", inputs.merchants, len(mconf.commissions)))
    except GraphMetricsError as exc:
        if log is not None:
            log(f"truth files do not cover the allocated nodes; no true values: {exc}")
        return None


def campaign_ratios(config, campaign: str) -> list[float]:
    """campaign.yaml `ratio_budget` as a list of ratios (empty without); JointAllocationError naming the
    campaign for a bad one."""
    try:
        return ratio_budgets(list(config.ratio_budget or ()))
    except JointAllocationError as exc:
        raise JointAllocationError(f"campaign '{campaign}': {exc}") from None


def allocate_joint(inputs: JointInputs, ratios: list[float], config, mconf: MerchantConfig, truth=None, *,
                   tags: dict | None = None, log=None) -> tuple[list[dict], list[pd.DataFrame]]:
    """The joint and the independent allocation of `inputs` under each ratio budget (`allocate_ratio_budgets`):
    (one evaluation row per ratio, tagged with `tags` and the node counts; the levels per ratio)."""
    rows, levels = allocate_ratio_budgets(
        JointCurves((inputs.customer_response, inputs.customer_cost), (inputs.merchant_response, inputs.merchant_cost)),
        ratios, JointNodes(inputs.users, inputs.merchants, np.asarray(config.incentives), np.asarray(mconf.commissions)),
        merchant_normalizer=inputs.normalizer, truth=truth, log=log)
    for row in rows:
        row.update({**(tags or {}), "n_customers": len(inputs.users), "n_merchants": len(inputs.merchants)})
    return rows, levels
