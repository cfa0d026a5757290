"""The `bipartite` simulator preset: files, determinism, truth shape, change point, influence."""

from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest

from promo_assets.config.campaign import CampaignConfig
from promo_assets.simulation import REFERENCE_START
from promo_assets.simulation.bipartite import BipartiteSimulationError, simulate_bipartite
from promo_assets.simulation.landing import SimulationRequest

DAY1, DAY2 = REFERENCE_START.isoformat(), (REFERENCE_START + timedelta(days=1)).isoformat()


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    request = SimulationRequest("bp", tmp_path_factory.mktemp("bp"), 2, 3000, 7, date(2024, 3, 1))
    summary = simulate_bipartite(request)
    d = request.campaign_dir
    return d, summary


def test_writes_landing_format(campaign):
    d, summary = campaign
    cfg = CampaignConfig.load(d)
    assert cfg.incentives == (0.0, 50.0, 100.0, 150.0, 200.0)
    assert list(cfg.merchants.treatments.levels) == [0, 25, 50, 75, 100]
    assert sorted(p.name for p in (d / "events").iterdir()) == ["2024-03-01.parquet", "2024-03-02.parquet"]
    ev = pd.concat(pd.read_parquet(p) for p in sorted((d / "events").iterdir()))
    assert {"user_id", "treatment", "response", "cost", "propensity", "merchant_id", "c_f0", "segment"} <= set(ev.columns)
    assert set(ev["response"].unique()) <= {0.0, 1.0}
    np.testing.assert_allclose(ev["cost"], ev["treatment"] * ev["response"])
    assert len(ev) == summary["events"]
    edges = pd.concat(pd.read_parquet(p) for p in sorted((d / "edges").iterdir()))
    assert {"user_id", "merchant_id", "n_payments", "amount", "event_date"} <= set(edges.columns)
    assert edges.groupby(["user_id", "merchant_id"]).ngroups == summary["edges"]
    assert (edges["n_payments"] >= 1).all()
    # every RCT customer's merchant is one the customer pays at
    pairs = set(zip(edges["user_id"], edges["merchant_id"]))
    assert all(p in pairs for p in zip(ev["user_id"], ev["merchant_id"]))
    mev = pd.concat(pd.read_parquet(p) for p in sorted((d / "merchants").iterdir()))
    assert {"merchant_id", "treatment", "response", "cost", "prev_shares", "m_f0"} <= set(mev.columns)
    assert (mev["response"] == np.round(mev["response"])).all() and (mev["response"] >= 0).all()
    pop = pd.read_parquet(d / "population" / "2024-03-02.parquet")
    assert len(pop) == 3000 and pop["user_id"].is_unique


def test_truth_covers_every_user_and_level_and_is_monotone(campaign):
    d, summary = campaign
    truth = pd.read_parquet(d / "truth" / "response.parquet")
    assert len(truth) == 3000 * 5
    wide = truth.pivot(index="user_id", columns="level", values="expected_response").to_numpy()
    assert (np.diff(wide, axis=1) >= 0).all() and (wide >= 0).all() and (wide <= 1).all()
    np.testing.assert_allclose(truth["expected_cost"], truth["incentive"] * truth["expected_response"])
    m = pd.read_parquet(d / "truth" / "merchant_response.parquet")
    assert {"merchant_id", "level", "commission", "expected_response", "expected_cost"} <= set(m.columns)
    mw = m.pivot(index="merchant_id", columns="level", values="expected_response").to_numpy()
    assert (np.diff(mw, axis=1) > 0).all()


def test_change_point_above_100(campaign):
    _, summary = campaign
    steps = np.diff(summary["true_mean_response"])  # 0->50, 50->100, 100->150, 150->200
    assert steps[2] > 3 * max(steps[0], steps[1])


def test_deterministic_by_seed(tmp_path):
    a = simulate_bipartite(SimulationRequest("a", tmp_path, 2, 400, 3, REFERENCE_START))
    b = simulate_bipartite(SimulationRequest("b", tmp_path, 2, 400, 3, REFERENCE_START))
    c = simulate_bipartite(SimulationRequest("c", tmp_path, 2, 400, 4, REFERENCE_START))
    for sub in (f"events/{DAY2}.parquet", f"edges/{DAY1}.parquet", "truth/response.parquet",
                f"merchants/{DAY1}.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a" / sub), pd.read_parquet(tmp_path / "b" / sub))
    assert a["true_mean_response"] == b["true_mean_response"] != c["true_mean_response"]


def test_customers_of_enthusiastic_merchants_respond_more(tmp_path):
    """Merchant feature m_f1 drives enthusiasm; with influence on, a customer's response rises with
    the payment-weighted m_f1 of their merchants, and with influence=0 it does not."""
    corr = {}
    for infl in (0.0, 1.0):
        request = SimulationRequest(f"i{infl}", tmp_path, 1, 4000, 11, REFERENCE_START)
        simulate_bipartite(request, influence=infl)
        d = request.campaign_dir
        edges = pd.read_parquet(d / "edges" / f"{DAY1}.parquet")
        merch = pd.read_parquet(next((d / "merchant_population").iterdir()))
        e = edges.merge(merch[["merchant_id", "m_f1"]], on="merchant_id")
        e["w"] = e["n_payments"] * e["m_f1"]
        g = e.groupby("user_id")[["w", "n_payments"]].sum()
        score = g["w"] / g["n_payments"]
        truth = pd.read_parquet(d / "truth" / "response.parquet")
        top = truth[truth["level"] == 4].set_index("user_id")["expected_response"]
        corr[infl] = np.corrcoef(score, top.loc[score.index])[0, 1]
    assert corr[1.0] > 0.15
    assert abs(corr[0.0]) < 0.08


def test_bad_arguments(tmp_path):
    with pytest.raises(BipartiteSimulationError, match="days"):
        simulate_bipartite(SimulationRequest("c", tmp_path, 0, 10, 0, REFERENCE_START))
    with pytest.raises(BipartiteSimulationError, match="customer_levels"):
        simulate_bipartite(SimulationRequest("c", tmp_path, 1, 10, 0, REFERENCE_START), customer_levels=[0, 50, 50])
    with pytest.raises(BipartiteSimulationError, match="unknown option"):
        simulate_bipartite(SimulationRequest("c", tmp_path, 1, 10, 0, REFERENCE_START), colour="red")
    with pytest.raises(BipartiteSimulationError, match="edges_per_customer"):
        simulate_bipartite(SimulationRequest("c", tmp_path, 1, 10, 0, REFERENCE_START), edges_per_customer=0.5)
    with pytest.raises(BipartiteSimulationError, match="merchant_exponent"):
        simulate_bipartite(SimulationRequest("c", tmp_path, 1, 10, 0, REFERENCE_START), merchant_exponent=0.0)


@pytest.mark.parametrize("exponent", [0.8, 1.0])
def test_merchant_response_shape_follows_the_exponent(tmp_path, exponent):
    """Expected sharing count v (1 + s (c/100)^e): its increments over equally spaced commissions
    shrink for e < 1 (concave) and are equal for e = 1 (the linear head's own form)."""
    request = SimulationRequest("m", tmp_path, 1, 300, 5, REFERENCE_START)
    simulate_bipartite(request, merchants=60, merchant_exponent=exponent)
    d = request.campaign_dir
    m = pd.read_parquet(d / "truth" / "merchant_response.parquet")
    steps = np.diff(m.pivot(index="merchant_id", columns="level", values="expected_response").to_numpy(), axis=1)
    if exponent == 1.0:
        np.testing.assert_allclose(steps, steps[:, :1].repeat(steps.shape[1], axis=1), rtol=1e-9)
    else:
        assert (np.diff(steps, axis=1) < 0).all()
