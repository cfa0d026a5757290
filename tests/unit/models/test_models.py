"""Response models: encoder, training loop, S-learner, DIPN (fast, tiny data)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from promo_assets.config.campaign import CampaignConfig
from promo_assets.models import (
    DIPNNet, FeatureEncoder, ModelInputError, ModelSkipped, TrainingConfig, TrainingData, fit_torch_model, load_model,
    registry, train_dipn_bias, train_dipn_uplift,
)
from promo_assets.models.dipn import DIPNShape, alpha_at, isotonic_embedding
from promo_assets.models.training import FullBatch, MiniBatches, SamePass, Step, ValidationLoss, WeightedLoss
from promo_assets.models.isotonic_kernel import isotonic_chain

NUMERIC = ["activity", "age"]
CATEGORICAL = ["city", "segment"]


def train_model(name, frame, config, numeric, categorical, **params):
    """Registered model `name` built with `params` and fitted on `frame`; returns its fitted object
    (`model_`: the TrainedModel)."""
    return registry.create(name, params).fit(TrainingData(config, frame, list(numeric), list(categorical))).model_


def make_config(levels=(0, 1, 2, 5, 10), cost="redeemed", response="binary", ordered=True) -> CampaignConfig:
    treatments = {"levels": list(levels)} if ordered else {"arms": {f"arm{i}": float(v) for i, v in enumerate(levels)}}
    return CampaignConfig.from_dict({"treatments": treatments, "cost": cost, "response": response}, campaign="t")


def true_curve(frame: pd.DataFrame, incentives) -> np.ndarray:
    """Ground truth used by the tiny generator: logistic in activity, city and log-incentive."""
    inc = np.asarray(incentives, dtype=float)[None, :]
    city = frame["city"].map({"a": 0.3, "b": -0.2, "c": 0.0}).fillna(0.0).to_numpy()[:, None]
    act = frame["activity"].fillna(0.0).to_numpy()[:, None]
    logit = -1.0 + 0.8 * act + city + (0.5 + 0.3 * (act < 0)) * np.log1p(inc)
    return 1.0 / (1.0 + np.exp(-logit))


def make_frame(n=3000, seed=0, config=None, response="binary", cost_rule="redeemed") -> pd.DataFrame:
    config = config or make_config(cost=cost_rule, response=response)
    rng = np.random.default_rng(seed)
    k = config.n_levels
    f = pd.DataFrame({
        "activity": rng.normal(size=n),
        "age": rng.uniform(18, 70, size=n),
        "city": rng.choice(["a", "b", "c"], size=n),
        "segment": rng.choice(["x", "y"], size=n),
    })
    f.loc[rng.random(n) < 0.05, "age"] = np.nan
    f["level"] = rng.integers(0, k, size=n)
    f["incentive"] = np.asarray(config.incentives)[f["level"]]
    p = true_curve(f, config.incentives)[np.arange(n), f["level"]]
    if response == "binary":
        f["response"] = (rng.random(n) < p).astype(float)
    elif response == "count":
        f["response"] = rng.poisson(3 * p).astype(float)
    else:
        f["response"] = 5 * p + rng.normal(scale=0.2, size=n)
    f["cost"] = f["incentive"] * f["response"] if cost_rule != "column" else 0.5 * f["incentive"] * p + rng.random(n)
    f["ips_weight"] = 1.0
    f["split"] = np.where(rng.random(n) < 0.75, "train", "validation")
    return f


# ------------------------------------------------------------------------------------- encoder
def test_encoder_unknown_bucket_and_standardization():
    train = pd.DataFrame({"x": [1.0, 2.0, 3.0, np.nan], "c": ["a", "b", "a", None]})
    enc = FeatureEncoder(["x"], ["c"]).fit(train)
    assert enc.cardinalities == [3]              # unknown + a + b
    assert enc.indicator_columns == ["x"]        # x had a missing value in training
    new = pd.DataFrame({"x": [2.0, np.nan, 4.0], "c": ["zzz-never-seen", None, "b"]})
    x_num, x_cat = enc.transform(new)
    assert x_num.dtype == np.float32 and x_cat.dtype == np.int64
    assert x_num.shape == (3, 2) and x_cat.shape == (3, 1)
    assert x_cat[:, 0].tolist() == [0, 0, 2]     # unseen and missing -> unknown bucket 0; 'b' -> 2
    std = np.std([1.0, 2.0, 3.0])
    np.testing.assert_allclose(x_num[:, 0], [0.0, 0.0, 2.0 / std], rtol=1e-6)
    assert x_num[:, 1].tolist() == [0.0, 1.0, 0.0]
    again = FeatureEncoder.from_state(enc.to_state())
    for a, b in zip(again.transform(new), enc.transform(new)):
        np.testing.assert_array_equal(a, b)
    assert enc.unknown_fraction(new) == {"c": pytest.approx(2 / 3)}


def test_encoder_errors_are_specific():
    with pytest.raises(ModelInputError, match="both numeric and categorical"):
        FeatureEncoder(["a"], ["a"])
    enc = FeatureEncoder(["x"], []).fit(pd.DataFrame({"x": [1.0, 2.0]}))
    with pytest.raises(ModelInputError, match=r"missing from the frame: \['x'\]"):
        enc.transform(pd.DataFrame({"y": [1.0]}))
    with pytest.raises(ModelInputError, match="non-numeric"):
        FeatureEncoder(["x"], []).fit(pd.DataFrame({"x": ["a", "b"]}))


def test_scoring_user_with_unseen_category_uses_unknown_bucket():
    frame = make_frame(n=800, seed=1)
    model = train_model("s_learner", frame, make_config(), NUMERIC, CATEGORICAL, max_epochs=2)
    user = frame.iloc[:1].copy()
    user["city"] = "atlantis"                    # never seen in training
    values, costs = model.predict(user)
    assert values.shape == (1, 5) and np.isfinite(values).all()
    _, x_cat = model.encoder.transform(user)
    assert x_cat[0, CATEGORICAL.index("city")] == 0
    # the prediction is exactly the one for a user whose city is missing (same bucket)
    missing = user.copy()
    missing["city"] = None
    np.testing.assert_array_equal(model.predict(missing)[0], values)


def test_encoder_dense_form_is_one_hot_of_the_indices():
    frame = pd.DataFrame({"x": [1.0, np.nan, 3.0], "city": ["b", "a", None]})
    enc = FeatureEncoder(["x"], ["city"]).fit(frame)
    assert enc.dense_names == ["x", "x missing", "city=a", "city=b"]
    dense = enc.transform_dense(pd.DataFrame({"x": [1.0, np.nan], "city": ["a", "zzz"]}))
    assert dense.dtype == np.float32
    np.testing.assert_allclose(dense, [[-1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])  # unseen city: zeros


# ------------------------------------------------------------------------------------- loop
def test_training_loop_early_stops_restores_best_and_logs():
    torch.manual_seed(0)
    x = torch.randn(400, 3)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.1 * torch.randn(400)
    net = torch.nn.Linear(3, 1)
    lines = []

    def loss_fn(m, b, step):
        return (m(b["x"]).squeeze(1) - b["y"]) ** 2, None

    loss = WeightedLoss(loss_fn, None)
    train, validation = {"x": x[:300], "y": y[:300]}, {"x": x[300:], "y": y[300:]}
    fit = fit_torch_model(net, loss, MiniBatches(train, 32, seed=0), ValidationLoss(loss, validation, train),
                          TrainingConfig(max_epochs=40, batch_size=32, lr=0.05, patience=3), log=lines.append)
    assert len(lines) == fit.epochs + 1 and "epoch 1/40" in lines[0] and "validation loss" in lines[0]
    val = [h["validation_loss"] for h in fit.history]
    assert fit.history[0]["train_loss"] > fit.history[fit.best_epoch - 1]["train_loss"]
    assert fit.best_validation_loss == pytest.approx(min(val))
    assert fit.best_epoch == int(np.argmin(val)) + 1
    with torch.no_grad():
        restored = float(((net(x[300:]).squeeze(1) - y[300:]) ** 2).mean())
    assert restored == pytest.approx(fit.best_validation_loss, rel=1e-5)


def test_training_loop_uses_sample_weights():
    # two groups with different targets; weights decide which one the constant model fits
    x = torch.zeros(200, 1)
    y = torch.cat([torch.zeros(100), torch.ones(100)])
    w = torch.cat([torch.full((100,), 9.0), torch.ones(100)])
    net = torch.nn.Linear(1, 1)

    def loss_fn(m, b, step):
        return (m(b["x"]).squeeze(1) - b["y"]) ** 2, None

    data = {"x": x, "y": y, "weight": w}
    loss = WeightedLoss(loss_fn)  # the "weight" column
    fit_torch_model(net, loss, MiniBatches(data, 200, seed=0), ValidationLoss(loss, data, data),
                    TrainingConfig(max_epochs=300, batch_size=200, lr=0.05, patience=300))
    assert float(net.bias.detach()) == pytest.approx(0.1, abs=0.02)   # weighted mean 1/(9+1)


def test_training_loop_full_batch_keeps_each_parts_best_parameters():
    """The full-batch form (the graph models): one step per epoch, early stopping per part, each
    part's best parameters kept; an improvement is credited to the parameters before the step."""

    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.zeros(()))
            self.b = torch.nn.Parameter(torch.zeros(()))

    net = Two()
    seen = []

    def step(module, batch, k):
        assert batch is None  # the full-batch source: the loss holds its data
        a, b = module.a.item(), module.b.item()
        seen.append((a, b))
        objective = (module.a - 1.0) ** 2 + (module.b - 2.0) ** 2  # trains a -> 1, b -> 2
        return Step(objective, float(objective.detach()), train={"train_a": (a - 1.0) ** 2},
                    monitored={"val_a": abs(a - 0.4), "val_b": abs(b - 2.0)})

    lines = []
    fit = fit_torch_model(net, step, FullBatch(), SamePass(), TrainingConfig(max_epochs=200, lr=0.05, patience=5,
                                                                             log_every=50),
                          log=lines.append, label="two")
    assert fit.stopped_early and fit.epochs < 200
    a_best = fit.best_states["val_a"]["a"].item()
    assert a_best == pytest.approx(0.4, abs=0.05)                 # a's validation optimum, not its training one
    assert fit.best_states["val_b"]["b"].item() == pytest.approx(2.0, abs=0.05)
    assert seen[fit.best_epochs["val_a"]][0] == a_best            # the parameters before that epoch's step
    assert net.a.item() == a_best                                 # the first part's parameters restored
    assert set(fit.history[0]) == {"epoch", "train_loss", "train_a", "val_a", "val_b", "seconds"}
    assert len(lines) == 1 + fit.epochs // 50 + 1 and "two epoch 1/200" in lines[0]


# ------------------------------------------------------------------------------------- S-learner
def test_s_learner_training_reduces_loss_and_learns_curves():
    config = make_config()
    frame = make_frame(n=4000, seed=2)
    model = train_model("s_learner", frame, config, NUMERIC, CATEGORICAL, max_epochs=15, seed=0)
    hist = model.history
    assert hist[-1]["train_loss"] < hist[0]["train_loss"]
    assert model.metrics["validation_loss"] <= hist[0]["validation_loss"]
    values, costs = model.predict(frame)
    assert values.shape == costs.shape == (len(frame), 5)
    np.testing.assert_allclose(costs, values * np.asarray(config.incentives)[None, :])   # 'redeemed'
    truth = true_curve(frame, config.incentives)
    mae = np.abs(values - truth).mean()
    assert mae < 0.08, mae
    for key in ("validation_loss", "epochs", "best_epoch", "seconds_per_epoch"):
        assert key in model.metrics


@pytest.mark.parametrize("response,cost_rule", [("count", "assigned"), ("continuous", "column")])
def test_s_learner_regression_heads(response, cost_rule):
    config = make_config(cost=cost_rule, response=response)
    frame = make_frame(n=2000, seed=3, config=config, response=response, cost_rule=cost_rule)
    model = train_model("s_learner", frame, config, NUMERIC, CATEGORICAL, max_epochs=8)
    assert model.history[-1]["train_loss"] < model.history[0]["train_loss"]
    values, costs = model.predict(frame.iloc[:50])
    assert np.isfinite(values).all() and (costs >= 0).all()
    if cost_rule == "assigned":
        np.testing.assert_array_equal(costs, np.broadcast_to(np.asarray(config.incentives), costs.shape))
    else:
        assert abs(costs.mean() - frame["cost"].mean()) < 0.5 * frame["cost"].mean()


def test_bad_input_errors():
    config = make_config()
    frame = make_frame(n=200)
    with pytest.raises(ModelInputError, match="unknown model"):
        train_model("nope", frame, config, NUMERIC, CATEGORICAL)
    with pytest.raises(ModelInputError, match="level"):
        train_model("s_learner", frame.assign(level=7), config, NUMERIC, CATEGORICAL, max_epochs=1)
    with pytest.raises(ModelInputError, match="ips_weight"):
        train_model("s_learner", frame.drop(columns="ips_weight"), config, NUMERIC, CATEGORICAL, max_epochs=1)
    with pytest.raises(ModelInputError, match="split"):
        train_model("s_learner", frame.assign(split="test"), config, NUMERIC, CATEGORICAL, max_epochs=1)
    with pytest.raises(ModelSkipped, match="needs ordered incentive levels"):
        train_model("dipn", frame, make_config(ordered=False), NUMERIC, CATEGORICAL, max_epochs=1)


# ------------------------------------------------------------------------------------- DIPN
def test_isotonic_embedding_eq9():
    e = isotonic_embedding(np.array([0, 2, 4]), 5)
    assert e.tolist() == [[1, 0, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]


def test_alpha_decays_as_eq17():
    assert alpha_at(0, 1.0, 0.1, 0.01) == 1.0
    assert alpha_at(50, 1.0, 0.1, 0.01) == pytest.approx(0.5)
    assert alpha_at(10_000, 1.0, 0.1, 0.01) == 0.1


@pytest.mark.parametrize("seed,signed_offset", [(0, True), (1, False), (2, True)])
def test_dipn_monotone_by_construction_with_random_weights(seed, signed_offset):
    torch.manual_seed(seed)
    net = DIPNNet(DIPNShape(n_numeric=3, cardinalities=[4, 6], incentives=[0, 1, 2, 3, 5, 8, 13], hidden=[16],
                            cost_head=True, phase="full", signed_offset=signed_offset))
    with torch.no_grad():
        for p in net.parameters():           # arbitrary weights, including negative carry factors
            p.normal_(0.0, 3.0)
    x_num = torch.randn(500, 3) * 3
    x_cat = torch.randint(0, 4, (500, 2))
    logits, cost = net.curves(x_num, x_cat)
    assert (torch.diff(logits, dim=1) >= 0).all()
    assert (torch.diff(torch.sigmoid(logits), dim=1) >= 0).all()
    assert (torch.diff(cost, dim=1) >= 0).all()
    # Eq. 12 written out with the isotonic embedding of Eq. 9 gives the same logits
    b = net.bias_logit(x_num, x_cat)
    w, _ = net.uplift(x_num, x_cat, b)
    assert (w[:, 1:] >= 0).all() and (signed_offset or (w[:, 0] >= 0).all())
    for level in range(7):
        e = isotonic_embedding(np.full(500, level), 7)
        torch.testing.assert_close((w * e).sum(1) + b, logits[:, level], rtol=1e-4, atol=1e-4)


def _reference_chain(z, u, factor, signed, eps):
    """The uplift chain, isotonic sum and Eq. 16 loss written with plain autograd ops, level by level."""
    n, k = z.shape
    q = [z[:, 0] if signed else torch.relu(z[:, 0])]
    prev = torch.zeros(n, dtype=z.dtype) if signed else q[0]
    for j in range(1, k):                     # q_j = ReLU(z_j + u_j q_{j-1}): each weight fed into the next
        prev = torch.relu(z[:, j] + u[j] * prev)
        q.append(prev)
    q = torch.stack(q, 1)
    s = q[:, 1:] * torch.as_tensor(factor[1:], dtype=z.dtype)
    smooth = ((s[:, 1:] - s[:, :-1]) ** 2 / (s[:, 1:] * s[:, :-1] + eps)).sum() / (n * k)
    return q, torch.cumsum(q, 1), smooth


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("equal_gaps", [True, False])
def test_isotonic_kernel_matches_autograd_reference(signed, equal_gaps):
    torch.manual_seed(3)
    n, k = 40, 9
    z = (torch.randn(n, k) + 0.3).requires_grad_(True)
    u = torch.randn(k).requires_grad_(True)
    factor = np.ones(k, np.float32) if equal_gaps else np.linspace(0.5, 2.0, k).astype(np.float32)
    q, cum, smooth = isotonic_chain(z, u, factor, signed, 0.05)
    rq, rcum, rsmooth = _reference_chain(z, u, factor, signed, 0.05)
    torch.testing.assert_close(q, rq)
    torch.testing.assert_close(cum, rcum)
    torch.testing.assert_close(smooth, rsmooth)
    assert (q[:, 1:] >= 0).all() and (signed or (q[:, 0] >= 0).all())
    gq, gc = torch.randn(n, k), torch.randn(n, k)
    got = torch.autograd.grad((q * gq).sum() + (cum * gc).sum() + 0.7 * smooth, (z, u))
    want = torch.autograd.grad((rq * gq).sum() + (rcum * gc).sum() + 0.7 * rsmooth, (z, u), retain_graph=True)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # the training path: only the isotonic sum and the smoothness loss reach the loss (q's gradient is None)
    q, cum, smooth = isotonic_chain(z, u, factor, signed, 0.05)
    got = torch.autograd.grad((cum * gc).sum() + 0.7 * smooth, (z, u))
    want = torch.autograd.grad((rcum * gc).sum() + 0.7 * rsmooth, (z, u), retain_graph=True)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # scoring skips the smoothness loss, and refuses a gradient through it
    q, cum, smooth = isotonic_chain(z, u, factor, signed, None)
    torch.testing.assert_close(cum, rcum)
    assert torch.isnan(smooth)
    with pytest.raises(RuntimeError, match="smoothness"):
        torch.autograd.grad(smooth + cum.sum(), (z, u))


def test_dipn_two_phases_rpr_zero_and_frozen_bias():
    config = make_config()
    frame = make_frame(n=3000, seed=4)
    lines = []
    bias = train_dipn_bias(TrainingData(config, frame, NUMERIC, CATEGORICAL), max_epochs=6, log=lines.append,
                           hidden=(16,))
    assert bias.name == "dipn_bias" and bias.metrics["n_train"] == int(
        ((frame["split"] == "train") & (frame["level"] == 0)).sum())   # lowest level only
    assert bias.history[-1]["train_loss"] < bias.history[0]["train_loss"]
    bv, _ = bias.predict(frame.iloc[:20])
    assert np.ptp(bv, axis=1).max() == 0.0                           # bias-only curve is flat
    model = train_dipn_uplift(bias, frame, max_epochs=8, log=lines.append)
    assert any(l.startswith("dipn_bias epoch 1/") for l in lines)
    assert any(l.startswith("dipn_uplift epoch 1/") for l in lines)
    assert model.name == "dipn" and model.metrics["n_train"] == int((frame["split"] == "train").sum())
    for key, value in bias.module.state_dict().items():               # bias net frozen in ULP
        if key.startswith(("bias_fc", "bias_embedding")):
            torch.testing.assert_close(model.module.state_dict()[key], value)
    uplift_hist = [h for h in model.history if h["phase"] == "uplift"]
    assert uplift_hist[-1]["train_loss"] < uplift_hist[0]["train_loss"]
    values, costs = model.predict(frame)
    diffs = np.diff(values, axis=1)
    k = values.shape[1]
    reversed_pairs = sum((values[:, b] < values[:, a]).sum() for a in range(k) for b in range(a + 1, k))
    assert reversed_pairs == 0                                        # RPR exactly 0
    assert (diffs >= 0).all()
    assert np.abs(values - true_curve(frame, config.incentives)).mean() < 0.1


def test_dipn_count_regression_variant_is_monotone():
    config = make_config(response="count", cost="column")
    frame = make_frame(n=1500, seed=5, config=config, response="count", cost_rule="column")
    model = train_model("dipn", frame, config, NUMERIC, CATEGORICAL, max_epochs=4, hidden=(16,))
    values, costs = model.predict(frame)
    assert (np.diff(values, axis=1) >= 0).all() and (np.diff(costs, axis=1) >= 0).all()
    assert abs(values.mean() - frame["response"].mean()) < 0.5 * frame["response"].mean()


# ------------------------------------------------------------------------------------- artefacts
@pytest.mark.parametrize("name", ["s_learner", "dipn"])
def test_save_load_round_trip_and_stable_version(name, tmp_path, monkeypatch):
    monkeypatch.setenv("PROMO_ARTIFACTS_DIR", str(tmp_path))
    config = make_config()
    frame = make_frame(n=1200, seed=6)
    kw = {"hidden": (16,)} if name == "dipn" else {"hidden": (16, 8)}
    model = train_model(name, frame, config, NUMERIC, CATEGORICAL, max_epochs=3, seed=11, **kw)
    version = model.save()
    assert version == model.version and len(version) == 16
    assert (tmp_path / "model" / f"{version}.bin").exists()
    loaded = load_model(version)
    assert loaded.name == name and loaded.version == version
    for a, b in zip(model.predict(frame), loaded.predict(frame)):
        np.testing.assert_array_equal(a, b)
    assert loaded.metrics["validation_loss"] == model.metrics["validation_loss"]
    # same data, same seed -> same weights -> same content-addressed version
    again = train_model(name, frame, config, NUMERIC, CATEGORICAL, max_epochs=3, seed=11, **kw)
    assert again.version == version
    other = train_model(name, frame, config, NUMERIC, CATEGORICAL, max_epochs=3, seed=12, **kw)
    assert other.version != version
    # an artefact written by another version of the architecture's code is refused, by name
    from promo_assets.models.base import TrainedModel
    stale = {**model.payload(), "architecture_version": model.payload()["architecture_version"] + 1}
    with pytest.raises(ModelInputError, match="re-materialize"):
        TrainedModel.from_payload(stale)


def test_max_epochs_setting_caps_training(monkeypatch):
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "2")
    frame = make_frame(n=600, seed=7)
    model = train_model("s_learner", frame, make_config(), NUMERIC, CATEGORICAL, max_epochs=50)
    assert model.metrics["epochs"] <= 2 and model.hparams["max_epochs"] == 2


def test_models_package_does_not_import_dagster():
    import subprocess
    import sys

    code = "import sys, promo_assets.models; print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
