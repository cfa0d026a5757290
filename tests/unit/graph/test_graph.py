"""promo_assets.graph: graph building, heads, training, metrics, joint allocation (tiny graphs)."""

import numpy as np
import pandas as pd
import pytest
import torch

from promo_assets.graph import (
    EDGE,
    REV_EDGE,
    GraphData,
    GraphDataError,
    GraphTrainConfig,
    GraphTrainingError,
    build_graph,
    customer_metrics,
    level_curve,
    load_bipartite_campaign,
    load_graph_model,
    normalized_adjacency,
    plot_uplift_quintiles,
    sensitivity_quintile_uplift,
    train_gnn_hazard,
    train_graph_model,
    truth_matrix,
    truth_metrics,
)
from promo_assets.graph.nn import HazardHead, MerchantHead, censored_hazard_loss
from promo_assets.simulation.bipartite import simulate_bipartite
from promo_assets.simulation.landing import SimulationRequest
from promo_assets.simulation import REFERENCE_START


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny graphs: one intra-op thread is faster than two on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def camp(tmp_path_factory):
    request = SimulationRequest("bp", tmp_path_factory.mktemp("g"), 2, 400, 5, REFERENCE_START)
    simulate_bipartite(request, merchants=100)
    d = request.campaign_dir
    return load_bipartite_campaign(d)


@pytest.fixture(scope="module")
def graph(camp):
    return build_graph(camp.edges, camp.customers, camp.merchants)


@pytest.fixture(scope="module")
def trained(camp, graph, tmp_path_factory):
    root = tmp_path_factory.mktemp("artifacts")
    lines = []
    model = train_gnn_hazard(GraphData(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions),
                             seed=1, max_epochs=15, log=lines.append, artifacts_root=root)
    return model, root, lines


def test_build_graph(camp, graph):
    assert graph["customer"].num_nodes == 400 and graph["merchant"].num_nodes == 100
    assert graph["customer"].x.shape == (400, 5 + 3)  # 5 numeric + one-hot segment (a, b, c)
    e = graph[EDGE].edge_index
    assert torch.equal(graph[REV_EDGE].edge_index, e.flip(0))
    pairs = camp.edges.groupby(["user_id", "merchant_id"])["n_payments"].sum()
    assert e.shape[1] == len(pairs)
    cid, mid = graph["customer"].ids[e[0].numpy()], graph["merchant"].ids[e[1].numpy()]
    n = pairs.loc[list(zip(cid, mid))].to_numpy()
    np.testing.assert_allclose(graph[EDGE].edge_weight.numpy(), np.log1p(n), rtol=1e-6)
    assert (graph["merchant"].normalizer.numpy() >= 1).all()
    adj = normalized_adjacency(graph)
    rows = adj[EDGE].to_dense().sum(1)  # merchants x customers
    has = torch.bincount(e[1], minlength=100) > 0
    torch.testing.assert_close(rows[has], torch.ones(int(has.sum())))


def test_graph_features_come_from_the_one_feature_encoder(camp):
    """Node features are `models.encoder.FeatureEncoder.transform_dense`: standardized numerics (a
    missing value is the mean: 0), one 0/1 column per known category (missing: all zeros)."""
    from promo_assets.models.encoder import FeatureEncoder

    cust = camp.customers.copy()
    cust.loc[0, "c_f0"] = np.nan
    cust.loc[1, "segment"] = None
    g = build_graph(camp.edges, cust, camp.merchants)
    enc = g.encoders["customer"]
    assert isinstance(enc, FeatureEncoder) and enc.indicator_columns == []
    assert enc.dense_names == ["c_f0", "c_f1", "c_f2", "c_f3", "c_f4", "segment=a", "segment=b", "segment=c"]
    x = g["customer"].x.numpy()
    col = pd.to_numeric(cust["c_f0"])
    np.testing.assert_allclose(x[2:, 0], ((col - col.mean()) / col.std(ddof=0)).to_numpy()[2:], rtol=1e-5)
    assert x[0, 0] == 0.0 and x[1, 5:].sum() == 0.0
    assert (x[2:, 5:].sum(axis=1) == 1).all()


def test_graph_model_payload_formats(trained, tmp_path):
    """A format-1 payload (before the one training loop) still loads; an unknown format is refused
    with a message that says to re-materialize the model."""
    from promo_assets.graph.train import TrainedGraphModel

    model = trained[0]
    old = model.payload()
    old.pop("format")
    old["history"] = [{"epoch": 1, "loss": 1.0, "loss_c": 0.5, "loss_m": 0.5, "val_c": 0.6, "val_m": 0.6}]
    loaded = TrainedGraphModel.from_payload(old, version="v1")
    np.testing.assert_array_equal(loaded.customer_values, model.customer_values)
    with pytest.raises(GraphTrainingError, match="payload format 99.*re-materialize gnn_hazard_model"):
        TrainedGraphModel.from_payload({**model.payload(), "format": 99}, version="v99")
    with pytest.raises(GraphTrainingError, match="re-materialize gnn_hazard_model"):
        TrainedGraphModel.from_payload({**model.payload(), "unknown_field": 1}, version="vx")


def test_build_graph_rejects_unknown_nodes(camp):
    edges = pd.concat([camp.edges, pd.DataFrame({"user_id": ["ghost"], "merchant_id": ["m000001"], "n_payments": [1]})])
    with pytest.raises(GraphDataError, match="missing from the node tables"):
        build_graph(edges, camp.customers, camp.merchants)
    g = build_graph(edges, camp.customers, camp.merchants, drop_unknown=True)
    assert g[EDGE].edge_index.shape[1] == camp.edges.groupby(["user_id", "merchant_id"]).ngroups
    with pytest.raises(GraphDataError, match="repeats user_id"):
        build_graph(camp.edges, pd.concat([camp.customers, camp.customers.head(1)]), camp.merchants)


def test_hazard_head_is_monotone_and_loss_matches_eq9():
    torch.manual_seed(0)
    head = HazardHead(8, 5, tower=16)
    h = torch.randn(50, 8) * 3
    f = head(h)
    assert (f.diff(dim=1) >= 0).all() and (f >= 0).all() and (f <= 1).all()
    lam = head.cumulative_hazard(h)
    level = torch.randint(0, 5, (50,))
    y = torch.randint(0, 2, (50,)).float()
    lj = lam[torch.arange(50), level]
    manual = -(y * torch.log(1 - torch.exp(-lj))).sum() + ((1 - y) * lj).sum()
    torch.testing.assert_close(censored_hazard_loss(lam, level, y), manual, rtol=1e-4, atol=1e-4)
    w = head.linear.weight
    torch.testing.assert_close(head.penalty(), (w[1:] - w[:-1]).abs().sum())


def test_merchant_head_non_decreasing_in_commission():
    torch.manual_seed(0)
    head = MerchantHead(8, torch.tensor([0.0, 25, 50, 75, 100]), tower=16)
    y = head(torch.randn(40, 8) * 3)
    assert (y.diff(dim=1) >= 0).all()


def test_train_gnn_hazard(trained, graph, camp):
    model, root, lines = trained
    values, costs = model.predict_customers()
    assert values.shape == (400, 5) and (np.diff(values, axis=1) >= -1e-12).all()
    np.testing.assert_allclose(costs, values * camp.incentives[None, :])
    mv, mc = model.predict_merchants()
    assert mv.shape == (100, 5) and (mv >= 0).all() and (np.diff(mv, axis=1) >= -1e-9).all()
    np.testing.assert_allclose(mc, mv * camp.commissions[None, :])
    for key in ("auc_c", "mae_c", "mse_c", "mae_m", "mse_m", "epochs", "seconds_per_epoch"):
        assert key in model.metrics
    assert 0.5 < model.metrics["auc_c"] <= 1.0
    assert lines and "epoch 1" in lines[0]
    loaded = load_graph_model(model.version, root)
    np.testing.assert_array_equal(loaded.customer_values, model.customer_values)
    frame = pd.DataFrame({"user_id": model.customer_ids[[3, 1]]})
    np.testing.assert_array_equal(model.predict(frame)[0], values[[3, 1]])
    with pytest.raises(GraphTrainingError, match="not in the graph"):
        model.predict(pd.DataFrame({"user_id": ["nobody"]}))
    coef = model.coefficients("merchant")
    assert list(coef.columns) == ["merchant_id", "level", "incentive", "response", "cost"] and len(coef) == 500


def test_training_is_deterministic_and_learns(camp, graph):
    kw = dict(seed=3, max_epochs=6, save=False, tower=32)
    a = train_gnn_hazard(GraphData(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions), **kw)
    b = train_gnn_hazard(GraphData(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions), **kw)
    np.testing.assert_allclose(a.customer_values, b.customer_values, rtol=1e-5, atol=1e-6)
    assert a.history[-1]["train_loss"] < a.history[0]["train_loss"]


@pytest.mark.parametrize("encoder,head", [("dnn", "hazard"), ("dnn_h", "hazard"), ("gnn", "cox"), ("gnn", "sbbm")])
def test_baselines_train(camp, graph, encoder, head):
    m = train_graph_model(GraphData(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions),
                          GraphTrainConfig(encoder=encoder, head=head, max_epochs=5, tower=32), save=False)
    v, _ = m.predict_customers()
    assert v.shape == (400, 5) and (np.diff(v, axis=1) >= -1e-9).all() and np.isfinite(m.metrics["mae_c"])


def test_training_input_errors(camp, graph):
    bad = camp.customer_events.assign(level=7)
    with pytest.raises(GraphTrainingError, match="level"):
        train_gnn_hazard(GraphData(graph, bad, camp.merchant_events, camp.incentives, camp.commissions), save=False)
    with pytest.raises(GraphTrainingError, match="0/1"):
        train_gnn_hazard(GraphData(graph, camp.customer_events.assign(response=2.0), camp.merchant_events,
                                   camp.incentives, camp.commissions), save=False)
    with pytest.raises(GraphTrainingError, match="encoder"):
        train_graph_model(GraphData(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions), GraphTrainConfig(encoder="gcn"), save=False)
    with pytest.raises(GraphTrainingError, match="unknown training option"):
        train_gnn_hazard(GraphData(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions), colour=1, save=False)


def test_customer_metrics_known_values():
    m = customer_metrics(np.array([0.9, 0.2, 0.6, 0.4]), np.array([1, 0, 0, 1]))
    assert m["auc_c"] == pytest.approx(0.75)
    assert m["mae_c"] == pytest.approx((0.1 + 0.2 + 0.6 + 0.6) / 4)
    assert m["mse_c"] == pytest.approx((0.01 + 0.04 + 0.36 + 0.36) / 4)


def test_sensitivity_quintiles_and_plot():
    rng = np.random.default_rng(0)
    n = 5000
    sens = rng.random(n)
    level = rng.integers(0, 2, n)
    response = (rng.random(n) < 0.1 + 0.5 * sens * level).astype(float)
    table = sensitivity_quintile_uplift(sens, level, response, [1], [0], true_uplift=0.5 * sens)
    assert list(table["group"]) == [1, 2, 3, 4, 5] and table["n"].sum() == n
    assert table["observed_uplift"].iloc[0] > table["observed_uplift"].iloc[-1] + 0.2
    assert (np.diff(table["true_uplift"]) < 0).all()
    png = plot_uplift_quintiles({"a": table, "b": table})
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_truth_helpers(trained, camp):
    model, _, _ = trained
    ct, cc = truth_matrix(camp.customer_truth, "user_id", model.customer_ids, 5)
    mt, _ = truth_matrix(camp.merchant_truth, "merchant_id", model.merchant_ids, 5)
    np.testing.assert_allclose(cc, ct * camp.incentives[None, :])
    tm = truth_metrics(model.customer_values, model.merchant_values, ct, mt, model.merchant_normalizer)
    assert 0 < tm["mae_c_truth"] < 0.3
    curve = level_curve(model.customer_values, ct, camp.incentives)
    assert list(curve.columns) == ["level", "incentive", "predicted", "predicted_step", "true", "true_step"]


def test_joint_allocation_and_decision_rule(trained, camp):
    from promo_assets.graph import (
        JointCurves as J,
        allocation_truth,
        compare_joint_independent,
        decide,
        joint_allocation,
    )

    model, _, _ = trained
    vc, cc = model.predict_customers()
    vm, cm = model.predict_merchants()
    norm = model.merchant_normalizer
    a = joint_allocation(J((vc, cc), (vm, cm)), 40.0, merchant_normalizer=norm)
    vmn, cmn = vm / norm[:, None], cm / norm[:, None]
    assert a.cost <= 40.0 * a.value * (1 + 1e-6) + cc.max() + cmn.max()  # at most one rounded user over
    # the normalizer is the paper's f^m = count / previous shares, applied to values and costs alike
    b = joint_allocation(J((vc, cc), (vmn, cmn)), 40.0)
    np.testing.assert_array_equal(a.merchant_levels, b.merchant_levels)
    assert a.value == pytest.approx(b.value) and a.merchant_value == pytest.approx(vmn[np.arange(len(vmn)), a.merchant_levels].sum())
    # Eq. 19-20 (same form on both sides) with lambda* reproduce the solver's choice (up to the fractional user)
    lam = a.lambda_
    same_c = decide(vc, cc, lam, 40.0) == a.customer_levels
    same_m = decide(vmn, cmn, lam, 40.0) == a.merchant_levels
    assert (~same_c).sum() + (~same_m).sum() <= 1
    ct = truth_matrix(camp.customer_truth, "user_id", model.customer_ids, 5)
    mt = truth_matrix(camp.merchant_truth, "merchant_id", model.merchant_ids, 5)
    r = allocation_truth(a, ct, mt, norm)
    assert r["true_value"] > 0 and r["true_cost"] > 0
    rows = np.arange(len(vm))
    assert r["true_merchant_count"] == pytest.approx(mt[0][rows, a.merchant_levels].sum())
    assert r["true_merchant_value"] == pytest.approx((mt[0][rows, a.merchant_levels] / norm).sum())
    assert r["true_spend"] == pytest.approx(ct[1][np.arange(len(vc)), a.customer_levels].sum() + mt[1][rows, a.merchant_levels].sum())
    for normalizer in (norm, None):
        cmp = compare_joint_independent(J((vc, cc), (vm, cm)), 40.0, J(ct, mt), merchant_normalizer=normalizer)
        scale = np.ones(len(vm)) if normalizer is None else normalizer
        for source, (tc, tm) in (("predicted", (cc, cm)), ("oracle", (ct[1], mt[1]))):
            j, i = cmp[f"{source}_joint"], cmp[f"{source}_independent"]
            one_user = tc.max() + (tm / scale[:, None]).max()
            # same total predicted budget (each of the two budget solves may round one user up)
            assert abs(j["predicted_cost"] - i["predicted_cost"]) <= 2 * one_user
            # on what it optimizes, the joint LP optimum beats any split of the same total
            slack = ct[0].max() + (mt[0] / scale[:, None]).max()
            assert j["predicted_value"] >= i["predicted_value"] - 2 * slack
            assert 0 < i["customer_share"] < 1
        assert cmp["predicted_independent_same_ratio"]["true_value"] > 0


def test_joint_beats_a_bad_split_and_rejects_bad_input():
    from promo_assets.graph.joint import (
        JointAllocationError,
        JointCurves as J,
        independent_allocation,
        joint_allocation,
    )

    rng = np.random.default_rng(0)
    amounts = np.array([0.0, 10.0, 20.0])
    # customers: steep cheap gains; merchants: flat curves whose own ratio-B solution still spends
    vc = np.sort(rng.uniform(0.0, 1.0, (200, 3)), axis=1) * np.array([0.1, 1.0, 1.2])
    vm = np.sort(rng.uniform(0.5, 1.0, (200, 3)), axis=1) * np.array([1.0, 1.02, 1.04])
    cc, cm = vc * amounts, vm * amounts
    j = joint_allocation(J((vc, cc), (vm, cm)), 10.0)
    i = independent_allocation(J((vc, cc), (vm, cm)), 10.0)  # total_cost defaults to the joint policy's cost
    assert i.info["total_cost"] == pytest.approx(j.cost)
    assert abs(i.cost - j.cost) <= 2 * max(cc.max(), cm.max())
    assert i.info["customer_budget"] + i.info["merchant_budget"] == pytest.approx(j.cost)
    assert j.value > i.value  # the fixed proportional split leaves value on the table here
    fixed = independent_allocation(J((vc, cc), (vm, cm)), 10.0, total_cost=1000.0)
    assert fixed.cost <= 1000.0 + 2 * max(cc.max(), cm.max())
    with pytest.raises(JointAllocationError, match="merchant_normalizer"):
        joint_allocation(J((vc, cc), (vm, cm)), 10.0, merchant_normalizer=np.ones(3))
    with pytest.raises(JointAllocationError, match="merchant_normalizer"):
        joint_allocation(J((vc, cc), (vm, cm)), 10.0, merchant_normalizer=np.zeros(200))
    with pytest.raises(JointAllocationError, match="total_cost"):
        independent_allocation(J((vc, cc), (vm, cm)), 10.0, total_cost=-1.0)
    with pytest.raises(JointAllocationError, match="cost"):
        joint_allocation(J((vc, cc[:, :2]), (vm, cm)), 10.0)


def test_split_scan_peaks_at_the_joint_split_on_exact_curves():
    from promo_assets.graph.joint import JointAllocationError, JointCurves as J, joint_allocation, split_scan

    rng = np.random.default_rng(1)
    amounts = np.array([0.0, 10.0, 20.0])
    vc = np.cumsum(rng.uniform(0.0, 0.3, (300, 3)), axis=1)
    vm = np.cumsum(rng.uniform(0.0, 0.6, (100, 3)), axis=1) + 1.0
    cc, cm = vc * amounts, vm * amounts
    exact = J((vc, cc), (vm, cm))
    j = joint_allocation(exact, 8.0)
    shares = np.linspace(0.0, 1.0, 41)
    # predictions equal to the truth: the scan's true value is the LP value of each split
    scan = split_scan(exact, j.cost, shares, exact)
    assert set(scan) == {"share", "true_value", "true_cost", "customer_slope", "merchant_slope"}
    # every split spends the total (each side's LP may round one user up or down)
    np.testing.assert_allclose(scan["true_cost"], j.cost, atol=2 * max(cc.max(), cm.max()))
    slack = 2 * max(vc.max(), vm.max())  # value of the users each LP may round
    joint_share = (cc[np.arange(300), j.customer_levels]).sum() / j.cost
    near = int(np.argmin(np.abs(shares - joint_share)))
    # the joint split is the best split (up to rounding), and the split matters here
    assert scan["true_value"][near] >= scan["true_value"].max() - slack
    assert j.value >= scan["true_value"].max() - slack
    assert scan["true_value"].max() - scan["true_value"][0] > 5 * slack
    # the predicted slopes cross at the joint split: customers' falls, merchants' rises with the share
    diff = scan["customer_slope"] - scan["merchant_slope"]
    assert diff[0] > 0 > diff[-1]
    assert abs(shares[np.argmin(np.abs(diff))] - joint_share) <= 0.05
    with pytest.raises(JointAllocationError, match="shares"):
        split_scan(exact, j.cost, [0.5, 1.5], exact)
    with pytest.raises(JointAllocationError, match="infeasible"):
        split_scan(J((vc, cc + 1.0), (vm, cm)), 10.0, [0.0], exact)


def test_ratio_budgets_and_allocate_ratio_budgets():
    from promo_assets.graph.joint import (
        JointAllocationError,
        JointCurves as J,
        JointNodes,
        allocate_ratio_budgets,
        allocation_truth,
        joint_allocation,
        ratio_budgets,
    )

    assert ratio_budgets(None) == [] and ratio_budgets(20) == [20.0] and ratio_budgets([10, "30"]) == [10.0, 30.0]
    for bad in (["x"], [-1.0], float("nan"), {"a": 1}):
        with pytest.raises(JointAllocationError, match="ratio_budget"):
            ratio_budgets(bad)
    rng = np.random.default_rng(1)
    amounts = np.array([0.0, 10.0, 20.0])
    vc = np.sort(rng.uniform(0.0, 1.0, (50, 3)), axis=1)
    vm = np.sort(rng.uniform(0.5, 2.0, (20, 3)), axis=1)
    cc, cm = vc * amounts, vm * amounts
    truth = ((vc * 0.9, cc * 0.9), (vm * 1.1, cm * 1.1))
    ids_c, ids_m = np.array([f"u{i}" for i in range(50)]), np.array([f"m{i}" for i in range(20)])
    curves = J((vc, cc), (vm, cm))
    rows, levels = allocate_ratio_budgets(curves, [5.0, 10.0], JointNodes(ids_c, ids_m, amounts, amounts * 2),
                                          truth=J(*truth))
    assert [r["ratio_budget"] for r in rows] == [5.0, 10.0] and all(r["note"] is None for r in rows)
    j = joint_allocation(curves, 10.0)
    assert rows[1]["joint_value"] == pytest.approx(j.value)
    assert rows[1]["joint_true_value"] == pytest.approx(allocation_truth(j, *truth)["true_value"])
    assert rows[1]["independent_cost"] == pytest.approx(j.cost, abs=2 * max(cc.max(), cm.max()))
    assert len(levels) == 2 * 2 * 2                     # ratios x kinds x sides
    merchant_joint = next(f for f in levels if (f["ratio_budget"] == 10.0).all() and (f["kind"] == "joint").all()
                          and (f["side"] == "merchant").all())
    assert list(merchant_joint["node_id"]) == list(ids_m)
    assert (merchant_joint["incentive"].to_numpy() == (amounts * 2)[j.merchant_levels]).all()
    # a ratio the solver refuses gives a row with a note, not an exception
    rows, levels = allocate_ratio_budgets(curves, [10.0], JointNodes(ids_c, ids_m, amounts, amounts),
                                          merchant_normalizer=np.zeros(20))
    assert rows[0]["note"] and "merchant_normalizer" in rows[0]["note"] and levels == []
