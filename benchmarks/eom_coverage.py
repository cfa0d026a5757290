"""EOM interval coverage, IPW vs doubly robust: does the true value lie inside the 95% interval, and
how wide is it? On `demo` (K = 6) and `dipn_synthetic_2` (K = 100), 5 seeds each.

Each (preset, seed) goes through the library path of the pipeline (`_honest_bench.evaluate_campaign`:
simulate -> events -> propensity / split / IPS weights -> every registered model trained on the
training days -> DR outcome model fitted on the training days -> `evaluate_policies`, as the
`policy_evaluation` asset calls it). For every (policy, budget) row, the random reference included,
the allocation's true value on the holdout (from the simulator's truth) is checked against
[eom_ci_low, eom_ci_high] (self-normalized IPW EOM, Poisson bootstrap) and [dr_ci_low, dr_ci_high]
(doubly robust EOM, same bootstrap, outcome model held fixed). Prints one line per (preset, seed), a
table of coverage and mean interval width per preset and estimator, then one JSON object.

    .venv/bin/python benchmarks/eom_coverage.py [--seeds 0 1 2 3 4] [--presets demo dipn_synthetic_2]
        [--days D --users N] [--max-epochs 20] [--n-boot 200] [--rows FILE]

`--rows FILE` reads the rows that `benchmarks/leaderboard.py --save-rows FILE` wrote (the same
campaigns, sizes and seeds), instead of training everything again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _honest_bench import add_arguments, evaluate_campaign  # noqa: E402

ESTIMATORS = {"IPW": ("eom_value", "eom_ci_low", "eom_ci_high"), "DR": ("dr_value", "dr_ci_low", "dr_ci_high")}


def coverage(rows: pd.DataFrame) -> dict:
    """Per estimator: rows with an interval, how many contain the true value, mean width, mean |error|."""
    out = {}
    for name, (value, lo, hi) in ESTIMATORS.items():
        r = rows[rows[lo].notna() & rows[hi].notna() & rows["true_value"].notna()]
        inside = (r[lo] <= r["true_value"]) & (r["true_value"] <= r[hi])
        out[name] = {"pairs": int(len(r)), "inside": int(inside.sum()),
                     "coverage": float(inside.mean()) if len(r) else float("nan"),
                     "mean_width": float((r[hi] - r[lo]).mean()),
                     "mean_abs_error": float((r[value] - r["true_value"]).abs().mean())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, ["demo", "dipn_synthetic_2"])
    ap.add_argument("--rows", type=Path, default=None,
                    help="read the rows written by leaderboard.py --save-rows instead of recomputing them")
    args = ap.parse_args()
    saved = pd.read_parquet(args.rows) if args.rows else None
    results, runs = {}, []
    for preset in args.presets:
        frames = []
        for seed in args.seeds:
            if saved is not None:
                rows = saved[(saved["preset"] == preset) & (saved["seed"] == seed)]
                if rows.empty:
                    continue
                info = {"preset": preset, "seed": seed, "holdout_events": int(rows["n_users"].max()),
                        "levels": "?", "from": str(args.rows)}
            else:
                rows, info = evaluate_campaign(preset, seed, days=args.days, users=args.users,
                                               max_epochs=args.max_epochs, n_boot=args.n_boot)
            frames.append(rows)
            c = coverage(rows)
            info["coverage"] = c
            runs.append(info)
            print(f"{preset} seed {seed}: " + "; ".join(
                f"{e} {v['inside']}/{v['pairs']} inside, mean width {v['mean_width']:.4f}" for e, v in c.items())
                + f"  [{info['holdout_events']} holdout events, K = {info['levels']}]", flush=True)
        if frames:
            results[preset] = coverage(pd.concat(frames, ignore_index=True))
    print(f"{'preset':18}{'estimator':>10}{'coverage':>14}{'mean width':>12}{'mean |err|':>12}")
    for preset, res in results.items():
        for e, v in res.items():
            print(f"{preset:18}{e:>10}{v['inside']:>6}/{v['pairs']:<3} {100 * v['coverage']:3.0f}%"
                  f"{v['mean_width']:>12.4f}{v['mean_abs_error']:>12.4f}")
    print(json.dumps({"benchmark": "eom_coverage", "seeds": args.seeds, "max_epochs": args.max_epochs,
                      "n_boot": args.n_boot, "results": results, "target_coverage": 0.9, "runs": runs},
                     default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


if __name__ == "__main__":
    main()
