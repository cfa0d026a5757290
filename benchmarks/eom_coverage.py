"""EOM interval coverage, IPW vs doubly robust: does the true value lie inside the 95% interval, and
how wide is it? On `demo` (K = 6) and `dipn_synthetic_2` (K = 100), 5 seeds each.

Each (preset, seed) goes through the production pipeline (`_pipeline_bench.evaluate_campaign`:
`promo simulate` into a temporary landing folder, `promo run`, then the `policy_evaluation` rows).
For every (policy, budget) row, the random reference included, the allocation's true value on the
holdout (from the simulator's truth) is checked against [eom_ci_low, eom_ci_high] (self-normalized
IPW EOM, 200-replicate Poisson bootstrap) and [dr_ci_low, dr_ci_high] (doubly robust EOM,
`dr_interval`: influence-function variance, Student-t quantile on the effective matched events).
Prints one line per (preset, seed), a table of coverage and mean interval width per preset and
estimator (all rows, then the models' rows and the random reference's apart), then one JSON object.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/eom_coverage.py [--seeds 0 1 2 3 4]
        [--presets demo dipn_synthetic_2] [--days D --users N] [--max-epochs 20] [--rows FILE]

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

from _pipeline_bench import add_arguments, evaluate_campaign  # noqa: E402
from _results import Recorder  # noqa: E402

ESTIMATORS = {"IPW": ("eom_value", "eom_ci_low", "eom_ci_high"), "DR": ("dr_value", "dr_ci_low", "dr_ci_high")}


def coverage(rows: pd.DataFrame) -> dict:
    """Per estimator: rows with an interval, how many contain the true value, mean width, mean |error|;
    the same for the models' rows and for the random reference's apart ("IPW models", "DR random", ...)."""
    out = {}
    parts = [("", rows)]
    if len(rows):
        parts += [(" models", rows[rows["model"] != "random"]), (" random", rows[rows["model"] == "random"])]
    for (name, (value, lo, hi)), (suffix, part) in ((e, p) for p in parts for e in ESTIMATORS.items()):
        r = part[part[lo].notna() & part[hi].notna() & part["true_value"].notna()]
        inside = (r[lo] <= r["true_value"]) & (r["true_value"] <= r[hi])
        out[name + suffix] = {"pairs": int(len(r)), "inside": int(inside.sum()),
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
    rec = Recorder("eom_coverage")
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
                        "from": str(args.rows)}
            else:
                rows, info = evaluate_campaign(preset, seed, days=args.days, users=args.users,
                                               max_epochs=args.max_epochs)
            frames.append(rows)
            c = coverage(rows)
            info["coverage"] = c
            runs.append(info)
            print(f"{preset} seed {seed}: " + "; ".join(
                f"{e} {c[e]['inside']}/{c[e]['pairs']} inside, mean width {c[e]['mean_width']:.4f}" for e in ESTIMATORS)
                + f"  [{info['holdout_events']} holdout events]", flush=True)
        if frames:
            results[preset] = coverage(pd.concat(frames, ignore_index=True))
    print(f"{'preset':18}{'estimator':>14}{'coverage':>14}{'mean width':>12}{'mean |err|':>12}")
    for preset, res in results.items():
        for e, v in res.items():
            print(f"{preset:18}{e:>14}{v['inside']:>6}/{v['pairs']:<3} {100 * v['coverage']:3.0f}%"
                  f"{v['mean_width']:>12.4f}{v['mean_abs_error']:>12.4f}")
    figures = {"benchmark": "eom_coverage", "seeds": args.seeds, "max_epochs": args.max_epochs,
               "path": "promo simulate + promo run (production pipeline)", "results": results,
               "target_coverage": 0.9, "runs": runs}
    print(json.dumps(figures, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    rec.write(figures, headline={f"{p}, {e}: true value inside the 95% interval": f"{v['inside']}/{v['pairs']}"
                                for p, res in results.items() for e, v in res.items() if " " not in e})


if __name__ == "__main__":
    main()
