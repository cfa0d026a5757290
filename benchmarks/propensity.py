"""Propensity model quality on a confounded demo campaign: estimated vs true propensities.

Simulates `demo` with logging='confounded' (active users get lower incentives; the events carry no
propensity), fits PropensityModel on the training window (train + validation splits, i.e. every day
but the holdout day), and prints as JSON (then a table):
  - mean absolute error of estimated vs true P(level | user), over all events x levels and per level,
    on the training window and on the holdout day;
  - the same error of the naive uniform guess 1/K for scale;
  - IPS weights (clip from campaign.yaml, self-normalized) from the estimated and the true
    propensities: ESS, ESS / N, largest weight;
  - calibration metrics (held-out log loss and class-wise ECE before / after temperature scaling), fit time.

Usage: python benchmarks/propensity.py [--users 8000] [--days 14] [--seed 0] [--splines]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _model_frames import load_events  # noqa: E402
from _results import Recorder  # noqa: E402

from promo_assets.causal import (  # noqa: E402
    PropensityModel,
    assign_split,
    effective_sample_size,
    ips_weights,
    propensity_diagnostics,
)
from promo_assets.simulation import REFERENCE_START, SimulationRequest, simulate, true_propensity_arrays  # noqa: E402

NUMERIC = ["age", "activity", "tenure_days", "avg_spend"]
CATEGORICAL = ["city", "device", "period_of_day"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=8000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--confounding", type=float, default=2.0)
    ap.add_argument("--splines", action="store_true", help="add the spline basis of numeric features")
    args = ap.parse_args()
    rec = Recorder("propensity")

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary = simulate("demo",
                           SimulationRequest("confounded", Path(tmp), days=args.days, users=args.users, seed=args.seed,
                                             start=REFERENCE_START),
                           logging="confounded", confounding=args.confounding)
        sim_s = time.perf_counter() - t0
        events, config, _, _ = load_events(summary.campaign_dir)  # the pipeline's landing reader
        truth = true_propensity_arrays(summary.campaign_dir, events["user_id"].to_numpy())
    k = config.n_levels
    split = assign_split(events, holdout_days=config.holdout_days, validation_fraction=config.validation_fraction)
    window = (split != "holdout").to_numpy()

    t0 = time.perf_counter()
    model = PropensityModel(splines=args.splines).fit(events[window], NUMERIC, CATEGORICAL, k, seed=args.seed)
    fit_s = time.perf_counter() - t0
    proba = model.predict_proba(events)
    err = np.abs(proba - truth)
    rows = np.arange(len(events))
    level = events["level"].to_numpy()
    w_est = ips_weights(proba[rows, level], clip=config.ips_clip)
    w_true = ips_weights(truth[rows, level], clip=config.ips_clip)
    diag = propensity_diagnostics(proba[window], level[window], w_est[window])

    result = {
        "benchmark": "propensity",
        "campaign": {"preset": "demo", "logging": "confounded", "confounding": args.confounding, "users": args.users,
                     "days": args.days, "seed": args.seed, "events": int(len(events)),
                     "training_window_events": int(window.sum()), "holdout_events": int((~window).sum()),
                     "levels": list(config.incentives), "ips_clip": config.ips_clip},
        "model": {"splines": args.splines, "fit_seconds": round(fit_s, 2), **{k_: round(v, 5) for k_, v in model.metrics.items()}},
        "mae": {
            "all_events": float(err.mean()),
            "training_window": float(err[window].mean()),
            "holdout": float(err[~window].mean()),
            "per_level": [float(x) for x in err.mean(axis=0)],
            "logged_level": float(err[rows, level].mean()),
            "max_abs_error": float(err.max()),
            "uniform_guess": float(np.abs(1.0 / k - truth).mean()),
        },
        "weights_estimated": {"ess": effective_sample_size(w_est), "ess_fraction": effective_sample_size(w_est) / len(w_est),
                              "max_weight": float(w_est.max()), "share_clipped": float((1.0 / proba[rows, level] > config.ips_clip).mean())},
        "weights_true": {"ess": effective_sample_size(w_true), "ess_fraction": effective_sample_size(w_true) / len(w_true),
                         "max_weight": float(w_true.max())},
        "overlap_training_window": {"min_propensity": diag["min_propensity"], "share_below_0.01": diag["share_below_0.01"],
                                    "per_level_p01": [o["p01"] for o in diag["overlap"]]},
        "simulate_seconds": round(sim_s, 2),
    }
    print(json.dumps(result, indent=2))
    rec.write(result, headline={"propensity MAE (estimated vs true)": round(result["mae"]["all_events"], 4),
                               "MAE of the uniform guess 1/K": round(result["mae"]["uniform_guess"], 4),
                               "ESS / N, estimated propensities": round(result["weights_estimated"]["ess_fraction"], 3),
                               "ESS / N, true propensities": round(result["weights_true"]["ess_fraction"], 3)})
    print("\nlevel  incentive  MAE(est vs true)  mean true P  mean est P", file=sys.stderr)
    for j in range(k):
        print(f"{j:5d}  {config.incentives[j]:9g}  {err[:, j].mean():16.4f}  {truth[:, j].mean():11.4f}  {proba[:, j].mean():10.4f}",
              file=sys.stderr)
    print(f"all    MAE {result['mae']['all_events']:.4f} (uniform guess {result['mae']['uniform_guess']:.4f}); "
          f"ESS/N est {result['weights_estimated']['ess_fraction']:.3f}, true {result['weights_true']['ess_fraction']:.3f}; "
          f"max weight est {result['weights_estimated']['max_weight']:.2f}; fit {fit_s:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
