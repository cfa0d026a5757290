"""Quality floors: every registered model, trained with its default hyper-parameters on one small
fixed simulated campaign, reaches at least its floor in % of the oracle at matched true spend.

The floors live in `quality_floors.json` beside this file, one per registered model (with the
campaign it is measured on, the figure measured and why the floor is where it is). A change that
makes a model worse fails here; a change that is meant to (a trade, a new default) updates the
model's `measured` and `floor` in the same commit and says why in its `reason`. A new registered
model fails `test_every_model_has_a_floor` until it has one.

The campaigns are the `demo` preset (3 days x 1,000 users, seed 0) for every model that applies to
it and the `bipartite` preset (3 days x 600 customers, seed 0) for the models that need the
customer-merchant graph; PROMO_MAX_EPOCHS caps every neural model's epochs (the file's
`max_epochs`) and torch runs on one thread, so the figures are the same on every run of one machine.
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

    def __getitem__(self, name: str):
        if name not in self._made:
            self._made[name] = _campaign(self.root, name, FLOORS["campaigns"][name])
        return self._made[name]


def _campaign(root: Path, name: str, spec: dict):
    simulate(spec["preset"], SimulationRequest(name, root, days=spec["days"], users=spec["users"], seed=spec["seed"],
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


_SCORES: dict[str, list[float]] = {}


def score(name: str, campaigns) -> list[float]:
    """Model `name` with its defaults, fitted once per session on its floor's campaign: its % of the
    oracle per budget (fractions)."""
    if name not in _SCORES:
        data, holdout, tv, tc = campaigns[FLOORS["models"][name]["campaign"]]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            fitted = registry.create(name).fit(data)
        finally:
            torch.set_num_threads(threads)
        response, cost = fitted.predict(holdout)
        _SCORES[name] = pct_oracle_at_matched_spend((response, cost), Truth(tv, tc), data.config.budget_per_capita)
    return _SCORES[name]


@pytest.fixture(autouse=True)
def epochs(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMO_MAX_EPOCHS", str(FLOORS["max_epochs"]))
    monkeypatch.setenv("PROMO_ARTIFACTS_DIR", str(tmp_path / "artifacts"))


def test_every_model_has_a_floor():
    registered, floored = set(registry.names()), set(FLOORS["models"])
    assert registered <= floored, (f"registered models without a quality floor in {FLOORS_FILE.name}: "
                                   f"{sorted(registered - floored)} (measure them and add an entry)")
    assert floored <= registered, f"floors of models that are not registered: {sorted(floored - registered)}"
    for name, entry in FLOORS["models"].items():
        assert entry["campaign"] in FLOORS["campaigns"], f"{name}: unknown campaign {entry['campaign']!r}"
        assert 0 < entry["floor"] <= entry["measured"] <= 100, f"{name}: floor {entry['floor']} > measured"
        assert entry.get("reason"), f"{name}: a floor says why it is where it is ('reason')"


@pytest.mark.parametrize("name", sorted(FLOORS["models"]))
def test_quality_floor(name, campaigns):
    entry = FLOORS["models"][name]
    pct = score(name, campaigns)
    mean = 100 * float(np.mean(pct))
    per_budget = " / ".join(f"{100 * p:.2f}" for p in pct)
    assert np.all(np.isfinite(pct)), f"{name}: no % of the oracle at some budget ({per_budget})"
    assert mean >= entry["floor"], (
        f"{name} reaches {mean:.2f} % of the oracle at matched true spend on {entry['campaign']} "
        f"(per budget {per_budget}), below its floor {entry['floor']} (measured {entry['measured']} when the floor "
        f"was set): a change made it worse. If that is intended, update measured and floor in {FLOORS_FILE.name} "
        f"with the reason in the same commit.")
