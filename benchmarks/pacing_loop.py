"""Pacing a total budget through the full closed loop, against solving each day alone.

Unlike benchmarks/pacing.py (a fixed champion driven for --days days), every day here is the real
loop of scripts/loop_demo.sh, through the CLI only, in a fresh temporary folder per arm (its own
landing root, warehouse, artefact store, outbox and DAGSTER_HOME):

    promo simulate --preset demo --campaign loop --days 3 --users U --seed S --start 2026-03-01
    for each of the --days days D after the RCT days:
        promo run --campaign loop          (ingest -> models -> leaderboard -> champion -> decisions)
        promo simulate --respond-to <outbox>/loop/<D>/<deployed budget>.parquet --day D

so each day's decisions come from models retrained on every day answered so far, with a champion
chosen again, and the realized spend of the days that came back is what the pacer sees.

Arms (the same simulated campaign and seed):
- `paced`: campaign.yaml `budget: {total: T, start, end}` (the pacer's default controller); the
  decision deployed is the manifest entry tagged `pacing`;
- `alone`: each day solved alone at T ÷ days, as a per-capita budget over the users decided for
  (a `budget_per_capita` entry of T / days / users): what the campaign does without pacing;
- `alone_matched`: each day alone at T ÷ days ÷ the prior share of users coming back (the share of
  the population seen on an RCT day): the per-day budget scaled so that its realized spend matches
  the total — the matched-spend comparison.

T = --spend-per-active × the mean number of users per RCT day × --days. Per arm and day: plan (paced),
λ, predicted spend, realized spend (the events' cost), cumulative realized against the even plan,
the true expected response and cost of the users who came back at their decided levels, and the
oracle's true response on those users at the same true spend (the MCKP optimum on the true
curves): the arm's % of the oracle at its own spend is comparable across arms at any spend. At
the end: realized / T and the cumulative true response of each arm against `alone` and
`alone_matched`.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pacing_loop.py [--users 3000] [--days 14] [--seed 0]
        [--models lgbm_s lgbm_s_mono lgbm_t] [--arms paced alone alone_matched] [--exploration 0.05] [--tag T]

Records benchmarks/results/pacing_loop.json (benchmarks/_results.py; pacing_loop--T.json with --tag). The
arms can run as separate processes side by side (one arm each, `--arms paced --tag paced`, ...); then

    .venv/bin/python benchmarks/pacing_loop.py --combine paced alone alone_matched

reads pacing_loop--<tag>.json of each and records pacing_loop.json with every arm and the comparisons.
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
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _pipeline_bench import folder_env  # noqa: E402
from _results import Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

START = REFERENCE_START
CAMPAIGN = "loop"
RCT_DAYS = 3


def cli(args: list[str], env: dict, cwd: Path) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


def simulate(tmp: Path, env: dict, args) -> Path:
    rc, out, _ = cli(["simulate", "--preset", "demo", "--campaign", CAMPAIGN, "--days", str(RCT_DAYS), "--users",
                      str(args.users), "--seed", str(args.seed), "--start", START.isoformat()], env, tmp)
    if rc:
        raise RuntimeError(f"promo simulate failed: {out[-2000:]}")
    return tmp / "landing" / CAMPAIGN


def rct_active(campaign_dir: Path) -> float:
    """The mean number of distinct users per RCT day."""
    return float(np.mean([pd.read_parquet(p, columns=["user_id"])["user_id"].nunique()
                          for p in sorted((campaign_dir / "events").glob("*.parquet"))]))


def configure(campaign_dir: Path, arm: str, total: float, per_day_budget: float | None, args) -> None:
    """campaign.yaml of the arm: the models, the exploration and the arm's budget."""
    path = campaign_dir / "campaign.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["models"] = {"include": list(args.models)}
    doc["exploration"] = {"share": args.exploration, "seed": args.seed}
    if arm == "paced":
        start = START + dt.timedelta(days=RCT_DAYS)
        doc["budget"] = {"total": round(total, 6), "start": start.isoformat(),
                         "end": (start + dt.timedelta(days=args.days - 1)).isoformat()}
    else:
        doc["budget_per_capita"] = sorted({*[float(b) for b in doc["budget_per_capita"]], per_day_budget})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def deployed_entry(manifest: dict, arm: str, per_day_budget: float | None) -> dict:
    if arm == "paced":
        return next(e for e in manifest["budgets"] if "pacing" in e)
    return next(e for e in manifest["budgets"] if abs(e["budget_per_capita"] - per_day_budget) < 1e-9)


def score_day(campaign_dir: Path, decision: pd.DataFrame, events: pd.DataFrame) -> dict:
    """The true expected response and cost of the users who came back at their decided levels, and
    the oracle's true response on those users at the same true cost."""
    from promo_assets.allocation import solve
    from promo_assets.simulation import truth_arrays

    ids = events["user_id"].astype(str).drop_duplicates().tolist()
    tv, tc = truth_arrays(campaign_dir, ids)
    lv = decision.assign(user_id=decision["user_id"].astype(str)).set_index("user_id")["level"].loc[ids].to_numpy()
    r = np.arange(len(ids))
    value, cost = float(tv[r, lv].sum()), float(tc[r, lv].sum())
    oracle = float(solve(tv, tc, cost, per_capita=False, rounding="down").lp_response)
    return {"came_back": len(ids), "true_response": value, "true_cost": cost, "oracle_at_same_cost": oracle}


def run_arm(arm: str, args, keep: Path | None) -> dict:
    from promo_assets.decisions import read_decision_file

    tmp = Path(tempfile.mkdtemp(prefix=f"pacing-loop-{arm}-", dir=keep))
    env = folder_env(tmp)
    if args.max_epochs:
        env["PROMO_MAX_EPOCHS"] = str(args.max_epochs)
    campaign_dir = simulate(tmp, env, args)
    active = rct_active(campaign_dir)
    total = args.spend_per_active * active * args.days
    prior = active / args.users
    per_day = {"paced": None, "alone": total / args.days / args.users,
               "alone_matched": total / args.days / args.users / prior}[arm]
    per_day = None if per_day is None else round(per_day, 6)
    configure(campaign_dir, arm, total, per_day, args)
    print(f"{arm}: total {total:.1f} over {args.days} days; prior share coming back {prior:.3f}; "
          f"deployed per-capita budget {per_day}", flush=True)
    rows = []
    try:
        for d in range(args.days):
            day = START + dt.timedelta(days=RCT_DAYS + d)
            rc, out, secs = cli(["run", "--campaign", CAMPAIGN, "--no-progress"], env, tmp)
            if rc:
                raise RuntimeError(f"{arm}: promo run before {day} failed (exit {rc}): {out[-3000:]}")
            folder = tmp / "outbox" / CAMPAIGN / day.isoformat()
            manifest = json.loads((folder / "manifest.json").read_text())
            entry = deployed_entry(manifest, arm, per_day)
            file = folder / entry["file"]
            rc, out, _ = cli(["simulate", "--respond-to", str(file), "--day", day.isoformat(), "--campaign", CAMPAIGN],
                             env, tmp)
            if rc:
                raise RuntimeError(f"{arm}: promo simulate --respond-to {day} failed: {out[-2000:]}")
            events = pd.read_parquet(campaign_dir / "events" / f"{day.isoformat()}.parquet")
            decision = read_decision_file(file)
            pacing = entry.get("pacing") or {}
            row = {"day": day.isoformat(), "champion": manifest.get("champion"),
                   "budget_per_capita": entry["budget_per_capita"], "lambda_": entry["lambda_"],
                   "plan": pacing.get("plan", total / args.days), "ratio": pacing.get("ratio"),
                   "predicted": float(entry["expected_cost"]["per_capita"]) * int(entry["users"]),
                   "realized": float(events["cost"].sum()), "realized_response": float(events["response"].sum()),
                   "events": int(len(events)), **score_day(campaign_dir, decision, events), "run_seconds": round(secs, 1)}
            rows.append(row)
            print(f"  {arm} {day}: champion {row['champion']}, plan {row['plan']:.1f}, λ {row['lambda_']:.4g}, predicted "
                  f"{row['predicted']:.1f}, realized {row['realized']:.1f}, true response {row['true_response']:.1f} "
                  f"({100 * row['true_response'] / row['oracle_at_same_cost']:.1f}% of the oracle at that cost); "
                  f"run {secs:.0f}s, load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    frame = pd.DataFrame(rows)
    frame["cumulative_realized"] = frame["realized"].cumsum()
    frame["cumulative_even_plan"] = total / args.days * np.arange(1, len(frame) + 1)
    return {"total": total, "prior_share": prior, "deployed_budget_per_capita": per_day,
            "days": frame.to_dict("records"),
            "realized_total": float(frame["realized"].sum()),
            "realized_over_total": float(frame["realized"].sum() / total),
            "max_daily_realized_over_plan_deviation": float((frame["realized"] / frame["plan"] - 1).abs().max()),
            "true_response": float(frame["true_response"].sum()), "true_cost": float(frame["true_cost"].sum()),
            "oracle_at_same_cost": float(frame["oracle_at_same_cost"].sum()),
            "pct_oracle_at_same_cost": float(frame["true_response"].sum() / frame["oracle_at_same_cost"].sum()),
            "realized_response": float(frame["realized_response"].sum()),
            "run_seconds_mean": float(frame["run_seconds"].mean())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=3000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", nargs="+", default=["lgbm_s", "lgbm_s_mono", "lgbm_t"])
    ap.add_argument("--arms", nargs="+", default=["paced", "alone", "alone_matched"])
    ap.add_argument("--exploration", type=float, default=0.05)
    ap.add_argument("--spend-per-active", type=float, default=1.0)
    ap.add_argument("--max-epochs", type=int, default=None, help="PROMO_MAX_EPOCHS (unset by default)")
    ap.add_argument("--keep", type=Path, default=None, help="keep each arm's folder under this directory")
    ap.add_argument("--tag", default=None, help="record pacing_loop--TAG.json")
    ap.add_argument("--combine", nargs="+", default=None, metavar="TAG",
                    help="combine the recorded pacing_loop--TAG.json files into pacing_loop.json (runs nothing)")
    args = ap.parse_args()
    rec = Recorder("pacing_loop")
    arms, sources = {}, None
    if args.combine:
        sources = {}
        for tag in args.combine:
            doc = json.loads((rec.path(tag)).read_text())
            sources[tag] = {k: doc[k] for k in ("command", "git_commit", "modified_code", "date", "seconds", "load_start",
                                                "load_end", "env")}
            arms.update(doc["figures"]["arms"])
            settings = {k: v for k, v in doc["figures"].items() if k != "arms"}
    for arm in [] if args.combine else args.arms:
        t0 = time.perf_counter()
        arms[arm] = run_arm(arm, args, args.keep)
        arms[arm]["seconds"] = round(time.perf_counter() - t0, 1)
        # the pacer reads its earlier days from the decisions runs the warehouse keeps (PROMO_KEEP_RUNS)
        arms[arm]["promo_keep_runs"] = os.environ.get("PROMO_KEEP_RUNS", "unset (default)")
        a = arms[arm]
        print(f"{arm}: realized {a['realized_total']:.1f} = {100 * a['realized_over_total']:.2f}% of the total; "
              f"true response {a['true_response']:.1f} ({100 * a['pct_oracle_at_same_cost']:.2f}% of the oracle at the "
              f"same cost)", flush=True)
    for base in ("alone", "alone_matched"):
        if base in arms:
            for a in arms.values():
                a[f"true_response_vs_{base}"] = a["true_response"] / arms[base]["true_response"]
    headline = {}
    for k, a in arms.items():
        headline[f"{k}: realized / total"] = round(a["realized_over_total"], 4)
        headline[f"{k}: true response"] = round(a["true_response"], 1)
        headline[f"{k}: % of oracle at same true cost"] = round(100 * a["pct_oracle_at_same_cost"], 2)
        for base in ("alone", "alone_matched"):
            if f"true_response_vs_{base}" in a and k != base:
                headline[f"{k}: true response vs {base}"] = round(a[f"true_response_vs_{base}"], 4)
    fig = {"preset": "demo", "users_per_day_decided": args.users, "days": args.days, "rct_days": RCT_DAYS,
           "seed": args.seed, "models": list(args.models), "model_set_note": "LightGBM models only (campaign.yaml "
           "models.include), champion chosen among them every day", "max_epochs": args.max_epochs,
           "exploration_share": args.exploration, "spend_per_active": args.spend_per_active,
           "matched_spend": "arm alone_matched: each day alone at total / days / prior share coming back, so that "
           "its realized spend matches the total; and every arm's true response against the oracle's at the "
           "same true cost on the users who came back", "arms": arms}
    if sources is not None:  # the settings the arms ran with, and each arm's own record
        fig.update({**settings, "arms": arms, "arm_records": sources})
    path = rec.write(fig, headline=headline, tag=args.tag)
    print(json.dumps({"written": str(path), "headline": headline}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
