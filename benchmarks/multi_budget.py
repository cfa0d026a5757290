"""Several budgets at once (`solve_multi`, DIPN Eq. 4) on a demo campaign: a second cost type and one
group cap, against the single-budget path.

A demo campaign (--days RCT days, --users users) goes through `promo run` (the champion pinned to
--model); the champion's predicted response and coupon cost for the population file's users are
the coefficients. The budgets:

1. the coupon budget: --budget per user (as `budget_per_capita`);
2. a second cost type, an SMS sent with every non-zero incentive (--sms per message): at most
   --sms-share of the users may get one (budget --sms-share × N × --sms);
3. a group cap: the coupon spend on the users of one city (--city) at most --cap × --budget per
   user of that city.

It reports, for `solve_multi` with the three budgets and for `solve` with the coupon budget alone:
each budget's use by the allocation as predicted (≤ budget) and in truth (the simulator's expected
coupon cost of each user's level; the SMS cost is exact), the multipliers, the true response, the
oracle's true response under the same three budgets on the true curves (`solve_multi` on the truth),
and the wall time of each solve (median of --repeats). At matched true spend: the coupon budget and
the group cap scaled by one factor (bisection) until the allocation's true coupon spend equals the
coupon budget; then each budget's true use (the group cap must hold in truth too).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/multi_budget.py [--users 5000] [--budget 1.0]
        [--sms 0.05] [--sms-share 0.4] [--city c0] [--cap 0.6] [--repeats 5]

Records benchmarks/results/multi_budget.json (benchmarks/_results.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _champion_campaign import decided_campaign  # noqa: E402
from _results import Recorder  # noqa: E402


def _timed(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, float(np.median(times))


def usage(levels, coupon, sms, group) -> list[float]:
    r = np.arange(len(levels))
    c = coupon[r, levels]
    return [float(c.sum()), float(sms[r, levels].sum()), float(c[group].sum())]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="lgbm_s_mono")
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--sms", type=float, default=0.05)
    ap.add_argument("--sms-share", type=float, default=0.4)
    ap.add_argument("--city", default=None, help="the capped group's city [the most frequent]")
    ap.add_argument("--cap", type=float, default=0.6)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rec = Recorder("multi_budget")

    from promo_assets.allocation import solve, solve_multi
    from promo_assets.simulation import truth_arrays

    tmp = Path(tempfile.mkdtemp(prefix="multi-bench-"))
    try:
        state, pop, values, coupon = decided_campaign(tmp, users=args.users, days=args.days, seed=args.seed,
                                                      model=args.model)
        true_v, true_c = truth_arrays(tmp / "landing" / "demo", pop["user_id"].astype(str).tolist())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    n, k = values.shape
    city = args.city or str(pop["city"].value_counts().index[0])
    group = (pop["city"].astype(str) == city).to_numpy()
    incentives = np.asarray(state.incentives)
    sms = np.broadcast_to(np.where(incentives > 0, args.sms, 0.0), (n, k)).copy()
    budgets = np.array([args.budget * n, args.sms_share * n * args.sms, args.cap * args.budget * group.sum()])
    costs = [coupon, sms, coupon * group[:, None]]
    true_costs = [true_c, sms, true_c * group[:, None]]

    multi, t_multi = _timed(lambda: solve_multi(values, costs, budgets, rounding="down"), args.repeats)
    single, t_single = _timed(lambda: solve(values, coupon, args.budget, per_capita=True, rounding="down"), args.repeats)
    oracle = solve_multi(true_v, true_costs, budgets, rounding="down")
    # at matched spend: the coupon-cost budgets (the coupon budget and the group cap) scaled by s so that
    # the allocation's true coupon spend equals the coupon budget (bisection on s), the SMS budget as is
    lo, hi, matched = 0.5, 1.5, None
    for _ in range(14):
        s = 0.5 * (lo + hi)
        trial = solve_multi(values, costs, budgets * np.array([s, 1.0, s]), rounding="down")
        if usage(trial.levels, true_c, sms, group)[0] > budgets[0]:
            hi = s
        else:
            lo, matched = s, (s, trial)
    r = np.arange(n)
    out = {}
    for name, levels in (("multi", multi.levels), ("single", np.asarray(single.levels))):
        pred = usage(levels, coupon, sms, group)
        truth = usage(levels, true_c, sms, group)
        out[name] = {"predicted_use": pred, "true_use": truth,
                     "predicted_use_over_budget": [u / b for u, b in zip(pred, budgets)],
                     "true_use_over_budget": [u / b for u, b in zip(truth, budgets)],
                     "every_budget_respected_predicted": bool(all(u <= b * (1 + 1e-9) for u, b in zip(pred, budgets))),
                     "true_response": float(true_v[r, levels].sum()), "predicted_response": float(values[r, levels].sum())}
    s_m, at = matched
    truth = usage(at.levels, true_c, sms, group)
    out["multi_at_matched_true_spend"] = {
        "coupon_budget_scale": s_m, "true_use": truth, "true_use_over_budget": [u / b for u, b in zip(truth, budgets)],
        "every_budget_respected_in_truth": bool(all(u <= b * (1 + 1e-9) for u, b in zip(truth, budgets))),
        "multipliers": [float(x) for x in at.multipliers], "true_response": float(true_v[r, at.levels].sum())}
    out["multi"]["multipliers"] = [float(x) for x in multi.multipliers]
    out["multi"]["relative_gap"] = float(multi.relative_gap)
    out["single"]["lambda_"] = float(single.lambda_)
    oracle_true = float(true_v[r, oracle.levels].sum())
    fig = {"users": n, "levels": k, "budget_names": ["coupon", "sms", f"coupon in city {city}"],
           "budgets": budgets.tolist(), "group_users": int(group.sum()), "settings": vars(args), **out,
           "oracle_under_the_three_budgets_true_response": oracle_true,
           "multi_pct_of_oracle": out["multi"]["true_response"] / oracle_true,
           "seconds": {"solve_multi": t_multi, "solve_single": t_single, "ratio": t_multi / t_single}}
    names = fig["budget_names"]
    print(f"{n} users, {k} levels; budgets: " + ", ".join(f"{a} {b:.1f}" for a, b in zip(names, budgets)))
    for name in ("multi", "single"):
        o = out[name]
        print(f"{name:7} use/budget predicted " + " ".join(f"{x:.3f}" for x in o["predicted_use_over_budget"])
              + "  true " + " ".join(f"{x:.3f}" for x in o["true_use_over_budget"])
              + f"  true response {o['true_response']:.1f}")
    m = out["multi_at_matched_true_spend"]
    print(f"at matched true spend (coupon budgets x{m['coupon_budget_scale']:.3f}): true use/budget "
          + " ".join(f"{x:.3f}" for x in m["true_use_over_budget"]) + f"  true response {m['true_response']:.1f}")
    print(f"multipliers {out['multi']['multipliers']}; single λ {out['single']['lambda_']:.4f}; "
          f"multi {100 * fig['multi_pct_of_oracle']:.2f}% of the oracle under the same budgets; "
          f"time multi {t_multi * 1e3:.1f} ms vs single {t_single * 1e3:.1f} ms")
    rec.write(fig, headline={"every_budget_respected_predicted": out["multi"]["every_budget_respected_predicted"],
                             "true_use_over_budget": out["multi"]["true_use_over_budget"],
                             "at_matched_true_spend_true_use_over_budget": m["true_use_over_budget"],
                             "multipliers": out["multi"]["multipliers"], "time_ratio_multi_over_single": t_multi / t_single})
    return 0


if __name__ == "__main__":
    sys.exit(main())
