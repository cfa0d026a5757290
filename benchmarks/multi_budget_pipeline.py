"""Several budgets end to end: `promo run` on the demo with a second cost type and a group cap, against
the same campaign without them, side by side in one run.

One demo campaign is simulated (--days RCT days, --users users, the models of --models); two copies of
it go through `promo run` in their own folders (landing root, warehouse, artefact store, outbox,
DAGSTER_HOME), one after the other:

- `single`: campaign.yaml as simulated (one budget per `budget_per_capita`: the single-budget path);
- `several`: the same plus campaign.yaml `constraints:` — an SMS cost type (--sms per non-zero
  incentive, a budget of --sms-budget per user) and a cap on the coupon spend of one city (--city,
  --cap per member), as scripts/loop_demo.sh's LOOP_CONSTRAINTS=1.

Recorded for each: the wall time of `promo run` and of its model-chain and decision steps (Dagster's
step statistics), and for every model and budget: each budget's use over the budget by the model's
allocation as predicted (the `allocation` table against the coefficients; for `single`, the SMS and
city budgets it would have had to keep), the multipliers (`budget_multipliers`), and the truth: each
budget's true use by the allocation, and at matched true spend (`allocation.budgets.use_at_matched_spend`:
the incentive budget and the group cap scaled until the allocation's true incentive spend is the
budget); and the champion's decisions' `budget_use` (the manifest). Every budget is respected when
each use / budget ≤ 1.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/multi_budget_pipeline.py [--users 3000] [--days 3]
        [--models lgbm_s_mono lgbm_s] [--sms 0.05] [--sms-budget 0.02] [--city shanghai] [--cap 0.4]

Records benchmarks/results/multi_budget_pipeline.json (benchmarks/_results.py).
"""

from __future__ import annotations

import argparse
import json
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
from run_time_ab import step_seconds  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

CAMPAIGN = "demo"


def promo(env: dict, *args: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"promo {' '.join(args)} failed: {(done.stdout + done.stderr)[-3000:]}")
    return time.perf_counter() - t0


def measure(tmp: Path, arm: str, models: list[str], cost_types: dict, groups_block: dict) -> dict:
    """The arm's allocations against every budget (predicted, true, true at matched spend)."""
    from promo_assets.allocation.budgets import budget_matrices, usage, use_at_matched_spend
    from promo_assets.simulation import truth_arrays
    from promo_assets.store.warehouse import connect

    campaign_dir = tmp / "landing" / CAMPAIGN
    pop = pd.read_parquet(sorted((campaign_dir / "population").glob("*.parquet"))[-1])
    pop = pop.assign(user_id=pop["user_id"].astype(str)).set_index("user_id")
    out = {}
    with connect(tmp / "warehouse.duckdb", read_only=True) as con:
        for model in models:
            version = con.execute("SELECT model_version FROM allocation WHERE model = ? ORDER BY allocated_at DESC "
                                  "LIMIT 1", [model]).fetchone()[0]
            coef = con.execute("SELECT user_id, level, response, cost FROM response_coefficients WHERE model = ? AND "
                               "model_version = ? AND target = 'population' ORDER BY user_id, level",
                               [model, version]).df()
            k = int(coef["level"].max()) + 1
            users = coef["user_id"].astype(str).to_numpy()[::k]
            values, costs = (coef[c].to_numpy().reshape(-1, k) for c in ("response", "cost"))
            true_v, true_c = truth_arrays(campaign_dir, users.tolist())
            groups = {g: ((pop.loc[users, b["feature"]].astype(str) == str(b["equals"])).to_numpy(), b["budget_per_capita"])
                      for g, b in groups_block.items()}
            alloc = con.execute("SELECT budget_per_capita, user_id, level FROM allocation WHERE model = ? AND "
                                "model_version = ? AND run_id = (SELECT max_by(run_id, allocated_at) FROM allocation "
                                "WHERE model = ?)", [model, version, model]).df()
            mult = con.execute("SELECT budget_per_capita, constraint_name, multiplier FROM budget_multipliers WHERE "
                               "model = ? AND model_version = ? AND target = 'population'", [model, version]).df()
            per_budget = {}
            for b, got in alloc.groupby("budget_per_capita"):
                lv = got.set_index(got["user_id"].astype(str))["level"].loc[users].to_numpy().astype(int)
                mats, totals = budget_matrices(costs, b, cost_types, groups)
                true_mats, _ = budget_matrices(true_c, b, cost_types, groups)
                matched = use_at_matched_spend(values, costs, true_mats, b, cost_types, groups) if arm == "several" \
                    else None
                pred, true = usage(mats, lv), usage(true_mats, lv)
                mu = mult[mult["budget_per_capita"] == b]
                per_budget[f"{b:g}"] = {
                    "budgets": totals.tolist(),
                    "predicted_use_over_budget": (pred / totals).tolist(),
                    "true_use_over_budget": (true / totals).tolist(),
                    "every_budget_respected_predicted": bool(np.all(pred <= totals * (1 + 1e-9))),
                    "multipliers": dict(zip(mu["constraint_name"], mu["multiplier"].astype(float))),
                    "true_response_per_user": float(true_v[np.arange(len(lv)), lv].mean()),
                    **({"matched_true_spend": {
                        "scale": matched["scale"], "true_use_over_budget": matched["true_use_over_budget"],
                        "every_budget_respected_in_truth": bool(matched["true_use"] is not None and all(
                            u <= t * (1 + 1e-9) for u, t in zip(matched["true_use"], matched["budget"])))}}
                       if matched else {})}
            out[model] = {"model_version": version, "users": len(users), "budgets": per_budget}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=3000)
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", nargs="+", default=["lgbm_s_mono", "lgbm_s"])
    ap.add_argument("--sms", type=float, default=0.05)
    ap.add_argument("--sms-budget", type=float, default=0.02)
    ap.add_argument("--city", default="shanghai")
    ap.add_argument("--cap", type=float, default=0.4)
    args = ap.parse_args()
    rec = Recorder("multi_budget_pipeline")
    tmp = Path(tempfile.mkdtemp(prefix="multi-pipeline-"))
    try:
        base = tmp / "base"
        env = folder_env(base)
        promo(env, "simulate", "--preset", "demo", "--campaign", CAMPAIGN, "--days", str(args.days), "--users",
              str(args.users), "--seed", str(args.seed), "--start", REFERENCE_START.isoformat())
        doc = yaml.safe_load((base / "landing" / CAMPAIGN / "campaign.yaml").read_text())
        k = len(doc["treatments"]["levels"])
        levels = [0.0 if float(x) == 0 else args.sms for x in doc["treatments"]["levels"]]
        constraints = {"costs": {"sms": {"levels": levels, "budget_per_capita": args.sms_budget}},
                       "groups": {args.city: {"feature": "city", "equals": args.city, "budget_per_capita": args.cap}}}
        cost_types = {"sms": (np.asarray(levels), args.sms_budget)}
        arms = {}
        for arm in ("single", "several"):
            folder = tmp / arm
            env = folder_env(folder)
            shutil.copytree(base / "landing", folder / "landing")
            d = dict(doc, models={"include": list(args.models)}, exploration={"share": 0.05, "seed": 0})
            if arm == "several":
                d["constraints"] = constraints
            (folder / "landing" / CAMPAIGN / "campaign.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
            wall = promo(env, "run", "--campaign", CAMPAIGN, "--no-progress")
            steps = step_seconds(folder / "dagster_home")
            chain = {s: round(v, 2) for s, v in sorted(steps.items())
                     if s.split("__")[-1] in ("budget_dual", "allocation", "policy_evaluation") or s in ("decisions",
                                                                                                          "leaderboard")}
            outbox = sorted((folder / "outbox" / CAMPAIGN).iterdir())[-1]
            manifest = json.loads((outbox / "manifest.json").read_text())
            arms[arm] = {"promo_run_seconds": round(wall, 1), "step_seconds": chain,
                         "budget_steps_seconds": round(sum(chain.values()), 2),
                         "models": measure(folder, arm, list(args.models), cost_types, constraints["groups"]),
                         "decisions": [{k2: e.get(k2) for k2 in ("budget_per_capita", "lambda_", "multipliers", "budget_use")}
                                       for e in manifest["budgets"]]}
            print(f"{arm}: promo run {wall:.0f}s; budget steps {arms[arm]['budget_steps_seconds']:.1f}s: {chain}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    names = ["budget", "sms", f"group:{args.city}"]
    headline = {"promo run seconds single / several": f"{arms['single']['promo_run_seconds']} / "
                                                      f"{arms['several']['promo_run_seconds']}",
                "budget steps seconds single / several": f"{arms['single']['budget_steps_seconds']} / "
                                                         f"{arms['several']['budget_steps_seconds']}"}
    for model, m in arms["several"]["models"].items():
        for b, got in m["budgets"].items():
            headline[f"several {model} budget {b}: predicted use/budget"] = [round(x, 4) for x in got["predicted_use_over_budget"]]
            headline[f"several {model} budget {b}: true use/budget at matched spend"] = [
                round(x, 4) for x in got["matched_true_spend"]["true_use_over_budget"] or []]
            headline[f"several {model} budget {b}: multipliers"] = {k2: round(v, 5) for k2, v in got["multipliers"].items()}
            single = arms["single"]["models"][model]["budgets"].get(b)
            if single:
                headline[f"single {model} budget {b}: predicted use/budget"] = [
                    round(x, 4) for x in single["predicted_use_over_budget"]]
    fig = {"preset": "demo", "users": args.users, "rct_days": args.days, "seed": args.seed, "models": args.models,
           "budget_names": names, "constraints": constraints, "levels": k, "arms": arms}
    path = rec.write(fig, headline=headline)
    print(json.dumps({"written": str(path), "headline": headline}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
