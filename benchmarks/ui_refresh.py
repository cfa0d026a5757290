"""A campaign refresh started from the UI vs `promo run`, doing the same work on the same small campaign.

`promo run --campaign demo` ingests the campaign's day files, then runs the models' chains and the
leaderboard. The UI side does exactly that work through `dagster dev`
(own process group, a free port, the repository's dagster.yaml), launched through the GraphQL API as
the UI's launchpad and a backfill do:
  - ingest:     one `ingest_job` run of the campaign partition (every new or changed day file);
  - downstream: `campaign_job` for the campaign, then `leaderboard_job`;
each timed from the launch to the last run's SUCCESS (`queued_s`: launch to run start, summed). The
sensors are switched off first (as a user can on the Automation page) and the runs they had already
started are waited for, so nothing else runs during the measurement. `promo run` is timed before and after the UI
runs; its downstream part is the time it prints ("downstream done in N s"). Ratios use the mean of
the two `promo run`s.

    .venv/bin/python benchmarks/ui_refresh.py [--days 4] [--users 300] [--epochs 3] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recorder  # noqa: E402

from devtools.devserver import DagsterDev, demo_env, promo  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

def wait_all(ui: DagsterDev, run_ids: list[str], timeout: float, log: Path) -> list[dict]:
    runs = []
    for run_id in run_ids:
        run = ui.wait_for_run(run_id, timeout)
        if run["status"] != "SUCCESS":
            raise SystemExit(f"run {run_id} ended {run['status']}; log: {log}")
        runs.append(run)
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=3, help="PROMO_MAX_EPOCHS")
    ap.add_argument("--repeat", type=int, default=2, help="UI refreshes, one after the other")
    ap.add_argument("--timeout", type=float, default=900, help="seconds one UI run may take")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = ap.parse_args()
    rec = Recorder("ui_refresh")

    tmp = Path(tempfile.mkdtemp(prefix="promo-ui-bench-"))
    env = demo_env(tmp, ROOT, args.epochs)
    promo(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", str(args.days),
          "--users", str(args.users), "--seed", "0", "--start", REFERENCE_START.isoformat())

    def promo_run() -> dict:
        start = time.perf_counter()
        done = promo(env, "run", "--campaign", "demo", "--no-progress")
        seconds = time.perf_counter() - start
        found = re.search(r"downstream done in (\d+)s", done.stdout)
        out = {"total_s": round(seconds, 1), "downstream_s": float(found.group(1)) if found else None}
        print(f"promo run: {out}", file=sys.stderr)
        return out

    result = {"days": args.days, "users": args.users, "max_epochs": args.epochs, "promo_run": [promo_run()]}
    log = tmp / "dagster_dev.log"
    start = time.perf_counter()
    with DagsterDev(ROOT, env, log) as ui:
        result["dagster_dev_ready_s"] = round(time.perf_counter() - start, 1)
        for sensor in ("landing_sensor", "automation"):
            ui.stop_sensor(sensor)
        before = ui.unfinished_runs()
        wait_all(ui, [r["runId"] for r in before], args.timeout, log)
        result["runs_started_by_sensors_before_they_were_stopped"] = len(before)
        refreshes = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ingest = wait_all(ui, [ui.launch_partition_run("ingest_job", "demo", {})], args.timeout, log)
            t1 = time.perf_counter()
            campaign = wait_all(ui, [ui.launch_partition_run("campaign_job", "demo", {})], args.timeout, log)
            board = wait_all(ui, [ui.launch_partition_run("leaderboard_job", "demo", {})], args.timeout, log)
            t2 = time.perf_counter()
            runs = ingest + campaign + board
            refreshes.append({
                "total_s": round(t2 - t0, 1), "ingest_s": round(t1 - t0, 1), "downstream_s": round(t2 - t1, 1),
                "runs": len(runs),
                "queued_s": round(sum(r["startTime"] - r["creationTime"] for r in runs), 1),
                "run_s": round(sum(r["endTime"] - r["startTime"] for r in runs), 1),
            })
            print(f"refresh from the UI: {refreshes[-1]}", file=sys.stderr)
        result["other_runs_during_measurement"] = len(ui.unfinished_runs())
    result["ui_refresh"] = refreshes
    result["promo_run"].append(promo_run())  # again after the UI runs: the machine's load drifts
    base_total = sum(r["total_s"] for r in result["promo_run"]) / 2
    downs = [r["downstream_s"] for r in result["promo_run"] if r["downstream_s"] is not None]
    base_down = sum(downs) / len(downs) if downs else None
    result["ratio_total_ui_over_promo_run"] = [round(r["total_s"] / base_total, 2) for r in refreshes]
    result["ratio_downstream_ui_over_promo_run"] = (
        [round(r["downstream_s"] / base_down, 2) for r in refreshes] if base_down else None)
    print(json.dumps(result, indent=2))
    rec.write(result, headline={
        "promo run, mean seconds (ingestion + models + leaderboard)": round(base_total, 1),
        "UI refresh, seconds (the same runs launched through the UI's API)": [r["total_s"] for r in refreshes],
        "UI / promo run, same work": result["ratio_total_ui_over_promo_run"],
        "UI / promo run, models and leaderboard only": result["ratio_downstream_ui_over_promo_run"],
    })
    if args.keep:
        print(f"kept {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
