"""Causal package: propensities (randomized and estimated), IPS weights, diagnostics, splits."""

from __future__ import annotations

import datetime as dt
import hashlib
import pickle

import numpy as np
import pandas as pd
import pytest

from promo_assets.causal import (
    PropensityError,
    PropensityModel,
    assign_split,
    assignment_frequencies,
    effective_sample_size,
    ips_weights,
    propensity_diagnostics,
    propensity_plot,
    randomized_propensity,
    user_hash_unit,
)
from promo_assets.config.campaign import CampaignConfig
from promo_assets.simulation import SimulationRequest, simulate, true_propensity_arrays

START = dt.date(2024, 5, 1)
NUMERIC = ["age", "activity", "tenure_days", "avg_spend"]
CATEGORICAL = ["city", "device", "period_of_day"]


def _frame(campaign_dir) -> pd.DataFrame:
    """Events as the warehouse hands them to domain code: event_date, level, incentive, ..."""
    config = CampaignConfig.load(campaign_dir)
    frames = []
    for f in sorted((campaign_dir / "events").glob("*.parquet")):
        frame = pd.read_parquet(f)
        frame["event_date"] = pd.Timestamp(f.stem)
        frames.append(frame)
    events = pd.concat(frames, ignore_index=True)
    events["level"] = np.searchsorted(np.asarray(config.incentives), events.pop("treatment").to_numpy())
    if "propensity" not in events.columns:
        events["propensity"] = np.nan
    return events


@pytest.fixture(scope="module")
def rct(tmp_path_factory):
    s = simulate("demo",
                 SimulationRequest("rct", tmp_path_factory.mktemp("l"), days=4, users=3000, seed=2, start=START))
    return s.campaign_dir, _frame(s.campaign_dir)


@pytest.fixture(scope="module")
def confounded(tmp_path_factory):
    s = simulate("demo",
                 SimulationRequest("conf", tmp_path_factory.mktemp("l"), days=6, users=4000, seed=9, start=START),
                 logging="confounded")
    return s.campaign_dir, _frame(s.campaign_dir)


def test_randomized_propensity_uses_logged_values_else_daily_frequencies():
    frame = pd.DataFrame({
        "event_date": ["2024-01-01"] * 4 + ["2024-01-02"] * 4,
        "level": [0, 0, 0, 1, 0, 1, 1, 1],
        "propensity": [0.5, np.nan, np.nan, np.nan, np.nan, 0.4, np.nan, np.nan],
    })
    p = randomized_propensity(frame, 2)
    np.testing.assert_allclose(p, [0.5, 0.75, 0.75, 0.25, 0.25, 0.4, 0.75, 0.75])
    freq = assignment_frequencies(frame, 2)
    np.testing.assert_allclose(freq[0], [0.75, 0.25])
    np.testing.assert_allclose(freq[-1], [0.25, 0.75])
    np.testing.assert_allclose(randomized_propensity(frame.drop(columns="propensity"), 2)[0], 0.75)
    with pytest.raises(PropensityError, match="outside"):
        randomized_propensity(frame.assign(propensity=1.5), 2)
    with pytest.raises(PropensityError, match="level"):
        randomized_propensity(frame.assign(level=5), 2)
    with pytest.raises(PropensityError, match="event_date"):
        randomized_propensity(frame.drop(columns="event_date"), 2)


def test_ips_weights_clip_and_self_normalize():
    p = np.array([0.5, 0.25, 0.01, 0.1])
    raw = ips_weights(p, clip=20.0, self_normalize=False)
    np.testing.assert_allclose(raw, [2.0, 4.0, 20.0, 10.0])
    w = ips_weights(p, clip=20.0)
    np.testing.assert_allclose(w, raw / raw.mean())
    assert w.mean() == pytest.approx(1.0)
    np.testing.assert_allclose(ips_weights(p, clip=None, self_normalize=False), 1 / p)
    for bad in ([0.0, 0.5], [np.nan], [1.2]):
        with pytest.raises(PropensityError, match="not in"):
            ips_weights(np.array(bad))
    with pytest.raises(PropensityError, match="clip"):
        ips_weights(p, clip=0.5)


def test_rct_weights_are_near_uniform(rct):
    _, frame = rct
    n = len(frame)
    w = ips_weights(randomized_propensity(frame, 6))  # logged 1/K
    assert effective_sample_size(w) >= 0.95 * n
    w_emp = ips_weights(randomized_propensity(frame.drop(columns="propensity"), 6))  # daily frequencies
    ess = effective_sample_size(w_emp)
    assert 0.95 * n <= ess < n  # near-uniform but not identical
    diag = propensity_diagnostics(assignment_frequencies(frame, 6), frame["level"].to_numpy(), w_emp)
    assert diag["ess_fraction"] >= 0.95
    assert all(abs(o["median"] - 1 / 6) < 0.02 for o in diag["overlap"])


def test_propensity_model_recovers_true_propensities_on_confounded_logging(confounded):
    d, frame = confounded
    split = assign_split(frame)
    train = frame[split != "holdout"]
    model = PropensityModel().fit(train, NUMERIC, CATEGORICAL, 6, seed=0)
    proba = model.predict_proba(frame)
    assert proba.shape == (len(frame), 6)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    truth = true_propensity_arrays(d, frame["user_id"].to_numpy())
    mae = np.abs(proba - truth).mean()
    uniform_mae = np.abs(1 / 6 - truth).mean()
    assert mae < 0.02 and mae < 0.15 * uniform_mae
    # calibration measured on held-out rows; temperature close to 1 for a well-specified model
    assert {"temperature", "log_loss_raw", "log_loss_calibrated", "ece_raw", "ece_calibrated"} <= set(model.metrics)
    assert model.metrics["log_loss_calibrated"] <= model.metrics["log_loss_raw"] + 1e-9
    assert 0.7 < model.metrics["temperature"] < 1.4
    # weights from the estimated propensities are far from uniform but bounded by the clip
    p = model.propensity_of(frame)
    w = ips_weights(p, clip=20.0)
    diag = propensity_diagnostics(proba, frame["level"].to_numpy(), w)
    assert 0.4 < diag["ess_fraction"] < 0.9
    assert diag["max_weight"] == pytest.approx(w.max())
    # pickled (artefact store) and class-level fit give the same model
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict_proba(frame.head(50)), proba[:50])
    np.testing.assert_allclose(PropensityModel.fit(train, NUMERIC, CATEGORICAL, 6, seed=0).predict_proba(frame.head(50)), proba[:50])


def test_propensity_model_scores_unknown_categories_and_missing_values(confounded):
    _, frame = confounded
    model = PropensityModel(calibration="none").fit(frame.head(3000), NUMERIC, CATEGORICAL, 6, seed=1)
    odd = frame.head(3).copy()
    odd["city"] = ["atlantis", None, "beijing"]
    odd.loc[odd.index[0], "age"] = np.nan
    proba = model.predict_proba(odd)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    with pytest.raises(PropensityError, match="no column"):
        model.predict_proba(frame.drop(columns="city"))
    with pytest.raises(PropensityError, match="two distinct"):
        PropensityModel().fit(frame.assign(level=0), NUMERIC, CATEGORICAL, 6)
    with pytest.raises(PropensityError, match="fit"):
        PropensityModel().predict_proba(frame)


def test_level_never_logged_gets_near_zero_propensity():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=400), "c": rng.choice(["a", "b"], 400)})
    frame["level"] = rng.integers(0, 2, 400)  # level 2 never logged
    proba = PropensityModel().fit(frame, ["x"], ["c"], 3).predict_proba(frame)
    assert proba.shape == (400, 3) and proba[:, 2].max() < 1e-6
    diag = propensity_diagnostics(proba, frame["level"].to_numpy())
    assert diag["overlap"][2]["logged"] == 0 and diag["overlap"][2]["share_below_0.01"] == 1.0
    assert diag["share_below_0.01"] == 1.0 and diag["ess_fraction"] == 1.0


def test_diagnostics_and_plot():
    proba = np.array([[0.5, 0.5], [0.995, 0.005], [0.2, 0.8], [0.6, 0.4]])
    levels = np.array([0, 1, 1, 0])
    w = np.array([1.0, 1.0, 1.0, 3.0])
    diag = propensity_diagnostics(proba, levels, w, labels=["0", "5"])
    assert diag["ess"] == pytest.approx(36 / 12)
    assert diag["ess_fraction"] == pytest.approx(0.75)
    assert diag["max_weight"] == 3.0
    assert diag["overlap"][1]["min"] == 0.005 and diag["overlap"][1]["share_below_0.01"] == 0.25
    assert diag["overlap"][0]["logged"] == 2 and diag["overlap"][1]["label"] == "5"
    assert diag["logged_propensity_min"] == 0.005
    png = propensity_plot(proba, levels, labels=["0", "5"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
    with pytest.raises(PropensityError, match="do not match"):
        propensity_diagnostics(proba, levels[:3])


def test_split_is_stable_per_user_and_holdout_is_the_last_day(rct):
    _, frame = rct
    split = assign_split(frame, holdout_days=1, validation_fraction=0.2)
    last = frame["event_date"].max()
    assert (split[frame["event_date"] == last] == "holdout").all()
    assert (split[frame["event_date"] < last] != "holdout").all()
    early = frame["event_date"] < last
    per_user = split[early].groupby(frame.loc[early, "user_id"], observed=True).nunique()
    assert (per_user == 1).all()  # same user => same split on every day
    share = (split[early] == "validation").mean()
    assert 0.17 < share < 0.23
    # stable across calls, row orders and processes (hashlib, not hash())
    shuffled = frame.sample(frac=1.0, random_state=0)
    pd.testing.assert_series_equal(assign_split(shuffled).sort_index(), split.sort_index())
    uid = "u0001234"
    expected = int.from_bytes(hashlib.blake2b(b"\x1f" + uid.encode(), digest_size=8).digest(), "big") / 2**64
    assert user_hash_unit([uid])[0] == expected
    # a different salt reshuffles users; two holdout days take the last two dates
    other = assign_split(frame, salt="v2")
    assert (other[early] != split[early]).mean() > 0.1
    two = assign_split(frame, holdout_days=2)
    dates = sorted(frame["event_date"].unique())
    assert set(frame.loc[two == "holdout", "event_date"]) == set(dates[-2:])
    with pytest.raises(PropensityError, match="validation_fraction"):
        assign_split(frame, validation_fraction=1.0)
