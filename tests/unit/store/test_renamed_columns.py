"""A warehouse made by an earlier version, whose coefficient tables and budget_dual still call the
predicted response `value`, opened by the current code: the rows are kept under `response` and the
pipeline's readers read them."""

from __future__ import annotations

import duckdb
import numpy as np

from promo_assets.store import warehouse
from promo_assets.allocation import solve
from promo_assets.allocation.plan import SolvedBudget
from promo_assets.allocation.stored import StoredCoefficients
from promo_assets.store import graph as graph_store
from promo_assets.store import models as models_store

# the two tables as earlier versions of sql/schema.sql created them
OLD_RESPONSE_COEFFICIENTS = """
CREATE TABLE response_coefficients (
    campaign VARCHAR NOT NULL, model VARCHAR NOT NULL, model_version VARCHAR NOT NULL, target VARCHAR NOT NULL,
    user_id VARCHAR NOT NULL, level INTEGER NOT NULL, value DOUBLE NOT NULL, cost DOUBLE NOT NULL,
    scored_at TIMESTAMP NOT NULL)"""
OLD_BUDGET_DUAL = """
CREATE TABLE budget_dual (
    campaign VARCHAR NOT NULL, model VARCHAR NOT NULL, model_version VARCHAR NOT NULL, budget_per_capita DOUBLE NOT NULL,
    lambda_ DOUBLE NOT NULL, value DOUBLE NOT NULL, cost DOUBLE NOT NULL, dual_bound DOUBLE NOT NULL,
    n_users BIGINT NOT NULL, run_id VARCHAR NOT NULL, solved_at TIMESTAMP NOT NULL, tie_share DOUBLE)"""
OLD_MERCHANT_COEFFICIENTS = """
CREATE TABLE merchant_coefficients (
    campaign VARCHAR NOT NULL, model VARCHAR NOT NULL, model_version VARCHAR NOT NULL, merchant_id VARCHAR NOT NULL,
    level INTEGER NOT NULL, incentive DOUBLE NOT NULL, value DOUBLE NOT NULL, cost DOUBLE NOT NULL,
    scored_at TIMESTAMP NOT NULL)"""


def columns(con, table: str) -> list[str]:
    return list(warehouse.table_columns(con, table))


def old_warehouse(path) -> None:
    con = duckdb.connect(str(path))
    try:
        con.execute(OLD_RESPONSE_COEFFICIENTS)
        con.execute(OLD_MERCHANT_COEFFICIENTS)
        con.execute(OLD_BUDGET_DUAL)
        con.execute("INSERT INTO budget_dual VALUES ('camp', 'lgbm', 'v1', 2.0, 0.5, 12.5, 4.0, 12.75, 2, 'r1', now(), 0.0)")
        for level, (v, c) in enumerate([(0.25, 0.0), (0.75, 1.5)]):
            con.execute("INSERT INTO response_coefficients VALUES ('camp', 'lgbm', 'v1', 'population', 'u1', ?, ?, ?, now())",
                        [level, v, c])
        con.execute("INSERT INTO merchant_coefficients VALUES ('camp', 'gnn_hazard', 'g1', 'm1', 0, 2.0, 3.5, 7.0, now())")
        # the schema marker of the earlier version (another schema text, so another hash)
        con.execute("CREATE TABLE warehouse_schema (schema_hash VARCHAR NOT NULL)")
        con.execute("INSERT INTO warehouse_schema VALUES ('an earlier schema')")
    finally:
        con.close()


def test_an_old_warehouse_keeps_its_coefficients_under_response(tmp_path):
    path = tmp_path / "old.duckdb"
    old_warehouse(path)
    with warehouse.connect(path) as con:
        assert "value" not in columns(con, "response_coefficients")
        assert columns(con, "response_coefficients")[6] == "response"  # same place: positional inserts still fit
        assert "value" not in columns(con, "merchant_coefficients") and "response" in columns(con, "merchant_coefficients")
        rows = con.execute("SELECT level, response, cost FROM response_coefficients ORDER BY level").fetchall()
        assert rows == [(0, 0.25, 0.0), (1, 0.75, 1.5)]
        # the pipeline's readers
        users, response, cost = models_store.coefficient_arrays(con, "camp", "lgbm", "v1", "population", 2)
        assert users.tolist() == ["u1"]
        assert np.array_equal(response, [[0.25, 0.75]]) and np.array_equal(cost, [[0.0, 1.5]])
        (chunk_response, chunk_cost, chunk_users), = StoredCoefficients(con, "camp", "lgbm", "v1", "population", 2).stream()
        assert np.array_equal(chunk_response, [[0.25, 0.75]]) and chunk_users.tolist() == ["u1"]
        merchants = graph_store.merchant_coefficients(con, "camp", "gnn_hazard", "g1")
        assert merchants["response"].tolist() == [3.5] and merchants["cost"].tolist() == [7.0]
        assert "value" not in columns(con, "budget_dual")
        assert con.execute("SELECT response, cost FROM budget_dual").fetchall() == [(12.5, 4.0)]
        assert models_store.duals_of_run(con, "camp", "lgbm", "v1", "r1")[0] == [(2.0, 0.5, 0.0)]
        # the pipeline's writer: a new budget's λ* lands in the renamed table
        solved = solve(np.array([[0.0, 3.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [0.0, 1.0]]), 1.0)
        models_store.record_dual(con, "camp", "lgbm", "v1", SolvedBudget(0.5, solved, 0.0, 2), "r2")
        assert con.execute("SELECT response FROM budget_dual WHERE run_id = 'r2'").fetchall() == [(solved.response,)]
    with warehouse.connect(path) as con:  # a second open changes nothing
        assert con.execute("SELECT count(*) FROM response_coefficients").fetchone()[0] == 2


def test_a_new_warehouse_has_response_and_no_value(tmp_path):
    with warehouse.connect(tmp_path / "new.duckdb") as con:
        for table in ("response_coefficients", "merchant_coefficients"):
            assert "response" in columns(con, table) and "value" not in columns(con, table)


def test_an_old_warehouse_opened_read_only_first_is_read_under_response(tmp_path):
    """`promo report` or `promo serve` may be the first to open a warehouse after an upgrade: the
    read-only connection has the columns renamed first (one short write connection), then reads."""
    path = tmp_path / "old.duckdb"
    old_warehouse(path)
    with warehouse.connect(path, read_only=True) as con:
        users, response, cost = models_store.coefficient_arrays(con, "camp", "lgbm", "v1", "population", 2)
        assert np.array_equal(response, [[0.25, 0.75]]) and "value" not in columns(con, "budget_dual")
    with warehouse.connect(tmp_path / "new.duckdb"):  # a current warehouse is opened read-only as it is
        pass
    with warehouse.connect(tmp_path / "new.duckdb", read_only=True) as con:
        assert "response" in columns(con, "response_coefficients")
