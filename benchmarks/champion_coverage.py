"""Coverage of the champion's paired interval on cross-fitted evidence: does the paired interval of two
candidates' decision-loss difference contain the true difference, at nominal 90 %, over many redrawn
holdouts?

Each (preset, seed) is simulated and run with `promo run` (--models, default the LightGBM models only;
`_pipeline_bench.evaluate_campaign`), then its evidence is built as the `champion` asset builds it with
`champion.evidence: cross_fitted` (--folds, default 3, --fold-by, default user, every model of --models
refitted, torch fits for their full fit's epochs with --fold-epochs full_fit; promo_assets.decisions.crossfit):
the holdout events and every training-day event with the refitted models' out-of-fold coefficients and
the out-of-fold outcome model's predictions. The models' coefficients, the outcome model's predictions
and the multipliers are then held fixed, and the events are redrawn R times from the simulator's truth
for the same users: a level drawn uniformly (propensity 1/K, as the RCT logged it), the response drawn
from the true response curve at that level (Bernoulli for a binary response), the cost by the
campaign's cost rule (the true cost per unit of response). For every pair of models and every redraw,
the paired interval (`paired_difference` of their per-event decision losses) is checked against the
true difference: the mean over the events of the squared error of their reduced values v - λc against
the truth's, summed over levels and budgets (what the decision loss estimates). The same is reported
for the holdout events alone. Writes benchmarks/results/champion_coverage[--tag].json.

    .venv/bin/python benchmarks/champion_coverage.py [--presets demo e2e_synthetic] [--seeds 0]
        [--redraws 200] [--days 6] [--users 3000] [--models lgbm_s lgbm_s_mono lgbm_t] [--folds 3]
        [--fold-by user] [--fold-epochs early_stopping] [--tag T]
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _pipeline_bench import evaluate_campaign  # noqa: E402
from _results import Recorder  # noqa: E402

from promo_assets.decisions.crossfit import Folds  # noqa: E402
from promo_assets.evaluation.champion import Evidence, decision_lambdas, loss_terms, paired_difference  # noqa: E402

MODELS = ["lgbm_s", "lgbm_s_mono", "lgbm_t"]


def campaign_evidence(preset: str, seed: int, days: int, users: int, models: list[str], folds,
                      fold_epochs: str) -> dict:
    """The holdout and cross-fitted evidence of one campaign run with `models`, on `folds` (crossfit.Folds)
    with every model refitted (`fold_epochs` as campaign.yaml's champion.fold_epochs), with the truth of
    every event's user."""
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.decisions.crossfit import cross_fitted_evidence, epoch_caps, refit_model
    from promo_assets.models.inputs import training_frame
    from promo_assets.simulation.truth import truth_arrays
    from promo_assets.store import frames as frames_store, models as models_store
    from promo_assets.store.warehouse import connect, sql

    keep = Path(tempfile.mkdtemp(prefix="champion-coverage-"))
    try:
        _, info = evaluate_campaign(preset, seed, days=days, users=users, keep=keep, models={"include": list(models)})
        folder = next(keep.iterdir())
        campaign = info["campaign"]
        landing = folder / "landing" / campaign
        config = CampaignConfig.load(landing)
        k = config.n_levels
        with connect(folder / "warehouse.duckdb", read_only=True) as con:
            champ = con.execute(sql("decisions", "latest_champion"), [campaign, ""]).df()
            board = champ["leaderboard_run_id"].iloc[0]
            from promo_assets.store import decisions as decisions_store

            hold = frames_store.holdout_events(con, campaign)
            pred = frames_store.outcome_predictions(con, campaign)
            coefs, versions = {}, {}
            for model, version, _ in decisions_store.board_models(con, campaign, board):
                ids, v, c = models_store.coefficient_arrays(con, campaign, model, version, "holdout", k)
                pos = {u: i for i, u in enumerate(ids)}
                idx = np.asarray([pos[u] for u in hold["user_id"]])
                coefs[model] = (v[idx], c[idx])
                versions[model] = version
            frame, numeric, categorical = training_frame(con, campaign)
            caps = (epoch_caps(models_store.model_metrics(con, campaign, versions)) if fold_epochs == "full_fit"
                    else None)
            t0 = time.perf_counter()
            xf = cross_fitted_evidence(frame, numeric, categorical, config, list(versions), folds=folds,
                                       fit_model=refit_model(config, caps))
            xfit_seconds = time.perf_counter() - t0
        holdout = Evidence(hold["level"].to_numpy(), hold["response"].to_numpy(float), hold["cost"].to_numpy(float),
                           hold["propensity"].to_numpy(float), pred["value"].to_numpy().reshape(len(hold), k),
                           pred["cost"].to_numpy().reshape(len(hold), k), coefs)
        refit = list(xf.evidence.coefficients)
        wide = Evidence.concat([holdout.only(refit), xf.evidence])
        tv, tc = truth_arrays(landing, [*hold["user_id"].tolist(), *xf.user_ids.tolist()])
        return {"holdout": holdout, "wide": wide, "true_values": tv, "true_costs": tc, "models": refit,
                "budgets": list(config.budget_per_capita), "binary": config.response == "binary", "redeemed": config.cost == "redeemed",
                "holdout_events": holdout.n, "cross_fitted_events": xf.n, "xfit_seconds": round(xfit_seconds, 2),
                "run_seconds": info.get("run_seconds")}
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def redraw(ev: Evidence, tv: np.ndarray, tc: np.ndarray, binary: bool, rng, redeemed: bool = True) -> Evidence:
    """The same users and predictions, the events drawn again from the truth (module docstring)."""
    n, k = tv.shape
    t = rng.integers(0, k, n)
    rows = np.arange(n)
    mean_y, mean_z = tv[rows, t], tc[rows, t]
    y = (rng.random(n) < mean_y).astype(float) if binary else mean_y + rng.normal(0, np.sqrt(np.maximum(mean_y, 1e-9)))
    unit = np.divide(mean_z, mean_y, out=np.zeros(n), where=mean_y > 0)
    z = np.where(mean_y > 0, unit * y, mean_z) if redeemed else mean_z
    return Evidence(t, y, z, np.full(n, 1.0 / k), ev.dm_values, ev.dm_costs, ev.coefficients)


def true_loss(ev: Evidence, model: str, lams: np.ndarray, tv: np.ndarray, tc: np.ndarray) -> float:
    v, c = ev.coefficients[model]
    return float(np.mean(sum((((v - lam * c) - (tv - lam * tc)) ** 2).sum(axis=1) for lam in lams if np.isfinite(lam))))


def coverage(ev: Evidence, tv, tc, binary: bool, lams: np.ndarray, redraws: int, seed: int, redeemed: bool) -> dict:
    rng = np.random.default_rng(seed)
    models = list(ev.coefficients)
    pairs = list(itertools.combinations(models, 2))
    truth = {m: true_loss(ev, m, lams, tv, tc) for m in models}
    inside = {p: 0 for p in pairs}
    widths = {p: [] for p in pairs}
    for _ in range(redraws):
        terms = loss_terms(redraw(ev, tv, tc, binary, rng, redeemed), models, lams)
        eye = np.eye(len(models))
        loss = {m: terms.loss(eye[i]) for i, m in enumerate(models)}
        for a, b in pairs:
            _, lo, hi = paired_difference(loss[a], loss[b], 0.9)
            inside[(a, b)] += int(lo <= truth[a] - truth[b] <= hi)
            widths[(a, b)].append(hi - lo)
    return {f"{a} - {b}": {"true_difference": truth[a] - truth[b], "inside": inside[(a, b)], "redraws": redraws,
                           "coverage": inside[(a, b)] / redraws, "mean_width": float(np.mean(widths[(a, b)]))}
            for a, b in pairs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["demo"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--redraws", type=int, default=200)
    ap.add_argument("--days", type=int, default=6)
    ap.add_argument("--users", type=int, default=3000)
    ap.add_argument("--models", nargs="+", default=MODELS, help="the models run and refitted per fold")
    ap.add_argument("--folds", type=int, default=3)
    ap.add_argument("--fold-by", choices=["user", "day"], default="user")
    ap.add_argument("--fold-epochs", choices=["full_fit", "early_stopping"], default="early_stopping")
    ap.add_argument("--tag", default=None)
    args = ap.parse_args()
    folds = Folds(args.folds, args.fold_by, tuple(args.models))
    rec = Recorder("champion_coverage")
    runs, all_inside, all_total, hold_inside, hold_total = [], 0, 0, 0, 0
    for preset, seed in itertools.product(args.presets, args.seeds):
        c = campaign_evidence(preset, seed, args.days, args.users, args.models, folds, args.fold_epochs)
        lams = decision_lambdas(c["holdout"], c["models"], c["budgets"])
        nh = c["holdout_events"]
        wide = coverage(c["wide"], c["true_values"], c["true_costs"], c["binary"], lams, args.redraws, seed, c["redeemed"])
        hold = coverage(c["holdout"].only(c["models"]), c["true_values"][:nh], c["true_costs"][:nh], c["binary"], lams,
                        args.redraws, seed + 1, c["redeemed"])
        all_inside += sum(v["inside"] for v in wide.values())
        all_total += sum(v["redraws"] for v in wide.values())
        hold_inside += sum(v["inside"] for v in hold.values())
        hold_total += sum(v["redraws"] for v in hold.values())
        runs.append({"preset": preset, "seed": seed, "holdout_events": nh, "cross_fitted_events": c["cross_fitted_events"],
                     "evidence_events": nh + c["cross_fitted_events"], "xfit_seconds": c["xfit_seconds"],
                     "run_seconds": c["run_seconds"], "cross_fitted": wide, "holdout_only": hold})
        for name, res in (("cross-fitted", wide), ("holdout", hold)):
            print(f"{preset} seed {seed} {name}: " + "; ".join(
                f"{p} {v['inside']}/{v['redraws']} (true {v['true_difference']:+.4g}, width {v['mean_width']:.3g})"
                for p, v in res.items()), flush=True)
    headline = {"coverage at nominal 90%, cross-fitted evidence": round(all_inside / all_total, 4),
                "pairs x redraws, cross-fitted": all_total,
                "coverage at nominal 90%, holdout only": round(hold_inside / hold_total, 4)}
    print(headline)
    rec.write({"presets": args.presets, "seeds": args.seeds, "redraws": args.redraws, "days": args.days,
               "users": args.users, "models": args.models,
               "folds": {"fold_by": args.fold_by, "folds": args.folds, "fold_epochs": args.fold_epochs}, "nominal": 0.9,
               "runs": runs}, tag=args.tag, headline=headline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
