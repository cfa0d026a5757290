"""LightGBM baselines lgbm_s, lgbm_s_mono, lgbm_t (issue #14 item 7): fit, predict, monotonicity,
artefacts, arms campaigns, hostile inputs. Tiny simulated frames (tests/unit/models/test_models.py's generator)."""

from __future__ import annotations

import lightgbm  # noqa: F401  a dependency (pyproject.toml): missing, this module fails, it never skips

import json

import numpy as np
import pytest

from promo_assets.store import artifacts
from promo_assets.models import registry
from promo_assets.models.errors import ModelInputError
from promo_assets.models.lgbm import ARCHITECTURE_VERSION, LGBMFitted
from promo_assets.models.protocol import ModelSkipped, TrainingData
from tests.unit.models.test_models import CATEGORICAL, NUMERIC, make_config, make_frame


LGBM = ("lgbm_s", "lgbm_s_mono", "lgbm_t")


def fit(name, response="binary", cost="redeemed", ordered=True, n=1500, seed=0, frame=None):
    config = make_config(cost=cost, response=response, ordered=ordered)
    frame = make_frame(n=n, seed=seed, config=config, response=response, cost_rule=cost) if frame is None else frame
    model = registry.create(name, {"seed": seed}).fit(TrainingData(config, frame, NUMERIC, CATEGORICAL)).model_
    return model, frame, config


@pytest.fixture(autouse=True)
def _store(promo_env):
    return promo_env


def test_registered_with_their_classes():
    for name in LGBM:
        model = registry.get(name)
        assert name in registry.names() and model.name == name and model.source == "baseline"


@pytest.mark.parametrize("name", LGBM)
@pytest.mark.parametrize("response,cost", [("binary", "redeemed"), ("count", "assigned"), ("continuous", "column")])
def test_fit_predict_shapes_and_cost_rule(name, response, cost):
    model, frame, config = fit(name, response, cost)
    assert isinstance(model, LGBMFitted) and model.name == name
    values, costs = model.predict(frame.iloc[:40])
    assert values.shape == costs.shape == (40, 5) and values.dtype == costs.dtype == np.float64
    assert np.isfinite(values).all() and (costs >= 0).all()
    incentives = np.asarray(config.incentives)[None, :]
    if cost == "assigned":
        np.testing.assert_array_equal(costs, np.broadcast_to(incentives, costs.shape))
    elif cost == "column":  # a cost model: varies with the user, roughly the frame's mean cost
        assert costs.std(axis=0).max() > 0
        assert abs(costs.mean() - frame["cost"].mean()) < 0.5 * frame["cost"].mean()
    if response == "binary":
        assert ((values >= 0) & (values <= 1)).all()
        np.testing.assert_allclose(costs, values * incentives)
    assert model.metrics["n_train"] == int((frame["split"] == "train").sum())
    assert model.metrics["validation_loss"] is not None and all(r >= 1 for r in model.metrics["rounds"].values())


def test_learns_the_incentive_effect():
    # the generator's response rises with log(1 + incentive): every model predicts more at 10 than at 0
    for name in LGBM:
        model, frame, _ = fit(name, n=3000)
        values, _ = model.predict(frame)
        assert values[:, 4].mean() > values[:, 0].mean() + 0.1, name


def test_monotone_model_is_monotone_in_the_level_for_every_user():
    config = make_config()
    frame = make_frame(n=1500, seed=3, config=config)
    frame["response"] = frame["response"].sample(frac=1.0, random_state=0).to_numpy()  # pure noise
    mono, _, _ = fit("lgbm_s_mono", frame=frame)
    free, _, _ = fit("lgbm_s", frame=frame)
    users = make_frame(n=2000, seed=9, config=config)
    assert (np.diff(mono.predict(users)[0], axis=1) >= 0).all()
    assert (np.diff(free.predict(users)[0], axis=1) < 0).any()  # without the constraint, noise is not monotone


@pytest.mark.parametrize("name", LGBM)
def test_save_load_round_trip_same_predictions_and_version(name):
    model, frame, _ = fit(name, cost="column", response="count")
    before = model.version
    version = model.save()
    assert version == before
    again = registry.get(name).load(version).model_
    assert again.version == version and again.name == name
    for a, b in zip(model.predict(frame), again.predict(frame)):
        np.testing.assert_array_equal(a, b)
    assert again.save() == version  # content-addressed: the same bytes


def test_deterministic_with_seed():
    a, _, _ = fit("lgbm_s", seed=1)
    b, _, _ = fit("lgbm_s", seed=1)
    assert a.version == b.version


def test_arms_campaign_s_and_t_apply_mono_gives_its_reason():
    for name in ("lgbm_s", "lgbm_t"):
        model, frame, config = fit(name, ordered=False)
        assert registry.get(name).applies_to(config) is None
        assert model.predict(frame.iloc[:10])[0].shape == (10, 5)
    config = make_config(ordered=False)
    reason = registry.get("lgbm_s_mono").applies_to(config)
    assert reason and "ordered" in reason and "'t'" in reason
    with pytest.raises(ModelSkipped, match="ordered"):
        fit("lgbm_s_mono", ordered=False)


# ------------------------------------------------------------------------------------ hostile
@pytest.fixture(scope="module")
def trained():
    config = make_config()
    frame = make_frame(n=1500, seed=0, config=config)
    return {n: registry.create(n).fit(TrainingData(config, frame, NUMERIC, CATEGORICAL)).model_ for n in LGBM}, frame


@pytest.mark.hostile
@pytest.mark.parametrize("name", LGBM)
@pytest.mark.parametrize("case", ["accepted-nan-feature", "accepted-inf-feature", "accepted-unseen-category"])
def test_predict_odd_feature_values_score_as_missing(trained, name, case):
    models, frame = trained
    user = frame.iloc[:3].copy()
    col, odd, missing = {"accepted-nan-feature": ("age", np.nan, np.nan),
                         "accepted-inf-feature": ("age", np.inf, np.nan),
                         "accepted-unseen-category": ("city", "atlantis", None)}[case]
    user[col] = odd
    values, costs = models[name].predict(user)
    assert np.isfinite(values).all() and np.isfinite(costs).all()
    as_missing = user.copy()
    as_missing[col] = missing
    np.testing.assert_array_equal(models[name].predict(as_missing)[0], values)


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-missing-feature-column", "error-non-numeric-feature"])
def test_predict_bad_feature_columns_named(trained, case):
    models, frame = trained
    user = frame.iloc[:3].copy()
    if case == "error-missing-feature-column":
        user = user.drop(columns=["activity"])
        match = r"missing from the frame: \['activity'\]"
    else:
        user["activity"] = "lots"
        match = "numeric feature column 'activity'"
    with pytest.raises(ModelInputError, match=match):
        models["lgbm_s"].predict(user)


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-no-ips-weight", "error-level-out-of-range", "error-level-without-rows",
                                  "error-no-train-rows"])
def test_training_frame_errors_are_specific(case):
    config = make_config()
    frame = make_frame(n=800, config=config)
    name = "lgbm_s"
    if case == "error-no-ips-weight":
        frame = frame.drop(columns=["ips_weight"])
        match = r"lacks columns \['ips_weight'\]"
    elif case == "error-level-out-of-range":
        frame.loc[0, "level"] = 7
        match = r"'level' must be integers in 0\.\.4"
    elif case == "error-level-without-rows":  # skipped with the reason, not failed
        frame = frame[frame["level"] != 3]
        name, match = "lgbm_t", r"level '5' \(index 3\).*has no training events .*a T-learner needs events at every level"
    else:
        frame["split"] = "validation"
        match = "lgbm_s: .*no rows with split == 'train'"
    with pytest.raises(ModelSkipped if name == "lgbm_t" else ModelInputError, match=match):
        registry.create(name).fit(TrainingData(config, frame, NUMERIC, CATEGORICAL))


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-missing-artefact", "error-foreign-artefact", "error-stale-architecture",
                                  "error-other-model"])
def test_load_refuses_with_a_clear_message(trained, case):
    models, _ = trained
    if case == "error-missing-artefact":
        version, match = "0123456789abcdef", "model artefact '0123456789abcdef': .*not found.*re-materialize"
    elif case == "error-foreign-artefact":  # e.g. a torch model's artefact under the same kind
        version, _ = artifacts.save_object({"format": 1, "state_dict": {}}, "model")
        match = f"model artefact '{version}' is not a LightGBM baseline artefact .model 'lgbm_s' cannot load it"
    elif case == "error-stale-architecture":
        payload = models["lgbm_s"].payload()
        payload["architecture_version"] = ARCHITECTURE_VERSION - 1
        version, _ = artifacts.save_bytes(json.dumps(payload).encode(), "model")
        match = (f"saved by version {ARCHITECTURE_VERSION - 1} of the 'lightgbm' architecture; this code reads "
                 f"version {ARCHITECTURE_VERSION}: re-materialize")
    else:
        version, match = models["lgbm_t"].save(), "holds model 'lgbm_t', not 'lgbm_s'"
    with pytest.raises(ModelInputError, match=match):
        registry.get("lgbm_s").load(version)


def test_lightgbm_imported_only_inside_functions():
    # the registry imports model modules lazily; the module itself must not pull lightgbm in at import
    import ast
    import inspect

    from promo_assets.models import lgbm

    top = ast.parse(inspect.getsource(lgbm)).body
    names = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in top if isinstance(n, ast.ImportFrom)}
    assert not any(str(m).split(".")[0] == "lightgbm" for m in names)
    assert registry.BUILTIN["lgbm_s"] == "promo_assets.models.lgbm:LGBMSLearner"
