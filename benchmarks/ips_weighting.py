"""The S-learner with and without IPS weights on a confounded campaign.

Simulates the `demo` preset with `logging="confounded"` (active users get lower incentives, the DIPN
paper's Figure 3; no propensity logged), estimates the propensities with
`promo_assets.causal.PropensityModel` on the training window, turns them into clipped,
self-normalized weights with `ips_weights(clip=config.ips_clip)`, then trains the DNN S-learner
twice with the same seed and hyper-parameters: unweighted and IPS-weighted. For every user of the
simulated pool it compares the predicted response curve with the true one (truth files) and prints
the mean absolute error averaged over users and levels, and per level, plus the propensity model's
mean absolute error against the true propensities. Output: a readable table, then one JSON object.

By default the response model does not see `activity`, the confounder (the paper's Figure 3: a DNN
"without knowledge of this bias"); the propensity model does. With `--hide` (no names) the
S-learner sees the confounder, conditions on it, and the weights then only add variance.

    .venv/bin/python benchmarks/ips_weighting.py [--seeds 0 1 2] [--quick] [--users N --days D]
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

from _model_frames import load_events, load_population, train_model  # noqa: E402
from _results import Recorder  # noqa: E402

from promo_assets.causal import PropensityModel, assign_split, effective_sample_size, ips_weights  # noqa: E402
from promo_assets.simulation import (  # noqa: E402
    REFERENCE_START,
    SimulationRequest,
    simulate,
    true_propensity_arrays,
    truth_arrays,
)


def run_seed(seed: int, users: int, days: int, confounding: float, max_epochs: int | None, root: Path,
             hparams: dict, hide: list[str]) -> dict:
    campaign = f"ips_demo_{seed}"
    simulate("demo", SimulationRequest(campaign, root, days=days, users=users, seed=seed,
                                       start=REFERENCE_START), overwrite=True,
             logging="confounded", confounding=confounding)
    cdir = root / campaign
    frame, config, numeric, categorical = load_events(cdir)
    frame["split"] = assign_split(frame, config.holdout_days, config.validation_fraction).astype(str).to_numpy()
    fit_rows = frame["split"] != "holdout"

    t0 = time.perf_counter()
    prop = PropensityModel().fit(frame.loc[fit_rows], numeric, categorical, config.n_levels, seed=seed)
    proba = prop.predict_proba(frame)
    p_logged = proba[np.arange(len(frame)), frame["level"].to_numpy()]
    frame["ips_weight"] = ips_weights(p_logged, clip=config.ips_clip)
    true_p = true_propensity_arrays(cdir, frame["user_id"].to_numpy())
    prop_mae = float(np.abs(proba - true_p).mean())
    prop_seconds = time.perf_counter() - t0

    population = load_population(cdir)
    true_values, _ = truth_arrays(cdir, population["user_id"].to_numpy())
    out = {
        "seed": seed, "events": int(len(frame)), "n_train": int((frame["split"] == "train").sum()),
        "propensity_mae": prop_mae, "propensity_seconds": prop_seconds,
        "ips_ess_fraction": effective_sample_size(frame.loc[frame["split"] == "train", "ips_weight"].to_numpy())
        / max(1, int((frame["split"] == "train").sum())),
        "max_weight": float(frame["ips_weight"].max()),
    }
    # the response model may be denied some features (`--hide`): the propensity model still sees them
    num_m = [c for c in numeric if c not in hide]
    cat_m = [c for c in categorical if c not in hide]
    for weighted in (False, True):
        model = train_model("s_learner", frame, config, num_m, cat_m, weighted=weighted, seed=seed,
                            max_epochs=max_epochs, **hparams)
        values, _ = model.predict(population)
        err = np.abs(values - true_values)
        key = "ips" if weighted else "unweighted"
        out[key] = {
            "mae": float(err.mean()),
            "mae_per_level": [float(x) for x in err.mean(axis=0)],
            "bias_per_level": [float(x) for x in (values - true_values).mean(axis=0)],
            "epochs": model.metrics["epochs"], "best_epoch": model.metrics["best_epoch"],
            "seconds_per_epoch": model.metrics["seconds_per_epoch"],
            "version": model.version,
        }
    out["incentives"] = list(config.incentives)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--users", type=int, default=8000)
    ap.add_argument("--days", type=int, default=14, help="daily_active 0.5: events = users * days / 2")
    ap.add_argument("--confounding", type=float, default=2.0)
    ap.add_argument("--max-epochs", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="one seed, 60,000 events, at most 15 epochs")
    ap.add_argument("--hparams", type=json.loads, default={}, help="S-learner hyper-parameters as JSON")
    ap.add_argument("--hide", nargs="*", default=["activity"],
                    help="feature columns the response model does not see (the propensity model does). "
                         "Default: activity, the DIPN paper's Figure 3 setting (a response model 'without "
                         "knowledge of this bias'); `--hide` with no names lets it see the confounder")
    args = ap.parse_args(argv)
    rec = Recorder("ips_weighting", argv)
    if args.quick:
        args.seeds, args.max_epochs = args.seeds[:1], args.max_epochs or 15
    with tempfile.TemporaryDirectory(prefix="ips_bench_") as tmp:
        runs = [run_seed(s, args.users, args.days, args.confounding, args.max_epochs, Path(tmp), args.hparams,
                         args.hide)
                for s in args.seeds]
    incentives = runs[0]["incentives"]
    summary = {
        "benchmark": "ips_weighting", "preset": "demo", "logging": "confounded",
        "confounding": args.confounding, "hidden_from_response_model": args.hide, "users": args.users, "days": args.days, "seeds": args.seeds,
        "events_per_seed": [r["events"] for r in runs],
        "mae_unweighted": float(np.mean([r["unweighted"]["mae"] for r in runs])),
        "mae_ips": float(np.mean([r["ips"]["mae"] for r in runs])),
        "mae_per_level_unweighted": np.mean([r["unweighted"]["mae_per_level"] for r in runs], axis=0).tolist(),
        "mae_per_level_ips": np.mean([r["ips"]["mae_per_level"] for r in runs], axis=0).tolist(),
        "propensity_mae": float(np.mean([r["propensity_mae"] for r in runs])),
        "runs": runs,
    }
    summary["relative_reduction"] = 1.0 - summary["mae_ips"] / summary["mae_unweighted"]
    print(f"S-learner response-curve MAE vs truth, confounded demo ({summary['events_per_seed']} events, "
          f"seeds {args.seeds})")
    print(f"{'level':>6} {'incentive':>9} {'unweighted':>11} {'IPS':>8}")
    for j, inc in enumerate(incentives):
        print(f"{j:>6} {inc:>9g} {summary['mae_per_level_unweighted'][j]:>11.4f} {summary['mae_per_level_ips'][j]:>8.4f}")
    print(f"{'all':>6} {'':>9} {summary['mae_unweighted']:>11.4f} {summary['mae_ips']:>8.4f}   "
          f"(IPS vs unweighted: {100 * (summary['mae_ips'] / summary['mae_unweighted'] - 1):+.1f}%)")
    for r in runs:
        print(f"seed {r['seed']}: unweighted {r['unweighted']['mae']:.4f}, IPS {r['ips']['mae']:.4f}, "
              f"propensity MAE {r['propensity_mae']:.4f}, train ESS/N {r['ips_ess_fraction']:.3f}")
    print(json.dumps(summary))
    rec.write(summary, headline={"response-curve MAE, unweighted": round(summary["mae_unweighted"], 4),
                                "response-curve MAE, IPS-weighted": round(summary["mae_ips"], 4),
                                "relative reduction": round(summary["relative_reduction"], 3)})
    return summary


if __name__ == "__main__":
    main()
