"""How large a planted change of the simulator is, on the truth alone: what a champion that does not
react loses, and what the coupon system's compliance and the population shift do.

For each seed, three demo campaigns (`promo_assets.simulation.simulate`), each with one planted change
on day 12 after 3 RCT days, and:

- response shift (`--response-shift`): the oracle's allocation on the day before the change (the MCKP
  optimum of the true curves at budget B, the best an unchanged champion can be) kept on the change
  day; its true value there as a % of the new oracle's value at the same true spend (`truth_on`),
  and its spend against B. 100 - that % is the loss of the best unchanged champion, in points of
  the oracle (the same figure for the population shift);
- compliance (`--compliance C`): the change day's events answering that allocation: the share of
  active decided users who got the cheapest level although their decided level was another (≈ 1 - C);
- population shift (`--population-shift`): on the population file of the change day, the share of
  users in a category the RCT days never saw, and the share of avg_spend values beyond the RCT
  days' maximum.

    .venv/bin/python benchmarks/simulated_change.py [--seeds 0 1 2 3 4] [--users 5000] [--budget 1.0]
        [--response-shift SPEC] [--population-shift SPEC] [--compliance C]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

START = REFERENCE_START
CHANGE = START + dt.timedelta(days=11)  # day 12, as in the monitoring benchmark's cases
RESPONSE_SHIFT = "city=chengdu:uplift=-1,city=beijing:uplift=3"
POPULATION_SHIFT = "city=shenzhen:share=0.2,avg_spend:scale=8:share=0.3"


def _campaign(root: Path, name: str, seed: int, args, **change) -> Path:
    from promo_assets.simulation import Change, SimulationRequest, simulate

    request = SimulationRequest(name, root, days=3, users=args.users, seed=seed, start=START)
    return simulate("demo", request, change=Change(CHANGE, **change)).campaign_dir


def _kept(campaign_dir: Path, budget: float) -> tuple[np.ndarray, float]:
    """The oracle's allocation of the day before the change and its % of that day's oracle."""
    from promo_assets.allocation import solve
    from promo_assets.simulation import truth_on

    v0, c0 = truth_on(campaign_dir, CHANGE - dt.timedelta(days=1))
    res = solve(v0, c0, budget, per_capita=True, rounding="down")
    rows = np.arange(v0.shape[0])
    return res.levels, float(v0[rows, res.levels].sum() / res.lp_response)


def _loss(campaign_dir: Path, kept: np.ndarray) -> tuple[float, float]:
    """(points of the change day's oracle at the same true spend lost by `kept`, its true spend)."""
    from promo_assets.allocation import solve
    from promo_assets.simulation import truth_on

    v1, c1 = truth_on(campaign_dir, CHANGE)
    rows = np.arange(v1.shape[0])
    value, spend = float(v1[rows, kept].mean()), float(c1[rows, kept].mean())
    oracle = float(solve(v1, c1, spend, per_capita=True, rounding="down").lp_response) / rows.size
    return 100 - 100 * value / oracle, spend


def _answer(campaign_dir: Path, kept: np.ndarray, root: Path):
    """The loop answers the day before the change and the change day with `kept`."""
    from promo_assets.simulation import respond

    decisions = pd.DataFrame({"user_id": [f"u{i:07d}" for i in range(kept.size)], "level": kept, "propensity": 1.0})
    decisions.to_parquet(root / "dec.parquet")
    respond(campaign_dir, root / "dec.parquet", CHANGE - dt.timedelta(days=1))
    answered = respond(campaign_dir, root / "dec.parquet", CHANGE)
    events = pd.read_parquet(campaign_dir / "events" / f"{CHANGE.isoformat()}.parquet")
    decided = pd.Series(kept, index=decisions["user_id"]).loc[events["user_id"]].to_numpy()
    return answered, events, decided


def one_seed(seed: int, args, root: Path) -> dict:
    response = _campaign(root, f"r{seed}", seed, args, response_shift=args.response_shift)
    kept, pct_before = _kept(response, args.budget)
    points_lost, spend = _loss(response, kept)

    population = _campaign(root, f"p{seed}", seed, args, population_shift=args.population_shift)
    population_points_lost, _ = _loss(population, kept)
    _answer(population, kept, root)
    train = pd.read_parquet(population / "population" / f"{(START + dt.timedelta(days=2)).isoformat()}.parquet")
    shifted = pd.read_parquet(population / "population" / f"{CHANGE.isoformat()}.parquet")

    compliance = _campaign(root, f"c{seed}", seed, args, compliance=args.compliance)
    answered, events, decided = _answer(compliance, kept, root)
    not_cheapest = decided != 0
    return {
        "seed": seed, "pct_oracle_before_change": 100 * pct_before,
        "points_lost": points_lost, "true_spend_after_change": spend,
        "population_shift_points_lost": population_points_lost,
        "share_new_city": float((~shifted["city"].isin(set(train["city"]))).mean()),
        "share_avg_spend_beyond_training_max": float((shifted["avg_spend"] > train["avg_spend"].max()).mean()),
        "events_on_change_day": int(len(events)), "decided_not_cheapest": int(not_cheapest.sum()),
        "share_not_applied": float((events["treatment"].to_numpy()[not_cheapest] == 0.0).mean()),
        "not_applied_reported": int(answered.details["not_applied"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--response-shift", default=RESPONSE_SHIFT)
    ap.add_argument("--population-shift", default=POPULATION_SHIFT)
    ap.add_argument("--compliance", type=float, default=0.8)
    args = ap.parse_args()
    rec = Recorder("simulated_change")
    with tempfile.TemporaryDirectory(prefix="simulated-change-") as tmp:
        seeds = [one_seed(s, args, Path(tmp)) for s in args.seeds]
    frame = pd.DataFrame(seeds)
    print(frame.round(4).to_string(index=False))
    summary = {k: {"mean": float(frame[k].mean()), "min": float(frame[k].min()), "max": float(frame[k].max())}
               for k in ("points_lost", "true_spend_after_change", "population_shift_points_lost", "share_not_applied",
                         "share_new_city", "share_avg_spend_beyond_training_max")}
    result = {"preset": "demo", "users": args.users, "budget": args.budget, "start": START.isoformat(),
              "change_day": CHANGE.isoformat(), "response_shift": args.response_shift,
              "population_shift": args.population_shift, "compliance": args.compliance, "summary": summary,
              "seeds": seeds}
    path = rec.write(result, headline={
        "points of the oracle lost by the best unchanged champion (mean, min)":
            f"{summary['points_lost']['mean']:.2f}, {summary['points_lost']['min']:.2f}",
        "share of decisions not applied (compliance)": f"{summary['share_not_applied']['mean']:.3f} "
                                                       f"(1 - {args.compliance})",
        "share of users in a new city": round(summary["share_new_city"]["mean"], 3)})
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
