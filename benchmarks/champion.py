"""The champion chosen without ground truth, against the truth: demo, dipn_synthetic_2, e2e_synthetic,
uplift_two_arm and dfcl_discount, several seeds each, through the production path.

Each (preset, seed) is simulated into a temporary landing folder and run with `promo run` (the CLI,
default models, in a temporary warehouse / artefact store / outbox / DAGSTER_HOME; the `champion`
asset runs in it). From the warehouse it reads, as % of the oracle at matched true spend on the
holdout users, mean over the campaign's budgets:

  (a) the champion (table champion: chosen without the truth; the truth only scores it),
  (b) the best candidate in truth (table champion_evidence: every model, the stacked blend and the
      equal blend of all models that the champion asset evaluated), and the best single model,
  (c) lgbm_s_mono (lgbm_s where lgbm_s_mono does not apply),
  (d) the old rule: at each budget the model with the highest DR Q (policy_evaluation.dr_q_value),
and the regret b - a, and the `champion` asset's run time (its step in the Dagster run, from the
campaign's DAGSTER_HOME). Prints one line per campaign, a table per preset (mean and worst regret) and
the means, then one JSON object. The JSON (benchmarks/results/champion--<tag>.json, tag `seeds-<first>-<last>`
unless --tag) is rewritten after every campaign, so an interrupted run keeps what it measured; --rows
summarizes such a file again (and --resume runs only the campaigns it lacks). Tune on seeds 100-114,
report on 0-4.

With --evidence DIR, each campaign's evidence (the holdout events' logged level, response, cost,
propensity, the outcome model's predictions, every candidate model's holdout coefficients and the
truth of the holdout users) is saved as DIR/<preset>-<seed>.npz, so that other rules can be scored on
the same campaigns without running them again (benchmarks/champion_rules.py). Beside it, the
cross-fitted evidence of the campaign (promo_assets.decisions.crossfit: the LightGBM models and the
outcome model refitted per fold over the training days) for user folds ('xu:' arrays) and day folds
('xd:'), and day or user folds with every model refitted, the torch models included ('xa:', 'xua:'), 3 folds each
('xua2:' the same on 2 user folds; 'xua2e:' with each torch refit trained for its full fit's epochs), with
the time of their refits ('<prefix>:seconds'), whatever the campaign's
`champion.evidence`: every evidence kind is scored on the same campaigns.

    .venv/bin/python benchmarks/champion.py [--seeds 0 1 2 3 4] [--presets ...] [--max-epochs N]
        [--tag T] [--evidence DIR [--xfit xu xd xa xua xua2 xua2e]] [--rows FILE [--resume]]
"""

from __future__ import annotations

import argparse
import json
import os
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

from _pipeline_bench import evaluate_campaign  # noqa: E402
from _results import Recorder  # noqa: E402
from run_time_ab import step_seconds  # noqa: E402

PRESETS = ("demo", "dipn_synthetic_2", "e2e_synthetic", "uplift_two_arm", "dfcl_discount")
SIZES = {"demo": (8, 5000), "dipn_synthetic_2": (8, 10000), "e2e_synthetic": (8, 2500),
         "uplift_two_arm": (8, 5000), "dfcl_discount": (8, 5000)}  # (days, users): holdout days of 2,500-5,000 events


def save_evidence(con, folder: Path, campaign: str, board_run: str, path: Path, xfit=None) -> int:
    """The champion's evidence of `campaign` (module docstring) as one .npz at `path`; its event count."""
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.simulation.truth import truth_arrays
    from promo_assets.store import decisions as decisions_store, frames as frames_store, models as models_store

    config = CampaignConfig.load(folder / "landing" / campaign)
    k = config.n_levels
    hold = frames_store.holdout_events(con, campaign)
    pred = frames_store.outcome_predictions(con, campaign)
    arrays = {"logged": hold["level"].to_numpy(), "budgets": np.asarray(config.budget_per_capita, dtype=float),
              **{c: hold[c].to_numpy(dtype=float) for c in ("response", "cost", "propensity")},
              "dm_values": pred["value"].to_numpy().reshape(len(hold), k),
              "dm_costs": pred["cost"].to_numpy().reshape(len(hold), k)}
    arrays["true_values"], arrays["true_costs"] = truth_arrays(folder / "landing" / campaign, hold["user_id"].tolist())
    models = {}
    for model, version, _ in decisions_store.board_models(con, campaign, board_run):
        users, v, c = models_store.coefficient_arrays(con, campaign, model, version, "holdout", k)
        idx = pd.Series(np.arange(len(users)), index=users).reindex(hold["user_id"]).to_numpy().astype(int)
        arrays[f"v:{model}"], arrays[f"c:{model}"] = v[idx], c[idx]
        models[model] = version
    arrays["models"] = np.asarray(list(models))
    arrays.update(cross_fitted_arrays(con, config, campaign, models, *([xfit] if xfit else [])))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return len(hold)


# npz prefix -> (fold_by, folds, refit, epochs) of the cross-fitted parts saved; refit None: the LightGBM
# models (the default), "all": every candidate model, the torch ones included; epochs "full_fit": each
# refitted torch model trains for its full fit's epochs (champion.fold_epochs), "early_stopping": it
# early-stops on its own
XFIT = {"xu": ("user", 3, None, "early_stopping"), "xd": ("day", 3, None, "early_stopping"),
        "xa": ("day", 3, "all", "early_stopping"), "xua": ("user", 3, "all", "early_stopping"),
        "xua2": ("user", 2, "all", "early_stopping"), "xua2e": ("user", 2, "all", "full_fit")}


def cross_fitted_arrays(con, config, campaign: str, versions: dict, prefixes=tuple(XFIT)) -> dict:
    """The cross-fitted evidence of `campaign` (promo_assets.decisions.crossfit; the refitted models'
    out-of-fold coefficients over the training days) for each fold scheme of XFIT, as npz arrays
    '<prefix>:logged', ... '<prefix>:v:<model>', with '<prefix>:seconds' (the time of the refits);
    `versions`: {model: version} of the candidates (their full fits' epochs for "full_fit")."""
    from promo_assets.decisions.crossfit import Folds, cross_fitted_evidence, epoch_caps, refit_model
    from promo_assets.models.inputs import training_frame
    from promo_assets.store import models as models_store

    frame, numeric, categorical = training_frame(con, campaign)
    models = list(versions)
    caps = epoch_caps(models_store.model_metrics(con, campaign, versions))
    out = {}
    for prefix in prefixes:
        by, k, refit, epochs = XFIT[prefix]
        t0 = time.perf_counter()
        folds = Folds(k, by, tuple(models) if refit == "all" else None)
        fit_model = refit_model(config, caps if epochs == "full_fit" else None)
        xf = cross_fitted_evidence(frame, numeric, categorical, config, models, folds=folds, fit_model=fit_model)
        out[f"{prefix}:seconds"] = np.asarray(time.perf_counter() - t0)
        if xf.evidence is None:
            continue
        e = xf.evidence
        out.update({f"{prefix}:logged": e.logged, f"{prefix}:response": e.response, f"{prefix}:cost": e.cost,
                    f"{prefix}:propensity": e.propensity, f"{prefix}:dm_values": e.dm_values,
                    f"{prefix}:dm_costs": e.dm_costs, f"{prefix}:models": np.asarray(list(e.coefficients))})
        for m, (v, c) in e.coefficients.items():
            out[f"{prefix}:v:{m}"], out[f"{prefix}:c:{m}"] = v, c
    return out


def campaign_row(preset: str, seed: int, max_epochs: int | None, evidence_dir: Path | None = None, xfit=None) -> dict:
    """One campaign through `promo run`, and what its warehouse says (module docstring)."""
    from promo_assets.store.warehouse import connect, sql

    days, users = SIZES.get(preset, (8, 5000))
    keep = Path(tempfile.mkdtemp(prefix="champion-bench-"))
    t0 = time.perf_counter()
    steps = {}
    try:
        rows, info = evaluate_campaign(preset, seed, days=days, users=users, max_epochs=max_epochs, keep=keep)
        folder = next(keep.iterdir())
        campaign = info["campaign"]
        with connect(folder / "warehouse.duckdb", read_only=True) as con:
            champ = con.execute(sql("decisions", "latest_champion"), [campaign, ""]).df()
            evidence = (con.execute(sql("decisions", "champion_evidence_of_run"), [campaign, champ["run_id"].iloc[0]]).df()
                        if len(champ) else pd.DataFrame())
            if evidence_dir is not None and len(champ):
                save_evidence(con, folder, campaign, champ["leaderboard_run_id"].iloc[0],
                              evidence_dir / f"{preset}-{seed}.npz", xfit)
        steps = step_seconds(folder / "dagster_home")
    finally:
        shutil.rmtree(keep, ignore_errors=True)
    out = {"preset": preset, "seed": seed, "campaign": info["campaign"], "run_exit_code": info.get("run_exit_code"),
           "run_seconds": info.get("run_seconds"), "wall_seconds": round(time.perf_counter() - t0, 1),
           "champion_seconds": round(steps["champion"], 2) if "champion" in steps else None,
           "holdout_events": info.get("holdout_events")}
    if champ.empty:
        return {**out, "error": "no champion: " + str(info.get("run_output_tail", ""))[-1500:]}
    c = champ.iloc[0]
    pooled = evidence[(evidence["evidence_kind"] == "candidate") & evidence["budget_per_capita"].isna()]
    pct = {r.champion_candidate: 100 * float(r.pct_oracle) for r in pooled.itertuples() if np.isfinite(r.pct_oracle)}
    models = rows[rows["model"] != "random"]
    per_model = models.groupby("model")["pct_oracle"].agg(lambda s: 100 * s.mean() if s.notna().all() else np.nan)
    base_name = "lgbm_s_mono" if "lgbm_s_mono" in per_model.index else "lgbm_s"
    old = [100 * g.sort_values("dr_q_value", ascending=False).iloc[0]["pct_oracle"]
           for _, g in models.groupby("budget_per_capita")]
    best_name = max(pct, key=pct.get)
    return {**out, "champion": c["champion"], "champion_pct": 100 * float(c["pct_oracle"]),
            "evidence_events": int(c["evidence_events"]),
            "best_candidate": best_name, "best_pct": pct[best_name],
            "regret": pct[best_name] - 100 * float(c["pct_oracle"]),
            "best_single": per_model.idxmax(), "best_single_pct": float(per_model.max()),
            "base": base_name, "base_pct": float(per_model[base_name]), "old_rule_pct": float(np.mean(old)),
            "candidates": pct, "models": per_model.round(3).to_dict(), "reason": c["champion_reason"]}


def summarize(rows: pd.DataFrame) -> dict:
    """Per preset the mean and the worst (largest) regret, the mean over campaigns, and the count of
    presets and campaigns where the champion is ahead of lgbm_s_mono."""
    if "champion_pct" not in rows:
        return {"per_preset": [], "mean": {}, "worst_regret": None, "presets_ahead_of_base": 0,
                "campaigns_ahead_of_base": 0, "campaigns": 0, "failed": rows[["preset", "seed"]].to_dict(orient="records")}
    ok = rows[rows["champion_pct"].notna()].copy()
    ok["regret"] = ok["best_pct"] - ok["champion_pct"]
    ok["regret_vs_best_single"] = ok["best_single_pct"] - ok["champion_pct"]
    ok["vs_base"] = ok["champion_pct"] - ok["base_pct"]
    ok["old_regret"] = ok["best_pct"] - ok["old_rule_pct"]
    ok["old_vs_base"] = ok["old_rule_pct"] - ok["base_pct"]
    ok["base_regret"] = ok["best_pct"] - ok["base_pct"]
    cols = ["champion_pct", "best_pct", "best_single_pct", "base_pct", "old_rule_pct", "regret",
            "regret_vs_best_single", "vs_base", "old_regret", "old_vs_base", "base_regret", "champion_seconds"]
    per = ok.groupby("preset")[cols].mean()
    worst = ok.groupby("preset")[["regret", "old_regret", "base_regret"]].max().add_prefix("worst_")
    per = per.join(worst)
    return {"per_preset": per.round(3).reset_index().to_dict(orient="records"),
            "mean": ok[cols].mean().round(3).to_dict(),
            "worst_regret": float(ok["regret"].max()) if len(ok) else None,
            "worst_campaign": ok.loc[ok["regret"].idxmax(), ["preset", "seed"]].to_dict() if len(ok) else None,
            "campaigns_with_regret_over_0.6": int((ok["regret"] > 0.6).sum()),
            "presets_ahead_of_base": int((per["vs_base"] > 0).sum()),
            "campaigns_ahead_of_base": int((ok["vs_base"] > 0).sum()), "campaigns": int(len(ok)),
            "failed": rows[rows["champion_pct"].isna()][["preset", "seed"]].to_dict(orient="records")}


def record(rec: Recorder, args, rows: pd.DataFrame, tag: str, done: bool) -> Path | None:
    """Write what was measured so far (all of it at the end) to benchmarks/results/champion--<tag>.json."""
    summary = summarize(rows)
    result = {"complete": done, "seeds": args.seeds, "presets": args.presets,
              "sizes": {p: SIZES.get(p) for p in args.presets}, "evidence_dir": str(args.evidence or ""),
              "summary": summary, "campaigns": rows.to_dict(orient="records")}
    return rec.write(result, tag=tag, headline=headline(summary))


def headline(summary: dict) -> dict:
    """The figures a reader looks for first, from `summarize`."""
    m = summary["mean"]
    return {"regret (points of the oracle)": m.get("regret"), "worst campaign's regret": summary["worst_regret"],
            "champion - lgbm_s_mono (points)": m.get("vs_base"), "old rule's regret (points)": m.get("old_regret"),
            "presets ahead of lgbm_s_mono": summary["presets_ahead_of_base"],
            "champion asset (seconds, mean)": m.get("champion_seconds"), "campaigns": summary["campaigns"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--presets", nargs="+", default=list(PRESETS))
    ap.add_argument("--max-epochs", type=int, default=None, help="PROMO_MAX_EPOCHS (default: unset, as the demo)")
    ap.add_argument("--tag", default=None, help="the result's tag (default: seeds-<first>-<last>)")
    ap.add_argument("--evidence", type=Path, default=None, help="save each campaign's evidence as <preset>-<seed>.npz here")
    ap.add_argument("--rows", type=Path, default=None,
                    help="the campaigns of a result this script wrote (benchmarks/results/champion--*.json): "
                    "summarize them instead of running (with --resume: run only the campaigns it lacks)")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--xfit", nargs="+", choices=list(XFIT), default=None,
                    help="the cross-fitted parts saved with --evidence (default: all of XFIT)")
    args = ap.parse_args()
    tag = args.tag or f"seeds-{args.seeds[0]}-{args.seeds[-1]}"
    rec = Recorder("champion")
    out = json.loads(args.rows.read_text())["figures"]["campaigns"] if args.rows else []
    if not args.rows or args.resume:
        have = {(r["preset"], r["seed"]) for r in out if "error" not in r or r.get("error") is None}
        out = [r for r in out if (r["preset"], r["seed"]) in have]
        for seed in args.seeds:
            for preset in args.presets:
                if (preset, seed) in have:
                    continue
                r = campaign_row(preset, seed, args.max_epochs, args.evidence, args.xfit)
                out.append(r)
                record(rec, args, pd.DataFrame(out), tag, done=False)
                if "error" in r:
                    print(f"{preset} seed {seed}: FAILED {r['error'][-300:]}", flush=True)
                    continue
                print(f"{preset} seed {seed}: champion {r['champion']} {r['champion_pct']:.2f}% | best {r['best_candidate']} "
                      f"{r['best_pct']:.2f}% | regret {r['regret']:.2f} | {r['base']} {r['base_pct']:.2f}% | old rule "
                      f"{r['old_rule_pct']:.2f}% | champion asset {r['champion_seconds']}s | promo run {r['run_seconds']}s, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    rows = pd.DataFrame(out)
    summary = summarize(rows)
    print(pd.DataFrame(summary["per_preset"]).to_string(index=False))
    print("mean over campaigns:", json.dumps(summary["mean"]))
    print(f"ahead of lgbm_s_mono on {summary['presets_ahead_of_base']} of {len(summary['per_preset'])} presets, "
          f"{summary['campaigns_ahead_of_base']} of {summary['campaigns']} campaigns; worst regret {summary['worst_regret']}")
    path = record(rec, args, rows, tag, done=True)
    print(json.dumps({"written": str(path), **summary["mean"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
