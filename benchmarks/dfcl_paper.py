"""The DFCL paper's tables on our simulator: what DFCL gains over the two-stage S-learner.

Parts (`--parts`, default all):
  table3    Table 3 analogue. For each seed: `promo simulate --preset dfcl_discount` + `promo run`
            on the production path (benchmarks/_pipeline_bench.evaluate_campaign, with a campaign.yaml
            `models:` block including s_learner, dipn, lgbm_s_mono, dfcl_pl, dfcl_mer, dfcl_ifd and
            e2e_fd when registered); from the `policy_evaluation` rows: pct_oracle at matched true
            spend per budget (the campaign's six budgets, all from ONE trained model per variant:
            the number of model versions per model is printed) and its relative improvement over
            s_learner (TSM-SL), 100 (pct_m / pct_s_learner - 1), per budget and averaged; the seeds
            on which each model's mean pct_oracle beats s_learner's.
  table2    Table 2 analogue: AUCC (policy_evaluation's `aucc`, two-arm ROI ranking) on
            `uplift_two_arm` and its relative gain over s_learner, same route.
  ablation  Fig. 2 analogue, in process on dfcl_discount (simulated_events -> the registry's
            s_learner as warm start, then train_dfcl of `--ablation-model`): alpha in {0, 0.1, 1, 10}
            and grid sizes {1, 5, 20}; mean pct_oracle over the six budgets (evaluate_policies, the
            pipeline's evaluation) per setting.
  timing    seconds per epoch of each DFCL variant vs the S-learner, trained back to back in one
            process on the same frame (with the machine's load average: ratios are what matters).
Prints one JSON object per part (per-seed rows and summaries) and readable tables.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/dfcl_paper.py [--seeds 0 1 2 3 4] [--parts table3 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _honest_bench import simulated_events  # noqa: E402
from _pipeline_bench import evaluate_campaign  # noqa: E402
from _results import Recorder  # noqa: E402

from promo_assets.evaluation import (  # noqa: E402
    BootstrapInterval,
    EvaluationSettings,
    Holdout,
    LevelScale,
    LoggedEvents,
    Truth,
    evaluate_policies,
)
from promo_assets.models import registry  # noqa: E402
from promo_assets.models.dfcl import train_dfcl, warm_start  # noqa: E402
from promo_assets.models.protocol import TrainingData  # noqa: E402
from promo_assets.simulation import truth_arrays  # noqa: E402

DFCL = ("dfcl_pl", "dfcl_mer", "dfcl_ifd")
TABLE3 = ("s_learner", "dipn", "lgbm_s_mono", *DFCL, "e2e_fd")
TABLE2 = ("s_learner", *DFCL, "e2e_fd")
ALPHAS = (0.0, 0.1, 1.0, 10.0)
GRID_SIZES = (1, 5, 20)


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _models(names) -> dict:
    return {"include": [n for n in names if n in registry.names()]}


def table3(seeds, days, users, max_epochs) -> dict:
    rows, infos = [], []
    for seed in seeds:
        r, info = evaluate_campaign("dfcl_discount", seed, days=days, users=users, max_epochs=max_epochs,
                                    models=_models(TABLE3))
        info["load"] = load()
        print(json.dumps({k: info.get(k) for k in ("seed", "run_exit_code", "run_seconds", "load", "models")}),
              flush=True)
        rows.append(r[r["model"] != "random"])
        infos.append(info)
    df = pd.concat(rows, ignore_index=True)
    df = df[df["pct_oracle"].notna()]
    versions = df.groupby("model")["model_version"].nunique().div(len(seeds)).to_dict()
    base = df[df["model"] == "s_learner"].set_index(["seed", "budget_per_capita"])["pct_oracle"]
    df["improvement_pct"] = 100 * (df["pct_oracle"].to_numpy()
                                   / base.reindex(pd.MultiIndex.from_frame(df[["seed", "budget_per_capita"]])).to_numpy() - 1)
    df["budget_rank"] = df.groupby(["seed", "model"])["budget_per_capita"].rank(method="first").astype(int)
    per_seed = df.groupby(["model", "seed"])["pct_oracle"].mean().unstack("seed")
    wins = (per_seed.sub(per_seed.loc["s_learner"], axis=1) > 0).sum(axis=1)
    table = df.pivot_table(index="model", columns="budget_rank", values="improvement_pct", aggfunc="mean")
    table["mean"] = df.groupby("model")["improvement_pct"].mean()
    table["pct_oracle"] = 100 * df.groupby("model")["pct_oracle"].mean()
    table["spend_ratio"] = df.groupby("model")["spend_ratio"].mean()
    table[f"seeds_beating_s_learner/{len(seeds)}"] = wins
    table["versions_per_seed"] = pd.Series(versions)
    print("\nTable 3 analogue (dfcl_discount): improvement of pct_oracle at matched true spend over "
          "s_learner, % per budget (1 = smallest), mean over seeds", flush=True)
    print(table.round(3).to_string(), flush=True)
    print("per-seed mean pct_oracle (%):\n" + (100 * per_seed).round(3).to_string(), flush=True)
    return {"part": "table3", "seeds": list(seeds), "table": table.round(4).reset_index().to_dict("records"),
            "per_seed_mean_pct_oracle": (100 * per_seed).round(4).reset_index().to_dict("records"),
            "runs": [{k: i.get(k) for k in ("seed", "run_exit_code", "run_seconds", "load")} for i in infos]}


def truth_ceiling(seed, days, users) -> float:
    """AUCC of the true ROI ranking (truth/ of the same simulated campaign) on its holdout: the
    largest AUCC any model can expect on that holdout (the holdout's outcome noise included)."""
    from promo_assets.evaluation.eom import aucc, roi_score

    with tempfile.TemporaryDirectory(prefix=f"dfcl-ceiling-{seed}-") as tmp:
        _, cdir, events, _, _, _ = simulated_events("uplift_two_arm", seed, tmp, days, users)
        holdout = events[events["split"] == "holdout"].reset_index(drop=True)
        tv, tc = truth_arrays(cdir, holdout["user_id"].astype(str).tolist())
    return aucc(roi_score(tv, tc), holdout["level"].to_numpy(), holdout["response"].to_numpy(float),
                holdout["cost"].to_numpy(float), holdout["propensity"].to_numpy(float))


def table2(seeds, days, users, max_epochs) -> dict:
    from promo_assets.simulation import PRESETS

    if "uplift_two_arm" not in PRESETS:
        print("table2: preset uplift_two_arm is not registered on this branch", flush=True)
        return {"part": "table2", "skipped": "uplift_two_arm preset missing"}
    out = []
    for seed in seeds:
        r, info = evaluate_campaign("uplift_two_arm", seed, days=days, users=users, max_epochs=max_epochs,
                                    models=_models(TABLE2))
        r = r[r["model"] != "random"]
        a = r.groupby("model")["aucc"].first()
        true_area = r.groupby("model")["area_ratio_true"].first()
        ceiling = truth_ceiling(seed, days, users)
        for m, v in a.items():
            out.append({"seed": seed, "model": m, "aucc": float(v),
                        "gain_pct": 100 * (float(v) / float(a["s_learner"]) - 1),
                        "area_ratio_true": float(true_area[m]),
                        "true_gain_pct": 100 * (float(true_area[m]) / float(true_area["s_learner"]) - 1),
                        "ceiling_aucc": ceiling})
        print(json.dumps({"seed": seed, "run_exit_code": info.get("run_exit_code"), "run_seconds": info.get("run_seconds"),
                          "holdout_events": info.get("holdout_events"), "load": load(),
                          "ceiling_aucc": round(ceiling, 5), "aucc": a.round(5).to_dict(),
                          "area_ratio_true": true_area.round(5).to_dict()}), flush=True)
    df = pd.DataFrame(out)
    table = df.groupby("model").agg(aucc=("aucc", "mean"), gain_pct=("gain_pct", "mean"),
                                    gain_sd=("gain_pct", "std"),
                                    seeds_beating_s_learner=("gain_pct", lambda g: int((g > 0).sum())),
                                    area_ratio_true=("area_ratio_true", "mean"),
                                    true_gain_pct=("true_gain_pct", "mean"),
                                    seeds_beating_true=("true_gain_pct", lambda g: int((g > 0).sum())))
    ceiling = df.groupby("seed")["ceiling_aucc"].first()
    print("\nTable 2 analogue (uplift_two_arm): AUCC on the holdout and its gain over s_learner (%, paired per "
          "seed: mean, sd over seeds), seeds beating s_learner; area_ratio_true (the frontier's area on the truth, "
          "no outcome noise) and its gain; mean over seeds", flush=True)
    print(table.round(4).to_string(), flush=True)
    print(f"truth ceiling (AUCC of the true ROI ranking on the same holdouts): mean {ceiling.mean():.4f}, "
          f"sd over seeds {ceiling.std():.4f}", flush=True)
    return {"part": "table2", "seeds": list(seeds), "table": table.round(5).reset_index().to_dict("records"),
            "ceiling_aucc": ceiling.round(5).to_dict(), "rows": df.round(5).to_dict("records")}


def _in_process(seed, days, users, max_epochs, settings: dict[str, tuple[str, dict]]):
    """Warm start once, then train_dfcl per setting; (mean pct_oracle per setting, seconds per epoch)."""
    with tempfile.TemporaryDirectory(prefix=f"dfcl-{seed}-") as tmp:
        campaign, cdir, events, config, numeric, categorical = simulated_events("dfcl_discount", seed, tmp, days, users)
        holdout = events[events["split"] == "holdout"].reset_index(drop=True)
        tv, tc = truth_arrays(cdir, holdout["user_id"].astype(str).tolist())
    data = TrainingData(config, events, numeric, categorical, frame_version=f"bench-{seed}")
    warm = warm_start(data, seed, max_epochs, True, None)
    specs = {"s_learner": (warm.version, *warm.predict(holdout))}
    per_epoch = {"s_learner": warm.metrics["seconds_per_epoch"]}
    best = {}
    for label, (name, extra) in settings.items():
        model = registry.create(name, extra)
        params = {**model.grid_params(), **({"max_epochs": max_epochs} if max_epochs else {}), **extra}
        fitted = train_dfcl(model.gradient, data, params, seed=seed, warm=warm)
        specs[label] = (f"{fitted.version}:{label}", *fitted.predict(holdout))
        per_epoch[label] = fitted.metrics["seconds_per_epoch"]
        best[label] = fitted.metrics["best_epoch"]
    rows = evaluate_policies(
        specs, Holdout(LoggedEvents.of_frame(holdout), Truth(tv, tc)),
        EvaluationSettings(list(config.budget_per_capita), campaign,
                           LevelScale(list(config.incentives), config.ordered, True), seed=seed,
                           eom_interval=BootstrapInterval(1), min_holdout_users=config.min_holdout_users))
    rows = rows[rows["model"].isin(list(specs))]
    return rows.groupby("model")["pct_oracle"].mean().to_dict(), per_epoch, best


def ablation(seeds, days, users, max_epochs, model_name) -> dict:
    settings = {f"alpha={a:g}": (model_name, {"alpha": a}) for a in ALPHAS}
    settings.update({f"grid_size={g}": (model_name, {"grid_size": g}) for g in GRID_SIZES})
    out = []
    for seed in seeds:
        pct, _, best = _in_process(seed, days, users, max_epochs, settings)
        for label, v in pct.items():
            out.append({"seed": seed, "setting": label, "pct_oracle": 100 * v, "best_epoch": best.get(label)})
        print(json.dumps({"seed": seed, "load": load(), "pct_oracle": {k: round(100 * v, 3) for k, v in pct.items()}}),
              flush=True)
    df = pd.DataFrame(out)
    base = df[df["setting"] == "s_learner"].set_index("seed")["pct_oracle"]
    df["over_s_learner"] = df["pct_oracle"].to_numpy() - base.reindex(df["seed"]).to_numpy()
    table = df.groupby("setting", sort=False).agg(
        pct_oracle=("pct_oracle", "mean"), minus_s_learner=("over_s_learner", "mean"),
        sd=("over_s_learner", "std"), seeds_beating_s_learner=("over_s_learner", lambda g: int((g > 0).sum())),
        best_epoch=("best_epoch", "mean"))
    print(f"\nFig. 2 analogue ({model_name} on dfcl_discount, {len(seeds)} seeds): mean pct_oracle (%) over the six "
          "budgets and seeds, its paired difference to s_learner (points: mean, sd), seeds beating s_learner, "
          "mean selected epoch", flush=True)
    print(table.round(3).to_string(), flush=True)
    return {"part": "ablation", "model": model_name, "seeds": list(seeds), "rows": df.round(4).to_dict("records")}


def timing(seed, days, users, max_epochs) -> dict:
    before = load()
    _, per_epoch, _ = _in_process(seed, days, users, max_epochs, {n: (n, {}) for n in DFCL})
    ratio = {k: v / per_epoch["s_learner"] for k, v in per_epoch.items()}
    print(f"\nseconds per epoch ({before} before, {load()} after):", flush=True)
    for k, v in per_epoch.items():
        print(f"  {k:10s} {v:8.3f} s  ({ratio[k]:.2f} x s_learner)", flush=True)
    return {"part": "timing", "seed": seed, "seconds_per_epoch": per_epoch, "ratio_to_s_learner": ratio,
            "load_before": before, "load_after": load()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", nargs="+", default=["table3", "table2", "ablation", "timing"],
                    choices=["table3", "table2", "ablation", "timing"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--ablation-seeds", type=int, nargs="+", default=None, help="default: --seeds")
    ap.add_argument("--ablation-model", default="dfcl_ifd", choices=list(DFCL))
    ap.add_argument("--days", type=int, default=8)
    ap.add_argument("--users", type=int, default=5000, help="user pool of dfcl_discount (daily_active 0.5)")
    ap.add_argument("--uplift-users", type=int, default=20000,
                    help="user pool of uplift_two_arm (daily_active 1: the holdout day has this many users) [20000]")
    ap.add_argument("--max-epochs", type=int, default=20, help="PROMO_MAX_EPOCHS / epoch cap [20]")
    args = ap.parse_args()
    rec = Recorder("dfcl_paper")
    start = time.perf_counter()
    results = []
    if "table3" in args.parts:
        results.append(table3(args.seeds, args.days, args.users, args.max_epochs))
    if "table2" in args.parts:
        results.append(table2(args.seeds, args.days, args.uplift_users, args.max_epochs))
    if "ablation" in args.parts:
        results.append(ablation(args.ablation_seeds or args.seeds, args.days, args.users, args.max_epochs, args.ablation_model))
    if "timing" in args.parts:
        results.append(timing(args.seeds[0], args.days, args.users, args.max_epochs))
    figures = {"results": results, "seconds": round(time.perf_counter() - start, 1), "end": load()}
    print(json.dumps(figures, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    headline = {}
    for part in results:
        if part.get("part") == "timing":
            headline |= {f"seconds per epoch, {m} / s_learner": round(r, 2) for m, r in part["ratio_to_s_learner"].items()}
        for row in part.get("table", []):  # the tables' model rows: their mean columns
            name = row.get("model") or row.get("index")
            headline |= {f"{part['part']}: {name} {k}": v for k, v in row.items() if name and k.startswith("mean")}
    rec.write(figures, headline=headline,
              tag=None if set(args.parts) == {"table3", "table2", "ablation", "timing"} else "-".join(args.parts))


if __name__ == "__main__":
    main()
