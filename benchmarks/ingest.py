"""Ingestion throughput: one 1,000,000-row day file through the rct_events asset vs a bare DuckDB insert.

Prints JSON with rows/s of
  - asset:      the rct_events asset materialized through Dagster (execute_in_process: validation,
                typing, the partition replace, rejected-row bookkeeping, asset checks, metadata);
  - ingest_fn:  the same domain function the asset calls (promo_assets.ingestion.ingest_events_day);
  - bare:       `CREATE TABLE t AS SELECT * FROM read_parquet(file)` into a fresh DuckDB file;
and the ratios (time of ours / time of bare). Target: asset ≤ 1.5× bare.

    .venv/bin/python benchmarks/ingest.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions; the best is reported")
    args = ap.parse_args()
    rec = Recorder("ingest")

    tmp = Path(tempfile.mkdtemp(prefix="promo-ingest-bench-"))
    os.environ.update(
        PROMO_LANDING_DIR=str(tmp / "landing"), PROMO_WAREHOUSE=str(tmp / "warehouse.duckdb"),
        PROMO_ARTIFACTS_DIR=str(tmp / "artifacts"), DAGSTER_HOME=str(tmp / "dagster_home"),
    )
    (tmp / "dagster_home").mkdir()
    from promo_assets.ingestion import day_files, ingest_events_day, load_config
    from promo_assets.simulation import SimulationRequest, simulate
    from promo_assets.store import warehouse

    day = REFERENCE_START
    t = time.perf_counter()
    simulate("demo", SimulationRequest("bench", tmp / "landing", days=1, users=args.rows, seed=0, start=day),
             daily_active=1.0)
    print(f"simulated {args.rows} rows in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    path = day_files(tmp / "landing", "bench")[day]
    n_rows = duckdb.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()[0]
    config = load_config(tmp / "landing", "bench")

    def bare() -> float:
        db = tmp / "bare.duckdb"
        db.unlink(missing_ok=True)
        con = duckdb.connect(str(db))
        start = time.perf_counter()
        con.execute("CREATE TABLE t AS SELECT * FROM read_parquet(?)", [str(path)])
        con.close()
        return time.perf_counter() - start

    def ingest_fn() -> float:
        with warehouse.connect(tmp / "fn.duckdb") as con:
            start = time.perf_counter()
            result = ingest_events_day(con, config, day, path)
            elapsed = time.perf_counter() - start
        assert result.rows_loaded == n_rows, result
        return elapsed

    import dagster as dg

    from promo_assets.definitions import defs
    from promo_assets.defs.common import register_partitions

    instance = dg.DagsterInstance.get()
    register_partitions(instance, campaigns=["bench"], days=[day.isoformat()])
    job = defs.resolve_job_def("ingest_job").get_subset(asset_selection={dg.AssetKey("rct_events")})

    def asset() -> float:
        start = time.perf_counter()
        result = job.execute_in_process(
            partition_key=dg.MultiPartitionKey({"date": day.isoformat(), "campaign": "bench"}), instance=instance,
            run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        )
        elapsed = time.perf_counter() - start
        assert result.success
        return elapsed

    timings = {name: [] for name in ("bare", "ingest_fn", "asset")}
    for _ in range(args.repeat):  # interleaved, so that machine noise hits all three alike
        timings["bare"].append(bare())
        timings["ingest_fn"].append(ingest_fn())
        timings["asset"].append(asset())
    with warehouse.connect(read_only=True) as con:
        stored = con.execute("SELECT count(*) FROM rct_events WHERE campaign = 'bench'").fetchone()[0]
    best = {k: min(v) for k, v in timings.items()}
    out = {
        "rows": n_rows,
        "rows_in_warehouse_after_repeats": stored,
        "seconds_best": {k: round(v, 3) for k, v in best.items()},
        "seconds_all": {k: [round(x, 3) for x in v] for k, v in timings.items()},
        "rows_per_s": {k: round(n_rows / v) for k, v in best.items()},
        "ratio_ingest_fn_to_bare": round(best["ingest_fn"] / best["bare"], 3),
        "ratio_asset_to_bare": round(best["asset"] / best["bare"], 3),
        "target_ratio": 1.5,
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(out, indent=2))
    rec.write(out, headline={"rows": n_rows, "ingest function / bare DuckDB": out["ratio_ingest_fn_to_bare"],
                            "rct_events Dagster run / bare DuckDB": out["ratio_asset_to_bare"],
                            "rows/s, Dagster run": out["rows_per_s"]["asset"]})


if __name__ == "__main__":
    main()
