"""Quality floors: every registered model, trained with its defaults on a few seeds of one fixed simulated
campaign, reaches on average at least its floor in % of the oracle at matched true spend.

The floors live in `quality_floors.json` beside this file, one per registered model: its campaign, its
seeds, the score of each seed, their mean and standard deviation, and the floor set from them
(`floor = mean - max(floor_sds x sd, min_margin_points)`), all written by
`python benchmarks/model_spread.py --floors --write-floors`. A change that makes a model worse fails here;
a change that is meant to (a trade, a new default) measures again in the same commit and says why. A new
registered model fails `test_every_model_has_a_floor` until it has one.

The campaigns are the `demo` preset at its default size (14 days x 5,000 users) for every model that
applies to it and the `bipartite` preset (3 days x 2,000 customers) for the models that need the
customer-merchant graph, each started on REFERENCE_START (a campaign is its preset, seed and start date);
seeds 0-2 for the neural models, 0-4 for the cheap ones (LightGBM, logistic). No epoch cap; torch runs on
one thread, so the figures are the same on every run of one machine.
% of the oracle: the mean over the campaign's budgets of the true value of the model's allocation of
the holdout users at matched true spend over the oracle's (`evaluation.pct_oracle_at_matched_spend`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from promo_assets.causal import build_training_frame
from promo_assets.config.campaign import CampaignConfig
from promo_assets.evaluation import Truth, pct_oracle_at_matched_spend
from promo_assets.graph import build_graph
from promo_assets.graph.landing import load_bipartite_campaign
from promo_assets.ingestion.frames import load_landing
from promo_assets.models import TrainingData, registry
from promo_assets.simulation import REFERENCE_START, SimulationRequest, simulate, truth_arrays

pytestmark = pytest.mark.slow

FLOORS_FILE = Path(__file__).with_name("quality_floors.json")
FLOORS = json.loads(FLOORS_FILE.read_text())


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """{campaign name: (TrainingData, holdout rows, true response, true cost)}, simulated on first use."""
    root = tmp_path_factory.mktemp("quality")
    return _Campaigns(root)


class _Campaigns:
    def __init__(self, root: Path):
        self.root = root
        self._made: dict[str, tuple] = {}

    def __getitem__(self, key: tuple[str, int]):
        """The campaign `name`'s draw of seed `seed` (key: (name, seed)), simulated and loaded once."""
        if key not in self._made:
            name, seed = key
            self._made[key] = _campaign(self.root, f"{name}-{seed}", FLOORS["campaigns"][name], seed)
        return self._made[key]


def _campaign(root: Path, name: str, spec: dict, seed: int):
    simulate(spec["preset"], SimulationRequest(name, root, days=spec["days"], users=spec["users"], seed=seed,
                                               start=REFERENCE_START))
    cdir = root / name
    if spec["preset"] == "bipartite":
        camp = load_bipartite_campaign(cdir)
        config = CampaignConfig.load(cdir / "campaign.yaml", campaign=name)
        frame = build_training_frame(camp.customer_events, config, [], [])
        data = TrainingData(config, frame, [], [], frame_version=f"quality_floors:{name}", campaign_dir=cdir,
                            graph=build_graph(camp.edges, camp.customers, camp.merchants), graph_version=name,
                            merchant_events=camp.merchant_events)
    else:
        loaded = load_landing(root, name, edges=False, merchants=False)
        config = loaded.config
        frame = build_training_frame(loaded.events, config, loaded.numeric, loaded.categorical)
        data = TrainingData(config, frame, list(loaded.numeric), list(loaded.categorical),
                            frame_version=f"quality_floors:{name}", campaign_dir=cdir)
    holdout = frame[frame["split"] == "holdout"]
    true_response, true_cost = truth_arrays(cdir, holdout["user_id"].astype(str).to_numpy())
    return data, holdout, true_response, true_cost


def _fit_and_score(name: str, seed: int, campaigns) -> list[float]:
    data, holdout, tv, tc = campaigns[(FLOORS["models"][name]["campaign"], seed)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fitted = registry.create(name).fit(data)
    finally:
        torch.set_num_threads(threads)
    response, cost = fitted.predict(holdout)
    return pct_oracle_at_matched_spend((response, cost), Truth(tv, tc), data.config.budget_per_capita)


def score(name: str, campaigns) -> dict[int, list[float]]:
    """Model `name` with its defaults on each seed of its floor's campaign: {seed: % of the oracle per
    budget (fractions)}."""
    return {seed: _fit_and_score(name, seed, campaigns) for seed in FLOORS["models"][name]["seeds"]}


@pytest.fixture(autouse=True)
def epochs(monkeypatch, tmp_path):
    if FLOORS.get("max_epochs"):
        monkeypatch.setenv("PROMO_MAX_EPOCHS", str(FLOORS["max_epochs"]))
    else:
        monkeypatch.delenv("PROMO_MAX_EPOCHS", raising=False)
    monkeypatch.setenv("PROMO_ARTIFACTS_DIR", str(tmp_path / "artifacts"))


def test_every_model_has_a_floor():
    registered, floored = set(registry.names()), set(FLOORS["models"])
    assert registered <= floored, (f"registered models without a quality floor in {FLOORS_FILE.name}: "
                                   f"{sorted(registered - floored)} (measure them and add an entry)")
    assert floored <= registered, f"floors of models that are not registered: {sorted(floored - registered)}"
    for name, entry in FLOORS["models"].items():
        assert entry["campaign"] in FLOORS["campaigns"], f"{name}: unknown campaign {entry['campaign']!r}"
        assert len(entry["seeds"]) >= 3, f"{name}: a floor is measured over at least 3 seeds, not {entry['seeds']}"
        assert len(entry["scores"]) == len(entry["seeds"]), f"{name}: one score per seed"
        mean, sd = float(np.mean(entry["scores"])), float(np.std(entry["scores"], ddof=1))
        assert abs(mean - entry["mean"]) < 0.01 and abs(sd - entry["sd"]) < 0.01, f"{name}: mean / sd of its scores"
        margin = max(FLOORS["floor_sds"] * sd, FLOORS["min_margin_points"])
        assert entry["floor"] == pytest.approx(np.floor((entry["mean"] - margin) * 10) / 10, abs=0.051), (
            f"{name}: floor {entry['floor']} is not mean - max({FLOORS['floor_sds']} sd, "
            f"{FLOORS['min_margin_points']}) = {entry['mean'] - margin:.2f}")
        assert entry.get("reason"), f"{name}: a floor says where it was measured ('reason')"


@pytest.mark.parametrize("name", sorted(FLOORS["models"]))
def test_quality_floor(name, campaigns):
    entry = FLOORS["models"][name]
    per_seed = score(name, campaigns)
    means = {seed: 100 * float(np.mean(pct)) for seed, pct in per_seed.items()}
    mean = float(np.mean(list(means.values())))
    shown = ", ".join(f"seed {s}: {m:.2f}" for s, m in means.items())
    assert all(np.all(np.isfinite(pct)) for pct in per_seed.values()), f"{name}: no % of the oracle somewhere ({shown})"
    assert mean >= entry["floor"], (
        f"{name} reaches {mean:.2f} % of the oracle at matched true spend on {entry['campaign']}, mean over seeds "
        f"({shown}), below its floor {entry['floor']} (measured mean {entry['mean']}, sd {entry['sd']} when the floor "
        f"was set): a change made it worse. If that is intended, measure again with `python benchmarks/model_spread.py "
        f"--floors --write-floors` and say why in the same commit.")
