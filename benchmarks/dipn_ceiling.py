"""How close to the oracle can ANY model get from the paper's 5,000 training samples?

The DIPN synthetic data (§5.1) has one true response curve per feature combination (3 one-hot
categorical features, n1 n2 n3 combinations), so a model can at best learn each combination's curve
from that combination's training samples. This script measures the future response (true per-capita
response of the allocation at per-capita cost 11.0, same protocol as benchmarks/dipn_paper.py) of
curve estimators that need no neural network and use the same 'train' rows:

- `isotonic`: per-combination weighted isotonic regression of the 0/1 labels on the level
  (sklearn IsotonicRegression, increasing); combinations without train rows get the pooled fit;
- `mle_true_family`: per-combination maximum-likelihood fit of the TRUE curve family (Eq. 19-20,
  parameters a, mu, delta, multi-start L-BFGS-B): a correctly specified parametric model, i.e. a
  generous ceiling for any model that does not know the generator;
- `oracle`: the true curves.

It prints one line per seed and one JSON object with the mean share of the oracle per estimator.

    .venv/bin/python benchmarks/dipn_ceiling.py [--presets dipn_synthetic_2] [--seeds 0 1 2 3 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from sklearn.isotonic import IsotonicRegression

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _model_frames import load_events, load_population  # noqa: E402
from _results import Recorder  # noqa: E402

from promo_assets.allocation import solve  # noqa: E402
from promo_assets.simulation import REFERENCE_START, SimulationRequest, simulate, truth_arrays  # noqa: E402
from promo_assets.simulation.dipn import dipn_curves  # noqa: E402

FEATURES = ["cat1", "cat2", "cat3"]


def combo_keys(frame) -> np.ndarray:
    return frame[FEATURES].astype(str).agg("|".join, axis=1).to_numpy()


def fit_isotonic(levels: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    iso.fit(levels.astype(float), y.astype(float))
    return iso.predict(np.arange(k, dtype=float))


def fit_true_family(incentives: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """MLE of (a, mu, delta) of Eq. 19-20 on Bernoulli labels y at integer incentives."""
    idx = incentives.astype(np.int64)

    def nll(theta):
        a, mu, delta = theta
        p = np.clip(dipn_curves(np.array([a]), np.array([mu]), np.array([delta]))[0, idx], 1e-6, 1 - 1e-6)
        return -float(np.sum(y * np.log(p) + (1 - y) * np.log1p(-p)))

    best, best_val = None, np.inf
    a0 = float(np.clip(y.mean() * 0.5, 0.01, 0.99))
    for mu0 in (-25.0, 25.0, 75.0, 125.0):
        for d0 in (5.0, 25.0, 45.0):
            r = minimize(nll, np.array([a0, mu0, d0]), method="L-BFGS-B",
                         bounds=[(1e-4, 1 - 1e-4), (-50.0, 150.0), (0.05, 50.0)])
            if r.fun < best_val:
                best, best_val = r.x, r.fun
    a, mu, delta = best
    return dipn_curves(np.array([a]), np.array([mu]), np.array([delta]))[0, grid.astype(np.int64)]


def run_one(preset: str, seed: int, args, root: Path) -> dict:
    n_train, n_val, n_test = args.train_size, args.validation_size, args.test_size
    campaign = f"{preset}_{seed}"
    simulate(preset, SimulationRequest(campaign, root, days=1, users=n_train + n_val + n_test, seed=seed,
                                       start=REFERENCE_START),
             overwrite=True, daily_active=1.0)
    cdir = root / campaign
    frame, config, _, _ = load_events(cdir)
    order = np.random.default_rng(seed).permutation(len(frame))   # the same split as dipn_paper.py
    train = frame.iloc[order[:n_train]]
    population = load_population(cdir)
    true_values, true_costs = truth_arrays(cdir, population["user_id"].to_numpy())
    incentives = np.asarray(config.incentives, dtype=float)
    k = len(incentives)
    rows = np.arange(len(population))
    pop_keys = combo_keys(population)
    tr_keys = combo_keys(train)
    lv, y = train["level"].to_numpy(), train["response"].to_numpy(dtype=float)
    pooled = fit_isotonic(lv, y, k)
    out = {"preset": preset, "seed": seed, "n_combinations_in_population": int(len(set(pop_keys))),
           "train_rows_per_combination_median": float(np.median(np.unique(tr_keys, return_counts=True)[1]))}
    oracle = solve(true_values, true_costs, args.budget, per_capita=True, seed=seed).levels
    out["oracle"] = float(true_values[rows, oracle].mean())
    for name in ("isotonic", "mle_true_family"):
        curves = {}
        for key in np.unique(pop_keys):
            m = tr_keys == key
            if not m.any():
                curves[key] = pooled
            elif name == "isotonic":
                curves[key] = fit_isotonic(lv[m], y[m], k)
            else:
                curves[key] = fit_true_family(incentives[lv[m]], y[m], incentives)
        values = np.stack([curves[key] for key in pop_keys])
        alloc = solve(values, values * incentives[None, :], args.budget, per_capita=True, seed=seed).levels
        out[name] = float(true_values[rows, alloc].mean())
        out[name + "_cost"] = float(true_costs[rows, alloc].mean())
        out[name + "_share"] = out[name] / out["oracle"]
        out[name + "_curve_mae"] = float(np.abs(values - true_values).mean())
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["dipn_synthetic_1", "dipn_synthetic_2"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--train-size", type=int, default=5000)
    ap.add_argument("--validation-size", type=int, default=5000)
    ap.add_argument("--test-size", type=int, default=10000)
    ap.add_argument("--budget", type=float, default=11.0)
    args = ap.parse_args(argv)
    rec = Recorder("dipn_ceiling", argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="dipn_ceiling_") as tmp:
        for preset in args.presets:
            for seed in args.seeds:
                r = run_one(preset, seed, args, Path(tmp))
                runs.append(r)
                print(f"{preset} seed {seed}: oracle {r['oracle']:.4f}; isotonic {r['isotonic']:.4f} "
                      f"({100 * r['isotonic_share']:.1f}%), true-family MLE {r['mle_true_family']:.4f} "
                      f"({100 * r['mle_true_family_share']:.1f}%)", flush=True)
    summary = {"benchmark": "dipn_ceiling", "train_size": args.train_size, "budget_per_capita": args.budget,
               "presets": {p: {k: float(np.mean([r[k] for r in runs if r["preset"] == p]))
                               for k in ("oracle", "isotonic", "isotonic_share", "mle_true_family",
                                         "mle_true_family_share", "isotonic_curve_mae",
                                         "mle_true_family_curve_mae")} for p in args.presets},
               "runs": runs}
    print(json.dumps(summary))
    rec.write(summary, headline={f"{p}: % of oracle, per-combination isotonic": round(100 * s["isotonic_share"], 1)
                                for p, s in summary["presets"].items()}
              | {f"{p}: % of oracle, true-family MLE": round(100 * s["mle_true_family_share"], 1)
                 for p, s in summary["presets"].items()})
    return summary


if __name__ == "__main__":
    main()
