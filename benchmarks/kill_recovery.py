"""kill -9 of `promo run` during ingestion, training and allocation, then the next `promo run`.

For each phase, on a fresh small demo campaign (own landing folder, warehouse and DAGSTER_HOME):
start `python -m promo_assets.cli run --verbose` in its own process group, watch its output and
kill -9 the group when the phase is reached (plus --delay seconds), then time the next
`promo run` to completion (or --timeout). Prints one row per phase and, with --json, one JSON
object per phase:
  phase, marker (the output line the kill followed), recovered (next run exited 0 in time),
  recovery_s (wall time of that run), normal_s (a clean run on the same data, for comparison),
  recovered_runs (what the next run said it recovered), dead_run_status (the killed run in
  DAGSTER_HOME afterwards), pool_slots_left (warehouse pool slots still claimed), leftover rows of
  the dead run in allocation, budget_dual, policy_evaluation, response_coefficients (by run_id;
  'no run_id column' where the table has none).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/kill_recovery.py [--days 4] [--users 300]
        [--phases ingestion training allocation] [--epochs 3] [--delay 0] [--timeout 600] [--json]
        [--models lgbm_s lgbm_s_mono]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's promo_assets, also in the child processes (PYTHONPATH)
from promo_assets.simulation import REFERENCE_START  # noqa: E402
MARKERS = {  # the first output line of `promo run --verbose` that shows the phase is running
    "ingestion": re.compile(r'Started execution of step "rct_events"'),
    "training": re.compile(r"epoch 1/"),
    "allocation": re.compile(r'Started execution of step "\w+__allocation"'),  # a model chain's allocation
}
RESULT_TABLES = ("allocation", "budget_dual", "policy_evaluation", "response_coefficients")


def _env(root: Path, epochs: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        PROMO_LANDING_DIR=str(root / "landing"), PROMO_WAREHOUSE=str(root / "warehouse.duckdb"),
        PROMO_ARTIFACTS_DIR=str(root / "artifacts"), DAGSTER_HOME=str(root / "dagster_home"),
        PROMO_MAX_EPOCHS=str(epochs),
    )
    return env


def _fresh(root: Path, landing: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    (root / "dagster_home").mkdir(parents=True)
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", root / "dagster_home")
    shutil.copytree(landing, root / "landing")


def _train_only(campaign_yaml: Path, models: list[str]) -> None:
    """campaign.yaml `models.include` = `models` (the rest of the file kept)."""
    import yaml

    config = yaml.safe_load(campaign_yaml.read_text()) or {}
    config.setdefault("models", {})["include"] = list(models)
    campaign_yaml.write_text(yaml.safe_dump(config, sort_keys=False))


def _promo(*args: str) -> list[str]:
    return [sys.executable, "-m", "promo_assets.cli", *args]


def _timed_run(env: dict[str, str], timeout: float) -> tuple[bool, float, str]:
    """`promo run` to completion: (exited 0 within timeout, wall seconds, output)."""
    start = time.perf_counter()
    proc = subprocess.Popen(_promo("run", "--no-progress"), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return False, time.perf_counter() - start, out + f"\n[killed after {timeout:.0f}s: still running]"
    return proc.returncode == 0, time.perf_counter() - start, out


def _kill_at(env: dict[str, str], marker: re.Pattern, delay: float, timeout: float) -> tuple[int, str | None]:
    """Start `promo run --verbose`, kill -9 its process group once `marker` is printed (+ delay).
    Returns (its pid, the marker line; None when the run ended or timed out before the marker)."""
    proc = subprocess.Popen(_promo("run", "--no-progress", "--verbose"), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = None
    deadline = time.monotonic() + timeout
    try:
        for line in proc.stdout:
            if marker.search(line):
                seen = line.strip()
                time.sleep(delay)
                break
            if time.monotonic() > deadline:
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
        proc.wait()
    return proc.pid, seen


def _inspect(root: Path, dead_pid: int) -> dict:
    """The dead run's status, pool slots still claimed, and its rows left in the results tables."""
    import dagster as dg
    from dagster._core.storage.dagster_run import RunsFilter

    from promo_assets.store import warehouse
    from promo_assets.defs.common import WAREHOUSE_POOL
    from promo_assets.defs.recovery import PID_TAG

    os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
    with dg.DagsterInstance.get() as instance:
        dead = instance.get_runs(filters=RunsFilter(tags={PID_TAG: str(dead_pid)}))
        storage = instance.event_log_storage
        slots = len(storage.get_concurrency_info(WAREHOUSE_POOL).claimed_slots)
    out: dict = {"dead_runs": {r.run_id[:8]: f"{r.job_name} {r.status.value}" for r in dead},
                 "pool_slots_left": slots, "leftover_rows": {}}
    with warehouse.connect(root / "warehouse.duckdb", read_only=True) as con:
        for table in RESULT_TABLES:
            if "run_id" not in warehouse.table_columns(con, table):
                out["leftover_rows"][table] = "no run_id column"
                continue
            statement = warehouse.sql("meta", "rows_of_run", table=warehouse.quote_ident(table))
            out["leftover_rows"][table] = sum(con.execute(statement, [r.run_id]).fetchone()[0] for r in dead)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--users", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=3, help="PROMO_MAX_EPOCHS for every run [3]")
    ap.add_argument("--phases", nargs="+", choices=list(MARKERS), default=list(MARKERS))
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between the phase's marker and kill -9 [0]")
    ap.add_argument("--timeout", type=float, default=600.0, help="give up on a run after this many seconds [600]")
    ap.add_argument("--no-baseline", action="store_true", help="skip the clean run used for comparison")
    ap.add_argument("--json", action="store_true", help="also print one JSON object per phase")
    ap.add_argument("--models", nargs="+", metavar="MODEL",
                    help="train only these models (the campaign.yaml models.include) [the default models]")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _results import Recorder

    rec = Recorder("kill_recovery")
    tmp = Path(tempfile.mkdtemp(prefix="promo-kill-bench-"))
    landing = tmp / "landing-src"
    subprocess.run(_promo("simulate", "--preset", "demo", "--campaign", "demo", "--days", str(args.days),
                          "--users", str(args.users), "--landing", str(landing),
                              "--start", REFERENCE_START.isoformat()),
                   env=_env(tmp, args.epochs), check=True, stdout=subprocess.DEVNULL)
    if args.models:
        _train_only(landing / "demo" / "campaign.yaml", args.models)
    normal_s = None
    if not args.no_baseline:
        _fresh(tmp / "baseline", landing)
        ok, normal_s, out = _timed_run(_env(tmp / "baseline", args.epochs), args.timeout)
        if not ok:
            sys.exit(f"the clean baseline run failed:\n{out[-3000:]}")
    rows = []
    for phase in args.phases:
        root = tmp / phase
        _fresh(root, landing)
        env = _env(root, args.epochs)
        pid, seen = _kill_at(env, MARKERS[phase], args.delay, args.timeout)
        ok, seconds, out = _timed_run(env, args.timeout)
        row = {"phase": phase, "marker": seen, "killed_pid": pid, "recovered": ok, "recovery_s": round(seconds, 1),
               "normal_s": round(normal_s, 1) if normal_s else None,
               "recovered_runs": [line.strip() for line in out.splitlines() if line.lstrip().startswith("recovered ")],
               "waited": any("waiting for the 'warehouse' pool" in line for line in out.splitlines()),
               **_inspect(root, pid)}
        if not ok:
            row["output_tail"] = out[-2000:]
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    print(f"\nkill -9 of `promo run` on a demo campaign of {args.days} days x {args.users} users "
          f"(PROMO_MAX_EPOCHS={args.epochs}, {os.cpu_count()} CPUs); clean run: "
          + (f"{normal_s:.1f}s" if normal_s else "not measured"))
    print(f"{'phase':<11} {'killed at':<40} {'recovered':<9} {'recovery':>9}  dead run(s) after; leftover rows "
          + ", ".join(RESULT_TABLES))
    for r in rows:
        left = ", ".join(str(r["leftover_rows"][t]) for t in RESULT_TABLES)
        dead = "; ".join(f"{k} {v}" for k, v in r["dead_runs"].items()) or "none recorded"
        print(f"{r['phase']:<11} {(r['marker'] or 'marker not seen')[-40:]:<40} {'yes' if r['recovered'] else 'NO':<9} "
              f"{r['recovery_s']:>8.1f}s  {dead}; {left}; pool slots left {r['pool_slots_left']}")
    rec.write({"days": args.days, "users": args.users, "max_epochs": args.epochs, "models": args.models or "default",
               "clean_run_s": normal_s,
               "phases": rows},
              headline={f"killed in {r['phase']}: next run recovered / its seconds / rows left":
                        f"{'yes' if r['recovered'] else 'NO'} / {r['recovery_s']} s / {sum(v for v in r['leftover_rows'].values() if isinstance(v, int))}"
                        for r in rows} | {"clean run seconds": round(normal_s, 1) if normal_s else None})
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
