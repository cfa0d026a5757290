"""Issue #15: Q(v, c) on a mini-batch, its FD / NES gradient estimators, the surrogate loss and the
registered `e2e_fd` / `e2e_nes` models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from promo_assets.allocation.decision import decide_at_lambdas
from promo_assets.evaluation.eom import q_at_budget_bisection
from promo_assets.evaluation.records import LoggedEvents
from promo_assets.models import decision_loss as dl
from promo_assets.models import registry


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """These tests run many tiny torch ops; one intra-op thread keeps them fast on a loaded machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _rct(seed: int, n: int = 1500, k: int = 4, redeemed: bool = False, propensity: bool = False):
    rng = np.random.default_rng(seed)
    v = np.sort(rng.uniform(0, 0.4, (n, k)), axis=1)
    c = v * np.arange(1, k + 1) if redeemed else np.broadcast_to(np.arange(1.0, k + 1), (n, k)).copy()
    t = rng.integers(0, k, n)
    y = (rng.random(n) < v[np.arange(n), t]).astype(float)
    z = c[np.arange(n), t] if not redeemed else (t + 1) * y
    p = rng.uniform(0.1, 0.5, n) if propensity else None
    return v, c, t, y, z, p


@pytest.mark.parametrize("redeemed,propensity", [(False, False), (True, False), (False, True)])
def test_vectorized_q_equals_algorithm_1_reference(redeemed, propensity):
    v, c, t, y, z, p = _rct(1, redeemed=redeemed, propensity=propensity)
    batch = dl.RCTBatch.from_arrays(t, y, z, p)
    for budget in (0.3 * z.mean(), 0.8 * z.mean(), 1.2 * z.mean()):
        ref = q_at_budget_bisection((v, c), LoggedEvents(t, y, z, p), budget, lambda_max=0.5, max_iter=40)
        ours = dl.q_bisection(torch.tensor(v), torch.tensor(c), batch, budget, lambda_max=0.5, max_iter=40)
        assert float(ours[0]) == pytest.approx(ref.value, abs=1e-12)
    # several budgets at once (the models' validation objective) give each budget's own Q
    budgets = [0.3 * z.mean(), 0.8 * z.mean(), 1.2 * z.mean()]
    many = dl.q_at_budgets(torch.tensor(v), torch.tensor(c), batch, budgets, lambda_max=0.5, max_iter=40)
    for b, q in zip(budgets, many.tolist()):
        assert q == dl.q_value(v, c, batch, b, lambda_max=0.5, max_iter=40)
    # several copies at once give each copy's own Q
    copies = torch.stack([torch.tensor(v), torch.tensor(v[::-1].copy()), torch.tensor(v) * 0.5])
    q = dl.q_bisection(copies, torch.tensor(c).expand(3, -1, -1), batch, 0.8 * z.mean(), lambda_max=0.5)
    for i in range(3):
        assert float(q[i]) == pytest.approx(dl.q_value(copies[i].numpy(), c, batch, 0.8 * z.mean(), lambda_max=0.5))


def test_matched_intervals_follow_the_decision_rule_and_its_ties():
    rng = np.random.default_rng(3)
    v = rng.integers(0, 4, (400, 3)).astype(float) / 4  # many exact ties
    c = rng.integers(0, 3, (400, 3)).astype(float)
    t = rng.integers(0, 3, 400)
    lo, hi = dl.matched_intervals(torch.tensor(v), torch.tensor(c), torch.tensor(t))
    lams = np.concatenate([np.linspace(0, 2, 41), [0.125, 0.25, 1 / 3, 0.5]])
    levels = decide_at_lambdas(v, c, lams)
    for i, lam in enumerate(lams):
        inside = (lo.numpy() <= lam) & (lam < hi.numpy())
        np.testing.assert_array_equal(inside, levels[i] == t, err_msg=f"lambda {lam}")


def _smooth(x: torch.Tensor) -> torch.Tensor:
    """f(x) = sum a * sin(x) + 0.5 * (sum x)^2 per copy: a smooth test function, exact gradient known."""
    a = torch.linspace(-1, 1, x.shape[-1], dtype=x.dtype)
    return (a * torch.sin(x)).sum(-1) + 0.5 * x.sum(-1) ** 2


def test_fd_and_nes_estimators_match_the_exact_gradient_of_a_smooth_function():
    x = torch.linspace(-1, 2, 20, dtype=torch.float64)
    exact = torch.linspace(-1, 1, 20, dtype=torch.float64) * torch.cos(x) + x.sum()
    gen = torch.Generator().manual_seed(0)

    def entries(flat, delta):
        xs = x.expand(flat.shape[0], -1).clone()
        xs[torch.arange(flat.shape[0]), flat] += delta
        return _smooth(xs)

    fd_all = dl.fd_estimate(entries, 20, 20, 1e-4, gen)
    torch.testing.assert_close(fd_all, exact, atol=1e-6, rtol=1e-6)
    fd_some = dl.fd_estimate(entries, 20, 7, 1e-4, gen)  # F' = 7: those entries exact, the rest 0
    picked = fd_some != 0
    assert int(picked.sum()) == 7
    torch.testing.assert_close(fd_some[picked], exact[picked], atol=1e-6, rtol=1e-6)
    cos = []
    for n_dir in (4, 64, 1000):
        g = dl.nes_estimate(lambda d: _smooth(x + 1e-3 * d), (20,), n_dir, 1e-3, gen, chunk=256)
        cos.append(float(torch.nn.functional.cosine_similarity(g, exact, dim=0)))
    assert cos[-1] > 0.95 and cos[0] < cos[1] < cos[2]


def test_nes_directions_come_in_antithetic_pairs():
    seen = []

    def record(delta):
        seen.append(delta.clone())
        return torch.ones(delta.shape[0], dtype=delta.dtype)

    g = dl.nes_estimate(record, (5,), 6, 0.1, torch.Generator().manual_seed(1), chunk=6)
    d = torch.cat(seen)
    torch.testing.assert_close(d[:3], -d[3:])
    torch.testing.assert_close(g, torch.zeros(5, dtype=torch.float64))  # a constant f: the pairs cancel
    with pytest.raises(Exception, match="even number of directions"):
        dl.nes_estimate(record, (5,), 5, 0.1, torch.Generator())


@pytest.mark.parametrize("wrt_costs", [True, False], ids=["v-and-c", "v-only"])
def test_batched_nes_equals_the_looped_nes_for_the_same_directions(wrt_costs):
    """All N' perturbed copies in one (N', B, K) bisection give exactly what one Q per copy gives."""
    v, c, t, y, z, _ = _rct(6, n=300, k=5, redeemed=True)
    batch = dl.RCTBatch.from_arrays(t, y, z)
    vt, ct = torch.tensor(v), torch.tensor(c)
    lam, sigma, n_dir = dl.q_lambda_max(vt, ct), 0.02, 12
    g_v, g_c = dl.nes_gradient(vt, ct, batch, 1.0, dl.NES(n_dir, sigma), torch.Generator().manual_seed(5),
                               wrt_costs=wrt_costs, search=dl.Bisection(lam, max_iter=30))
    base = (torch.stack([vt, ct]) if wrt_costs else vt[None]).float()
    half = dl.nes_directions(n_dir, tuple(base.shape), torch.Generator().manual_seed(5))
    ref = torch.zeros(base.shape, dtype=torch.float64)
    for d in half:  # the loop the batch replaces: one perturbed copy per Q evaluation
        q = []
        for op in (torch.add, torch.sub):
            p = op(base, d, alpha=sigma)
            q.append(float(dl.q_bisection(p[0], p[1] if wrt_costs else ct.float(), batch, 1.0, lambda_max=lam,
                                          max_iter=30)[0]))
        ref += d.double() * (q[0] - q[1])
    ref /= sigma * n_dir
    assert float(ref.abs().sum()) > 0  # some perturbation changed Q
    torch.testing.assert_close(g_v, ref[0], rtol=1e-12, atol=1e-12)
    if wrt_costs:
        torch.testing.assert_close(g_c, ref[1], rtol=1e-12, atol=1e-12)
    else:
        assert g_c is None
    # two directions per call (the memory cap's chunks) draw the same directions: the same estimate
    g_v2, _ = dl.nes_gradient(vt, ct, batch, 1.0, dl.NES(n_dir, sigma, chunk=2), torch.Generator().manual_seed(5),
                              wrt_costs=wrt_costs, search=dl.Bisection(lam, max_iter=30))
    torch.testing.assert_close(g_v2, g_v, rtol=1e-12, atol=1e-12)


def test_q_of_float32_copies_matches_the_float64_q_at_the_models_bisection_depth():
    """NES evaluates its perturbed copies in float32. At the models' 20 bisection iterations Q is the
    float64 one on (nearly) every copy: they can differ only where the last midpoint lies within
    float32 rounding (~1e-7 relative) of a row's interval end, a row's share of Q apart."""
    same = total = 0
    for k, redeemed in ((4, False), (4, True), (60, True)):
        v, c, t, y, z, _ = _rct(7, n=800, k=k, redeemed=redeemed)
        batch = dl.RCTBatch.from_arrays(t, y, z)
        vt, ct = torch.tensor(v), torch.tensor(c)
        lam = dl.q_lambda_max(vt, ct)
        noise = torch.randn((2, 16) + vt.shape, generator=torch.Generator().manual_seed(k), dtype=torch.float64)
        pv, pc = vt + 0.01 * noise[0], ct + 0.01 * noise[1]
        for budget in (0.5 * z.mean(), z.mean()):
            q64 = dl.q_bisection(pv, pc, batch, budget, lambda_max=lam, max_iter=20)
            q32 = dl.q_bisection(pv.float(), pc.float(), batch, budget, lambda_max=lam, max_iter=20)
            same += int((q64 == q32).sum())
            total += 16
            assert float((q64 - q32).abs().max()) < 0.05, (k, budget)
    assert same >= 0.95 * total, f"{same}/{total} copies with the same Q"


def _two_users(gap: float):
    """Users A (treatment pays: +1 conversion at cost 1) and B (treatment wasted), each logged once
    at each of the two levels; the budget treats one of them. Rows: A@0, A@1, B@0, B@1."""
    t = np.array([0, 1, 0, 1])
    y = np.array([0.0, 1.0, 0.0, 0.0])
    z = np.array([0.0, 1.0, 0.0, 1.0])
    u_a, u_b = 0.2, 0.2 + gap  # predicted uplifts: the model ranks B above A when gap > 0
    v = np.array([[0.1, 0.1 + u_a]] * 2 + [[0.1, 0.1 + u_b]] * 2)
    c = np.array([[0.0, 1.0]] * 4)
    return torch.tensor(v), torch.tensor(c), dl.RCTBatch.from_arrays(t, y, z, np.full(4, 0.5))


def test_q_gradient_sign_on_a_two_user_toy():
    right_v, c, batch = _two_users(-0.01)
    wrong_v, _, _ = _two_users(0.01)
    assert dl.q_value(right_v, c, batch, 0.5) == pytest.approx(0.5)  # A treated: Q = 0.5
    assert dl.q_value(wrong_v, c, batch, 0.5) == pytest.approx(0.0)  # B treated: Q = 0
    gen = torch.Generator().manual_seed(0)
    g_fd, _ = dl.fd_gradient(wrong_v, c, batch, 0.5, dl.FiniteDifferences(8, 0.02), gen, wrt_costs=False)
    g_nes, _ = dl.nes_gradient(wrong_v, c, batch, 0.5, dl.NES(600, 0.02, chunk=600), gen, wrt_costs=False)
    # NES (all rows perturbed together): raising A's treated value helps, raising B's hurts
    assert float(g_nes[0:2, 1].sum()) > 0 and float(g_nes[2:4, 1].sum()) < 0, g_nes
    # FD (one entry at a time): only A's treated row flips the decision alone; nothing pushes the wrong way
    assert float(g_fd[1, 1]) > 0 and float(g_fd[0:2, 1].sum()) > 0 and float(g_fd[2:4, 1].sum()) <= 0, g_fd
    # a step on v along either estimate raises Q
    for g in (g_fd, g_nes):
        assert dl.q_value(wrong_v + 0.02 * g / g.abs().max(), c, batch, 0.5) > dl.q_value(wrong_v, c, batch, 0.5)


def test_surrogate_loss_gradient_is_minus_the_estimated_gradient():
    v, c, t, y, z, _ = _rct(2, n=300)
    vt = torch.tensor(v, requires_grad=True)
    ct = torch.tensor(c, requires_grad=True)
    batch = dl.RCTBatch.from_arrays(t, y, z)
    g_v, g_c = dl.nes_gradient(vt, ct, batch, 2.0, dl.NES(16, 0.01), torch.Generator().manual_seed(0))
    loss = dl.surrogate_loss(vt, ct, g_v, g_c)
    value = float(loss.detach())
    loss.backward()
    torch.testing.assert_close(vt.grad, -g_v)
    torch.testing.assert_close(ct.grad, -g_c)
    # the estimate is a constant of the graph (stop-gradient): the loss is linear in v and c
    assert value == pytest.approx(-float((vt.detach() * g_v).sum() + (ct.detach() * g_c).sum()))


def test_q_ignores_per_user_level_shifts_and_the_centered_gradient_keeps_only_what_matters():
    v, c, t, y, z, _ = _rct(5, n=400)
    batch = dl.RCTBatch.from_arrays(t, y, z)
    shift = np.random.default_rng(0).uniform(-0.3, 0.3, (400, 1))
    lam = dl.q_lambda_max(torch.tensor(v), torch.tensor(c))
    q = dl.q_value(v, c, batch, 2.0, lambda_max=lam)
    assert dl.q_value(v + shift, c, batch, 2.0, lambda_max=lam) == pytest.approx(q, abs=1e-12)
    assert dl.q_value(v, c + shift, batch, 2.0, lambda_max=lam) == pytest.approx(q, abs=1e-12)
    g_v, _ = dl.nes_gradient(torch.tensor(v), torch.tensor(c), batch, 2.0, dl.NES(8, 0.01),
                             torch.Generator().manual_seed(0), wrt_costs=False, search=dl.Bisection(lam))
    centered = dl.remove_level_shifts(g_v)
    torch.testing.assert_close(centered.sum(-1), torch.zeros(400, dtype=torch.float64))
    torch.testing.assert_close(centered + g_v.mean(-1, keepdim=True), g_v)  # only the shift part removed
    # a function that ignores per-row shifts: its exact gradient is unchanged by the centering
    a = torch.randn(6, 3, dtype=torch.float64)
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    (((x - x.mean(-1, keepdim=True)) * a).sin().sum()).backward()
    torch.testing.assert_close(dl.remove_level_shifts(x.grad), x.grad)
    assert dl.remove_level_shifts(None) is None


def test_q_ignores_the_scale_of_v_and_c_and_the_projected_gradient_is_orthogonal_to_it():
    v, c, t, y, z, _ = _rct(8, n=400, redeemed=True)
    batch = dl.RCTBatch.from_arrays(t, y, z)
    lam = dl.q_lambda_max(torch.tensor(v), torch.tensor(c))
    q = dl.q_value(v, c, batch, 1.0, lambda_max=lam)
    # the multiplier's search interval scales along (powers of two: the same midpoints exactly)
    assert dl.q_value(2.0 * v, c, batch, 1.0, lambda_max=2.0 * lam) == q
    assert dl.q_value(v, 0.5 * c, batch, 1.0, lambda_max=2.0 * lam) == q
    g_v, g_c = dl.nes_gradient(torch.tensor(v), torch.tensor(c), batch, 1.0, dl.NES(8, 0.01),
                               torch.Generator().manual_seed(0))
    for g, x in ((g_v, v), (g_c, c)):
        p = dl.remove_invariant_directions(g, torch.tensor(x))
        xc = dl.remove_level_shifts(torch.tensor(x))
        torch.testing.assert_close(p.sum(-1), torch.zeros(400, dtype=torch.float64))  # no per-row shift left
        assert abs(float((p * xc).sum())) < 1e-9 * float(g.norm() * xc.norm())  # no scale component left
        rest = dl.remove_level_shifts(g) - p  # only a multiple of the centered point was removed
        assert float(torch.linalg.matrix_rank(torch.stack([rest.flatten(), xc.flatten()]))) <= 1
    assert dl.remove_invariant_directions(None, torch.tensor(v)) is None


def test_fd_on_q_agrees_with_re_evaluating_q():
    v, c, t, y, z, _ = _rct(4, n=400)
    batch = dl.RCTBatch.from_arrays(t, y, z)
    vt, ct = torch.tensor(v), torch.tensor(c)
    lam = dl.q_lambda_max(vt, ct)
    g, _ = dl.fd_gradient(vt, ct, batch, 2.0, dl.FiniteDifferences(400, 0.01), torch.Generator().manual_seed(0),
                          wrt_costs=False, search=dl.Bisection(lam))
    nz = torch.nonzero(g)
    assert len(nz) > 0
    for i, j in nz[:10].tolist():
        up, down = v.copy(), v.copy()
        up[i, j] += 0.01
        down[i, j] -= 0.01
        ref = (dl.q_value(up, c, batch, 2.0, lambda_max=lam) - dl.q_value(down, c, batch, 2.0, lambda_max=lam)) / 0.02
        assert float(g[i, j]) == pytest.approx(ref, abs=1e-9)


@pytest.mark.hostile
@pytest.mark.parametrize("model,params,expected", [
    ("e2e_fd", {"h": 0.0}, "h = 0.0"),
    ("e2e_fd", {"h": -0.1}, "h = -0.1"),
    ("e2e_fd", {"entries": 4096, "batch_size": 1024}, "larger than the batch"),
    ("e2e_fd", {"budget_range": [2.0, 1.0]}, "budget_range = [2.0, 1.0] is empty"),
    ("e2e_nes", {"budget_range": [3.0]}, "budget_range"),
    ("e2e_nes", {"directions": 7}, "directions = 7"),
    ("e2e_nes", {"sigma": 0.0}, "sigma = 0.0"),
    ("e2e_nes", {"gamma": -1.0}, "gamma = -1.0"),
    ("e2e_nes", {"epochs": 0}, "epochs = 0"),
    ("e2e_fd", {"center": "yes"}, "= 'yes'"),
    ("e2e_nes", {"project_scale": "yes"}, "project_scale"),
], ids=["error-h-zero", "error-h-negative", "error-entries-above-batch", "error-empty-budget-range",
        "error-budget-range-one-number", "error-odd-directions", "error-sigma-zero", "error-negative-gamma",
        "error-no-epochs", "error-center-not-a-boolean", "error-project-scale-not-a-boolean"])
def test_bad_e2e_hyper_parameters_are_refused_by_name(model, params, expected):
    problems = registry.get(model)(**params).check_params()
    assert problems and any(expected in p for p in problems), problems
    assert not registry.get(model)().check_params()
    refused = registry.check_models_block({"include": [model], "params": {model: params}})
    assert any(f"models.params.{model}" in p and expected in p for p in refused), refused


@pytest.mark.hostile
@pytest.mark.parametrize("params", [{"budget_range": [1.0, 1.0]}, {"entries": 64, "batch_size": 64}],
                         ids=["accepted-one-point-budget-range", "accepted-entries-equal-batch"])
def test_edge_e2e_hyper_parameters_are_accepted(params):
    assert registry.check_models_block({"params": {"e2e_fd": params}}) == []


def test_e2e_models_are_registered_off_by_default():
    for name in ("e2e_fd", "e2e_nes"):
        m = registry.get(name)
        assert m.name == name and m.default is False
        assert {"gamma", "budget_range", "epochs", "lr", "batch_size", "seed"} <= set(m.param_names())
    assert {"entries", "h"} <= set(registry.get("e2e_fd").param_names())
    assert {"directions", "sigma"} <= set(registry.get("e2e_nes").param_names())


@pytest.mark.slow
@pytest.mark.parametrize("model,params", [("e2e_fd", {}), ("e2e_nes", {"center": True, "directions": 4})],
                         ids=["fd-defaults", "nes-centered"])
def test_e2e_fit_fine_tunes_the_warm_start_on_a_two_arm_campaign(tmp_path, monkeypatch, model, params):
    import sys
    from pathlib import Path

    monkeypatch.setenv("PROMO_MAX_EPOCHS", "2")
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from _honest_bench import simulated_events

    from promo_assets.models.protocol import TrainingData

    _, _, events, config, numeric, categorical = simulated_events("uplift_two_arm", 0, str(tmp_path), 3, 800)
    fitted = registry.create(model, params).fit(TrainingData(config, events, numeric, categorical)).model_
    m = fitted.metrics
    n_train = int((events["split"] == "train").sum())
    batch = registry.get(model).defaults()["batch_size"]
    assert m["q_steps"] == 2 * -(-n_train // batch) and m["q_seconds_per_step"] > 0  # 2 epochs of steps
    assert m["best_epoch"] in (0, 1, 2) and fitted.hparams["e2e_center"] is params.get("center", False)
    assert [h["phase"] for h in fitted.history][-2:] == [model, model]
    v, c = fitted.predict(events[events["split"] == "holdout"])
    assert v.shape == c.shape == (int((events["split"] == "holdout").sum()), 2)
    assert np.isfinite(v).all() and np.isfinite(c).all()


def test_a_fine_tuned_epoch_is_kept_only_when_its_q_gain_exceeds_its_bootstrap_noise():
    from promo_assets.models.e2e import QGainCheck

    v, c, t, y, z, _ = _rct(3, n=3000, redeemed=True)
    batch = dl.RCTBatch.from_arrays(t, y, z)
    budgets = [0.3 * z.mean(), 0.6 * z.mean()]
    check = QGainCheck(batch, budgets, max_iter=30, seed=0, draws=50)
    truth = (torch.tensor(v), torch.tensor(c))
    # the same curves: no gain, and a gain of 0 is never beyond 2 standard errors
    gain, se = check.gain(truth, truth)
    assert gain == 0.0 and not gain > 2 * se
    # the true curves against curves that cannot tell the levels apart: a gain far beyond its noise
    flat = torch.tensor(np.repeat(v.mean(axis=1, keepdims=True), v.shape[1], axis=1))
    gain, se = check.gain((flat, flat * torch.arange(1, 5, dtype=flat.dtype)), truth)
    assert se > 0 and gain > 5 * se
    # a tiny perturbation of the truth: its gain (either sign) stays within the noise
    nudged = (truth[0] + 1e-3 * torch.tensor(np.random.default_rng(1).standard_normal(v.shape)), truth[1])
    gain, se = check.gain(truth, nudged)
    assert abs(gain) <= 2 * se


def test_the_warm_start_follows_the_campaigns_s_learner_parameters(monkeypatch):
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.models.protocol import TrainingData
    from promo_assets.models.s_learner import warm_start
    from tests.unit.models.test_models import CATEGORICAL, NUMERIC, make_config, make_frame

    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")
    frame = make_frame(n=600, seed=2)
    config = make_config()
    tuned = CampaignConfig.from_dict({"treatments": {"levels": [0, 1, 2, 5, 10]}, "cost": "redeemed",
                                      "response": "binary", "models": {"params": {"s_learner": {
                                          "hidden": [8], "head_hidden": 0, "lr": 0.01}}}}, campaign="t")
    warm = warm_start(TrainingData(tuned, frame, NUMERIC, CATEGORICAL), 0, 60, True, None)
    assert warm.hparams["hidden"] == [8] and warm.hparams["head_hidden"] == 0 and warm.hparams["lr"] == 0.01
    default = warm_start(TrainingData(config, frame, NUMERIC, CATEGORICAL), 0, 60, True, None)
    assert default.hparams["hidden"] == [64, 32] and default.hparams["lr"] == 2e-3
