"""EOM interval coverage on the demo campaign: does the true value lie inside the EOM 95% interval?

For each seed: simulate the demo campaign (14 days, 5,000 users), run the whole asset graph with
`promo run` (in-process Dagster, temporary warehouse and DAGSTER_HOME), then count the
(model, budget) pairs of `policy_evaluation` whose true value (from the simulator's truth files)
lies inside [eom_ci_low, eom_ci_high]. Prints one line per seed and a JSON summary.

    .venv/bin/python benchmarks/eom_coverage.py [--seeds 0 1 2 3 4] [--users 5000] [--days 14]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]


def run_seed(seed: int, users: int, days: int) -> dict:
    from promo_assets.cli import main

    tmp = Path(tempfile.mkdtemp(prefix=f"eom-coverage-{seed}-"))
    (tmp / "dagster_home").mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", tmp / "dagster_home")
    os.environ.update(
        PROMO_LANDING_DIR=str(tmp / "landing"), PROMO_WAREHOUSE=str(tmp / "w.duckdb"),
        PROMO_ARTIFACTS_DIR=str(tmp / "artifacts"), DAGSTER_HOME=str(tmp / "dagster_home"),
    )
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", str(days),
                     "--users", str(users), "--seed", str(seed)]) == 0
        assert main(["run", "--no-progress"]) == 0
    with duckdb.connect(str(tmp / "w.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT model, budget_per_capita, eom_value, eom_ci_low, eom_ci_high, true_value FROM policy_evaluation"
        ).fetchall()
    shutil.rmtree(tmp, ignore_errors=True)
    inside = [lo <= t <= hi for _, _, _, lo, hi, t in rows]
    return {"seed": seed, "pairs": len(rows), "inside": int(sum(inside)),
            "outside": [(m, b) for (m, b, *_), ok in zip(rows, inside) if not ok]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--days", type=int, default=14)
    args = ap.parse_args()
    runs = []
    for seed in args.seeds:
        r = run_seed(seed, args.users, args.days)
        runs.append(r)
        print(f"seed {seed}: true value inside the EOM 95% interval for {r['inside']}/{r['pairs']} (model, budget) pairs"
              + (f"; outside: {r['outside']}" if r["outside"] else ""))
    pairs, inside = sum(r["pairs"] for r in runs), sum(r["inside"] for r in runs)
    print(json.dumps({"benchmark": "eom_coverage", "users": args.users, "days": args.days, "seeds": args.seeds,
                      "pairs": pairs, "inside": inside, "coverage": inside / pairs, "target": 0.9, "runs": runs}))


if __name__ == "__main__":
    main()
