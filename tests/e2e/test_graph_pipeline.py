"""The bipartite campaign through the Dagster graph: merchant_events → customer_merchant_graph →
gnn_hazard_model → merchant_coefficients / response_coefficients → joint_allocation, via `promo`."""

from __future__ import annotations

import base64
import datetime as dt
import json

import dagster as dg
import duckdb
import pandas as pd
import pytest
import yaml

from promo_assets.cli.main import main
from tests.conftest import train_only
from promo_assets.simulation import REFERENCE_START

START = REFERENCE_START


def simulate(preset: str, campaign: str, days: int, users: int) -> None:
    assert main(["simulate", "--preset", preset, "--campaign", campaign, "--days", str(days),
                 "--users", str(users), "--seed", "3", "--start", START.isoformat()]) == 0


def query(promo_env, statement: str, params=()):
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        return con.execute(statement, list(params)).fetchall()


def test_merchant_events_load_and_reject_bad_files(promo_env, capsys):
    simulate("bipartite", "shop", days=3, users=400)
    merchants = promo_env["landing"] / "shop" / "merchants"
    bad_day = START + dt.timedelta(days=1)
    frame = pd.read_parquet(merchants / f"{bad_day}.parquet")
    frame.loc[2, "treatment"] = 33.0  # not a commission level [0, 25, 50, 75, 100]
    frame.to_parquet(merchants / f"{bad_day}.parquet")
    missing_day = START + dt.timedelta(days=2)
    pd.read_parquet(merchants / f"{missing_day}.parquet").drop(columns="response").to_parquet(
        merchants / f"{missing_day}.parquet")

    assert main(["run", "--campaign", "shop", "--ingest-only", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"{bad_day}.parquet" in err and "'treatment'" in err and "commission level" in err and "33" in err
    assert f"{missing_day}.parquet" in err and "'response'" in err
    # the good day is loaded with levels on the grid; the bad days load nothing
    good = pd.read_parquet(merchants / f"{START}.parquet")
    rows = query(promo_env, "SELECT event_date, count(*), min(level), max(level), "
                 "count(*) FILTER (WHERE cost <> incentive * response) FROM merchant_events GROUP BY 1")
    assert rows == [(START, len(good), 0, 4, 0)]
    features = query(promo_env, "SELECT features FROM merchant_events LIMIT 1")[0][0]
    assert set(json.loads(features)) == {"prev_shares", "m_f0", "m_f1", "m_f2", "m_f3"}
    failed = query(promo_env, "SELECT event_date FROM ingest_log WHERE table_name = 'merchant_events' "
                   "AND status = 'failed' ORDER BY 1")
    assert failed == [(bad_day,), (missing_day,)]

    # fixing the file and re-running replaces the partition (no duplicates on a second run)
    frame.loc[2, "treatment"] = 25.0
    frame.to_parquet(merchants / f"{bad_day}.parquet")
    for _ in range(2):
        assert main(["run", "--campaign", "shop", "--from", bad_day.isoformat(), "--to", bad_day.isoformat(),
                     "--ingest-only", "--no-progress"]) == 0
    assert query(promo_env, "SELECT count(*) FROM merchant_events WHERE event_date = ?", [bad_day]) == [(len(frame),)]


# Both campaigns train gnn_hazard and one LightGBM model beside it (the other default models are
# not what this test is about): in the demo campaign gnn_hazard is listed too, so that it is left
# out because it does not apply (no merchants), not because campaign.yaml leaves it out.
GRAPH_MODELS = ("gnn_hazard", "lgbm_s")


@pytest.mark.slow
def test_promo_run_trains_gnn_hazard_and_allocates_jointly(promo_env, capsys, monkeypatch):
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")  # the graph's plumbing end to end: tables, metrics, plots, not their quality
    simulate("bipartite", "shop", days=4, users=1500)
    simulate("demo", "demo", days=3, users=400)
    for campaign in ("shop", "demo"):
        train_only(promo_env["landing"] / campaign / "campaign.yaml", GRAPH_MODELS)
    assert main(["run", "--no-progress"]) == 0
    config = yaml.safe_load((promo_env["landing"] / "shop" / "campaign.yaml").read_text())
    n_merchants = config["simulator"]["merchants"]

    # the graph tables hold every simulated customer and merchant, and the edges of the files
    edges = pd.concat(pd.read_parquet(p) for p in (promo_env["landing"] / "shop" / "edges").glob("*.parquet"))
    pairs = edges.groupby(["user_id", "merchant_id"])["n_payments"].sum()
    assert query(promo_env, "SELECT count(*), sum(n_payments) FROM graph_edges WHERE campaign = 'shop'") == [
        (len(pairs), float(pairs.sum()))]
    assert query(promo_env, "SELECT count(*) FROM graph_customers WHERE campaign = 'shop'") == [(1500,)]
    assert query(promo_env, "SELECT count(*) FROM graph_merchants WHERE campaign = 'shop'") == [(n_merchants,)]

    # the model is registered with its offline and truth metrics
    reg = query(promo_env, "SELECT model_version, metrics FROM model_registry WHERE campaign = 'shop' AND model = 'gnn_hazard'")
    assert len(reg) == 1
    metrics = json.loads(reg[0][1])
    for key in ("auc_c", "mae_c", "mse_c", "mae_m", "mse_m", "mae_c_truth", "mae_m_truth"):
        assert 0 <= metrics[key] < float("inf"), key
    version = reg[0][0]

    # both sides' coefficients: customers through response_coefficients, merchants in their table
    assert query(promo_env, "SELECT count(*) FROM merchant_coefficients WHERE campaign = 'shop' AND model_version = ?",
                 [version]) == [(n_merchants * 5,)]
    assert query(promo_env, "SELECT count(DISTINCT user_id) FROM response_coefficients WHERE campaign = 'shop' "
                 "AND model = 'gnn_hazard' AND target = 'population'") == [(1500,)]

    # its own chain evaluates gnn_hazard like any model
    models = [r[0] for r in query(promo_env, "SELECT DISTINCT model FROM policy_evaluation WHERE campaign = 'shop' ORDER BY 1")]
    assert models == sorted([*GRAPH_MODELS, "random"])

    # one joint-vs-independent row per ratio budget, with true values (simulated campaign)
    rows = query(promo_env, "SELECT ratio_budget, joint_true_value, independent_true_value, joint_cost, independent_cost, "
                 "note FROM joint_allocation_evaluation WHERE campaign = 'shop' AND model_version = ? ORDER BY 1", [version])
    assert [r[0] for r in rows] == sorted(float(b) for b in config["ratio_budget"])
    for ratio, jt, it, jc, ic, note in rows:
        assert note is None and jt > 0 and it > 0 and jc > 0 and ic > 0
    alloc = query(promo_env, "SELECT kind, side, count(*) FROM joint_allocation WHERE campaign = 'shop' GROUP BY 1, 2 ORDER BY 1, 2")
    n_ratios = len(config["ratio_budget"])
    assert alloc == [("independent", "customer", 1500 * n_ratios), ("independent", "merchant", n_merchants * n_ratios),
                     ("joint", "customer", 1500 * n_ratios), ("joint", "merchant", n_merchants * n_ratios)]

    # the model's materialization carries the Fig. 4 plot and the per-level curve
    instance = dg.DagsterInstance.get()
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(["gnn_hazard", "model"]), asset_partitions=["shop"]), limit=1).records
    meta = records[0].asset_materialization.metadata
    png = base64.b64decode(meta["uplift_quintiles_plot"].value.split("data:image/png;base64,")[1].rstrip(")"))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| level | incentive | predicted |" in meta["response_per_level"].value

    # the demo (non-graph) campaign: no graph, no gnn_hazard, the usual leaderboard
    assert query(promo_env, "SELECT count(*) FROM graph_customers WHERE campaign = 'demo'") == [(0,)]
    assert query(promo_env, "SELECT count(*) FROM model_registry WHERE campaign = 'demo' AND model = 'gnn_hazard'") == [(0,)]
    assert query(promo_env, "SELECT count(*) FROM joint_allocation_evaluation WHERE campaign = 'demo'") == [(0,)]
    demo_models = [r[0] for r in query(promo_env, "SELECT DISTINCT model FROM policy_evaluation WHERE campaign = 'demo' ORDER BY 1")]
    assert demo_models == sorted({*GRAPH_MODELS, "random"} - {"gnn_hazard"})


# --------------------------------------------------------------------------------------------
# payment_edges.amount: stored when the edge file has it (the graph's history features sum it)


def _edges_con():
    from promo_assets.store.warehouse import ensure_schema

    con = duckdb.connect(":memory:")
    ensure_schema(con)
    return con


def test_payment_edges_store_the_amount_and_the_graph_history_uses_it(tmp_path):
    from promo_assets.graph import aggregate_edges, build_graph
    from promo_assets.ingestion import ingest_edges_day
    from promo_assets.store.warehouse import sql

    with_amount, without = tmp_path / "2026-01-01.parquet", tmp_path / "2026-01-02.csv"
    pd.DataFrame({"user_id": ["u1", "u1", "u2"], "merchant_id": ["m1", "m1", "m2"], "n_payments": [2, 1, 1],
                  "amount": [10.0, 5.5, None]}).to_parquet(with_amount)
    without.write_text("user_id,merchant_id,n_payments\nu2,m1,3\n")
    con = _edges_con()
    ingest_edges_day(con, "shop", START, with_amount)
    ingest_edges_day(con, "shop", START + dt.timedelta(days=1), without)
    rows = con.execute("SELECT user_id, merchant_id, weight, amount FROM payment_edges ORDER BY event_date, amount").fetchall()
    assert rows == [("u1", "m1", 1.0, 5.5), ("u1", "m1", 2.0, 10.0), ("u2", "m2", 1.0, None), ("u2", "m1", 3.0, None)]

    edges = aggregate_edges(con.execute(sql("graph", "campaign_edges"), ["shop"]).df())
    assert edges[["user_id", "merchant_id", "n_payments", "amount"]].values.tolist() == [
        ["u1", "m1", 3.0, 15.5], ["u2", "m1", 3.0, 0.0], ["u2", "m2", 1.0, 0.0]]
    customers = pd.DataFrame({"user_id": ["u1", "u2"], "x": [0.0, 1.0]})
    merchants = pd.DataFrame({"merchant_id": ["m1", "m2"], "y": [0.0, 1.0]})
    graph = build_graph(edges, customers, merchants)
    # DNN-H history of each customer: log1p of degree, payments, amount (standardized): u1 paid 15.5, u2 nothing
    raw_amount = graph["customer"].history[:, 2]
    assert raw_amount[0] > raw_amount[1]


def test_an_old_warehouse_gets_the_amount_column(tmp_path):
    from promo_assets.ingestion import ingest_edges_day
    from promo_assets.store.warehouse import ensure_schema

    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as con:  # payment_edges as warehouses before the column created it
        con.execute("CREATE TABLE payment_edges (campaign VARCHAR NOT NULL, event_date DATE NOT NULL, "
                    "user_id VARCHAR NOT NULL, merchant_id VARCHAR NOT NULL, weight DOUBLE NOT NULL, "
                    "source_file VARCHAR NOT NULL)")
        con.execute("INSERT INTO payment_edges VALUES ('shop', DATE '2026-01-01', 'u1', 'm1', 2, 'old.csv')")
    edge_file = tmp_path / "2026-01-02.csv"
    edge_file.write_text("user_id,merchant_id,n_payments,amount\nu1,m2,1,7.25\n")
    with duckdb.connect(str(path)) as con:
        ensure_schema(con)
        ingest_edges_day(con, "shop", START, edge_file)
        rows = con.execute("SELECT event_date, merchant_id, amount FROM payment_edges ORDER BY 1").fetchall()
    assert rows == [(dt.date(2026, 1, 1), "m1", None), (START, "m2", 7.25)]


@pytest.mark.hostile
@pytest.mark.parametrize("cell", ["abc", "-1", "nan"], ids=["error-amount-not-a-number", "error-amount-negative",
                                                         "error-amount-nan"])
def test_an_edge_file_with_a_bad_amount_is_refused_naming_the_column(tmp_path, cell):
    from promo_assets.ingestion import IngestError, ingest_edges_day

    edge_file = tmp_path / "2026-03-01.csv"
    edge_file.write_text(f"user_id,merchant_id,n_payments,amount\nu1,m1,1,3\nu2,m2,1,{cell}\n")
    con = _edges_con()
    con.execute("INSERT INTO payment_edges (campaign, event_date, user_id, merchant_id, weight, source_file) "
                "VALUES ('shop', DATE '2026-03-01', 'u0', 'm0', 1, 'before.csv')")
    with pytest.raises(IngestError) as err:
        ingest_edges_day(con, "shop", START, edge_file)
    message = str(err.value)
    assert str(edge_file) in message and "'amount'" in message and "data row 2" in message
    # nothing of the partition is lost or half-written
    assert con.execute("SELECT user_id FROM payment_edges").fetchall() == [("u0",)]
