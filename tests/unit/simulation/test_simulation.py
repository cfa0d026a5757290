"""Simulator: landing format, determinism, ground truth, and the paper generators' definitions."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from promo_assets.config.campaign import CampaignConfig
from promo_assets.simulation import (
    PRESETS,
    SimulationError,
    SimulationRequest,
    TruthError,
    load_truth,
    simulate,
    true_propensity_arrays,
    truth_arrays,
    truth_user_ids,
)
from promo_assets.simulation.dipn import dipn_curves
from promo_assets.simulation import REFERENCE_START

START = dt.date(2024, 3, 1)


def _events(campaign_dir) -> pd.DataFrame:
    frames = []
    for f in sorted((campaign_dir / "events").glob("*.parquet")):
        frame = pd.read_parquet(f)
        frame["event_date"] = dt.date.fromisoformat(f.stem)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    root = tmp_path_factory.mktemp("landing")
    out = {
        "demo": simulate("demo", SimulationRequest("demo", root, days=3, users=2000, seed=11, start=START)),
        "confounded": simulate("demo", SimulationRequest("confounded", root, days=4, users=4000, seed=5, start=START),
                               logging="confounded"),
        "dipn_synthetic_1": simulate("dipn_synthetic_1",
                                     SimulationRequest("dipn1", root, days=2, users=1500, seed=3, start=START)),
        "dipn_synthetic_2": simulate("dipn_synthetic_2",
                                     SimulationRequest("dipn2", root, days=2, users=1500, seed=3, start=START)),
        "e2e_synthetic": simulate("e2e_synthetic",
                                  SimulationRequest("e2e", root, days=1, users=20000, seed=7, start=START)),
    }
    return root, out


def test_presets_registry_describes_each_preset():
    for name in ("demo", "dipn_synthetic_1", "dipn_synthetic_2", "e2e_synthetic"):
        assert name in PRESETS
        assert PRESETS[name].description and isinstance(PRESETS[name].defaults, dict)
        assert callable(PRESETS[name].run)


def test_same_seed_gives_byte_identical_files_and_another_seed_does_not(tmp_path):
    a = simulate("demo", SimulationRequest("c", tmp_path / "a", days=2, users=800, seed=42, start=START))
    b = simulate("demo", SimulationRequest("c", tmp_path / "b", days=2, users=800, seed=42, start=START))
    c = simulate("demo", SimulationRequest("c", tmp_path / "c", days=2, users=800, seed=43, start=START))
    rel = lambda s: sorted(p.relative_to(s.campaign_dir) for p in s.files)  # noqa: E731
    assert rel(a) == rel(b) == rel(c)
    for path in rel(a):
        assert (a.campaign_dir / path).read_bytes() == (b.campaign_dir / path).read_bytes(), path
    day = f"events/{START.isoformat()}.parquet"
    assert (a.campaign_dir / day).read_bytes() != (c.campaign_dir / day).read_bytes()


def test_days_simulated_separately_equal_days_simulated_at_once(tmp_path):
    whole = simulate("demo", SimulationRequest("c", tmp_path / "whole", days=3, users=500, seed=1, start=START))
    simulate("demo", SimulationRequest("c", tmp_path / "parts", days=2, users=500, seed=1, start=START))
    part = simulate("demo", SimulationRequest("c", tmp_path / "parts", days=1, users=500, seed=1,
                                              start=START + dt.timedelta(days=2)))
    for d in whole.dates:
        name = f"events/{d.isoformat()}.parquet"
        assert (whole.campaign_dir / name).read_bytes() == (part.campaign_dir / name).read_bytes()
    with pytest.raises(SimulationError, match="different simulated campaign"):
        simulate("demo", SimulationRequest("c", tmp_path / "parts", days=1, users=600, seed=1, start=START))
    again = simulate("demo", SimulationRequest("c", tmp_path / "parts", days=1, users=600, seed=1, start=START),
                     overwrite=True)
    assert sorted(p.name for p in (again.campaign_dir / "events").glob("*.parquet")) == [f"{START.isoformat()}.parquet"]


def test_summary_and_landing_format(campaigns):
    root, sims = campaigns
    s = sims["demo"]
    assert s.dates == [START + dt.timedelta(days=i) for i in range(3)]
    assert s.users == 2000 and s.n_levels == 6
    events = _events(s.campaign_dir)
    assert len(events) == s.rows == sum(s.rows_per_day.values())
    # about daily_active = 0.5 of the pool each day, each active user once
    for d, n in s.rows_per_day.items():
        assert 850 < n < 1150
        assert events.loc[events.event_date == d, "user_id"].is_unique
    config = CampaignConfig.load(s.campaign_dir)
    assert config.incentives == (0.0, 1.0, 2.0, 3.0, 5.0, 8.0) and config.cost == "redeemed" and config.randomized
    raw = yaml.safe_load((s.campaign_dir / "campaign.yaml").read_text())
    assert raw["simulation"]["preset"] == "demo" and raw["simulation"]["seed"] == 11
    schema = pq.read_schema(s.campaign_dir / "events" / f"{START.isoformat()}.parquet")
    assert schema.names[:6] == ["user_id", "treatment", "response", "cost", "propensity", "event_time"]
    assert str(schema.field("user_id").type) == "string" and str(schema.field("city").type) == "string"
    assert str(schema.field("event_time").type) == "timestamp[us]"
    assert events["user_id"].str.fullmatch(r"u\d{7}").all()
    assert set(events["treatment"]) <= set(config.incentives)
    assert set(events["response"]) <= {0.0, 1.0}
    np.testing.assert_allclose(events["cost"], events["treatment"] * events["response"])
    np.testing.assert_allclose(events["propensity"], 1.0 / 6.0)
    assert (events["event_time"].dt.date == events["event_date"]).all()
    # the event time falls in the user's period of day
    hours = events["event_time"].dt.hour
    bounds = {"morning": (6, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (0, 6)}
    lo = events["period_of_day"].map(lambda p: bounds[p][0])
    hi = events["period_of_day"].map(lambda p: bounds[p][1])
    assert ((hours >= lo) & (hours < hi)).all()
    population = pd.read_parquet(s.campaign_dir / "population" / f"{s.dates[-1].isoformat()}.parquet")
    assert len(population) == 2000 and population["user_id"].is_unique
    assert list(population.columns) == ["user_id", "age", "activity", "tenure_days", "avg_spend", "city", "device", "period_of_day"]
    # events carry the user's static features
    merged = events.merge(population, on="user_id", suffixes=("", "_pop"))
    assert len(merged) == len(events) and (merged["city"] == merged["city_pop"]).all()
    assert str(s).startswith("demo campaign 'demo'")


def test_default_start_ends_yesterday(tmp_path):
    s = simulate("e2e_synthetic", SimulationRequest("e", tmp_path, days=2, users=50, seed=0))  # today's start is under test
    assert s.dates[-1] == dt.date.today() - dt.timedelta(days=1)


@pytest.mark.parametrize("name", ["demo", "confounded", "dipn_synthetic_1", "dipn_synthetic_2", "e2e_synthetic"])
def test_truth_covers_every_user_and_level_and_curves_are_monotone(campaigns, name):
    _, sims = campaigns
    s = sims[name]
    truth = load_truth(s.campaign_dir)
    assert len(truth) == s.users * s.n_levels
    assert truth.groupby("user_id")["level"].nunique().eq(s.n_levels).all()
    assert truth["user_id"].nunique() == s.users
    values, costs = truth_arrays(s.campaign_dir)
    assert values.shape == costs.shape == (s.users, s.n_levels)
    assert ((values >= 0) & (values <= 1)).all()
    assert (np.diff(values, axis=1) >= -1e-12).all()
    config = CampaignConfig.load(s.campaign_dir)
    incentives = np.asarray(config.incentives)
    expected_cost = values * incentives if config.cost == "redeemed" else np.broadcast_to(incentives, values.shape)
    np.testing.assert_allclose(costs, expected_cost)
    # every budget lies between the cheapest and the dearest allocation
    assert config.budget_per_capita
    for b in config.budget_per_capita:
        assert costs.min(axis=1).mean() < b < costs.max(axis=1).mean()
    events = _events(s.campaign_dir)
    assert set(events["user_id"]) <= set(truth_user_ids(s.campaign_dir))


def test_truth_arrays_align_to_given_ids_and_reject_unknown_ones(campaigns):
    _, sims = campaigns
    d = sims["demo"].campaign_dir
    all_values, all_costs = truth_arrays(d)
    ids = truth_user_ids(d)
    order = np.random.default_rng(0).permutation(ids.size)[:300]
    values, costs = truth_arrays(d, ids[order])
    np.testing.assert_array_equal(values, all_values[order])
    np.testing.assert_array_equal(costs, all_costs[order])
    with pytest.raises(TruthError, match="no ground truth"):
        truth_arrays(d, ["u0000001", "nobody"])
    with pytest.raises(TruthError, match="propensity.parquet"):
        true_propensity_arrays(d)


def test_demo_true_curves_have_diminishing_returns_and_feature_effects(campaigns):
    _, sims = campaigns
    d = sims["demo"].campaign_dir
    values, _ = truth_arrays(d)
    pop = pd.read_parquet(next((d / "population").glob("*.parquet")))
    uplift = values[:, -1] - values[:, 0]
    assert uplift.mean() > 0.15
    # per unit of incentive, the first coupon adds more than the last step (8 vs 5) for most users
    first, last = values[:, 1] - values[:, 0], (values[:, 5] - values[:, 4]) / 3.0
    assert (first > last).mean() > 0.6
    by_period = pd.Series(uplift).groupby(pop["period_of_day"]).mean()
    assert by_period["evening"] > by_period["morning"] + 0.03
    by_city = pd.Series(uplift).groupby(pop["city"]).mean()
    assert by_city["wuhan"] > by_city["beijing"] + 0.03
    active = pop["activity"] > 20
    assert values[active.to_numpy(), 0].mean() > values[(~active).to_numpy(), 0].mean() + 0.1


def test_confounded_logging_gives_active_users_lower_incentives(campaigns):
    _, sims = campaigns
    d = sims["confounded"].campaign_dir
    config = CampaignConfig.load(d)
    assert not config.randomized
    events = _events(d)
    assert "propensity" not in events.columns
    assert np.corrcoef(events["treatment"], events["activity"])[0, 1] < -0.4
    prop = true_propensity_arrays(d)
    np.testing.assert_allclose(prop.sum(axis=1), 1.0)
    assert prop.min() > 0.005
    # the logged levels follow the true propensities: mean P(level) over the events' users
    level = np.searchsorted(np.asarray(config.incentives), events["treatment"].to_numpy())
    expected = true_propensity_arrays(d, events["user_id"].to_numpy()).mean(axis=0)
    observed = np.bincount(level, minlength=6) / level.size
    np.testing.assert_allclose(observed, expected, atol=0.01)
    # unweighted averages of the response per level are biased: level 0 (mostly active users)
    # looks far better than it is and the uplift of the top level is understated
    values, _ = truth_arrays(d)
    naive = events.groupby(level)["response"].mean().to_numpy()
    true_mean = values.mean(axis=0)
    assert naive[0] > true_mean[0] + 0.06
    assert (naive[-1] - naive[0]) < 0.8 * (true_mean[-1] - true_mean[0])


def _eq19_reference(a: float, mu: float, delta: float) -> np.ndarray:
    """Eq. 19-20 written out literally."""
    terms = [np.exp(-((h - mu) ** 2) / (2 * delta**2)) for h in range(101)]
    z = max(terms)
    return np.array([a + (1 - a) / (100 * z) * sum(terms[: i + 1]) for i in range(101)])


def test_dipn_curves_follow_eq_19_20():
    for a, mu, delta in [(0.3, 40.0, 20.0), (0.7, -30.0, 45.0), (0.1, 130.0, 10.0), (0.5, 50.0, 3.0)]:
        ours = dipn_curves(np.array([a]), np.array([mu]), np.array([delta]))[0]
        np.testing.assert_allclose(ours, _eq19_reference(a, mu, delta), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,n", [("dipn_synthetic_1", (2, 2, 2)), ("dipn_synthetic_2", (3, 5, 7))])
def test_dipn_presets_match_the_paper_setup(campaigns, name, n):
    _, sims = campaigns
    d = sims[name].campaign_dir
    config = CampaignConfig.load(d)
    assert config.incentives == tuple(float(i) for i in range(1, 101))
    assert 11.0 in config.budget_per_capita and config.cost == "redeemed"
    pop = pd.read_parquet(next((d / "population").glob("*.parquet")))
    assert [pop[f"cat{j + 1}"].nunique() <= k for j, k in enumerate(n)] == [True] * 3
    values, _ = truth_arrays(d, pop["user_id"].to_numpy())
    # users of the same combination share one curve; the curve is a + b * (cumulative Gaussian mass)
    combos = pop[["cat1", "cat2", "cat3"]].astype(str).agg("|".join, axis=1)
    for _, idx in pd.Series(np.arange(len(pop))).groupby(combos.to_numpy()):
        block = values[idx.to_numpy()]
        np.testing.assert_array_equal(block, np.broadcast_to(block[0], block.shape))
    assert combos.nunique() <= int(np.prod(n))
    assert values[:, -1].max() <= 1.0 and values.min() >= 0.0
    events = _events(d)
    assert np.allclose(events["propensity"], 0.01)
    assert events["treatment"].between(1, 100).all()


def test_e2e_generator_marginals_follow_the_paper(campaigns):
    _, sims = campaigns
    s = sims["e2e_synthetic"]
    config = CampaignConfig.load(s.campaign_dir)
    assert config.incentives == (1.0, 2.0, 3.0, 4.0) and config.cost == "assigned"
    assert 2.0 in config.budget_per_capita
    values, costs = truth_arrays(s.campaign_dir)
    np.testing.assert_array_equal(costs, np.broadcast_to([1.0, 2.0, 3.0, 4.0], costs.shape))
    v1, k = values[:, 0], np.diff(values, axis=1)
    assert v1.min() >= 0 and v1.max() <= 0.1
    assert abs(v1.mean() - 0.05) < 0.002 and abs(v1.std() - 0.1 / np.sqrt(12)) < 0.002
    # descending order statistics of three U(0, 0.2): means 0.15, 0.10, 0.05
    assert (k[:, 0] >= k[:, 1]).all() and (k[:, 1] >= k[:, 2]).all() and (k >= 0).all() and (k <= 0.2).all()
    np.testing.assert_allclose(k.mean(axis=0), [0.15, 0.10, 0.05], atol=0.003)
    events = _events(s.campaign_dir)
    assert len(events) == 20000  # daily_active defaults to 1.0: every user, once
    np.testing.assert_allclose(events["cost"], events["treatment"])
    shares = events["treatment"].value_counts(normalize=True).sort_index().to_numpy()
    np.testing.assert_allclose(shares, 0.25, atol=0.015)
    # responses are Bernoulli(v_gt(t)): per treatment, the mean response matches the mean truth
    ids = events["user_id"].to_numpy()
    v = truth_arrays(s.campaign_dir, ids)[0][np.arange(len(ids)), events["treatment"].astype(int).to_numpy() - 1]
    for t in (1, 2, 3, 4):
        sel = events["treatment"].to_numpy() == t
        assert abs(events["response"].to_numpy()[sel].mean() - v[sel].mean()) < 0.02
    # features: the latent draws (x1 = v1, x2..x4 = increments)
    np.testing.assert_allclose(events["x1"].to_numpy(), v1[np.searchsorted(truth_user_ids(s.campaign_dir), ids)])


def test_e2e_without_features_writes_no_feature_column(tmp_path):
    s = simulate("e2e_synthetic", SimulationRequest("e", tmp_path, days=1, users=100, seed=0, start=START),
                 features="none")
    names = pq.read_schema(s.campaign_dir / "events" / f"{START.isoformat()}.parquet").names
    assert names == ["user_id", "treatment", "response", "cost", "propensity", "event_time"]


def test_bad_arguments_are_refused_with_clear_errors(tmp_path):
    with pytest.raises(SimulationError, match="unknown preset"):
        simulate("nope", SimulationRequest("c", tmp_path, days=1, users=10, start=REFERENCE_START))
    with pytest.raises(SimulationError, match="no option"):
        simulate("demo", SimulationRequest("c", tmp_path, days=1, users=10, start=REFERENCE_START), colour="red")
    with pytest.raises(SimulationError, match="days"):
        simulate("demo", SimulationRequest("c", tmp_path, days=0, users=10, start=REFERENCE_START))
    with pytest.raises(SimulationError, match="users"):
        simulate("demo", SimulationRequest("c", tmp_path, days=1, users=0, start=REFERENCE_START))
    with pytest.raises(SimulationError, match="daily_active"):
        simulate("demo", SimulationRequest("c", tmp_path, days=1, users=10, start=REFERENCE_START), daily_active=1.5)
    with pytest.raises(SimulationError, match="logging"):
        simulate("demo", SimulationRequest("c", tmp_path, days=1, users=10, start=REFERENCE_START), logging="biased")
    with pytest.raises(SimulationError, match="levels"):
        simulate("dipn_synthetic_1", SimulationRequest("c", tmp_path, days=1, users=10,
                                                       start=REFERENCE_START), levels=[5, 3])
    assert not (tmp_path / "c" / "events").exists()


def test_options_change_the_campaign(tmp_path):
    s = simulate("demo", SimulationRequest("c", tmp_path, days=1, users=1000, seed=0, start=START), daily_active=1.0,
                 levels=[0, 2, 4])
    assert s.rows == 1000 and s.n_levels == 3
    assert CampaignConfig.load(s.campaign_dir).incentives == (0.0, 2.0, 4.0)
    d = simulate("dipn_synthetic_1", SimulationRequest("d", tmp_path, days=1, users=200, seed=0, start=START),
                 levels=[0, 10, 50, 100])
    values, _ = truth_arrays(d.campaign_dir)
    assert values.shape == (200, 4)
    # level 0 of Eq. 19 is a + b/(100 Z) * exp(-(0-mu)^2/2d^2) >= a: never below the intercept
    assert (values[:, 0] > 0).all()


def test_bipartite_preset_is_registered_when_its_module_exists(tmp_path):
    # the module is part of the package: missing, this fails (it used to pass without checking anything)
    import promo_assets.simulation.bipartite  # noqa: F401

    assert "bipartite" in PRESETS
    s = simulate("bipartite", SimulationRequest("bp", tmp_path, days=2, users=200, seed=0, start=START))
    assert s.dates == [START, START + dt.timedelta(days=1)]
    assert s.rows == sum(len(pd.read_parquet(f)) for f in (s.campaign_dir / "events").glob("*.parquet")) > 0
    assert s.n_levels == CampaignConfig.load(s.campaign_dir).n_levels and s.details
