"""The LightGBM baselines against the S-learner at equal true spend, on `demo`,
`dipn_synthetic_2`, `e2e_synthetic` and `bipartite` (customer side), 5 seeds.

Each (preset, seed): the campaign is simulated and read with the propensity / split / IPS weight
columns (`_honest_bench.simulated_events`); every model is fitted through the model registry
(`promo_assets.models.registry`, through `_model_frames.train_model`) on the training days, scored on the holdout events, allocated with the project's allocator
(`promo_assets.allocation.solve`, through `evaluate_policies`) at every budget of the preset, and
measured at equal spend against the truth (`promo_assets.evaluation.honest`: pct_oracle = true
value at matched true spend / the oracle's, spend ratio = true cost of the allocation as made /
budget). No outcome model (these figures do not use it) and one bootstrap replicate.

Prints one line per campaign, then the table (mean pct_oracle / mean spend ratio / mean training
seconds per model x preset, over seeds and budgets) and one JSON object with every figure.

    .venv/bin/python benchmarks/lgbm_baselines.py [--seeds 0 1 2 3 4] [--presets ...]
        [--models lgbm_s lgbm_s_mono lgbm_t s_learner] [--days D --users N] [--max-epochs 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _honest_bench import PRESET_SIZES, simulated_events  # noqa: E402
from _model_frames import train_model  # noqa: E402
from _results import Recorder  # noqa: E402

from promo_assets.evaluation import (  # noqa: E402
    BootstrapInterval,
    EvaluationSettings,
    Holdout,
    LoggedEvents,
    Truth,
    evaluate_policies,
)
from promo_assets.models.protocol import ModelSkipped  # noqa: E402
from promo_assets.simulation import truth_arrays  # noqa: E402

PRESETS = ("demo", "dipn_synthetic_2", "e2e_synthetic", "bipartite")
MODELS = ("lgbm_s", "lgbm_s_mono", "lgbm_t", "s_learner")


def fit(name, events, config, numeric, categorical, seed, max_epochs):
    """The fitted registered model (ModelSkipped with the reason when it does not apply)."""
    return train_model(name, events, config, numeric, categorical, seed=seed, max_epochs=max_epochs)


def run_campaign(preset: str, seed: int, models, days: int, users: int, max_epochs: int):
    with tempfile.TemporaryDirectory(prefix=f"lgbm-{preset}-{seed}-") as tmp:
        campaign, cdir, events, config, numeric, categorical = simulated_events(preset, seed, tmp, days, users)
        holdout = events[events["split"] == "holdout"].reset_index(drop=True)
        true_values, true_costs = truth_arrays(cdir, holdout["user_id"].astype(str).tolist())
    specs, seconds, skipped = {}, {}, {}
    for name in models:
        start = time.perf_counter()
        try:
            trained = fit(name, events, config, numeric, categorical, seed, max_epochs)
        except ModelSkipped as exc:
            skipped[name] = str(exc)
            continue
        seconds[name] = time.perf_counter() - start
        values, costs = trained.predict(holdout)
        specs[name] = (trained.version, values, costs)
    rows = evaluate_policies(
        specs, Holdout(LoggedEvents.of_frame(holdout), Truth(true_values, true_costs)),
        EvaluationSettings.from_config(config, campaign, seed=seed, eom_interval=BootstrapInterval(1)))
    rows = rows[rows["model"].isin(list(specs))].assign(preset=preset, seed=seed)
    rows["train_seconds"] = rows["model"].map(seconds)
    info = {"preset": preset, "seed": seed, "levels": config.n_levels, "training_events": int((events["split"] != "holdout").sum()),
            "holdout_events": len(holdout), "skipped": skipped}
    return rows, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--presets", nargs="+", default=list(PRESETS))
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--days", type=int, default=None, help="days per campaign (default: _honest_bench.PRESET_SIZES)")
    ap.add_argument("--users", type=int, default=None, help="user pool (default: _honest_bench.PRESET_SIZES)")
    ap.add_argument("--max-epochs", type=int, default=20, help="the neural models' epochs (LightGBM: early stopping)")
    args = ap.parse_args()
    rec = Recorder("lgbm_baselines")
    frames, runs = [], []
    for preset in args.presets:
        d0, u0 = PRESET_SIZES[preset]
        for seed in args.seeds:
            rows, info = run_campaign(preset, seed, args.models, args.days or d0, args.users or u0, args.max_epochs)
            frames.append(rows)
            runs.append(info)
            per = rows.groupby("model", sort=False).agg(p=("pct_oracle", "mean"), s=("train_seconds", "first"))
            print(f"{preset} seed {seed}: " + ", ".join(f"{m} {100 * r.p:.1f}% ({r.s:.1f} s)" for m, r in per.iterrows())
                  + (f"; skipped {info['skipped']}" if info["skipped"] else ""), flush=True)
    rows = pd.concat(frames, ignore_index=True)
    table = rows.groupby(["model", "preset"]).agg(pct_oracle=("pct_oracle", "mean"), spend_ratio=("spend_ratio", "mean"),
                                                  train_seconds=("train_seconds", "mean"),
                                                  rows=("pct_oracle", "size")).reset_index()
    best = table.groupby("preset")["pct_oracle"].transform("max")
    table["points_below_best"] = 100 * (best - table["pct_oracle"])
    cell = {(r.model, r.preset): f"{100 * r.pct_oracle:5.1f}% / {r.spend_ratio:.3f} / {r.train_seconds:5.1f}s"
            for r in table.itertuples()}
    print("mean % oracle at matched true spend / mean spend ratio as made / mean training seconds "
          f"(over seeds {args.seeds} and the presets' budgets)")
    print(f"{'model':12}" + "".join(f"{p:>30}" for p in args.presets))
    for m in args.models:
        print(f"{m:12}" + "".join(f"{cell.get((m, p), 'skipped'):>30}" for p in args.presets))
    figures = {"benchmark": "lgbm_baselines", "seeds": args.seeds, "presets": args.presets,
               "max_epochs": args.max_epochs, "table": table.to_dict(orient="records"), "runs": runs}
    print(json.dumps(figures, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))
    rec.write(figures, headline={f"{r.preset}: {r.model} % oracle / spend ratio / training s":
                                f"{100 * r.pct_oracle:.1f}% / {r.spend_ratio:.3f} / {r.train_seconds:.1f} s" for r in table.itertuples()})


if __name__ == "__main__":
    main()
