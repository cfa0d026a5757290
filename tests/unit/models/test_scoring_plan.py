"""The compiled scoring plan (promo_assets.models.plan) decides exactly as the path it replaces: every
registered feature-only model, on an ordered campaign, a three-arm campaign and a multi-attribute
campaign, for every user, one at a time (the service's path: NumPy lookups, LightGBM's single-row C
call or its compiled forest, a traced torch pass) and in a batch.

The reference is the path before the plan: `FeatureEncoder.transform` on a pandas frame, then
LightGBM's `Booster.predict` (a booster built from the model text, `num_threads=1`) or the torch
network's eager forward pass, then the model's response link and cost rule. Tolerance: the levels
must be identical; the response and cost are compared with rtol 1e-12 (they have been bitwise equal
in every run: the plan calls the same arithmetic on the same float64 / float32 inputs; a one-user call
is compared with a one-user reference, because a matrix product over one row and over many rows may
round differently in the last bit, in both paths alike). One exception, stated: a torch network's
one-user call goes through its NumPy float64 pass (`TrainedModel._one_user_numpy`, kept by `compile`
only within 1e-5 (1 + |x|) of the eager float32 pass on the link scale), so its one-user response and
cost are compared with rtol ONE_USER_RTOL = 1e-5 (observed: about 1e-7), and its levels must still be
identical at every multiplier tried."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from promo_assets.allocation import decide
from promo_assets.decisions import OnlinePolicy
from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.coefficients import Coefficients
from promo_assets.models import ModelSkipped, TrainingData, registry
from promo_assets.models.base import TrainedModel, rule_costs
from promo_assets.models.lgbm import LGBMFitted, _level_feature
from promo_assets.models.plan import ScoringPlan, fitted_of

CONFIGS = {
    "ordered": {"treatments": {"levels": [0, 1, 2, 5, 10]}, "cost": "redeemed", "response": "binary",
                "budget_per_capita": [1.0]},
    "three_arms": {"treatments": {"arms": {"none": 0.0, "small": 1.0, "big": 5.0}}, "cost": "redeemed",
                   "response": "binary", "budget_per_capita": [1.0]},
    "multi_attribute": {"treatments": {"levels": [{"amount": 0, "threshold": 0}, {"amount": 5, "threshold": 20},
                                                  {"amount": 8, "threshold": 30}, {"amount": 8, "threshold": 20}],
                                       "attributes": {"amount": {"monotone": "increasing"},
                                                      "threshold": {"monotone": "decreasing"}},
                                       "cost": {"attribute": "amount"}},
                        "cost": "redeemed", "response": "binary", "budget_per_capita": [1.0]},
}
NUMERIC = ["activity", "age"]
CATEGORICAL = ["city", "segment"]
FEATURE_MODELS = [n for n in registry.names() if not registry.get(n).needs_graph]
# by default the models trained by default (and logistic_s, a model the plan does not compile); every
# feature-only model of the registry under `-m slow` (the other torch networks share s_learner's path)
DEFAULT_MODELS = [n for n in FEATURE_MODELS if registry.get(n).default or n == "logistic_s"]
SMALL = {"lgbm_s": {"num_boost_round": 30}, "lgbm_s_mono": {"num_boost_round": 30}, "lgbm_t": {"num_boost_round": 30}}


def _frame(cfg: CampaignConfig, n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    k = cfg.n_levels
    f = pd.DataFrame({"user_id": np.arange(n), "activity": rng.normal(size=n), "age": rng.uniform(18, 70, size=n),
                      "city": rng.choice(["a", "b", "c"], size=n), "segment": rng.choice(["x", "y"], size=n)})
    f.loc[rng.random(n) < 0.1, "age"] = np.nan  # missing values and their indicators
    f["level"] = rng.integers(0, k, size=n)
    inc = np.asarray(cfg.incentives, dtype=float)
    p = 1 / (1 + np.exp(-(-1.0 + 0.8 * f["activity"] + 0.4 * np.log1p(inc[f["level"]]))))
    f["response"] = (rng.random(n) < p).astype(float)
    f["incentive"] = inc[f["level"]]
    f["cost"] = f["incentive"] * f["response"]
    f["ips_weight"] = 1.0
    f["propensity"] = 1.0 / k
    f["split"] = np.where(rng.random(n) < 0.75, "train", "validation")
    return f


def _users(n: int = 100, seed: int = 1) -> pd.DataFrame:
    """Users to score: seen and unseen categories, missing values of both kinds."""
    rng = np.random.default_rng(seed)
    users = pd.DataFrame({"activity": rng.normal(size=n), "age": rng.uniform(10, 90, size=n),
                          "city": rng.choice(["a", "b", "c", "never-seen"], size=n).astype(object),
                          "segment": rng.choice(["x", "y"], size=n).astype(object)})
    users.loc[rng.random(n) < 0.15, "age"] = np.nan
    users.loc[rng.random(n) < 0.1, "activity"] = np.nan
    users.loc[rng.random(n) < 0.1, "city"] = None
    return users


_BOOSTERS: dict = {}


def _reference(model, users: pd.DataFrame) -> Coefficients:
    """The path before the plan (module docstring)."""
    fitted = fitted_of(model)
    if isinstance(fitted, LGBMFitted):
        import lightgbm as lgb

        x_num, x_cat = fitted.encoder.transform(users)
        x = np.hstack([x_num.astype(np.float64), x_cat.astype(np.float64)])
        k = fitted.config.n_levels

        def booster(role):
            key = fitted.boosters[role]  # the model text (an id() could be reused by another model)
            if key not in _BOOSTERS:
                _BOOSTERS[key] = lgb.Booster(model_str=key)
            return _BOOSTERS[key]

        def score(part):
            if fitted.variant == "t":
                return np.column_stack([booster(f"{part}/{j}").predict(x, num_threads=1) for j in range(k)])
            grid = np.column_stack([np.repeat(x, k, axis=0), np.tile(_level_feature(fitted.config, np.arange(k)), len(x))])
            return booster(part).predict(grid, num_threads=1).reshape(len(x), k)

        response = score("response")
        return Coefficients(response, rule_costs(fitted.config, response, lambda: np.clip(score("cost"), 0.0, None)))
    if isinstance(fitted, TrainedModel):
        traced, fitted._one_row = fitted._one_row, None  # the eager forward pass
        numpy_one, fitted._numpy_one = fitted._numpy_one, None  # (not the NumPy one-user pass either)
        try:
            with torch.no_grad():
                return fitted.predict(users)
        finally:
            fitted._one_row, fitted._numpy_one = traced, numpy_one
    return model.predict(users)


def _fit(name: str, kind: str):
    cfg = CampaignConfig.from_dict(CONFIGS[kind], campaign=f"plan_{kind}")
    cls = registry.get(name)
    if cls.applies_to(cfg) is not None:
        return None
    try:
        return registry.create(name, SMALL.get(name)).fit(TrainingData(cfg, _frame(cfg), NUMERIC, CATEGORICAL))
    except ModelSkipped:
        return None


ONE_USER_RTOL = 1e-5  # a torch network's NumPy one-user pass against its eager float32 pass (module docstring)


def _same(got: Coefficients, want: Coefficients, rtol: float = 1e-12) -> None:
    np.testing.assert_allclose(got.response, want.response, rtol=rtol, atol=0)
    np.testing.assert_allclose(got.cost, want.cost, rtol=rtol, atol=0)


def _numpy_one(model) -> bool:
    """Whether one user of this model goes through its network's NumPy pass."""
    return bool(getattr(fitted_of(model), "_numpy_one", None))


@pytest.fixture(autouse=True)
def _small(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")
    monkeypatch.setenv("PROMO_ARTIFACTS_DIR", str(tmp_path / "artifacts"))


@pytest.mark.parametrize("kind", list(CONFIGS))
@pytest.mark.parametrize("models", [pytest.param(DEFAULT_MODELS, id="default-models"),
                                    pytest.param(FEATURE_MODELS, id="every-model", marks=pytest.mark.slow)])
def test_the_plan_decides_as_the_path_it_replaces(kind, models):
    users = _users()
    records = users.to_dict("records")
    trained = {}
    for name in models:
        model = _fit(name, kind)
        if model is None:
            continue
        trained[name] = model
        plan = ScoringPlan([model])
        # torch networks and LightGBM are compiled; another model (logistic_s) keeps its own predict
        assert plan.compiled == isinstance(fitted_of(model), (TrainedModel, LGBMFitted)), name
        if isinstance(fitted_of(model), LGBMFitted):  # its trees compiled when the plan was built (models.forest)
            assert fitted_of(model)._live.get("forest/response") is not None, name
        want = _reference(model, users)
        _same(plan.coefficients(users), want)  # a batch from a frame (the population, decide_stream)
        rows = plan.rows_of(records)
        _same(plan.coefficients_rows(*rows), want)  # a batch from rows (the service)
        lams = [0.0, 0.05, 0.3, 2.0]
        # the small networks of s_learner and dipn score one user in NumPy (compiled when the plan was built)
        assert _numpy_one(model) or name not in ("s_learner", "dipn"), name
        for i in range(40):  # one user at a time against the reference on that one user
            one = _reference(model, users.iloc[i:i + 1])
            got = plan.coefficients_rows(rows[0][i:i + 1], rows[1][i:i + 1])
            _same(got, one, ONE_USER_RTOL if _numpy_one(model) else 1e-12)
            for lam in lams:
                assert decide(*got, lam)[0] == decide(*one, lam)[0], (name, i, lam)
        for lam in lams:
            np.testing.assert_array_equal(decide(*plan.coefficients_rows(*rows), lam), decide(*want, lam))
        # OnlinePolicy goes through the plan, for a dict and for a frame
        policy = OnlinePolicy(model, 0.05)
        assert (policy.plan is not None) == plan.compiled
        np.testing.assert_array_equal(np.concatenate([policy.decide(r) for r in records[:40]]),
                                      [decide(*_reference(model, users.iloc[i:i + 1]), 0.05)[0] for i in range(40)])
        np.testing.assert_array_equal(np.concatenate(list(policy.decide_stream(iter([users.iloc[:70], users.iloc[70:]]),
                                                                               batch_size=64))),
                                      decide(*want, 0.05))
    assert {"s_learner", "lgbm_s", "lgbm_t"} <= set(trained)  # the kinds of model the plan compiles, on every campaign
    # a blend (the service's champion): the weighted sum in the members' order, as before
    names = sorted(trained)[:3]
    weights = [0.5, 0.3, 0.2][:len(names)]
    plan = ScoringPlan([trained[n] for n in names], weights)
    response = cost = None
    for n, w in zip(names, weights):
        v, c = _reference(trained[n], users)
        v, c = w * v, w * c
        response, cost = (v, c) if response is None else (response + v, cost + c)
    _same(plan.coefficients_rows(*plan.rows_of(records)), Coefficients(response, cost))
    # one user at a time (the blend then runs in Python floats): against the reference on that one user
    policy = OnlinePolicy(plan, 0.05)
    for i in range(15):
        response = cost = None
        for n, w in zip(names, weights):
            v, c = _reference(trained[n], users.iloc[i:i + 1])
            v, c = w * v, w * c
            response, cost = (v, c) if response is None else (response + v, cost + c)
        got = plan.coefficients_rows(*plan.rows_of(records[i:i + 1]))
        if any(_numpy_one(trained[n]) for n in names):
            _same(got, Coefficients(response, cost), ONE_USER_RTOL)
        else:
            np.testing.assert_array_equal(got.response, response)
            np.testing.assert_array_equal(got.cost, cost)
        assert policy.decide(records[i])[0] == decide(response, cost, 0.05)[0]


def test_a_model_the_plan_cannot_compile_is_scored_by_its_own_predict():
    class Stand:
        def predict(self, frame):
            x = frame["x"].fillna(1.0).to_numpy()[:, None]
            return np.repeat(x, 3, axis=1), np.ones((len(frame), 3))

    plan = ScoringPlan([Stand()], numeric=["x"], categorical=[])
    assert not plan.compiled
    got = plan.coefficients_rows(np.array([[2.0], [np.nan]]), np.empty((2, 0), dtype=object))
    np.testing.assert_array_equal(got.response, [[2.0] * 3, [1.0] * 3])
    assert OnlinePolicy(Stand(), 0.1).plan is None


def test_one_user_is_encoded_as_the_encoder_encodes_a_frame():
    """A plan encodes one user in Python floats (the service's path): the same float32 / int64 arrays
    as `FeatureEncoder.transform` gives that user in a frame of many, for missing, infinite, huge and
    tiny values, unseen and missing categories."""
    from promo_assets.models.encoder import FeatureEncoder

    train = _users(200, seed=3)
    encoder = FeatureEncoder(NUMERIC, CATEGORICAL).fit(train)
    assert encoder.indicator_columns  # a missing indicator is written too

    class Stand:
        def __init__(self):
            self.encoder = encoder

        def predict_encoded(self, x_num, x_cat):
            return x_num.astype(np.float64), x_cat.astype(np.float64)

    plan = ScoringPlan([Stand()])
    assert plan.compiled
    users = _users(300, seed=4)
    users.loc[::7, "activity"] = np.inf
    users.loc[::11, "age"] = -np.inf
    users.loc[::13, "activity"] = 1e300
    users.loc[::17, "age"] = 5e-324
    users.loc[::19, "segment"] = "unseen"
    want_num, want_cat = encoder.transform(users)
    num, cat = plan.rows_of(users.to_dict("records"))
    for i in range(len(users)):
        x_num, x_cat = plan.members[0].encode(num[i:i + 1], cat[i:i + 1])
        assert x_num.dtype == np.float32 and x_cat.dtype == np.int64
        np.testing.assert_array_equal(x_num, want_num[i:i + 1])
        np.testing.assert_array_equal(x_cat, want_cat[i:i + 1])


@pytest.mark.parametrize("cost", ["redeemed", "assigned"])
def test_a_torch_models_one_user_scale_and_cost_rule_equal_the_array_arithmetic(cost):
    """For one user a torch model scales its response and applies the cost rule in Python floats
    (`TrainedModel._one_user`): bitwise the arrays' arithmetic (`predict_encoded` for many users)."""
    from types import SimpleNamespace

    cfg = CampaignConfig.from_dict({**CONFIGS["ordered"], "cost": cost}, campaign="one_user")
    rng = np.random.default_rng(2)
    for _ in range(200):
        mean = torch.from_numpy(rng.random((1, cfg.n_levels), dtype=np.float32) * 3)
        targets = {"response_scale": float(rng.uniform(0.1, 3.0)), "response_mean": float(rng.normal())}
        got = TrainedModel._one_user(SimpleNamespace(targets=targets, config=cfg), mean)
        response = mean.numpy().astype(np.float64) * targets["response_scale"] + targets["response_mean"]
        assert got.response.dtype == got.cost.dtype == np.float64
        np.testing.assert_array_equal(got.response, response)
        np.testing.assert_array_equal(got.cost, rule_costs(cfg, response, None))
