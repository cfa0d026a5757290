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

from promo_assets.cli import main

START = dt.date(2026, 3, 1)


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


@pytest.mark.slow
def test_promo_run_trains_gnn_hazard_and_allocates_jointly(promo_env, capsys):
    simulate("bipartite", "shop", days=4, users=1500)
    simulate("demo", "demo", days=3, users=400)
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
    assert models == ["dipn", "gnn_hazard", "lgbm_s", "lgbm_s_mono", "lgbm_t", "random", "s_learner"]

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
    assert demo_models == ["dipn", "lgbm_s", "lgbm_s_mono", "lgbm_t", "random", "s_learner"]
