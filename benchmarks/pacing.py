"""Pacing a total budget over 14 days on the closed-loop simulator, against solving each day alone.

A demo campaign (3 RCT days, --users users) goes through `promo run` once (the champion pinned to
--model, so that every arm decides with the same model); then, for each arm, a copy of the
simulated campaign lives --days days: every day the champion's predicted response and cost for the
population file's users are computed, the arm chooses λ, every user gets argmax_j v_ij − λ c_ij,
the decision file is answered by the simulator (`promo_assets.simulation.respond`: the same share
of users comes back as on an RCT day, at their decided level, the outcome drawn from the true
curves) and the day's events report the realized spend, which the pacer sees the next day.

Arms (promo_assets.decisions.pacing):
- `ratio`: the pacer's default controller (plan = budget left / days left; λ meets plan / ρ̂, ρ̂ the
  realized over predicted spend of the days that came back);
- `dual`: DIPN's multiplicative dual update λ_d = λ_{d−1} (realized / plan)^η (η = --gain);
- `alone`: each day solved alone at total ÷ days, as a per-capita budget over the users decided for
  (what the campaign does without pacing);
- `alone_prior`: each day solved alone at total ÷ days, scaled by the prior share of users that
  come back (the pacer's first day, repeated: the plan without feedback).

The total is --spend-per-active × the mean number of users per RCT day × --days. Reported per arm
and day: plan, λ, predicted and realized spend, cumulative realized vs the even plan; at the end:
realized / total, and the cumulative true response (the truth's expected response of the users
who came back, at their levels) against `alone`.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pacing.py [--users 5000] [--days 14] [--seed 0]
        [--model lgbm_s_mono] [--spend-per-active 1.0] [--gain 1.0] [--arms ratio dual alone alone_prior]

Prints a table per arm and records benchmarks/results/pacing.json (benchmarks/_results.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _champion_campaign import decided_campaign  # noqa: E402
from _results import Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

START = REFERENCE_START
RCT_DAYS = 3


def run_arm(arm: str, base: Path, work: Path, users: np.ndarray, values: np.ndarray, costs: np.ndarray,
            budget, prior: float) -> dict:
    from promo_assets.allocation import decide, solve
    from promo_assets.decisions.pacing import PacingDay, PeriodBudget, lambda_for_spend, pace_day, predicted_spend
    from promo_assets.simulation import respond, truth_arrays

    folder = work / arm / "demo"
    shutil.copytree(base, folder)
    n = len(users)
    paced = PeriodBudget(total=budget.total, start=budget.start, end=budget.end,
                         controller=arm if arm in ("ratio", "dual") else "ratio", gain=budget.gain)
    history: list[PacingDay] = []
    rows = []
    for d in range(budget.days):
        day = budget.start + dt.timedelta(days=d)
        if arm in ("ratio", "dual"):
            today = pace_day(paced, day, values, costs, history, prior)
            lam = today.lambda_
        elif arm == "alone":
            lam = float(solve(values, costs, budget.total / budget.days / n, per_capita=True, rounding="down").lambda_)
            today = PacingDay(day, budget.total / budget.days, lam, predicted_spend(values, costs, lam))
        else:  # alone_prior
            lam = lambda_for_spend(values, costs, budget.total / budget.days / prior)
            today = PacingDay(day, budget.total / budget.days, lam, predicted_spend(values, costs, lam), ratio=prior)
        levels = decide(values, costs, lam)
        file = work / arm / f"{day.isoformat()}.parquet"
        pd.DataFrame({"user_id": users, "level": levels.astype(np.int32), "propensity": 1.0}).to_parquet(file)
        respond(folder, file, day)
        events = pd.read_parquet(folder / "events" / f"{day.isoformat()}.parquet")
        today.realized = float(events["cost"].sum())
        history.append(today)
        tv, tc = truth_arrays(folder, events["user_id"].astype(str).tolist())
        lv = pd.Series(levels, index=users).loc[events["user_id"].astype(str)].to_numpy()
        r = np.arange(len(lv))
        rows.append({**today.to_dict(), "events": int(len(events)), "true_response": float(tv[r, lv].sum()),
                     "true_cost": float(tc[r, lv].sum()), "realized_response": float(events["response"].sum())})
    frame = pd.DataFrame(rows)
    frame["cumulative_realized"] = frame["realized"].cumsum()
    frame["cumulative_even_plan"] = budget.total / budget.days * np.arange(1, len(frame) + 1)
    return {"days": frame.to_dict("records"),
            "realized_total": float(frame["realized"].sum()),
            "realized_over_total": float(frame["realized"].sum() / budget.total),
            "max_daily_deviation_from_even_plan": float((frame["realized"] / (budget.total / budget.days) - 1).abs().max()),
            "true_response": float(frame["true_response"].sum()), "true_cost": float(frame["true_cost"].sum()),
            "realized_response": float(frame["realized_response"].sum())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="lgbm_s_mono")
    ap.add_argument("--spend-per-active", type=float, default=1.0)
    ap.add_argument("--gain", type=float, default=1.0)
    ap.add_argument("--arms", nargs="+", default=["ratio", "dual", "alone", "alone_prior"])
    args = ap.parse_args()
    rec = Recorder("pacing")

    from promo_assets.decisions.pacing import PeriodBudget

    tmp = Path(tempfile.mkdtemp(prefix="pacing-bench-"))
    try:
        t0 = time.perf_counter()
        _, pop, values, costs = decided_campaign(tmp, users=args.users, days=RCT_DAYS, seed=args.seed,
                                                 model=args.model, start=START,
                                                 yaml_extra="exploration:\n  share: 0\n")
        print(f"champion trained by promo run in {time.perf_counter() - t0:.0f}s", flush=True)
        base = tmp / "landing" / "demo"
        users = pop["user_id"].astype(str).to_numpy()
        seen = [pd.read_parquet(p, columns=["user_id"])["user_id"].nunique() for p in sorted((base / "events").glob("*.parquet"))]
        prior = float(np.mean(seen)) / len(users)
        start = START + dt.timedelta(days=RCT_DAYS)
        budget = PeriodBudget(total=args.spend_per_active * float(np.mean(seen)) * args.days, start=start,
                              end=start + dt.timedelta(days=args.days - 1), gain=args.gain)
        print(f"total budget {budget.total:.1f} over {budget.days} days ({budget.start} .. {budget.end}); "
              f"{len(users)} users decided for a day, prior share coming back {prior:.3f}", flush=True)
        arms = {}
        for arm in args.arms:
            t1 = time.perf_counter()
            arms[arm] = run_arm(arm, base, tmp / "arms", users, values, costs, budget, prior)
            arms[arm]["seconds"] = round(time.perf_counter() - t1, 1)
            a = arms[arm]
            print(f"\n{arm}: realized {a['realized_total']:.1f} = {100 * a['realized_over_total']:.2f}% of the total; "
                  f"true response {a['true_response']:.1f}", flush=True)
            print(f"  {'day':>10} {'plan':>9} {'lambda':>8} {'predicted':>10} {'realized':>9} {'cum':>9} {'even':>9}")
            for r in a["days"]:
                print(f"  {r['day']:>10} {r['plan']:9.1f} {r['lambda_']:8.4f} {r['predicted']:10.1f} {r['realized']:9.1f} "
                      f"{r['cumulative_realized']:9.1f} {r['cumulative_even_plan']:9.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base_resp = arms.get("alone", {}).get("true_response")
    for a in arms.values():
        a["true_response_vs_alone"] = a["true_response"] / base_resp if base_resp else None
    fig = {"total": budget.total, "days": budget.days, "users": args.users, "model": args.model, "prior_share": prior,
           "gain": args.gain, "arms": arms}
    headline = {f"{k}_realized_over_total": v["realized_over_total"] for k, v in arms.items()}
    headline.update({f"{k}_true_response_vs_alone": v["true_response_vs_alone"] for k, v in arms.items()})
    print("\n" + "  ".join(f"{k}: {100 * v['realized_over_total']:.2f}% of total, response x{v['true_response_vs_alone'] or 0:.3f}"
                           for k, v in arms.items()))
    rec.write(fig, headline=headline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
