"""The honest leaderboard: every registered model and the cost-matched random reference at
equal spend, on `demo`, `dipn_synthetic_2`, `e2e_synthetic` and `bipartite` (customer side), 5 seeds,
through the production pipeline.

Each (preset, seed) is simulated into a temporary landing folder and run with `promo run` (the CLI,
in a temporary warehouse / artefact store / DAGSTER_HOME, PROMO_MAX_EPOCHS=--max-epochs); its
`policy_evaluation` rows (the latest succeeded run of every model) are read back
(`_pipeline_bench.evaluate_campaign`). Every model the pipeline runs appears by itself. Prints:

- one line per (preset, seed): the exit code and wall time of `promo run`, the models evaluated;
- one table: mean pct_oracle (true value at matched true spend / the oracle's) and mean spend ratio
  (true cost of the allocation as made / budget) per model x preset, over seeds and budgets;
- the checks of issue #13, each with its count of violating rows: pct_oracle > 1; matched true cost
  more than 0.5 % from the budget (per model); the random reference's matched EOM cost more than
  1 % from the budget; rows without pct_oracle (with their notes); failed `promo run`s;
- then one JSON object with every figure and the timings.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/leaderboard.py [--seeds 0 1 2 3 4] [--presets ...]
        [--days D --users N] [--max-epochs 20] [--save-rows benchmarks/results/leaderboard_rows.parquet]
        [--rows FILE]   (summarize saved rows instead of running)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pipeline_bench import add_arguments, evaluate_campaign  # noqa: E402
from _results import Recorder  # noqa: E402

PRESETS = ("demo", "dipn_synthetic_2", "e2e_synthetic", "bipartite")
PCT_MAX = 1.0
MATCHED_COST_TOL = 0.005  # matched true cost within 0.5 % of the budget
RANDOM_EOM_COST_TOL = 0.01  # the random reference's matched EOM cost within 1 % of the budget


def summarize(rows: pd.DataFrame) -> dict:
    """The table (mean pct_oracle / spend ratio per model x preset) and the #13 checks with counts."""
    rows = rows.copy()
    b = rows["budget_per_capita"]
    rows["matched_cost_error"] = (rows["matched_true_cost"] / b - 1).abs()
    rows["eom_cost_error"] = (rows["eom_cost"] / b - 1).abs()
    rows["q_cost_error"] = (rows["q_cost"] / b - 1).abs()
    table = rows.groupby(["model", "preset"]).agg(
        pct_oracle=("pct_oracle", "mean"), spend_ratio=("spend_ratio", "mean"),
        rows=("pct_oracle", "size"), seeds=("seed", "nunique")).reset_index()
    per_model = rows.groupby("model").agg(
        max_pct_oracle=("pct_oracle", "max"),
        max_matched_cost_error=("matched_cost_error", "max"),
        matched_cost_violations=("matched_cost_error", lambda s: int((s > MATCHED_COST_TOL).sum())),
        empty_pct_rows=("pct_oracle", lambda s: int(s.isna().sum())),
        max_q_cost_error=("q_cost_error", "max")).reset_index()
    rnd = rows[rows["model"] == "random"]
    empty = rows[rows["pct_oracle"].isna()]
    return {
        "table": table.to_dict(orient="records"),
        "per_model": per_model.to_dict(orient="records"),
        "rows": int(len(rows)),
        "max_pct_oracle": float(rows["pct_oracle"].max()),
        "violations": {
            "pct_oracle_above_1": int((rows["pct_oracle"] > PCT_MAX).sum()),
            "matched_true_cost_off_by_more_than_0.5pct": int((rows["matched_cost_error"] > MATCHED_COST_TOL).sum()),
            "random_matched_eom_cost_off_by_more_than_1pct": int((rnd["eom_cost_error"] > RANDOM_EOM_COST_TOL).sum()),
            "rows_without_pct_oracle": int(len(empty)),
        },
        "max_matched_cost_error": float(rows["matched_cost_error"].max()),
        "random_max_eom_cost_error": float(rnd["eom_cost_error"].max()) if len(rnd) else float("nan"),
        "notes": sorted({f"{r.model}@{r.budget_per_capita:g} ({r.preset}): {r.note}" for r in rows.itertuples()
                         if isinstance(r.note, str) and r.note}),
    }


def print_table(summary: dict, presets) -> None:
    table = pd.DataFrame(summary["table"])
    if table.empty:
        print("(no policy_evaluation rows)")
        return
    cell = {(r.model, r.preset): f"{100 * r.pct_oracle:5.1f}% / {r.spend_ratio:.3f}" for r in table.itertuples()}
    models = sorted(set(table["model"]), key=lambda m: (m == "random", m))
    width = 20
    print("mean % oracle at matched true spend / mean spend ratio as made (over seeds and budgets)")
    print(f"{'model':14}" + "".join(f"{p:>{width}}" for p in presets))
    for m in models:
        print(f"{m:14}" + "".join(f"{cell.get((m, p), '-'):>{width}}" for p in presets))
    v = summary["violations"]
    print(f"{summary['rows']} rows; max pct_oracle {summary['max_pct_oracle']:.4f}")
    print(f"violations: pct_oracle > 1: {v['pct_oracle_above_1']}; matched true cost > 0.5% from the budget: "
          f"{v['matched_true_cost_off_by_more_than_0.5pct']}; random's matched EOM cost > 1% from the budget: "
          f"{v['random_matched_eom_cost_off_by_more_than_1pct']}; rows without pct_oracle: {v['rows_without_pct_oracle']}")
    for r in summary["per_model"]:
        print(f"  {r['model']:14} max pct_oracle {r['max_pct_oracle']:.4f}; max |matched true cost / budget - 1| "
              f"{100 * r['max_matched_cost_error']:.3f}% ({r['matched_cost_violations']} rows > 0.5%); "
              f"max |Q cost / budget - 1| {100 * r['max_q_cost_error']:.3f}%; rows without pct_oracle {r['empty_pct_rows']}")
    print(f"random reference: max |matched EOM cost / budget - 1| {100 * summary['random_max_eom_cost_error']:.2e}%")
    for note in summary["notes"]:
        print(f"  note: {note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap, PRESETS)
    ap.add_argument("--save-rows", type=Path, default=None,
                    help="also write every policy_evaluation row (parquet), e.g. for eom_coverage.py --rows")
    ap.add_argument("--rows", type=Path, default=None, help="summarize rows saved by --save-rows instead of running")
    args = ap.parse_args()
    rec = Recorder("leaderboard")
    frames, runs = [], []
    start = time.perf_counter()
    if args.rows:
        saved = pd.read_parquet(args.rows)
        frames = [saved[saved["preset"].isin(args.presets) & saved["seed"].isin(args.seeds)]]
    else:
        # seeds outer, presets inner: an interrupted run still has every preset for its first seeds
        for seed in args.seeds:
            for preset in args.presets:
                rows, info = evaluate_campaign(preset, seed, days=args.days, users=args.users,
                                               max_epochs=args.max_epochs)
                frames.append(rows)
                runs.append(info)
                if args.save_rows:  # after every campaign, so that an interrupted run keeps what it did
                    args.save_rows.parent.mkdir(parents=True, exist_ok=True)
                    pd.concat(frames, ignore_index=True).to_parquet(args.save_rows)
                print(f"{preset} seed {seed}: promo run exit {info['run_exit_code']} in {info['run_seconds']} s "
                      f"(simulate {info['simulate_seconds']} s), {info['holdout_events']} holdout events, "
                      f"models {', '.join(info['models']) or 'none'}", flush=True)
                if info["run_exit_code"] != 0:
                    print(f"  promo run failed: ...{info['run_output_tail'][-600:]}", flush=True)
    total = time.perf_counter() - start
    rows = pd.concat(frames, ignore_index=True)
    summary = summarize(rows)
    print_table(summary, args.presets)
    failed = [f"{r['preset']} seed {r['seed']}" for r in runs if r["run_exit_code"] != 0]
    run_secs = [r["run_seconds"] for r in runs]
    if runs:
        print(f"failed promo runs: {len(failed)} {failed if failed else ''}")
        print(f"wall time {total:.0f} s for {len(runs)} campaigns (promo run: mean {np.mean(run_secs):.0f} s, "
              f"max {np.max(run_secs):.0f} s)")
    figures = {"benchmark": "leaderboard", "path": "promo simulate + promo run (production pipeline)",
               "seeds": args.seeds, "presets": args.presets, "max_epochs": args.max_epochs,
               **summary, "failed_runs": failed, "wall_seconds": round(total, 1), "runs": runs}
    print(json.dumps(figures, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    rec.write(figures, headline={f"{r['preset']}: {r['model']} % oracle at matched true spend / spend ratio":
                                f"{100 * r['pct_oracle']:.1f}% / {r['spend_ratio']:.3f}" for r in summary["table"]}
              | {"failed promo runs": len(failed), **{f"violations: {k}": v for k, v in summary["violations"].items()}})


if __name__ == "__main__":
    main()
