"""The customer–merchant graph's stored tables, the merchant coefficients and the joint allocation."""

from __future__ import annotations

import duckdb
import pandas as pd

from promo_assets.store.warehouse import quote_ident, registered, sql, transaction


def graph_tables(con: duckdb.DuckDBPyConnection, campaign: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(customers, merchants, edges) of the campaign's stored graph; empty frames without one."""
    customers = con.execute(sql("graph", "graph_customers"), [campaign]).df()
    if customers.empty:
        return customers, pd.DataFrame(), pd.DataFrame()
    return (customers, con.execute(sql("graph", "graph_merchants"), [campaign]).df(),
            con.execute(sql("graph", "graph_edges"), [campaign]).df())


def merchant_events(con: duckdb.DuckDBPyConnection, campaign: str) -> pd.DataFrame:
    """The campaign's loaded merchant events."""
    return con.execute(sql("graph", "campaign_merchant_events"), [campaign]).df()


def replace_merchant_coefficients(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str,
                                  frame: pd.DataFrame) -> None:
    """The merchant coefficients of a model version replaced by `frame` (merchant_id, level,
    incentive, response, cost), inside the caller's transaction."""
    with registered(con, "coef_df", frame):
        con.execute(sql("graph", "delete_merchant_coefficients"), [campaign, model, version])
        con.execute(sql("graph", "insert_merchant_coefficients"), [campaign, model, version])


def merchant_coefficients(con: duckdb.DuckDBPyConnection, campaign: str, model: str, version: str) -> pd.DataFrame:
    """The stored merchant coefficients of a model version (merchant × level, in merchant order)."""
    return con.execute(sql("graph", "merchant_coefficients"), [campaign, model, version]).df()


def write_joint(con: duckdb.DuckDBPyConnection, campaign: str, version: str, run_id: str,
                allocation: pd.DataFrame | None, evaluation: pd.DataFrame) -> None:
    """The joint allocation's levels (when any) and its evaluation rows, inside the caller's transaction."""
    if allocation is not None:
        with registered(con, "alloc_df", allocation):
            con.execute(sql("graph", "insert_joint_allocation"), [campaign, version, run_id])
    with registered(con, "eval_df", evaluation):
        con.execute(sql("graph", "insert_joint_evaluation"))


def campaign_edges(con: duckdb.DuckDBPyConnection, campaign: str) -> pd.DataFrame:
    """The campaign's loaded payment edges."""
    return con.execute(sql("graph", "campaign_edges"), [campaign]).df()


def campaign_merchant_events(con: duckdb.DuckDBPyConnection, campaign: str) -> pd.DataFrame:
    """The campaign's loaded merchant events."""
    return con.execute(sql("graph", "campaign_merchant_events"), [campaign]).df()


def latest_customer_features(con: duckdb.DuckDBPyConnection, campaign: str, features: list[str]) -> pd.DataFrame:
    """Each customer's latest RCT row's `features`."""
    cols = "".join(f", {quote_ident(c)}" for c in features)
    return con.execute(sql("graph", "latest_customer_features", columns=cols), [campaign]).df()


def customer_event_counts(con: duckdb.DuckDBPyConnection, campaign: str) -> pd.DataFrame:
    """Each customer's number of RCT events."""
    return con.execute(sql("graph", "customer_event_counts"), [campaign]).df()


GRAPH_TABLES = ("graph_edges", "graph_customers", "graph_merchants")


def replace_graph(con: duckdb.DuckDBPyConnection, campaign: str, version: str | None = None,
                  edges: pd.DataFrame | None = None, customers: pd.DataFrame | None = None,
                  merchants: pd.DataFrame | None = None) -> None:
    """The campaign's graph tables replaced by `edges` and the node tables, stamped `version`, in one
    transaction; emptied without them (a campaign with no graph)."""
    with transaction(con):
        for table in GRAPH_TABLES:
            con.execute(sql("graph", "delete_graph", table=quote_ident(table)), [campaign])
        if version is None:
            return
        for name, frame, statement in (("edges_df", edges, "insert_graph_edges"), ("nodes_df", customers, "insert_graph_customers"),
                                       ("nodes_df", merchants, "insert_graph_merchants")):
            with registered(con, name, frame):
                con.execute(sql("graph", statement), [campaign, version])
