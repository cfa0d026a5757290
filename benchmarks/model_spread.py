"""How much a model's decision quality moves from one draw of a campaign to the next: every model
asked for, with its defaults, on several seeds of one simulated campaign (preset, size and a fixed
start date), scored by % of the oracle at matched true spend (mean over the campaign's budgets, holdout
users), as tests/unit/models/test_model_quality.py scores its floors.

    python benchmarks/model_spread.py                                  # every torch model, demo preset at its
                                                                       # default size, seeds 0-4
    python benchmarks/model_spread.py --floors                         # the quality floors' campaigns, seeds and
                                                                       # epoch cap (quality_floors.json), every model
    python benchmarks/model_spread.py --models dipn --seeds 0 1 2 --days 3 --users 1000 --max-epochs 3

Per model: the score of each seed, their mean and standard deviation, and the fit's seconds. With
--floors the file also holds, per model, the floor the rule of quality_floors.json gives
(`floor = mean - floor_sds x sd`, rounded down to 0.1, and at most mean - min_margin_points), so a floor
is set from a measurement. Torch runs on one thread, as in the test. JSON: results/model_spread--<tag>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _model_frames import load_training_frame  # noqa: E402
from _results import ROOT, Recorder  # noqa: E402

from promo_assets.evaluation import Truth, pct_oracle_at_matched_spend  # noqa: E402
from promo_assets.models import TrainingData, registry  # noqa: E402
from promo_assets.simulation import REFERENCE_START, SimulationRequest, simulate, truth_arrays  # noqa: E402

FLOORS_FILE = ROOT / "tests" / "unit" / "models" / "quality_floors.json"
TORCH_MODELS = ("s_learner", "dipn", "dnn_m", "fpm", "cmnn", "coman", "e2e_fd", "e2e_nes", "dfcl_pl", "dfcl_mer",
                "dfcl_ifd")


def campaign_scores(preset: str, days: int, users: int, seed: int, models: list[str], start) -> dict:
    """{model: (% of the oracle as a fraction per budget, fit seconds)} on one simulated campaign."""
    import torch

    out = {}
    with tempfile.TemporaryDirectory(prefix="model_spread_") as tmp:
        simulate(preset, SimulationRequest("c", Path(tmp), days=days, users=users, seed=seed, start=start))
        cdir = Path(tmp) / "c"
        data = _bipartite_data(cdir, seed) if preset == "bipartite" else _training_data(cdir, seed)
        frame, config = data.frame, data.config
        holdout = frame[frame["split"] == "holdout"]
        truth = Truth(*truth_arrays(cdir, holdout["user_id"].astype(str).to_numpy()))
        torch.set_num_threads(1)
        for name in models:
            t0 = time.perf_counter()
            fitted = registry.create(name).fit(data)
            seconds = time.perf_counter() - t0
            pct = pct_oracle_at_matched_spend(fitted.predict(holdout), truth, config.budget_per_capita)
            metrics = fitted.model_.metrics if hasattr(fitted, "model_") else {}
            out[name] = ([float(p) for p in pct], seconds,
                         {k: metrics.get(k) for k in ("epochs", "best_epoch", "bias_epochs", "bias_best_epoch")
                          if metrics.get(k) is not None})
            print(f"  seed {seed} {name}: {100 * float(np.mean(pct)):.2f} % ({seconds:.1f} s)", file=sys.stderr)
    return out


def _training_data(cdir: Path, seed: int) -> TrainingData:
    frame, config, numeric, categorical = load_training_frame(cdir)
    return TrainingData(config, frame, numeric, categorical, frame_version=f"spread:{seed}", campaign_dir=cdir)


def _bipartite_data(cdir: Path, seed: int) -> TrainingData:
    """The customer events, the graph and the merchants' events, as the graph assets hand them to gnn_hazard."""
    from promo_assets.causal import build_training_frame
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.graph import build_graph
    from promo_assets.graph.landing import load_bipartite_campaign

    camp = load_bipartite_campaign(cdir)
    config = CampaignConfig.load(cdir / "campaign.yaml", campaign=cdir.name)
    frame = build_training_frame(camp.customer_events, config, [], [])
    return TrainingData(config, frame, [], [], frame_version=f"spread:{seed}", campaign_dir=cdir,
                        graph=build_graph(camp.edges, camp.customers, camp.merchants), graph_version=f"spread:{seed}",
                        merchant_events=camp.merchant_events)


def floor_of(mean: float, sd: float, rule: dict) -> float:
    """The floor `rule` (quality_floors.json's floor_sds and min_margin_points) gives a measured mean and sd."""
    margin = max(float(rule["floor_sds"]) * sd, float(rule["min_margin_points"]))
    return math.floor((mean - margin) * 10) / 10


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--floors", action="store_true", help="the quality floors' campaigns, seeds and epoch cap")
    ap.add_argument("--models", nargs="+", help=f"registered models (default: {' '.join(TORCH_MODELS)})")
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--start", default=REFERENCE_START.isoformat(), help="the campaigns' first day (YYYY-MM-DD)")
    ap.add_argument("--max-epochs", type=int, help="PROMO_MAX_EPOCHS for every neural model")
    ap.add_argument("--write-floors", action="store_true",
                    help="with --floors: write each model's scores, mean, sd and floor into quality_floors.json")
    ap.add_argument("--tag", default=None)
    args = ap.parse_args()
    rec = Recorder("model_spread")
    os.environ.setdefault("PROMO_ARTIFACTS_DIR", tempfile.mkdtemp(prefix="model_spread_artifacts_"))
    rec.simulation_start = args.start
    if args.max_epochs:
        os.environ["PROMO_MAX_EPOCHS"] = str(args.max_epochs)
    runs = []  # (campaign label, preset, days, users, seeds, models)
    if args.floors:
        floors = json.loads(FLOORS_FILE.read_text())
        if floors.get("max_epochs"):
            os.environ["PROMO_MAX_EPOCHS"] = str(floors["max_epochs"])
        for label, spec in floors["campaigns"].items():
            names = [m for m, e in floors["models"].items() if e["campaign"] == label and (not args.models or m in args.models)]
            if names:
                runs.append((label, spec["preset"], spec["days"], spec["users"],
                             {m: floors["models"][m]["seeds"] for m in names}))
    else:
        runs.append((args.preset, args.preset, args.days, args.users,
                     {m: args.seeds for m in args.models or TORCH_MODELS}))
    models = {}
    for label, preset, days, users, seeds_of in runs:  # seeds_of: {model: its seeds}
        per_seed = {}
        for seed in sorted({s for seeds in seeds_of.values() for s in seeds}):
            print(f"[model_spread] {label}: {preset} {days} days x {users} users, seed {seed}", file=sys.stderr)
            per_seed[seed] = campaign_scores(preset, days, users, seed,
                                             [m for m, seeds in seeds_of.items() if seed in seeds], args.start)
        for name, seeds in seeds_of.items():
            scores = [100 * float(np.mean(per_seed[s][name][0])) for s in seeds]
            entry = {"campaign": label, "seeds": list(seeds), "scores": [round(x, 3) for x in scores],
                     "per_budget": {s: per_seed[s][name][0] for s in seeds},
                     "mean": round(float(np.mean(scores)), 3), "sd": round(float(np.std(scores, ddof=1)), 3),
                     "fit_seconds": [round(per_seed[s][name][1], 2) for s in seeds],
                     "epochs": {s: per_seed[s][name][2] for s in seeds}}
            if args.floors:
                entry["floor"] = floor_of(entry["mean"], entry["sd"], floors)
            models[name] = entry
    figures = {"start": args.start, "max_epochs": os.environ.get("PROMO_MAX_EPOCHS"),
               "campaigns": [{"label": r[0], "preset": r[1], "days": r[2], "users": r[3]} for r in runs],
               "models": models}
    headline = {m: {"mean": e["mean"], "sd": e["sd"], **({"floor": e["floor"]} if "floor" in e else {})}
                for m, e in models.items()}
    for m, e in models.items():
        print(f"{m:>12}: mean {e['mean']:.2f}  sd {e['sd']:.2f}  scores {e['scores']}")
    path = rec.write(figures, headline=headline, tag=args.tag or ("floors" if args.floors else None))
    if args.floors and args.write_floors:
        for name, e in models.items():
            floors["models"][name].update(scores=e["scores"], mean=e["mean"], sd=e["sd"], floor=e["floor"],
                                          reason=f"measured by benchmarks/model_spread.py --floors at {rec.git_commit[:7]}"
                                                 f"{' (code modified)' if rec.modified_code else ''} ({path.name if path else 'not kept'})")
        FLOORS_FILE.write_text(json.dumps(floors, indent=2) + "\n")
        print(f"[model_spread] floors written to {FLOORS_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
