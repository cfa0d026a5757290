"""The CoMAN paper's offline tables on the `coman_spatiotemporal` preset.

For every seed: `promo simulate`'s preset (multi-attribute coupons, five periods of day, six cities
with differently shaped curves, RCT) is written to a temporary landing folder, read the pipeline's way
(benchmarks/_model_frames: the ingestion loaders and `build_training_frame`), and every variant is
trained with `_model_frames.train_model` (the registered models, their one training loop) on
the train/validation days and scored on the holdout day's users:

- Table 1 analogue: AUC of the prediction at the logged level against the logged response, and the
  curve MSE, MAE, KL and correlation against the true expected response per user x level
  (`evaluation.segments.truth_curve_metrics`; KL = mean Bernoulli KL(truth || prediction));
- Tables 2-3 analogue: MAE and KL per period of day (and per city);
- decision quality: `evaluation.evaluate_policies` on the holdout users (the pipeline's evaluation:
  the allocator on each model's coefficients, pct_oracle = true value at matched TRUE spend over the
  oracle's), per budget; `lgbm_s_mono` and `dipn` do not apply to multi-attribute levels (their skip
  reasons are printed);
- monotonicity: violations of each declared direction on a grid (21 points per attribute over its
  level range, the other attributes at every level's values) for every holdout user;
- time per epoch (`seconds_per_epoch` of the training loop) and its ratio to the S-learner's.
Variants: DNN (s_learner), DNN-M, SBBM (the SBBM-style logistic head: `fpm` with `curve: logistic`),
FPM, CMNN with ReLU / ELU / CLU, CoMAN-B (no AA, no S-t), CoMAN w/o AA, CoMAN w/o S-t, CoMAN, and the
LightGBM S- and T-learners (decision references). `--pipeline-seeds` additionally runs `promo simulate` + `promo run`
(benchmarks/_pipeline_bench.evaluate_campaign) and prints the pipeline's policy_evaluation.

Torch uses one thread (`--threads`): on the shared 2-core machine more threads only contend.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/coman_paper.py --seeds 0 1 2 3 4 > /tmp/coman_paper.json
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from promo_assets.simulation import REFERENCE_START  # noqa: E402

VARIANTS: dict[str, tuple[str, dict]] = {
    "DNN": ("s_learner", {}),
    "DNN-M": ("dnn_m", {}),
    "SBBM": ("fpm", {"curve": "logistic"}),
    "FPM": ("fpm", {}),
    "CMNN(ReLU)": ("cmnn", {"activation": "relu"}),
    "CMNN(ELU)": ("cmnn", {"activation": "elu"}),
    "CMNN(CLU)": ("cmnn", {"activation": "clu"}),
    "CoMAN-B": ("coman", {"adaptive_activation": False, "st_attention": False}),
    "CoMAN w/o AA": ("coman", {"adaptive_activation": False}),
    "CoMAN w/o S-t": ("coman", {"st_attention": False}),
    "CoMAN": ("coman", {}),
    "lgbm_s": ("lgbm_s", {}),
    "lgbm_t": ("lgbm_t", {}),
}
TORCH = {"s_learner", "dnn_m", "fpm", "cmnn", "coman"}


def violations(fitted, holdout: pd.DataFrame, config) -> int | None:
    """Grid check of every declared direction for every holdout user (None: not an attribute model)."""
    import torch

    net = getattr(fitted, "module", None)
    if not hasattr(net, "response_at"):
        return None
    x_num, x_cat = (torch.from_numpy(a) for a in fitted.encoder.transform(holdout))
    a_mat, signs = config.attribute_matrix(), config.attribute_signs()
    bad = 0
    with torch.no_grad():
        for a, sign in enumerate(signs):
            if sign == 0:
                continue
            grid = np.linspace(a_mat[:, a].min(), a_mat[:, a].max(), 21)
            for base in a_mat:
                pts = np.repeat(base[None, :], len(grid), axis=0)
                pts[:, a] = grid
                attrs = torch.as_tensor(np.broadcast_to(pts, (len(holdout), *pts.shape)).copy())
                out = net.response_at(x_num, x_cat, attrs).numpy()
                bad += int((sign * np.diff(out, axis=1) < -1e-7).sum())
    return bad


def run_seed(seed: int, args) -> tuple[list[dict], pd.DataFrame, list[dict], dict]:
    from _model_frames import load_training_frame, train_model
    from sklearn.metrics import roc_auc_score

    from promo_assets.evaluation import (
        BootstrapInterval,
        EvaluationSettings,
        Holdout,
        LevelScale,
        LoggedEvents,
        Truth,
        evaluate_policies,
    )
    from promo_assets.evaluation.segments import truth_curve_metrics
    from promo_assets.models import registry
    from promo_assets.simulation import SimulationRequest, simulate, truth_arrays

    with tempfile.TemporaryDirectory(prefix="coman-paper-") as tmp:
        os.environ["PROMO_ARTIFACTS_DIR"] = str(Path(tmp) / "artifacts")
        request = SimulationRequest(f"coman-{seed}", Path(tmp) / "landing", days=args.days, users=args.users,
                                    seed=seed, start=REFERENCE_START)
        s = simulate("coman_spatiotemporal", request, incentive=args.incentive)
        frame, config, numeric, categorical = load_training_frame(s.campaign_dir)
        holdout = frame[frame["split"] == "holdout"].reset_index(drop=True)
        tv, tc = truth_arrays(s.campaign_dir, holdout["user_id"].tolist())
    skips = {m: registry.get(m).applies_to(config) for m in ("dipn", "lgbm_s_mono")}
    rows, preds, monotone = [], {}, []
    lvl, y = holdout["level"].to_numpy(), holdout["response"].to_numpy(dtype=float)
    for variant, (model, hp) in VARIANTS.items():
        if args.variants and variant not in args.variants:
            continue
        hp = dict(hp)
        if model in TORCH:
            hp["batch_size"] = args.batch_size
        t0 = time.perf_counter()
        fitted = train_model(model, frame, config, numeric, categorical, seed=seed, max_epochs=args.max_epochs, **hp)
        secs = time.perf_counter() - t0
        v, c = fitted.predict(holdout)
        preds[variant] = (fitted.version, v, c)
        row = {"seed": seed, "variant": variant, "model": model, "segment_by": "all", "segment_value": "all",
               "auc": float(roc_auc_score(y, v[np.arange(len(y)), lvl])), **truth_curve_metrics(v, tv),
               "seconds_per_epoch": fitted.metrics.get("seconds_per_epoch"), "epochs": fitted.metrics.get("epochs"),
               "train_seconds": round(secs, 2)}
        rows.append(row)
        for col in ("period_of_day", "city"):
            for value in sorted(holdout[col].astype(str).unique()):
                m = holdout[col].astype(str).to_numpy() == value
                rows.append({"seed": seed, "variant": variant, "model": model, "segment_by": col, "segment_value": value,
                             **truth_curve_metrics(v[m], tv[m])})
        bad = violations(fitted, holdout, config)
        if bad is not None:
            monotone.append({"seed": seed, "variant": variant, "violations": bad, "users": len(holdout)})
        print(f"seed {seed} {variant}: kl {row['kl']:.5f} mae {row['curve_mae']:.4f} auc {row['auc']:.4f} "
              f"s/epoch {row['seconds_per_epoch']} violations {bad}", file=sys.stderr, flush=True)
    ev = evaluate_policies(preds, Holdout(LoggedEvents.of_frame(holdout), Truth(tv, tc)),
                           EvaluationSettings(list(config.budget_per_capita), f"coman-{seed}",
                                              LevelScale(list(config.incentives), config.ordered, True), seed=seed,
                                              eom_interval=BootstrapInterval(20)))
    ev["seed"] = seed
    info = {"seed": seed, "holdout_users": len(holdout), "train_rows": int((frame["split"] == "train").sum()),
            "budgets": list(config.budget_per_capita), "skipped": skips}
    return rows, ev, monotone, info


def timing(args) -> dict:
    """Median seconds per epoch of the S-learner (DNN) and CoMAN, trained alternately on the same frame
    (same batch size; widths: the S-learner's trunk [64, 32] = CoMAN's tower), and their ratio."""
    from _model_frames import load_training_frame, train_model

    from promo_assets.simulation import SimulationRequest, simulate

    with tempfile.TemporaryDirectory(prefix="coman-timing-") as tmp:
        os.environ["PROMO_ARTIFACTS_DIR"] = str(Path(tmp) / "artifacts")
        request = SimulationRequest("coman-t", Path(tmp) / "landing", days=args.days, users=args.users, seed=0,
                                    start=REFERENCE_START)
        s = simulate("coman_spatiotemporal", request, incentive=args.incentive)
        frame, config, numeric, categorical = load_training_frame(s.campaign_dir)
        out: dict[str, list[float]] = {"s_learner": [], "coman": [], "cmnn": []}
        for _ in range(args.timing_repeats):
            for model in out:
                f = train_model(model, frame, config, numeric, categorical, seed=0, max_epochs=2,
                                batch_size=args.batch_size, patience=5)
                out[model].append(float(f.metrics["seconds_per_epoch"]))
    med = {m: float(np.median(v)) for m, v in out.items()}
    return {"seconds_per_epoch": out, "median": med, "coman / s_learner": med["coman"] / med["s_learner"],
            "cmnn / s_learner": med["cmnn"] / med["s_learner"], "train_rows": int((frame["split"] == "train").sum())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--days", type=int, default=10)
    ap.add_argument("--users", type=int, default=3000)
    ap.add_argument("--incentive", default="coupon", choices=["coupon", "fee_waiver"])
    ap.add_argument("--max-epochs", type=int, default=25)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", nargs="*", default=None, help="a subset of: " + ", ".join(VARIANTS))
    ap.add_argument("--timing-repeats", type=int, default=0,
                    help="only time: train DNN and CoMAN alternately this many times (2 epochs) on seed 0's data "
                         "and print the median seconds per epoch and their ratio")
    ap.add_argument("--pipeline-seeds", type=int, nargs="*", default=[],
                    help="also run promo simulate + promo run for these seeds (the pipeline's policy_evaluation)")
    args = ap.parse_args()
    import torch
    from _results import Recorder

    rec = Recorder("coman_paper")
    torch.set_num_threads(args.threads)
    if args.timing_repeats:
        t = timing(args)
        print(json.dumps(t, indent=1))
        rec.write(t, tag="timing")
        return
    started = time.perf_counter()
    all_rows, evals, mono, infos = [], [], [], []
    for seed in args.seeds:
        rows, ev, m, info = run_seed(seed, args)
        all_rows += rows
        evals.append(ev)
        mono += m
        infos.append(info)
    df = pd.DataFrame(all_rows)
    ev = pd.concat(evals, ignore_index=True)
    overall = df[df["segment_by"] == "all"]
    cols = ["auc", "curve_mse", "curve_mae", "kl", "corr", "seconds_per_epoch"]
    table1 = overall.groupby("variant", sort=False)[cols].agg(["mean", "std"])
    per_period = df[df["segment_by"] == "period_of_day"].groupby(["variant", "segment_value"], sort=False)[
        ["curve_mae", "kl"]].mean().unstack("segment_value")
    per_city = df[df["segment_by"] == "city"].groupby(["variant", "segment_value"], sort=False)[
        ["curve_mae", "kl"]].mean().unstack("segment_value")
    decision = ev.groupby(["model", "budget_per_capita"], sort=False)["pct_oracle"].agg(["mean", "std"]).unstack(
        "budget_per_capita")
    spend = ev.groupby(["model", "budget_per_capita"], sort=False)["spend_ratio"].mean().unstack("budget_per_capita")
    mean = overall.groupby("variant", sort=False)[cols].mean()

    def better(a: str, b: str, metric: str) -> dict:
        per = df[df["segment_by"] == "period_of_day"].groupby(["segment_value", "variant"])[metric].mean().unstack("variant")
        return {"overall": bool(mean.loc[a, metric] < mean.loc[b, metric]),
                "periods_better": int((per[a] < per[b]).sum()), "periods": int(len(per))}

    checks = {}
    if {"CoMAN", "CMNN(CLU)", "FPM"} <= set(mean.index):
        checks = {f"CoMAN < {b} on {m}": better("CoMAN", b, m) for b in ("CMNN(CLU)", "FPM") for m in ("kl", "curve_mae")}
    if {"CMNN(CLU)", "CMNN(ReLU)"} <= set(mean.index):
        checks["CMNN(CLU) KL <= CMNN(ReLU) KL"] = bool(mean.loc["CMNN(CLU)", "kl"] <= mean.loc["CMNN(ReLU)", "kl"])
    if {"CoMAN", "DNN"} <= set(mean.index):
        checks["time per epoch CoMAN / DNN"] = float(mean.loc["CoMAN", "seconds_per_epoch"] / mean.loc["DNN", "seconds_per_epoch"])
    pipeline = []
    if args.pipeline_seeds:
        from _pipeline_bench import evaluate_campaign

        for seed in args.pipeline_seeds:
            rows, info = evaluate_campaign("coman_spatiotemporal", seed, days=args.days, users=args.users,
                                           max_epochs=args.max_epochs)
            pipeline.append({"info": info, "rows": rows[["model", "budget_per_capita", "pct_oracle", "spend_ratio"]]
                             .to_dict("records")})
    for title, t in (("Table 1 analogue (mean, std over seeds)", table1), ("MAE and KL per period of day", per_period),
                     ("MAE and KL per city", per_city), ("pct_oracle at matched true spend per budget", decision),
                     ("true spend / budget as made", spend)):
        print(f"\n## {title}\n", file=sys.stderr)
        print(t.round(5).to_markdown(), file=sys.stderr)
    mono_df = pd.DataFrame(mono)
    figures = {
        "args": vars(args), "seconds": round(time.perf_counter() - started, 1), "seeds": infos,
        "table1_mean": mean.round(6).to_dict("index"),
        "table1_std": overall.groupby("variant", sort=False)[cols].std().round(6).to_dict("index"),
        "per_period": {v: {f"{m}|{p}": round(float(x), 6) for (m, p), x in r.items()} for v, r in per_period.iterrows()},
        "per_city": {v: {f"{m}|{p}": round(float(x), 6) for (m, p), x in r.items()} for v, r in per_city.iterrows()},
        "pct_oracle": {m: {f"{s}|{b}": round(float(x), 3) for (s, b), x in r.items()} for m, r in decision.iterrows()},
        "monotonicity_violations": mono_df.groupby("variant")["violations"].sum().to_dict() if len(mono_df) else {},
        "checks": checks, "pipeline": pipeline,
    }
    print(json.dumps(figures, indent=1, default=str))
    rec.write(figures, headline={f"{v}: KL / MAE (x 1e-2)": f"{100 * r['kl']:.2f} / {100 * r['curve_mae']:.2f}"
                                for v, r in mean.iterrows()} | {k: (v if not isinstance(v, dict) else
                                f"{'yes' if v['overall'] else 'no'} overall, {v['periods_better']}/{v['periods']} periods")
                                for k, v in checks.items()})


if __name__ == "__main__":
    main()
