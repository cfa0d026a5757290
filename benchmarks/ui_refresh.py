"""A campaign refresh started from the UI (the daemon's run) vs `promo run`, on the same small campaign.

Simulates the demo campaign into a temporary landing folder, times
  - promo_run:  `python -m promo_assets.cli run --campaign demo` (ingestion + every downstream asset,
                in-process);
  - ui_run:     `dagster dev` (own process group, a free port, the repository's dagster.yaml), then
                `campaign_job` for partition `demo` launched through the GraphQL API as the UI's
                launchpad does, from the launch until the run's SUCCESS; `queued_s` is launch → run
                start (run queue + daemon + run process start), `run_s` run start → end;
and prints them as JSON with the ratio ui_run / promo_run (issue #12 item 14: ≤ 2); `promo run` is
timed before and after the UI runs and the ratio uses their mean.

    .venv/bin/python benchmarks/ui_refresh.py [--days 4] [--users 300] [--epochs 3] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promo_assets.devserver import DagsterDev, demo_env, promo  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=3, help="PROMO_MAX_EPOCHS")
    ap.add_argument("--repeat", type=int, default=2, help="campaign_job runs launched one after the other")
    ap.add_argument("--timeout", type=float, default=900, help="seconds one UI run may take")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="promo-ui-bench-"))
    env = demo_env(tmp, ROOT, args.epochs)
    promo(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", str(args.days),
          "--users", str(args.users), "--seed", "0")

    def promo_run() -> float:
        start = time.perf_counter()
        promo(env, "run", "--campaign", "demo", "--no-progress")
        seconds = time.perf_counter() - start
        print(f"promo run: {seconds:.1f} s", file=sys.stderr)
        return round(seconds, 1)

    result = {"days": args.days, "users": args.users, "max_epochs": args.epochs, "promo_run_s": [promo_run()]}
    start = time.perf_counter()
    with DagsterDev(ROOT, env, tmp / "dagster_dev.log") as ui:
        result["dagster_dev_ready_s"] = round(time.perf_counter() - start, 1)
        runs = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            run_id = ui.launch_partition_run("campaign_job", "demo")
            run = ui.wait_for_run(run_id, args.timeout)
            wall = time.perf_counter() - start
            if run["status"] != "SUCCESS":
                raise SystemExit(f"campaign_job run {run_id} ended {run['status']}; log: {tmp / 'dagster_dev.log'}")
            runs.append({
                "ui_run_s": round(wall, 1),
                "queued_s": round(run["startTime"] - run["creationTime"], 1),
                "run_s": round(run["endTime"] - run["startTime"], 1),
            })
            print(f"campaign_job from the UI: {runs[-1]}", file=sys.stderr)
    result["ui_runs"] = runs
    result["promo_run_s"].append(promo_run())  # again after the UI runs: the machine's load drifts
    baseline = sum(result["promo_run_s"]) / 2
    result["ratio_ui_over_promo_run"] = [round(r["ui_run_s"] / baseline, 2) for r in runs]
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=2))
    if args.keep:
        print(f"kept {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
