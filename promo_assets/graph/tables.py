"""The campaign's customer–merchant graph tables (graph_edges, graph_customers, graph_merchants),
rebuilt from the warehouse's payment_edges, merchant_events and rct_events and the latest
population / merchant_population landing files: what the `customer_merchant_graph` asset stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.store.artifacts import content_version
from promo_assets.graph.data import aggregate_edges
from promo_assets.graph.warehouse_io import features_frame, latest_landing_file, node_stats, node_table
from promo_assets.store import graph as graph_store
from promo_assets.store.frames import loaded_features



@dataclass
class StoredGraph:
    """What was stored: `version` (None when the campaign has no graph: then `note` says why), the
    line to log and the materialization's metadata (plain values)."""

    version: str | None
    message: str
    metadata: dict = field(default_factory=dict)


def _ids(*columns) -> np.ndarray:
    return np.unique(np.concatenate([np.asarray(c, dtype=str) for c in columns]))


@dataclass(frozen=True)
class _NodeTables:
    """The node tables with their statistics and features, and where each side's features come from."""

    customers: pd.DataFrame
    merchants: pd.DataFrame
    customer_source: str
    merchant_source: str


def _node_tables(con, landing_dir: Path, campaign: str, edges: pd.DataFrame, m_events: pd.DataFrame) -> _NodeTables:
    """The customer and merchant node tables and the sources of their features."""
    population, pop_source = latest_landing_file(landing_dir, campaign, "population")
    merchant_pop, mpop_source = latest_landing_file(landing_dir, campaign, "merchant_population")
    kinds = loaded_features(con, campaign)
    rct_features = graph_store.latest_customer_features(
        con, campaign, [c for k in ("numeric", "categorical") for c in kinds if kinds[c] == k])
    n_events = graph_store.customer_event_counts(con, campaign)
    m_feats = features_frame(m_events["merchant_id"], m_events["features"], "merchant_id")
    c_ids = _ids(edges["user_id"], rct_features["user_id"], [] if population is None else population["user_id"])
    m_ids = _ids(edges["merchant_id"], m_events["merchant_id"], [] if merchant_pop is None else merchant_pop["merchant_id"])
    c_nodes = node_stats(node_table(c_ids, "user_id", population, rct_features), "user_id", edges, n_events)
    m_nodes = node_stats(node_table(m_ids, "merchant_id", merchant_pop, m_feats), "merchant_id", edges, m_events)
    return _NodeTables(c_nodes, m_nodes, pop_source or "latest RCT row per customer",
                       mpop_source or "latest merchant RCT row")


def store_campaign_graph(con, landing_dir: Path, campaign: str) -> StoredGraph:
    """Replace the campaign's graph tables (one transaction): the payment edges summed over the days
    and the node tables with their statistics and features. A campaign without payment edges or
    merchant events gets no rows (its earlier graph is deleted) and a note."""
    raw_edges = graph_store.campaign_edges(con, campaign)
    m_events = graph_store.campaign_merchant_events(con, campaign)
    if raw_edges.empty or m_events.empty:
        graph_store.replace_graph(con, campaign)
        missing = "payment edges" if raw_edges.empty else "merchant events"
        note = f"campaign '{campaign}' has no {missing}; no graph (not a bipartite campaign)"
        return StoredGraph(None, note, {"note": note, "customers": 0, "merchants": 0, "edges": 0})
    edges = aggregate_edges(raw_edges)
    nodes = _node_tables(con, landing_dir, campaign, edges, m_events)
    c_nodes, m_nodes, c_source, m_source = nodes.customers, nodes.merchants, nodes.customer_source, nodes.merchant_source
    version = content_version(
        pd.util.hash_pandas_object(edges, index=False).to_numpy().tobytes()
        + "\n".join(c_nodes["features"]).encode() + "\n".join(m_nodes["features"]).encode()
    )
    graph_store.replace_graph(con, campaign, version, edges, c_nodes, m_nodes)
    return StoredGraph(version, f"{campaign}: graph {version}: {len(c_nodes)} customers, {len(m_nodes)} merchants, "
                       f"{len(edges)} edges", {
        "graph_version": version,
        "customers": len(c_nodes),
        "merchants": len(m_nodes),
        "edges": len(edges),
        "payment_rows": len(raw_edges),
        "isolated_customers": int((c_nodes["degree"] == 0).sum()),
        "isolated_merchants": int((m_nodes["degree"] == 0).sum()),
        "mean_customer_degree": float(c_nodes["degree"].mean()),
        "mean_merchant_degree": float(m_nodes["degree"].mean()),
        "customer_features_from": c_source,
        "merchant_features_from": m_source,
    })
