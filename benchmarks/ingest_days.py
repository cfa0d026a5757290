"""`promo run --ingest-only` over 5, 50 and 365 days of a small campaign, several checkouts side by side.

For each number of days, a demo campaign with 300 users a day (`daily_active=1.0`: every user of a
300-user pool has one event a day) is simulated once into a temporary landing folder; then every
checkout given with `--code LABEL=PATH` runs `python -m promo_assets.cli run --ingest-only
--campaign small --no-progress` on it in a fresh warehouse, artefact store and DAGSTER_HOME (with
that checkout's dagster_home/dagster.yaml), the checkouts' order alternating between rounds. It
records the wall time and the CPU time (user + system of the process tree) of each run, the rows
loaded (counted in the warehouse afterwards), the time per day, and the ratio of the 365-day time
to the 50-day time (target: ≤ 3).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ingest_days.py --code before=/path/to/old \
        --code after=. [--days 5 50 365] [--rounds 1]

Same Python environment for every checkout (its code and its own SQL: benchmarks/_checkout.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _checkout import cli_command  # noqa: E402
from _results import Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

USERS = 300
CAMPAIGN = "small"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def simulate(landing: Path, days: int) -> None:
    from promo_assets.simulation import SimulationRequest, simulate as sim

    sim("demo", SimulationRequest(CAMPAIGN, landing, days, USERS, 0, start=REFERENCE_START), daily_active=1.0)


def run(code: Path, landing: Path, work: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code), PROMO_LANDING_DIR=str(landing),
               PROMO_WAREHOUSE=str(work / "warehouse.duckdb"), PROMO_ARTIFACTS_DIR=str(work / "artifacts"),
               DAGSTER_HOME=str(work / "dagster_home"))
    (work / "dagster_home").mkdir(parents=True, exist_ok=True)
    shutil.copy(code / "dagster_home" / "dagster.yaml", work / "dagster_home" / "dagster.yaml")
    t0, cpu0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(cli_command(code, "run", "--ingest-only", "--campaign", CAMPAIGN, "--no-progress"),
                          env=env, capture_output=True, text=True, cwd=code)
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    rows = days = None
    if (work / "warehouse.duckdb").exists():
        with duckdb.connect(str(work / "warehouse.duckdb"), read_only=True) as con:
            rows, days = con.execute("SELECT count(*), count(DISTINCT event_date) FROM rct_events WHERE campaign = ?",
                                     [CAMPAIGN]).fetchone()
    out = {"wall_s": round(seconds, 2), "cpu_s": round(cpu, 2), "exit": proc.returncode, "rows": rows, "days_loaded": days}
    if proc.returncode != 0:
        out["tail"] = proc.stdout[-400:] + proc.stderr[-800:]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", action="append", required=True, metavar="LABEL=PATH",
                    help="a checkout to measure (repeatable), e.g. before=/tmp/old")
    ap.add_argument("--days", type=int, nargs="+", default=[5, 50, 365])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tag", default=None, help="write benchmarks/results/ingest_days--TAG.json (a comparison of its own)")
    args = ap.parse_args()
    rec = Recorder("ingest_days")
    codes = {label: Path(path).resolve() for label, path in (c.split("=", 1) for c in args.code)}
    git = lambda code: subprocess.run(["git", "rev-parse", "HEAD"], cwd=code, capture_output=True,  # noqa: E731
                                      text=True).stdout.strip()
    runs: dict[str, dict[str, list[dict]]] = {label: {} for label in codes}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.days:
            landing = Path(tmp) / f"landing{n}"
            simulate(landing, n)
            for r in range(args.rounds):
                order = list(codes) if r % 2 == 0 else list(reversed(codes))
                for label in order:
                    work = Path(tmp) / f"{label}-{n}-{r}"
                    out = run(codes[label], landing, work)
                    runs[label].setdefault(str(n), []).append(out)
                    shutil.rmtree(work, ignore_errors=True)
                    print(f"{n:>4} days {label:>8}: {out['wall_s']:7.1f} s wall, {out['cpu_s']:7.1f} s CPU, "
                          f"{out['rows']} rows, exit {out['exit']}, load {os.getloadavg()[0]:.1f}"
                          + (f"\n{out['tail']}" if out["exit"] else ""), flush=True)
    summary: dict[str, dict] = {}
    for label, by_days in runs.items():
        wall = {n: statistics.median(o["wall_s"] for o in outs) for n, outs in by_days.items()}
        summary[label] = {
            "git_commit": git(codes[label]),
            "median_wall_s": wall,
            "wall_s_per_day": {n: round(w / int(n), 3) for n, w in wall.items()},
            "all_ok": all(o["exit"] == 0 and o["rows"] == USERS * int(n) for n, outs in by_days.items() for o in outs),
        }
        if "50" in wall and "365" in wall:
            summary[label]["ratio_365_to_50"] = round(wall["365"] / wall["50"], 2)
    for label, s in summary.items():
        print(f"{label}: " + ", ".join(f"{n} days {w:.1f} s ({s['wall_s_per_day'][n]:.3f} s/day)"
                                       for n, w in s["median_wall_s"].items())
              + (f"; 365 / 50 days = {s['ratio_365_to_50']}" if "ratio_365_to_50" in s else ""))
    headline = {f"{label} {n} days s": round(w, 1) for label, s in summary.items() for n, w in s["median_wall_s"].items()}
    headline.update({f"{label} 365 / 50 days": s.get("ratio_365_to_50") for label, s in summary.items()})
    rec.write({"users_per_day": USERS, "days": args.days, "rounds": args.rounds, "codes": {k: str(v) for k, v in codes.items()},
               "runs": runs, "summary": summary}, headline=headline, tag=args.tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
