"""The closed loop on the simulator: a few RCT days, then every day train -> champion -> export ->
the simulated population answers -> ingest -> retrain -> ..., for several exploration shares.

For each exploration share (campaign.yaml `exploration: {share: ε}`), in a fresh temporary folder
(its own landing root, warehouse, artefact store, outbox and DAGSTER_HOME), through the CLI only:

    promo simulate --preset demo --campaign loop --days 3 --users U --seed S --start 2026-03-01
    for each day D = 4 .. --days:
        promo run --campaign loop                  (models, leaderboard, champion, decisions, outbox)
        promo simulate --respond-to <outbox>/loop/<D>/<budget>.parquet --day D

and per day it reads the champion (and its % of the oracle on that run's holdout users, the truth
kept for auditing) and scores the exported decision (every population user's level) against the
truth: its true expected response and spend per user, the oracle's value at the same true spend
(the MCKP optimum on the true curves with that budget), and staying fully randomized (a uniform
random level for everyone: its value and spend, and the cost-matched random mix's value at the
loop's spend). Prints one line per day, then one JSON object; writes it to benchmarks/results/.

    .venv/bin/python benchmarks/closed_loop.py [--shares 0 0.05 0.2] [--days 14] [--users 5000]
        [--seed 0] [--budget 1.0] [--max-epochs N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _pipeline_bench import folder_env  # noqa: E402
from _results import Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

START = REFERENCE_START
CAMPAIGN = "loop"


def cli(args: list[str], env: dict, cwd: Path) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


def score_decision(landing: Path, file: Path) -> dict:
    """The exported decision against the truth: true value and spend per user, the oracle's value at
    the same spend, the uniform RCT's value and spend, the cost-matched random mix at that spend."""
    from promo_assets.allocation import solve
    from promo_assets.decisions import read_decision_file
    from promo_assets.evaluation.honest import match_mix, mix_true_value
    from promo_assets.evaluation.records import Truth
    from promo_assets.simulation import truth_arrays

    frame = read_decision_file(file)
    tv, tc = truth_arrays(landing / CAMPAIGN, frame["user_id"].tolist())
    rows = np.arange(len(frame))
    lv = frame["level"].to_numpy().astype(int)
    value, spend = float(tv[rows, lv].mean()), float(tc[rows, lv].mean())
    oracle = float(solve(tv, tc, spend, per_capita=True, rounding="down").lp_response) / len(frame)
    truth = Truth(tv, tc)
    mix = match_mix(lambda m: mix_true_value(m, truth)[1], tc.mean(axis=0), spend, what="true").mix
    matched_random = mix_true_value(mix, truth)[0] if mix is not None else float("nan")
    return {"users": int(len(frame)), "true_value": value, "true_spend": spend, "oracle_at_spend": oracle,
            "pct_oracle_at_spend": value / oracle if oracle > 0 else float("nan"),
            "uniform_value": float(tv.mean()), "uniform_spend": float(tc.mean()), "random_at_spend": matched_random,
            "explored": int((frame["policy"] == "explore").sum())}


def run_loop(share: float, args, keep: Path | None) -> dict:
    from promo_assets.store.warehouse import connect, sql

    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"closed-loop-{share:g}-", dir=keep))
    env = folder_env(tmp)
    if args.max_epochs:
        env["PROMO_MAX_EPOCHS"] = str(args.max_epochs)
    rc, out, _ = cli(["simulate", "--preset", "demo", "--campaign", CAMPAIGN, "--days", str(args.rct_days), "--users",
                      str(args.users), "--seed", str(args.seed), "--start", START.isoformat()], env, tmp)
    if rc:
        raise RuntimeError(f"promo simulate failed: {out[-2000:]}")
    with open(tmp / "landing" / CAMPAIGN / "campaign.yaml", "a") as f:
        f.write(f"exploration:\n  share: {share}\n  seed: {args.seed}\nmonitoring:\n  budget: {args.budget}\n")
    days, champions = [], []
    try:
        for d in range(args.rct_days + 1, args.days + 1):
            day = START + dt.timedelta(days=d - 1)
            rc, out, secs = cli(["run", "--campaign", CAMPAIGN, "--no-progress"], env, tmp)
            if rc:
                raise RuntimeError(f"promo run before day {day} failed (exit {rc}): {out[-3000:]}")
            with connect(tmp / "warehouse.duckdb", read_only=True) as con:
                champ = con.execute(sql("decisions", "latest_champion"), [CAMPAIGN, ""]).df().iloc[0]
            folder = tmp / "outbox" / CAMPAIGN / day.isoformat()
            manifest = json.loads((folder / "manifest.json").read_text())
            entry = next(e for e in manifest["budgets"] if abs(e["budget_per_capita"] - args.budget) < 1e-9)
            scored = score_decision(tmp / "landing", folder / entry["file"])
            rc, out, _ = cli(["simulate", "--respond-to", str(folder / entry["file"]), "--day", day.isoformat(),
                              "--campaign", CAMPAIGN], env, tmp)
            if rc:
                raise RuntimeError(f"promo simulate --respond-to {day} failed: {out[-2000:]}")
            events = pd.read_parquet(tmp / "landing" / CAMPAIGN / "events" / f"{day.isoformat()}.parquet")
            row = {"day": d, "date": day.isoformat(), "champion": champ["champion"],
                   "champion_pct_oracle": float(champ["pct_oracle"]), "best_candidate": champ["best_candidate"],
                   "best_pct_oracle": float(champ["best_pct_oracle"]), "changed": bool(champ["champion_changed"]),
                   **scored, "events": int(len(events)), "realized_response": float(events["response"].sum()),
                   "realized_spend": float(events["cost"].sum()),
                   "logged_propensity_min": float(events["propensity"].min()), "run_seconds": round(secs, 1)}
            days.append(row)
            champions.append(champ["champion"])
            print(f"ε={share:g} day {d}: champion {row['champion']} ({100 * row['champion_pct_oracle']:.2f}% of oracle; "
                  f"best {row['best_candidate']} {100 * row['best_pct_oracle']:.2f}%), decision {row['true_value']:.4f} "
                  f"at spend {row['true_spend']:.4f} = {100 * row['pct_oracle_at_spend']:.2f}% of the oracle at that "
                  f"spend; uniform RCT {row['uniform_value']:.4f} at {row['uniform_spend']:.4f}; run {secs:.0f}s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    frame = pd.DataFrame(days)
    n = frame["users"]
    changes = int(sum(a != b for a, b in zip(champions, champions[1:])))
    return {
        "share": share, "days": days,
        "cumulative": {
            "true_response": float((frame["true_value"] * n).sum()), "true_spend": float((frame["true_spend"] * n).sum()),
            "oracle_response_at_same_spend": float((frame["oracle_at_spend"] * n).sum()),
            "uniform_rct_response": float((frame["uniform_value"] * n).sum()),
            "uniform_rct_spend": float((frame["uniform_spend"] * n).sum()),
            "cost_matched_random_response": float((frame["random_at_spend"] * n).sum()),
            "realized_response": float(frame["realized_response"].sum()),
            "realized_spend": float(frame["realized_spend"].sum())},
        "pct_of_oracle_at_same_spend": float((frame["true_value"] * n).sum() / (frame["oracle_at_spend"] * n).sum()),
        "champion_changes": changes,
        "first_champion": {"day": int(frame["day"].iloc[0]), "champion": champions[0],
                           "pct_oracle": float(frame["champion_pct_oracle"].iloc[0])},
        "last_champion": {"day": int(frame["day"].iloc[-1]), "champion": champions[-1],
                          "pct_oracle": float(frame["champion_pct_oracle"].iloc[-1])},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.05, 0.2])
    ap.add_argument("--days", type=int, default=14, help="last day of the loop [14]")
    ap.add_argument("--rct-days", type=int, default=3, help="RCT days before the loop starts [3]")
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=1.0, help="the budget whose decisions are deployed [1.0]")
    ap.add_argument("--max-epochs", type=int, default=None, help="PROMO_MAX_EPOCHS (default: unset, as the demo)")
    ap.add_argument("--keep", type=Path, default=None, help="keep each loop's folder under this directory")
    args = ap.parse_args()
    rec = Recorder("closed_loop")
    loops = [run_loop(s, args, args.keep) for s in args.shares]
    table = [{"share": lp["share"], **{k: round(v, 2) for k, v in lp["cumulative"].items()},
              "pct_oracle_at_same_spend": round(100 * lp["pct_of_oracle_at_same_spend"], 2),
              "champion_changes": lp["champion_changes"],
              "champion_pct_oracle_day_first": round(100 * lp["first_champion"]["pct_oracle"], 2),
              "champion_pct_oracle_day_last": round(100 * lp["last_champion"]["pct_oracle"], 2)} for lp in loops]
    print(pd.DataFrame(table).to_string(index=False))
    result = {"preset": "demo", "users": args.users, "seed": args.seed, "budget": args.budget, "days": args.days,
              "rct_days": args.rct_days, "table": table, "loops": loops}
    path = rec.write(result, headline={f"share {row['share']}: % of oracle at the same spend / champion day first -> last":
                                       f"{row['pct_oracle_at_same_spend']} / {row['champion_pct_oracle_day_first']} -> "
                                       f"{row['champion_pct_oracle_day_last']}" for row in table})
    print(json.dumps({"written": str(path), "table": table}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
