"""One contract, checked on every registered model (in the spirit of scikit-learn's
`parametrize_with_checks`): construction from hyper-parameters, fit / predict shapes, finite outputs,
monotone where the model declares it, deterministic for a seed, save -> load -> the same predictions,
unknown or out-of-range parameters refused with their name, a campaign it does not apply to refused
with its reason.

Tiny simulated frames and PROMO_MAX_EPOCHS=1 keep it fast. `CONTRACT` holds a model's own entry: the
hyper-parameters that make its fit small (only models whose cost is not in epochs need one). A new
registered model is picked up by every check without touching this file.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.coefficients import Coefficients
from promo_assets.models import ModelInputError, ModelSkipped, ResponseModel, TrainingData, registry
from promo_assets.models.protocol import same_kind
from promo_assets.simulation import REFERENCE_START

# a model's contract entry: hyper-parameters for a small fit (optional)
CONTRACT: dict[str, dict] = {
    "lgbm_s": {"num_boost_round": 20},
    "lgbm_s_mono": {"num_boost_round": 20},
    "lgbm_t": {"num_boost_round": 20},
}
NUMERIC = ["activity", "age"]
CATEGORICAL = ["city", "segment"]
GRAPH_MODELS = {n for n in registry.names() if registry.get(n).needs_graph}


def names_with(slow_graph: bool = True) -> list:
    """Every registered model; fitting one that needs the graph simulates a bipartite campaign (slow)."""
    return [pytest.param(n, marks=pytest.mark.slow) if slow_graph and n in GRAPH_MODELS else n
            for n in registry.names()]


CONFIGS = {
    "ordered": {"treatments": {"levels": [0, 1, 2, 5, 10]}, "cost": "redeemed", "response": "binary",
                "budget_per_capita": [0.5, 1.0]},
    "arms": {"treatments": {"arms": {"none": 0.0, "small": 1.0, "big": 5.0}}, "cost": "redeemed",
             "response": "binary"},
}


def config(kind: str = "ordered") -> CampaignConfig:
    return CampaignConfig.from_dict(CONFIGS[kind], campaign=f"contract_{kind}")


def frame(cfg: CampaignConfig, n: int = 500, seed: int = 0) -> pd.DataFrame:
    """A small RCT frame: logistic response increasing in the incentive, uniform levels."""
    rng = np.random.default_rng(seed)
    k = cfg.n_levels
    f = pd.DataFrame({"user_id": np.arange(n), "activity": rng.normal(size=n), "age": rng.uniform(18, 70, size=n),
                      "city": rng.choice(["a", "b", "c"], size=n), "segment": rng.choice(["x", "y"], size=n)})
    f["level"] = rng.integers(0, k, size=n)
    inc = np.asarray(cfg.incentives, dtype=float)
    p = 1 / (1 + np.exp(-(-1.0 + 0.8 * f["activity"] + 0.5 * np.log1p(inc[f["level"]]))))
    f["response"] = (rng.random(n) < p).astype(float)
    f["incentive"] = inc[f["level"]]
    f["cost"] = f["incentive"] * f["response"]
    f["ips_weight"] = 1.0
    f["propensity"] = 1.0 / k
    f["split"] = np.where(rng.random(n) < 0.75, "train", "validation")
    return f


@lru_cache(maxsize=1)
def graph_data() -> TrainingData:
    """A small simulated customer–merchant campaign with its graph (for models that need one)."""
    import tempfile

    from promo_assets.graph import build_graph
    from promo_assets.graph.landing import load_bipartite_campaign
    from promo_assets.simulation.bipartite import simulate_bipartite
    from promo_assets.simulation.landing import SimulationRequest

    request = SimulationRequest("bp", Path(tempfile.mkdtemp(prefix="contract_graph_")), 2, 300, 5, REFERENCE_START)
    simulate_bipartite(request, merchants=60)
    d = request.campaign_dir
    camp = load_bipartite_campaign(d)
    cfg = CampaignConfig.load(d / "campaign.yaml", campaign="bp")
    events = camp.customer_events.assign(split="train")
    return TrainingData(cfg, events, [], [], graph=build_graph(camp.edges, camp.customers, camp.merchants),
                        graph_version="contract", merchant_events=camp.merchant_events, campaign_dir=d)


def data_for(name: str) -> TrainingData:
    if name in GRAPH_MODELS:
        return graph_data()
    cfg = config("ordered")
    return TrainingData(cfg, frame(cfg), list(NUMERIC), list(CATEGORICAL))


def users_for(name: str, data: TrainingData) -> pd.DataFrame:
    """Users to score: the training users without their outcomes (the graph models: its customers)."""
    return data.frame.drop(columns=["response", "cost", "level", "incentive", "split", "ips_weight", "propensity"],
                           errors="ignore").head(60)


@pytest.fixture(autouse=True)
def one_epoch(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")
    monkeypatch.setenv("PROMO_ARTIFACTS_DIR", str(tmp_path / "artifacts"))


_FITTED: dict[str, ResponseModel] = {}


def fitted(name: str) -> ResponseModel:
    """Model `name` fitted once per test session on its small data."""
    if name not in _FITTED:
        _FITTED[name] = registry.create(name, CONTRACT.get(name)).fit(data_for(name))
    return _FITTED[name]


# ------------------------------------------------------------------------------------ construction
@pytest.mark.parametrize("name", registry.names())
def test_constructed_from_its_hyper_parameters(name):
    cls = registry.get(name)
    assert issubclass(cls, ResponseModel) and cls.name == name
    assert dataclasses.is_dataclass(cls.Params) and cls.Params.__dataclass_params__.frozen
    assert all(f.default is not dataclasses.MISSING for f in dataclasses.fields(cls.Params)), \
        "every hyper-parameter has a default"
    model = cls()
    assert model.get_params() == cls.defaults()
    assert model.check_params() == [], "the defaults are valid"
    assert not [k for k in vars(model) if k.endswith("_")], "no learned state before fit"
    clone = cls(**model.get_params())
    assert clone.get_params() == model.get_params()
    assert cls(cls.Params()).get_params() == model.get_params()
    with pytest.raises(ModelInputError, match="is not fitted"):
        model.predict(frame(config()))


@pytest.mark.parametrize("name", registry.names())
def test_unknown_parameter_refused_with_its_name(name):
    with pytest.raises(ModelInputError, match="'no_such_param'"):
        registry.create(name, {"no_such_param": 1})
    with pytest.raises(ModelInputError, match="no_such_param"):
        registry.get(name)().set_params(no_such_param=1)
    problems = registry.check_models_block({"params": {name: {"no_such_param": 1}}})
    assert problems and f"models.params.{name}.no_such_param" in problems[0]


BAD_CANDIDATES = (-1, -0.5, 0, 1.5, 10 ** 9, [], [0], "no-such-choice")


@pytest.mark.parametrize("name", registry.names())
def test_out_of_range_parameters_refused_with_their_name(name):
    """A value of the wrong kind for every parameter, and a value outside its rule for every ruled
    parameter that has one among BAD_CANDIDATES, are refused naming the parameter, before training."""
    cls = registry.get(name)
    defaults = cls.defaults()
    for param, default in defaults.items():
        wrong = 3 if isinstance(default, str) else "x"
        with pytest.raises(ModelInputError, match=rf"\b{param}\b"):
            registry.create(name, {param: wrong})
    refused = []
    for param, (ok, what) in cls.rules.items():
        bad = [v for v in BAD_CANDIDATES if same_kind(defaults[param], v) and not _passes(ok, v)]
        if not bad:
            continue  # e.g. a seed: every integer is fine
        model = cls(**{param: bad[0]})
        problems = model.check_params()
        assert any(p.startswith(f"{param} = ") for p in problems), (param, bad[0], problems)
        with pytest.raises(ModelInputError, match=rf"\b{param}\b"):
            model.fit(_no_data())
        refused.append(param)
    assert refused, f"{name}: no parameter has a range that BAD_CANDIDATES falls outside of"


def _passes(ok, value) -> bool:
    try:
        return bool(ok(value))
    except TypeError:
        return False


def _no_data() -> TrainingData:
    """Data that would fail if it were read: the parameters are checked first."""
    cfg = config("ordered")
    return TrainingData(cfg, pd.DataFrame(), [], [])


# ------------------------------------------------------------------------------------ applies to
@pytest.mark.parametrize("name", registry.names())
def test_a_campaign_it_does_not_apply_to_is_refused_with_its_reason(name):
    cls = registry.get(name)
    for kind in CONFIGS:
        cfg = config(kind)
        reason = cls.applies_to(cfg)
        if reason is None:
            continue
        assert isinstance(reason, str) and len(reason) > 10
        assert registry.skip_reason(name, cfg.__class__.from_dict({**CONFIGS[kind], "models": {"include": [name]}},
                                                                   campaign=cfg.campaign)) == reason
        with pytest.raises(ModelSkipped) as err:
            registry.create(name, CONTRACT.get(name)).fit(TrainingData(cfg, frame(cfg, n=50), list(NUMERIC),
                                                                        list(CATEGORICAL)))
        assert str(err.value) == reason
    applies_somewhere = [kind for kind in CONFIGS if cls.applies_to(config(kind)) is None]
    if name in GRAPH_MODELS:
        applies_somewhere += [] if cls.applies_to(MERCHANTS_CONFIG()) else ["merchants"]
    assert applies_somewhere, f"{name} applies to none of the contract's campaigns"


def MERCHANTS_CONFIG() -> CampaignConfig:
    return CampaignConfig.from_dict({"treatments": {"levels": [0, 1, 2]},
                                     "merchants": {"treatments": {"levels": [0, 1]}}}, campaign="m")


# ------------------------------------------------------------------------------------ fit / predict
@pytest.mark.parametrize("name", names_with())
def test_fit_returns_self_with_learned_state_and_predicts_per_user_and_level(name):
    model = fitted(name)
    assert isinstance(model, registry.get(name))
    assert model.phase_ == model.phases[-1]
    assert isinstance(model.metrics_, dict) and isinstance(model.history_, list)
    data = data_for(name)
    users = users_for(name, data)
    coefficients = model.predict(users)
    assert isinstance(coefficients, Coefficients), type(coefficients)
    response, cost = coefficients
    assert response is coefficients.response and cost is coefficients.cost
    k = data.config.n_levels
    for a in (response, cost):
        assert isinstance(a, np.ndarray) and a.shape == (len(users), k) and a.dtype == np.float64
        assert np.isfinite(a).all()
    assert (cost >= 0).all()
    if model.monotone:
        assert (np.diff(response, axis=1) >= -1e-9).all(), "declared monotone: response non-decreasing in the level"


@pytest.mark.parametrize("name", names_with())
def test_deterministic_for_a_seed(name):
    model = fitted(name)
    data = data_for(name)
    again = registry.create(name, model.get_params()).fit(data)
    users = users_for(name, data)
    for a, b in zip(model.predict(users), again.predict(users)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", names_with())
def test_save_load_same_predictions(name, tmp_path):
    model = fitted(name)
    version = model.save(tmp_path)
    assert model.version_ == version and model.save(tmp_path) == version, "content-addressed: same state, same version"
    loaded = registry.get(name).load(version, tmp_path)
    assert type(loaded) is type(model) and loaded.version_ == version
    assert loaded.get_params() == model.get_params()
    users = users_for(name, data_for(name))
    for a, b in zip(model.predict(users), loaded.predict(users)):
        np.testing.assert_array_equal(a, b)
    other = "lgbm_s" if name != "lgbm_s" else "s_learner"
    with pytest.raises(ModelInputError):
        registry.get(other).load(version, tmp_path)
