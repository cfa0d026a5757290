"""Issue #13: the honest leaderboard, every registered model and the cost-matched random reference at
equal spend, on `demo`, `dipn_synthetic_2`, `e2e_synthetic` and `bipartite` (customer side), 5 seeds.

Each (preset, seed) goes through the library path of the pipeline (`_honest_bench.evaluate_campaign`:
simulate -> events -> propensity / split / IPS weights -> every model in
`promo_assets.models.registry` trained on the training days -> DR outcome model ->
`evaluate_policies`, as the `policy_evaluation` asset calls it). Prints:

- one table: mean pct_oracle (true value at matched true spend / the oracle's) and mean spend ratio
  (true cost of the allocation as made / budget) per model x preset, over seeds and budgets;
- the checks of issue #13: max pct_oracle over every row (must be <= 1), the largest
  |matched true cost / budget - 1| per model (must be <= 0.5 %), the random reference's largest
  |EOM cost / budget - 1| (must be <= 1 %);
- then one JSON object with every figure.

    .venv/bin/python benchmarks/leaderboard.py [--seeds 0 1 2 3 4] [--presets ...] [--days D --users N]
        [--max-epochs 20] [--n-boot 200] [--save-rows benchmarks/results/leaderboard_rows.parquet]
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

PRESETS = ("demo", "dipn_synthetic_2", "e2e_synthetic", "bipartite")


def summarize(rows: pd.DataFrame) -> dict:
    rows = rows.copy()
    rows["matched_cost_error"] = (rows["matched_true_cost"] / rows["budget_per_capita"] - 1).abs()
    rows["eom_cost_error"] = (rows["eom_cost"] / rows["budget_per_capita"] - 1).abs()
    table = rows.groupby(["model", "preset"]).agg(pct_oracle=("pct_oracle", "mean"),
                                                  spend_ratio=("spend_ratio", "mean"),
                                                  rows=("pct_oracle", "size")).reset_index()
    per_model = rows.groupby("model").agg(max_pct_oracle=("pct_oracle", "max"),
                                          max_matched_cost_error=("matched_cost_error", "max"),
                                          empty_pct_rows=("pct_oracle", lambda s: int(s.isna().sum())))
    rnd = rows[rows["model"] == "random"]
    return {
        "table": table.to_dict(orient="records"),
        "per_model": per_model.reset_index().to_dict(orient="records"),
        "max_pct_oracle": float(rows["pct_oracle"].max()),
        "rows_above_1": int((rows["pct_oracle"] > 1).sum()),
        "max_matched_cost_error": float(rows["matched_cost_error"].max()),
        "random_max_eom_cost_error": float(rnd["eom_cost_error"].max()),
        "notes": sorted({n for n in rows["note"] if n}),
    }


def print_table(summary: dict, presets) -> None:
    table = pd.DataFrame(summary["table"])
    cell = {(r.model, r.preset): f"{100 * r.pct_oracle:5.1f}% / {r.spend_ratio:.3f}" for r in table.itertuples()}
    models = sorted(set(table["model"]), key=lambda m: (m == "random", m))
    width = 20
    print("mean % oracle at matched true spend / mean spend ratio as made (over seeds and budgets)")
    print(f"{'model':12}" + "".join(f"{p:>{width}}" for p in presets))
    for m in models:
        print(f"{m:12}" + "".join(f"{cell.get((m, p), '-'):>{width}}" for p in presets))
    print(f"max pct_oracle over all rows: {summary['max_pct_oracle']:.4f} ({summary['rows_above_1']} rows above 1)")
    for r in summary["per_model"]:
        print(f"{r['model']:12} max pct_oracle {r['max_pct_oracle']:.4f}; max |matched true cost / budget - 1| "
              f"{100 * r['max_matched_cost_error']:.3f}%; rows without pct_oracle {r['empty_pct_rows']}")
    print(f"random reference: max |EOM cost / budget - 1| {100 * summary['random_max_eom_cost_error']:.2e}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, PRESETS)
    ap.add_argument("--save-rows", type=Path, default=None,
                    help="also write every policy_evaluation row (parquet), e.g. for eom_coverage.py --rows")
    args = ap.parse_args()
    frames, runs = [], []
    for preset in args.presets:
        for seed in args.seeds:
            rows, info = evaluate_campaign(preset, seed, days=args.days, users=args.users,
                                           max_epochs=args.max_epochs, n_boot=args.n_boot)
            frames.append(rows)
            runs.append(info)
            if args.save_rows:  # after every campaign, so that an interrupted run keeps what it did
                args.save_rows.parent.mkdir(parents=True, exist_ok=True)
                pd.concat(frames, ignore_index=True).drop(columns=["evaluated_at"]).to_parquet(args.save_rows)
            print(f"{preset} seed {seed}: " + ", ".join(
                f"{r.model}@{r.budget_per_capita:g} {100 * r.pct_oracle:.1f}% (spend {r.spend_ratio:.3f})"
                for r in rows.itertuples()) + f"  [{info}]", flush=True)
    rows = pd.concat(frames, ignore_index=True)
    summary = summarize(rows)
    print_table(summary, args.presets)
    print(json.dumps({"benchmark": "leaderboard", "seeds": args.seeds, "presets": args.presets,
                      "max_epochs": args.max_epochs, **summary, "runs": runs},
                     default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


if __name__ == "__main__":
    main()
