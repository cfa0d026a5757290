"""The DIPN paper's synthetic comparison (Tables 2-3), DNN S-learner vs DIPN.

For each preset (`dipn_synthetic_1`: categories (2,2,2); `dipn_synthetic_2`: (3,5,7); 100 levels =
promotions 1..100, cost = promotion x response) and seed, the simulator writes one day with every
pool user active, i.e. the paper's data points (default: 5,000 training, 5,000 validation and
10,000 test events, as in the paper; `--train-size` changes the first). Both models train with the
same seed and the same hidden sizes (the S-learner's shared MLP and DIPN's uplift MLP, `--hidden`;
the S-learner's 2K heads are linear, its cheapest form), IPS weights from the logged (uniform)
propensities. Reported per model, averaged over seeds:

- LogLoss, AUC, RPR, EPR, MLSS on the test events (`promo_assets.evaluation.curve_metrics`, DIPN §5);
- future response / future cost: allocate the whole simulated population with
  `promo_assets.allocation.solve(values, costs, 11.0, per_capita=True)` on the model's coefficients
  and read the true per-capita response and cost of that allocation from the truth files; the
  oracle is the same allocator on the true curves;
- training seconds per epoch (DIPN: the uplift phase, which sees all samples like the S-learner;
  the bias phase sees the lowest level only and is reported separately), measured apart from the
  quality runs on each preset's first seed: a warm-up run per model, then `--timing-repeats`
  alternating runs of `--timing-epochs` epochs with early stopping off, median per model;
- two references that put "% of oracle" on a scale: `flat`, the best single level for everyone within
  the budget (read from the truth: no personalization), and `isotonic`, a per-feature-combination
  isotonic regression of the train labels on the level (sklearn; possible here only because the
  features are three categoricals, so every user's curve is its combination's curve).
  benchmarks/dipn_ceiling.py adds a correctly specified parametric fit (the generator's own family)
  as a ceiling for what the 5,000 training samples can support.

Prints a table shaped like the paper's Tables 2-3, then one JSON object.

    .venv/bin/python benchmarks/dipn_paper.py [--seeds 0 1 2 3 4] [--quick] [--presets ...]
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
from sklearn.isotonic import IsotonicRegression  # noqa: E402

from promo_assets.allocation import solve  # noqa: E402
from promo_assets.causal import ips_weights  # noqa: E402
from promo_assets.evaluation.curve_metrics import LevelScale, curve_metrics  # noqa: E402
from promo_assets.simulation import REFERENCE_START, SimulationRequest, simulate, truth_arrays  # noqa: E402

MODELS = ("s_learner", "dipn")
LABELS = {"s_learner": "DNN (S-learner)", "dipn": "DIPN"}
METRICS = ("logloss", "auc", "rpr", "epr", "mlss", "future_response", "future_cost", "seconds_per_epoch")


def isotonic_curves(train, population, categorical: list[str], k: int) -> np.ndarray:
    """Per-combination isotonic regression of the train responses on the level (N_population x K);
    combinations without train rows get the pooled fit."""
    def fit(levels, y):
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        return iso.fit(levels.astype(float), y.astype(float)).predict(np.arange(k, dtype=float))

    tr_keys = train[categorical].astype(str).agg("|".join, axis=1).to_numpy()
    pop_keys = population[categorical].astype(str).agg("|".join, axis=1).to_numpy()
    lv, y = train["level"].to_numpy(), train["response"].to_numpy(dtype=float)
    pooled = fit(lv, y)
    curves = {key: (fit(lv[tr_keys == key], y[tr_keys == key]) if (tr_keys == key).any() else pooled)
              for key in np.unique(pop_keys)}
    return np.stack([curves[key] for key in pop_keys])


def split_frame(preset: str, seed: int, args, root: Path):
    """Simulate one day with every pool user active and split its events at random into the
    train / validation / test sizes; IPS weights from the logged propensities."""
    n_train, n_val, n_test = args.train_size, args.validation_size, args.test_size
    campaign = f"{preset}_{seed}"
    simulate(preset, SimulationRequest(campaign, root, days=1, users=n_train + n_val + n_test, seed=seed,
                                       start=REFERENCE_START),
             overwrite=True, daily_active=1.0)
    frame, config, numeric, categorical = load_events(root / campaign)
    order = np.random.default_rng(seed).permutation(len(frame))
    split = np.empty(len(frame), dtype=object)
    split[order[:n_train]] = "train"
    split[order[n_train:n_train + n_val]] = "validation"
    split[order[n_train + n_val:]] = "holdout"
    frame["split"] = split
    frame["ips_weight"] = ips_weights(frame["propensity"].to_numpy(), clip=config.ips_clip)
    return frame, config, numeric, categorical


def run_one(preset: str, seed: int, args, root: Path) -> dict:
    frame, config, numeric, categorical = split_frame(preset, seed, args, root)
    cdir = root / f"{preset}_{seed}"
    test = frame[frame["split"] == "holdout"]
    population = load_population(cdir)
    true_values, true_costs = truth_arrays(cdir, population["user_id"].to_numpy())
    rows = np.arange(len(population))
    oracle = solve(true_values, true_costs, args.budget, per_capita=True, seed=seed).levels
    out = {"preset": preset, "seed": seed, "events": int(len(frame)), "population": int(len(population)),
           "oracle_future_response": float(true_values[rows, oracle].mean()),
           "oracle_future_cost": float(true_costs[rows, oracle].mean())}
    within = [k for k in range(true_values.shape[1]) if true_costs[:, k].mean() <= args.budget]
    flat_level = max(within, key=lambda k: true_values[:, k].mean())
    out["flat_future_response"] = float(true_values[:, flat_level].mean())
    out["flat_level"] = int(flat_level)
    iso = isotonic_curves(frame[frame["split"] == "train"], population, categorical, true_values.shape[1])
    iso_levels = np.asarray(solve(iso, iso * np.asarray(config.incentives)[None, :], args.budget,
                                  per_capita=True, seed=seed).levels)
    out["isotonic_future_response"] = float(true_values[rows, iso_levels].mean())
    out["isotonic_future_cost"] = float(true_costs[rows, iso_levels].mean())
    for name in MODELS:
        kw = {"hidden": tuple(args.hidden)}
        if name == "s_learner":
            kw["head_hidden"] = 0
        t0 = time.perf_counter()
        model = train_model(name, frame, config, numeric, categorical, seed=seed, max_epochs=args.max_epochs, **kw)
        seconds = time.perf_counter() - t0
        pred_test, _ = model.predict(test)
        m = curve_metrics(pred_test, test["level"].to_numpy(), test["response"].to_numpy(),
                          scale=LevelScale(incentives=config.incentives))
        values, costs = model.predict(population)
        alloc = solve(values, costs, args.budget, per_capita=True, seed=seed)
        levels = np.asarray(alloc.levels)
        m.update({
            "future_response": float(true_values[rows, levels].mean()),
            "future_cost": float(true_costs[rows, levels].mean()),
            "predicted_cost": float(costs[rows, levels].mean()),
            "curve_mae": float(np.abs(values - true_values).mean()),
            "seconds_per_epoch": float(model.metrics["seconds_per_epoch"]),
            "epochs": int(model.metrics["epochs"]),
            "best_epoch": int(model.metrics["best_epoch"]),
            "train_seconds": seconds,
        })
        if name == "dipn":
            m["bias_seconds_per_epoch"] = float(model.metrics.get("bias_seconds_per_epoch", float("nan")))
            m["bias_epochs"] = int(model.metrics["bias_epochs"])
        out[name] = m
    return out


def time_epochs(preset: str, args, root: Path) -> dict:
    """Training seconds per epoch of both models on one frame (the preset's first seed), measured
    apart from the quality runs: one warm-up run each (imports, numba's compiled kernel), then
    `--timing-repeats` runs of `--timing-epochs` epochs each with early stopping off, alternating
    DNN and DIPN so that machine noise hits both alike; the median per model is reported."""
    seed = args.seeds[0]
    frame, config, numeric, categorical = split_frame(preset, seed, args, root)
    per_model: dict[str, list[float]] = {name: [] for name in MODELS}
    for repeat in range(-1, args.timing_repeats):
        for name in MODELS:
            kw = {"hidden": tuple(args.hidden), "patience": args.timing_epochs}
            if name == "s_learner":
                kw["head_hidden"] = 0
            model = train_model(name, frame, config, numeric, categorical, seed=seed,
                                max_epochs=1 if repeat < 0 else args.timing_epochs, **kw)
            if repeat >= 0:
                per_model[name].append(float(model.metrics["seconds_per_epoch"]))
    med = {name: float(np.median(v)) for name, v in per_model.items()}
    return {"epochs": args.timing_epochs, "repeats": args.timing_repeats, "seconds_per_epoch": per_model,
            "median_seconds_per_epoch": med, "ratio_of_medians": med["dipn"] / med["s_learner"],
            "ratio_per_repeat": [d / s for d, s in zip(per_model["dipn"], per_model["s_learner"])]}


def summarize(runs: list[dict], preset: str) -> dict:
    sel = [r for r in runs if r["preset"] == preset]
    s = {"seeds": [r["seed"] for r in sel],
         "oracle_future_response": float(np.mean([r["oracle_future_response"] for r in sel]))}
    for ref in ("flat", "isotonic"):
        s[f"{ref}_future_response"] = float(np.mean([r[f"{ref}_future_response"] for r in sel]))
        s[f"{ref}_share_of_oracle"] = s[f"{ref}_future_response"] / s["oracle_future_response"]
    for name in MODELS:
        s[name] = {k: float(np.mean([r[name][k] for r in sel])) for k in (*METRICS, "curve_mae", "train_seconds")}
        s[name]["rpr_max_over_seeds"] = float(max(r[name]["rpr"] for r in sel))
        s[name]["share_of_oracle"] = s[name]["future_response"] / s["oracle_future_response"]
    # context only: the quality runs' own per-epoch means (early stopping, the first run pays the warm-up)
    s["quality_runs_time_ratio"] = s["dipn"]["seconds_per_epoch"] / s["s_learner"]["seconds_per_epoch"]
    s["dipn_future_response_ge_dnn_seeds"] = int(sum(r["dipn"]["future_response"] >= r["s_learner"]["future_response"]
                                                    for r in sel))
    return s


def print_table(preset: str, s: dict, budget: float) -> None:
    print(f"\n{preset}  (mean over seeds {s['seeds']})")
    print(f"{'':32}{LABELS['s_learner']:>18}{LABELS['dipn']:>12}")
    rows = [("LogLoss (lower is better)", "logloss", 4), ("AUC-ROC", "auc", 4), ("RPR (lower is better)", "rpr", 4),
            ("EPR (lower is better)", "epr", 4), ("MLSS (lower is better)", "mlss", 4),
            ("Future response", "future_response", 4), (f"Future cost (constraint = {budget:g})", "future_cost", 2),
            ("Curve MAE vs truth", "curve_mae", 4), ("Seconds per epoch", "seconds_per_epoch", 3)]
    for label, key, nd in rows:
        print(f"{label:32}{s['s_learner'][key]:>18.{nd}f}{s['dipn'][key]:>12.{nd}f}")
    print(f"{'Oracle future response':32}{s['oracle_future_response']:>18.4f}")
    print(f"References: best single level {s['flat_future_response']:.4f} ({100 * s['flat_share_of_oracle']:.1f}% "
          f"of oracle), per-combination isotonic {s['isotonic_future_response']:.4f} "
          f"({100 * s['isotonic_share_of_oracle']:.1f}%)")
    print(f"DIPN: {100 * s['dipn']['share_of_oracle']:.1f}% of oracle (DNN {100 * s['s_learner']['share_of_oracle']:.1f}%), "
          f"max RPR over seeds {s['dipn']['rpr_max_over_seeds']:g}, future response >= DNN on "
          f"{s['dipn_future_response_ge_dnn_seeds']}/{len(s['seeds'])} seeds")
    t = s.get("timing")
    if t:
        med = t["median_seconds_per_epoch"]
        print(f"Training seconds per epoch (median of {t['repeats']} alternating runs of {t['epochs']} epochs, "
              f"after a warm-up): DNN {med['s_learner']:.4f}, DIPN {med['dipn']:.4f}, DIPN/DNN "
              f"{t['ratio_of_medians']:.2f} (per run {', '.join(f'{r:.2f}' for r in t['ratio_per_repeat'])})")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["dipn_synthetic_1", "dipn_synthetic_2"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--train-size", type=int, default=5000)
    ap.add_argument("--validation-size", type=int, default=5000)
    ap.add_argument("--test-size", type=int, default=10000)
    ap.add_argument("--budget", type=float, default=11.0, help="per-capita cost constraint")
    ap.add_argument("--hidden", type=int, nargs="+", default=[64, 32], help="equal hidden sizes of both models")
    ap.add_argument("--max-epochs", type=int, default=None)
    ap.add_argument("--timing-epochs", type=int, default=20, help="epochs per timing run (early stopping off)")
    ap.add_argument("--timing-repeats", type=int, default=7, help="alternating timing runs per model")
    ap.add_argument("--quick", action="store_true", help="2 seeds, at most 25 epochs")
    args = ap.parse_args(argv)
    rec = Recorder("dipn_paper", argv)
    if args.quick:
        args.seeds, args.max_epochs = args.seeds[:2], args.max_epochs or 25
    runs, timing = [], {}
    with tempfile.TemporaryDirectory(prefix="dipn_bench_") as tmp:
        for preset in args.presets:
            timing[preset] = time_epochs(preset, args, Path(tmp))
            print(f"{preset}: DIPN/DNN seconds per epoch {timing[preset]['ratio_of_medians']:.2f}", flush=True)
            for seed in args.seeds:
                runs.append(run_one(preset, seed, args, Path(tmp)))
                r = runs[-1]
                print(f"{preset} seed {seed}: future response DNN {r['s_learner']['future_response']:.4f}, "
                      f"DIPN {r['dipn']['future_response']:.4f}, oracle {r['oracle_future_response']:.4f}; "
                      f"RPR DIPN {r['dipn']['rpr']:g}", flush=True)
    summary = {"benchmark": "dipn_paper", "budget_per_capita": args.budget, "hidden": args.hidden,
               "train_size": args.train_size, "validation_size": args.validation_size, "test_size": args.test_size,
               "max_epochs": args.max_epochs, "presets": {p: {**summarize(runs, p), "timing": timing[p]}
                                                          for p in args.presets}, "runs": runs}
    for p in args.presets:
        print_table(p, summary["presets"][p], args.budget)
    print(json.dumps(summary))
    headline = {}
    for p, s in summary["presets"].items():
        for m in ("s_learner", "dipn"):
            headline[f"{p}: {m} % of the oracle's future response"] = round(100 * s[m]["share_of_oracle"], 1)
        headline[f"{p}: seeds where DIPN >= DNN"] = f"{s['dipn_future_response_ge_dnn_seeds']}/{len(s['seeds'])}"
        headline[f"{p}: DIPN / DNN seconds per epoch"] = round(s["timing"]["ratio_of_medians"], 2)
    rec.write(summary, headline=headline, tag="quick" if args.quick else None)
    return summary


if __name__ == "__main__":
    main()
