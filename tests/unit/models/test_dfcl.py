"""DFCL (issue #16): the IFD perturbation and incremental EOM, the PL / MER losses against hand-computed
values, the lambda grid and hyper-parameter checks, the dfcl_discount preset and one fit serving
every budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from promo_assets.allocation.decision import decide
from promo_assets.evaluation.eom import eom_batch
from promo_assets.models import registry
from promo_assets.models.dfcl import (
    eom_change,
    flips,
    grid_budgets,
    ifd_gradient,
    lambda_grid,
    policy_loss,
)
from promo_assets.simulation import REFERENCE_START

# ------------------------------------------------------------------------------- IFD: the flip
V = np.array([[0.30, 0.50, 0.45],     # decision 1 (a = 0.30, 0.40, 0.25 at lambda 0.1)
              [0.20, 0.25, 0.60],     # decision 0 (a = 0.20, 0.15, 0.00)
              [0.10, 0.40, 0.70]])    # decision 2 (a = 0.10, 0.30, 0.40)
C = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 6.0], [0.0, 1.0, 3.0]])
LAM = 0.1


def test_ifd_perturbation_flips_exactly_the_intended_decision():
    a = V - LAM * C
    d = decide(V, C, LAM)
    assert d.tolist() == [1, 0, 2]
    delta, new = flips(a, C, d.astype(np.int64))
    # hand-computed smallest flips: other levels rise to the decision's reduced value, the
    # decision falls to its runner-up's
    assert delta[0] == pytest.approx([0.10, -0.10, 0.15], abs=1e-8)
    assert new[0].tolist() == [0, 0, 2]          # lowering level 1 of user 0 hands it to level 0 (0.30 > 0.25)
    assert delta[1] == pytest.approx([-0.05, 0.05, 0.20], abs=1e-8)
    assert new[1].tolist() == [1, 1, 2]
    for i in range(3):
        for j in range(3):
            perturbed = V.copy()
            perturbed[i, j] += delta[i, j]       # the perturbation of v_ij alone (c unchanged)
            after = decide(perturbed, C, LAM)
            assert after[i] == new[i, j] != d[i], (i, j)   # user i flips, to the intended level
            others = np.arange(3) != i
            assert (after[others] == d[others]).all()      # nobody else moves
            smaller = V.copy()
            smaller[i, j] += 0.99 * delta[i, j]  # anything smaller does not flip
            assert decide(smaller, C, LAM)[i] == d[i], (i, j)


def test_ifd_flip_to_the_logged_level_follows_the_tie_rule():
    # two levels tied after the perturbation would go to the cheaper one: the margin makes it strict
    v = np.array([[0.5, 0.4]])
    c = np.array([[1.0, 0.0]])
    d = decide(v, c, 0.0).astype(np.int64)
    assert d.tolist() == [0]
    delta, new = flips(v - 0.0 * c, c, d)
    assert new.tolist() == [[1, 1]]
    up = v.copy()
    up[0, 1] += delta[0, 1]
    assert decide(up, c, 0.0).tolist() == [1]


# -------------------------------------------------------------------------- incremental EOM
def test_incremental_eom_equals_full_recomputation():
    rng = np.random.default_rng(3)
    n, k, lam = 40, 4, 0.3
    t = rng.integers(0, k, n)
    y = rng.binomial(1, 0.4, n).astype(float)
    z = y * rng.uniform(0.5, 2.0, n)
    w = rng.uniform(0.5, 2.0, n)
    d = rng.integers(0, k, n)
    d[:10] = t[:10]                                # some matched users
    base, add, remove = eom_change(t, y, z, w, d, lam)
    v0, c0, _ = eom_batch(d, t, y, z, 1.0 / w / (1.0 / w).max())
    assert base == pytest.approx(v0[0] - lam * c0[0], rel=1e-12)
    for i in range(n):
        d2 = d.copy()
        d2[i] = (t[i] + 1) % k if d[i] == t[i] else t[i]   # i stops / starts matching
        v2, c2, _ = eom_batch(d2, t, y, z, 1.0 / w / (1.0 / w).max())
        full = v2[0] - lam * c2[0] - base
        assert (remove[i] if d[i] == t[i] else add[i]) == pytest.approx(full, rel=1e-9, abs=1e-12), i


def test_ifd_gradient_is_the_eom_change_over_the_perturbation():
    t = np.array([1, 2, 2])                        # user 0 matched (decision 1), users 1, 2: see below
    y = np.array([1.0, 0.0, 1.0])
    z = np.array([0.5, 0.0, 1.0])
    w = np.ones(3)
    g = ifd_gradient((V, C), t, y, z, w, [LAM], clip="none")[0]
    d = decide(V, C, LAM)
    base, add, remove = eom_change(t, y, z, w, d, LAM)
    delta, new = flips(V - LAM * C, C, d.astype(np.int64))
    # user 0 is matched: every flip removes it; user 1 (decision 0, logged 2): only raising level 2
    # makes it match; user 2 (decision 2 = logged): matched, every flip removes it
    assert g[0] == pytest.approx(remove[0] / delta[0])
    assert g[1] == pytest.approx([0.0, 0.0, add[1] / delta[1, 2]])
    assert g[2] == pytest.approx(remove[2] / delta[2])
    fixed = ifd_gradient((V, C), t, y, z, w, [LAM], clip="fix", h=0.12)[0]
    near = np.abs(delta) < 0.12
    change = g * delta                             # the EOM change of each entry's flip
    assert near.any() and (~near & (g != 0)).any()
    assert fixed == pytest.approx(np.where(near, change / (np.sign(delta) * 0.12), 0.0))
    biggest = ifd_gradient((V, C), t, y, z, w, [LAM], clip="max")[0]
    top = np.abs(delta[g != 0]).max()
    assert biggest == pytest.approx(np.where(g != 0, g * delta / (np.sign(delta) * top), 0.0))


# ---------------------------------------------------------------------------- PL and MER
def test_policy_learning_and_max_entropy_losses_match_hand_computed_values():
    v = torch.tensor([[0.2, 0.5], [0.1, 0.3]], dtype=torch.float64)
    c = torch.tensor([[0.0, 1.0], [0.0, 2.0]], dtype=torch.float64)
    t = torch.tensor([1, 0])
    y = torch.tensor([1.0, 1.0], dtype=torch.float64)
    z = torch.tensor([1.0, 0.0], dtype=torch.float64)
    w = torch.tensor([2.0, 1.0], dtype=torch.float64)
    # lambda 0.1: a = [0.2, 0.4] and [0.1, 0.1]; rewards 0.9 and 1.0
    p1 = 1 / (1 + math.exp(-0.2))
    pl = -(2 * 0.9 * p1 + 1 * 1.0 * 0.5) / 3
    assert float(policy_loss((v, c), t, y, z, w, [0.1])) == pytest.approx(pl, rel=1e-12)
    p1_tau = 1 / (1 + math.exp(-0.2 / 0.1))
    mer = -(2 * 0.9 * p1_tau + 1 * 1.0 * 0.5) / 3
    assert float(policy_loss((v, c), t, y, z, w, [0.1], tau=0.1)) == pytest.approx(mer, rel=1e-12)
    # two multipliers: the mean; lambda 0: a = v, rewards 1.0 and 1.0
    p1_0 = 1 / (1 + math.exp(-0.3))
    p2_0 = 1 / (1 + math.exp(-0.2))               # user 2 logged level 0: softmax(0.1, 0.3)[0]
    pl0 = -(2 * 1.0 * p1_0 + 1 * 1.0 * (1 - p2_0)) / 3
    assert float(policy_loss((v, c), t, y, z, w, [0.0, 0.1])) == pytest.approx((pl0 + pl) / 2, rel=1e-12)


# ------------------------------------------------------------------------- grid and checks
def test_lambda_grid_spans_the_budget_range():
    assert grid_budgets([1.0, 0.5, 2.0], 4).tolist() == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert grid_budgets([0.5, 2.0], 1).tolist() == [1.25]
    rng = np.random.default_rng(0)
    v = np.sort(rng.uniform(0, 1, (200, 4)), axis=1)
    c = np.broadcast_to(np.arange(4.0), (200, 4)).copy()
    lams = lambda_grid(v, c, [0.5, 1.0, 2.0], 5)
    assert lams.size == 5 and np.all(np.diff(lams) > 0)     # a larger budget has a smaller multiplier
    from promo_assets.allocation import solve
    assert lams[0] == pytest.approx(solve(v, c, 2.0, per_capita=True).lambda_)
    assert lams[-1] == pytest.approx(solve(v, c, 0.5, per_capita=True).lambda_)


def test_lambda_grid_below_the_predicted_cheapest_allocation_takes_everyone_cheapest():
    from promo_assets.evaluation.eom import lambda_upper_bound

    v = np.array([[0.1, 0.3], [0.2, 0.25]])
    c = np.array([[0.5, 1.0], [0.5, 2.0]])          # the cheapest allocation costs 0.5 per capita
    lams = lambda_grid(v, c, [0.2, 1.0], 2)
    assert lams[-1] == pytest.approx(lambda_upper_bound(v, c))
    assert (decide(v, c, lams[-1]) == 0).all()


def _config(params, tmp_path):
    """campaign.yaml with these `models.params`, loaded as the pipeline loads it (the schema, then the
    registry's check of the models block)."""
    import yaml

    from promo_assets.ingestion import load_config

    (tmp_path / "c1").mkdir(exist_ok=True)
    (tmp_path / "c1" / "campaign.yaml").write_text(yaml.safe_dump({
        "treatments": {"levels": [0, 1, 2]}, "budget_per_capita": [0.5, 1.0],
        "models": {"include": list(params), "params": params}}))
    return load_config(tmp_path, "c1")


@pytest.mark.hostile
@pytest.mark.parametrize("params, expected", [
    ({"dfcl_mer": {"tau": 0}}, "'models.params.dfcl_mer': tau = 0: the temperature must be a finite number > 0"),
    ({"dfcl_mer": {"tau": -0.5}}, "tau = -0.5: the temperature must be a finite number > 0"),
    ({"dfcl_pl": {"grid_size": 0}}, "grid_size = 0: the number of lambda values must be an integer in 1..1000"),
    ({"dfcl_ifd": {"lambdas": [0.1, -1]}}, "lambdas = [0.1, -1]: every multiplier must be a finite number >= 0"),
    ({"dfcl_ifd": {"lambdas": [0.1, 0.1]}}, "lambdas = [0.1, 0.1]: the grid has repeated values"),
    ({"dfcl_ifd": {"clip": "min"}}, "clip = 'min': must be one of fix, max, none"),
    ({"dfcl_ifd": {"h": 0.0}}, "h = 0.0: the clipping threshold must be a finite number > 0"),
    ({"dfcl_pl": {"alpha": -1}}, "alpha = -1: the prediction-loss weight must be a finite number >= 0"),
    ({"dfcl_pl": {"tau": 1.0}}, "unknown key 'models.params.dfcl_pl.tau'"),
], ids=["error-tau-zero", "error-tau-negative", "error-grid-size", "error-grid-negative", "error-grid-repeated",
        "error-clip", "error-h", "error-alpha", "error-tau-on-pl"])
def test_dfcl_params_refused_with_clear_messages(params, expected, tmp_path):
    from promo_assets.config.campaign import CampaignConfigError

    with pytest.raises(CampaignConfigError) as err:
        _config(params, tmp_path)
    assert expected in str(err.value)


@pytest.mark.hostile
@pytest.mark.parametrize("params", [
    {"dfcl_mer": {"tau": 0.5, "grid_size": 1}},
    {"dfcl_ifd": {"lambdas": [0.05, 0.2], "clip": "max"}},
], ids=["accepted-tau-grid-size", "accepted-explicit-grid"])
def test_dfcl_params_accepted(params, tmp_path):
    config = _config(params, tmp_path)
    (name, given), = params.items()
    assert registry.for_campaign(name, config).get_params() == {**registry.get(name).defaults(), **given}


# ------------------------------------------------------------------------ preset and a fit
def test_dfcl_discount_preset_truth(tmp_path):
    import pandas as pd

    from promo_assets.simulation import SimulationRequest, simulate
    from promo_assets.simulation.dfcl import LEVELS, dfcl_pool

    pool, budgets = dfcl_pool(3000, 1)
    p, c = pool.expected_response, pool.expected_cost
    assert np.all(np.diff(p, axis=1) >= 0) and np.all((p > 0) & (p < 1))
    assert c == pytest.approx(np.asarray(LEVELS)[None] * pool.order_value[:, None] * p)
    second = np.diff(p, n=2, axis=1)
    assert (second > 1e-6).any(axis=1).mean() > 0.05      # part of the users respond non-concavely
    assert len(budgets) == 6 and 0 < budgets[0] < budgets[-1] < c.max(axis=1).mean()
    simulate("dfcl_discount", SimulationRequest("dd", tmp_path, days=2, users=500, seed=1, start=REFERENCE_START))
    ev = pd.read_parquet(next((tmp_path / "dd" / "events").glob("*.parquet")))
    ordered = ev["response"] == 1
    assert (ev.loc[~ordered, "cost"] == 0).all() and (ev.loc[ordered & (ev["treatment"] > 0), "cost"] > 0).all()


@pytest.mark.slow
def test_one_dfcl_fit_serves_every_budget(tmp_path, monkeypatch):
    import sys
    from pathlib import Path

    monkeypatch.setenv("PROMO_MAX_EPOCHS", "2")
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from _honest_bench import simulated_events

    from promo_assets.allocation import solve
    from promo_assets.models.protocol import TrainingData

    _, _, events, config, numeric, categorical = simulated_events("dfcl_discount", 0, str(tmp_path), 3, 1500)
    data = TrainingData(config, events, numeric, categorical)
    fitted = registry.create("dfcl_ifd").fit(data).model_
    lams = fitted.metrics["lambdas"]   # grid_size 10; budgets sharing a multiplier collapse into one
    assert fitted.name == "dfcl_ifd" and 2 <= len(lams) <= 10 and lams == sorted(set(lams))
    assert fitted.metrics["best_epoch"] in (0, 1, 2)
    holdout = events[events["split"] == "holdout"]
    v, c = fitted.predict(holdout)
    from promo_assets.allocation.errors import InfeasibleBudgetError

    spends = []
    for b in config.budget_per_capita:   # one model, six budgets (a 2-epoch cost head may make the
        try:                              # smallest ones infeasible: the pipeline reports those)
            spends.append(solve(v, c, b, per_capita=True, rounding="down").cost / len(v))
        except InfeasibleBudgetError:
            assert not spends
    assert len(config.budget_per_capita) == 6 and len(spends) >= 3 and np.all(np.diff(spends) >= 0)


def test_training_loop_monitor_keeps_the_starting_parameters_when_no_epoch_beats_them():
    from promo_assets.models.training import Metric, MiniBatches, TrainingConfig, WeightedLoss, fit_torch_model

    torch.manual_seed(0)
    net = torch.nn.Linear(2, 1)
    start = {k: v.clone() for k, v in net.state_dict().items()}
    x = torch.randn(64, 2)
    data = {"x": x, "y": x.sum(1)}

    def loss_fn(module, batch, step):
        return (module(batch["x"]).squeeze(1) - batch["y"]) ** 2, None

    def drift(module):  # any move away from the start is worse
        return float(sum(((p - start[k]) ** 2).sum() for k, p in module.state_dict().items()))

    fit = fit_torch_model(net, WeightedLoss(loss_fn, None), MiniBatches(data, 16), Metric(drift),
                          TrainingConfig(max_epochs=3, batch_size=16, lr=0.1, patience=2))
    assert fit.best_epoch == 0 and fit.epochs == 2 and fit.stopped_early
    assert all(torch.equal(net.state_dict()[k], v) for k, v in start.items())
    assert fit.history[0]["validation_loss"] > 0      # what the monitor said after epoch 1
