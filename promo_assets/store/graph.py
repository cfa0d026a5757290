"""The customer–merchant graph's stored tables, the merchant coefficients and the joint allocation."""

from __future__ import annotations

import duckdb
import pandas as pd

from promo_assets.store.warehouse import registered, sql


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
