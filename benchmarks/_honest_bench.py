"""Shared by benchmarks/leaderboard.py and benchmarks/eom_coverage.py: one simulated campaign through
the library path of the pipeline, down to its `policy_evaluation` rows.

simulate (the preset's landing files) -> events read as the warehouse's rct_events shape
(`_model_frames.load_events`) -> propensities (`randomized_propensity`), the train / validation /
holdout split (`assign_split`) and IPS weights, as the `propensity` and `training_frame` assets
compute them -> every registered model without a graph (`promo_assets.models.registry`) trained on the training
days and scored on the holdout events -> the DR outcome model fitted on the training days ->
`evaluate_policies` with the truth and the outcome model's predictions, exactly as the
`policy_evaluation` asset calls it. No Dagster run (faster on a shared 2-core machine).
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _model_frames import load_events, train_model  # noqa: E402

from promo_assets.causal import assign_split, ips_weights, randomized_propensity  # noqa: E402
from promo_assets.evaluation import (  # noqa: E402
    BootstrapInterval,
    EvaluationSettings,
    Holdout,
    LevelScale,
    LoggedEvents,
    OutcomeFit,
    OutcomePredictions,
    Truth,
    evaluate_policies,
    fit_outcome_model,
)
from promo_assets.models import registry  # noqa: E402
from promo_assets.simulation import REFERENCE_START, SimulationRequest, simulate, truth_arrays  # noqa: E402

MODEL_NAMES = tuple(n for n in registry.names() if not registry.get(n).needs_graph)  # registered models without a graph

PRESET_SIZES = {  # (days, users): a holdout day of ~2,500 events (5,000 for K = 100)
    "demo": (8, 5000),
    "dipn_synthetic_2": (8, 10000),
    "e2e_synthetic": (8, 2500),
    "bipartite": (8, 8000),
}


def add_arguments(ap, presets) -> None:
    """The command-line options both benchmarks share."""
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--presets", nargs="+", default=list(presets))
    ap.add_argument("--days", type=int, default=None, help="days per campaign (default: PRESET_SIZES)")
    ap.add_argument("--users", type=int, default=None, help="user pool (default: PRESET_SIZES)")
    ap.add_argument("--max-epochs", type=int, default=20)
    ap.add_argument("--n-boot", type=int, default=200)


def simulated_events(preset: str, seed: int, landing: str, days: int, users: int):
    """Simulate campaign '<preset>-<seed>' into the folder `landing`; return (campaign, its folder,
    events, config, numeric, categorical), the events with the propensity, split and IPS weight
    columns as the `propensity` and `training_frame` assets compute them."""
    campaign = f"{preset}_{seed}".replace("_", "-")
    simulate(preset, SimulationRequest(campaign, landing, days=days, users=users, seed=seed, start=REFERENCE_START))
    cdir = Path(landing) / campaign
    events, config, numeric, categorical = load_events(cdir)
    events["propensity"] = randomized_propensity(events, config.n_levels)
    events["split"] = assign_split(events, holdout_days=config.holdout_days,
                                   validation_fraction=config.validation_fraction).to_numpy()
    events["ips_weight"] = ips_weights(events["propensity"].to_numpy(), clip=config.ips_clip)
    return campaign, cdir, events, config, numeric, categorical


def evaluate_campaign(preset: str, seed: int, *, days: int | None = None, users: int | None = None,
                      max_epochs: int | None = 20, n_boot: int = 200, models=MODEL_NAMES,
                      log=None) -> tuple[pd.DataFrame, dict]:
    """policy_evaluation rows of one simulated campaign (every model + the random reference) and
    timings / sizes. `days`, `users` default to PRESET_SIZES[preset]."""
    d0, u0 = PRESET_SIZES.get(preset, (8, 5000))
    days, users = days or d0, users or u0
    info = {"preset": preset, "seed": seed, "days": days, "users": users}
    with tempfile.TemporaryDirectory(prefix=f"honest-{preset}-{seed}-") as tmp:
        campaign, cdir, events, config, numeric, categorical = simulated_events(preset, seed, tmp, days, users)
        holdout = events[events["split"] == "holdout"].reset_index(drop=True)
        train = events[events["split"] != "holdout"].reset_index(drop=True)
        info.update(holdout_events=len(holdout), training_events=len(train), levels=config.n_levels)
        specs = {}
        start = time.perf_counter()
        info["failed"] = {}
        for name in models:
            try:  # a model that fails fails alone, as in the pipeline
                trained = train_model(name, events, config, numeric, categorical, seed=seed, max_epochs=max_epochs)
            except ValueError as exc:
                info["failed"][name] = str(exc)
                continue
            values, costs = trained.predict(holdout)
            specs[name] = (trained.version, values, costs)
        info["training_seconds"] = round(time.perf_counter() - start, 1)
        start = time.perf_counter()
        outcome = fit_outcome_model(train, numeric, categorical, config.n_levels,
                                    scale=LevelScale(list(config.incentives), config.ordered), cost_rule=config.cost,
                                    fit=OutcomeFit(seed=seed))
        dm_values, dm_costs = outcome.predict(holdout)
        info["outcome_model_seconds"] = round(time.perf_counter() - start, 1)
        true_values, true_costs = truth_arrays(cdir, holdout["user_id"].astype(str).tolist())
        start = time.perf_counter()
        rows = evaluate_policies(
            specs, Holdout(LoggedEvents.of_frame(holdout), Truth(true_values, true_costs),
                           OutcomePredictions(dm_values, dm_costs)),
            EvaluationSettings.from_config(config, campaign, seed=seed, eom_interval=BootstrapInterval(n_boot), log=log),
        )
        info["evaluation_seconds"] = round(time.perf_counter() - start, 1)
    rows["preset"] = preset
    rows["seed"] = seed
    return rows, info
