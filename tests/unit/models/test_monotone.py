"""The monotone models of issue #17: CLU, the CMNN layer's activations, FPM, and monotonicity by
construction of dnn_m / fpm / cmnn / coman (random weights, every declared direction, a grid)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from promo_assets.config.campaign import CampaignConfig
from promo_assets.models import registry
from tests.unit.models.test_models import train_model
from promo_assets.models.coman import CoMANNet, CoMANShape
from promo_assets.models.monotone import (
    MonotoneDense, adaptive_masks, block_sizes, clu, concave, convex_activation, fpm_response, saturated,
)
from promo_assets.models.monotone_models import MonotoneNet, MonotoneShape

LEVELS = [[0, 0, 3], [5, 20, 3], [8, 30, 0], [8, 20, 1]]
SIGNS = [1, -1, 1]


def test_clu_is_strictly_increasing_strictly_convex_zero_centred_and_lower_bounded():
    x = torch.linspace(-30, 30, 6001, dtype=torch.float64)
    y = clu(x)
    d1, d2 = torch.diff(y), torch.diff(y, n=2)
    assert bool((d1 > 0).all()) and bool((d2 > 0).all())
    assert float(clu(torch.zeros((), dtype=torch.float64))) == 0.0
    assert float(y.min()) > -0.5 and abs(float(clu(torch.tensor(-1e6, dtype=torch.float64))) + 0.5) < 1e-5
    xg = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(clu(xg).sum(), xg, create_graph=True)
    (g2,) = torch.autograd.grad(g.sum(), xg)
    torch.testing.assert_close(g, (1 + x / torch.sqrt(x * x + 1)) / 2)          # CLU'  in (0, 1)
    torch.testing.assert_close(g2, 1 / (2 * (x * x + 1) ** 1.5))                 # CLU'' > 0
    assert bool((g > 0).all()) and bool((g < 1).all())


@pytest.mark.parametrize("name", ["relu", "elu", "clu"])
def test_concave_and_saturated_activations_are_monotone_with_the_right_shape(name):
    rho = convex_activation(name)
    x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    for f in (rho, concave(rho), saturated(rho)):
        assert bool((torch.diff(f(x)) >= -1e-12).all())
    assert bool((torch.diff(concave(rho)(x), n=2) <= 1e-9).all())                 # concave
    sat = saturated(rho)(x)
    one, low = (float(rho(torch.tensor(v, dtype=torch.float64))) for v in (1.0, -1e3))
    assert float(sat.max() - sat.min()) <= 2 * (one - low) + 1e-9                  # bounded
    assert block_sizes(16) == (7, 7, 2) and sum(block_sizes(5)) == 5


def test_monotone_dense_sign_transform_and_adaptive_masks():
    layer = MonotoneDense(3, 4, [1, -1, 0], None).double()
    w = layer.signed_weight()
    assert bool((w[0] >= 0).all()) and bool((w[1] <= 0).all())
    torch.testing.assert_close(w[2], layer.weight[2])
    m = adaptive_masks(torch.tensor([[0.0], [1.0]]), 10)
    assert bool((m[0] < 0.5).all()) and bool((m[1] > 0.5).all())


def test_fpm_is_monotone_and_hits_its_parameters():
    u = torch.linspace(-2, 3, 501, dtype=torch.float64)
    for binary in (True, False):
        params = torch.randn(50, 1, 4, dtype=torch.float64) * 3
        r = fpm_response(params, u.expand(50, -1), binary)
        assert bool((torch.diff(r, dim=1) >= -1e-12).all())
    # binary: r0 at u = 0 (no incentive), rmax at u = 1 (the most generous corner), inflection at x0
    p = torch.tensor([[[0.0, 0.0, 0.0, float(np.log(np.e ** 0.1 - 1))]]], dtype=torch.float64)
    prob = lambda v: torch.sigmoid(fpm_response(p, torch.tensor([[v]], dtype=torch.float64), True)).item()
    assert abs(prob(0.0) - 0.5) < 1e-9 and abs(prob(1.0) - 0.75) < 1e-9
    h = 1e-3
    assert abs(prob(0.5 + h) - 2 * prob(0.5) + prob(0.5 - h)) < 1e-9              # x0 = sigmoid(0) = 1/2
    assert abs(prob(0.5) - 0.625) < 1e-9                                           # symmetric about x0


def _nets(n_numeric=3, cards=(4, 6, 3)):
    common = dict(n_numeric=n_numeric, cardinalities=list(cards), level_attributes=LEVELS, signs=SIGNS)
    yield "dnn_m", MonotoneNet(MonotoneShape(head="dnn_m", **common))
    yield "fpm", MonotoneNet(MonotoneShape(head="fpm", **common))
    yield "sbbm", MonotoneNet(MonotoneShape(head="sbbm", **common))
    for act in ("relu", "elu", "clu"):
        yield f"cmnn_{act}", MonotoneNet(MonotoneShape(head="cmnn", activation=act, **common))
    for aa in (True, False):
        for st in (True, False):
            yield f"coman_aa{aa}_st{st}", CoMANNet(CoMANShape(st_index=[0, 1], adaptive_activation=aa, st_attention=st,
                                                              **common))


def _violations(net, x_num, x_cat, attr: int, sign: int, grid: np.ndarray, base: np.ndarray) -> int:
    """Count pairs of adjacent grid points along attribute `attr` where the response moves against `sign`."""
    n = x_num.shape[0]
    attrs = np.repeat(base[None, None, :], len(grid), axis=1).repeat(n, axis=0)
    attrs[:, :, attr] = grid
    with torch.no_grad():
        out = net.response_at(x_num, x_cat, torch.as_tensor(attrs)).numpy()
    return int((sign * np.diff(out, axis=1) < -1e-9).sum())


@pytest.mark.parametrize("seed", [0, 1])
def test_every_monotone_net_is_monotone_by_construction_with_random_weights(seed):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n = 64
    x_num = torch.as_tensor(rng.normal(size=(n, 3)) * 2)
    x_cat = torch.as_tensor(np.stack([rng.integers(0, c, n) for c in (4, 6, 3)], axis=1))
    for name, net in _nets():
        net = net.double().eval()
        with torch.no_grad():
            for p in net.parameters():      # random weights far from the initialisation
                p.copy_(torch.randn_like(p) * 1.5)
        raw, cost = net.curves(x_num, x_cat)
        assert raw.shape == (n, 4) and cost is None and bool(torch.isfinite(raw).all()), name
        for a, sign in enumerate(SIGNS):
            grid = np.linspace(-5, 40, 91)
            for base in (np.array([0.0, 0.0, 0.0]), np.array([5.0, 25.0, 2.0])):
                assert _violations(net, x_num, x_cat, a, sign, grid, base) == 0, (name, a)


def _frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    level = rng.integers(0, 4, n)
    attrs = np.asarray(LEVELS, dtype=float)[level]
    city = rng.choice(["a", "b", "c"], n)
    p = 0.1 + 0.02 * attrs[:, 0] - 0.004 * attrs[:, 1] + 0.1 * (city == "a")
    return pd.DataFrame({"user_id": [f"u{i}" for i in range(n)], "level": level,
                         "response": (rng.random(n) < np.clip(p, 0.01, 0.99)).astype(float),
                         "split": rng.choice(["train", "validation"], n, p=[0.8, 0.2]), "ips_weight": 1.0,
                         "age": rng.normal(40, 10, n), "city": city, "period_of_day": rng.choice(["am", "pm"], n)})


MULTI = {"treatments": {"levels": [dict(amount=a, threshold=t, fee=f) for a, t, f in LEVELS],
                        "attributes": {"amount": {"monotone": "increasing"}, "threshold": {"monotone": "decreasing"},
                                       "fee": {"monotone": "increasing"}}}}


@pytest.mark.parametrize("name", ["dnn_m", "fpm", "cmnn", "coman"])
def test_registered_models_train_predict_reload_and_stay_monotone(name, promo_env):
    config = CampaignConfig.from_dict(MULTI, "m1")
    frame = _frame()
    fitted = train_model(name, frame, config, ["age"], ["city", "period_of_day"], max_epochs=2)
    values, costs = fitted.predict(frame.head(50))
    assert values.shape == (50, 4) and ((values > 0) & (values < 1)).all()
    np.testing.assert_allclose(costs, values * np.asarray(config.incentives))
    again = registry.get(name).load(fitted.save())
    np.testing.assert_allclose(again.predict(frame.head(50))[0], values, rtol=1e-6)
    x_num, x_cat = (torch.from_numpy(a) for a in fitted.encoder.transform(frame.head(50)))
    net = fitted.module.double()
    for a, sign in enumerate(config.attribute_signs()):
        assert _violations(net, x_num.double(), x_cat, a, int(sign), np.linspace(0, 30, 61), np.array([4.0, 10.0, 1.0])) == 0


def test_coman_training_is_reproducible_whatever_ran_before(promo_env):
    """Dropout draws from torch's global generator: the same seed gives the same CoMAN even when other
    draws happened in between (a benchmark trains other variants first)."""
    config, frame = CampaignConfig.from_dict(MULTI, "m1"), _frame()
    first = train_model("coman", frame, config, ["age"], ["city", "period_of_day"], max_epochs=2, seed=3)
    torch.rand(1000)
    second = train_model("coman", frame, config, ["age"], ["city", "period_of_day"], max_epochs=2, seed=3)
    np.testing.assert_array_equal(first.predict(frame.head(50))[0], second.predict(frame.head(50))[0])


def test_monotone_models_apply_and_skip_with_reasons():
    multi = CampaignConfig.from_dict(MULTI, "m1")
    arms = CampaignConfig.from_dict({"treatments": {"arms": {"a": 0, "b": 1}}}, "a1")
    single = CampaignConfig.from_dict({"treatments": {"levels": [0, 1, 2]}}, "s1")
    for name in ("dnn_m", "fpm", "cmnn", "coman"):
        model = registry.get(name)
        assert model.default is False
        assert model.applies_to(multi) is None and model.applies_to(single) is None
        assert "unordered arms" in model.applies_to(arms)
    assert registry.check_models_block({"params": {"cmnn": {"activation": "tanh"}}}) == [
        "'models.params.cmnn': activation = 'tanh': expected one of relu, elu, clu"]


@pytest.mark.hostile
@pytest.mark.parametrize("curve, message", [
    pytest.param("cubic", "'models.params.fpm': curve = 'cubic': expected one of four_parameter, logistic",
                 id="error-unknown-fpm-curve"),
    pytest.param(3, "'models.params.fpm.curve' = 3 (int): expected str like the default 'four_parameter'",
                 id="error-fpm-curve-not-a-name")])
def test_bad_fpm_curve_is_refused_naming_it(curve, message):
    assert registry.check_models_block({"params": {"fpm": {"curve": curve}}}) == [message]


def test_sbbm_head_is_logit_linear_in_the_attributes_and_trains(promo_env):
    """The SBBM-style logistic head: logit r = alpha_i + sum_a t_a w_ia x_a with w_ia >= 0 per user."""
    config = CampaignConfig.from_dict(MULTI, "m1")
    frame = _frame()
    fitted = train_model("fpm", frame, config, ["age"], ["city", "period_of_day"], max_epochs=2, curve="logistic")
    net = fitted.module.double()
    assert net.head == "sbbm" and fitted.hparams["curve"] == "logistic"
    x_num, x_cat = (torch.from_numpy(a) for a in fitted.encoder.transform(frame.head(20)))
    grid = torch.linspace(0, 30, 7, dtype=torch.float64)
    for a, sign in enumerate(config.attribute_signs()):
        attrs = torch.tensor([4.0, 10.0, 1.0], dtype=torch.float64).repeat(20, 7, 1)
        attrs[:, :, a] = grid
        with torch.no_grad():
            logit = net.response_at(x_num.double(), x_cat, attrs)
        steps = torch.diff(logit, dim=1)
        torch.testing.assert_close(steps, steps[:, :1].expand_as(steps))          # linear on the logit scale
        assert bool((sign * steps >= 0).all())


def test_coman_without_spatiotemporal_columns_is_skipped(promo_env):
    from promo_assets.models import ModelSkipped

    with pytest.raises(ModelSkipped, match="spatio-temporal columns"):
        train_model("coman", _frame(), CampaignConfig.from_dict(MULTI, "m1"), ["age"], [], max_epochs=1)


def test_clu_fast_path_equals_the_block_definition():
    torch.manual_seed(0)
    layer = MonotoneDense(5, 16, None, "clu").double()
    x = torch.randn(40, 5, dtype=torch.float64) * 3
    z = x @ layer.signed_weight() + layer.bias
    cv, cc, _ = layer.blocks
    want = torch.cat([clu(z[:, :cv]), concave(clu)(z[:, cv:cv + cc]), saturated(clu)(z[:, cv + cc:])], dim=1)
    torch.testing.assert_close(layer(x), want)
    share = torch.rand(40, 1, dtype=torch.float64)
    m = adaptive_masks(share, cv + cc)
    want = torch.cat([m * clu(z[:, :cv + cc]) + (1 - m) * concave(clu)(z[:, :cv + cc]), saturated(clu)(z[:, cv + cc:])], dim=1)
    torch.testing.assert_close(layer(x, share), want)


@pytest.mark.hostile
@pytest.mark.parametrize("value, message", [
    pytest.param(1.5, "'models.params.coman': dropout = 1.5: expected a number in [0, 1)", id="error-coman-dropout-above-1"),
    pytest.param(-0.1, "'models.params.coman': dropout = -0.1: expected a number in [0, 1)", id="error-coman-dropout-negative"),
    pytest.param("x", "'models.params.coman.dropout' = 'x' (str): expected float like the default 0.3",
                 id="error-coman-dropout-not-a-number")])
def test_bad_coman_dropout_is_refused_naming_it(value, message):
    assert registry.check_models_block({"params": {"coman": {"dropout": value}}}) == [message]
