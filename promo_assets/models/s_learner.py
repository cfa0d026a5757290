"""DNN S-learner with 2K heads (TSM-SL, the two-stage baseline; end-to-end paper §3.2, Eq. 1).

A shared MLP turns the encoded user features (one embedding per categorical column, concatenated
with the standardized numeric columns) into a hidden representation h; K response heads and K cost
heads (small "shadow" MLPs, one per level) sit on top of h. The loss touches only the heads of the
logged level t_i (Eq. 1):

    L = sum_i w_i [ L_resp(f_v(u_i)_{t_i}, y_i) + L_cost(f_c(u_i)_{t_i}, z_i) ] / sum_i w_i

with w_i the IPS weight (1 when unweighted), L_resp the cross-entropy for binary responses, the
Poisson NLL for counts, the squared error for continuous responses (see models.base).

Cost heads: only for cost rule 'column'. For 'redeemed' the cost is incentive x response by
definition, so the expected cost is incentive x the predicted response and a separate cost head
would only add noise; for 'assigned' it is the incentive. (Documented choice, see base.py.)
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from torch import nn

from promo_assets.config import settings
from promo_assets.config.campaign import CampaignConfig
from promo_assets.models.base import (
    TorchResponseModel, TrainedModel, TrainingRecord, cost_loss, fit_metrics, numpy_of, numpy_relu_mlp, prepare_frame,
    register_architecture, relu_mlp, resolve_max_epochs, response_loss,
)
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import (
    COUNT, FLAG, NON_NEGATIVE, POSITIVE, SEED, WIDTHS, TrainingData, is_int,
)
from promo_assets.models.training import (
    MiniBatches, TrainingConfig, ValidationLoss, WeightedLoss, evaluate_loss, fit_torch_model, seeded,
)

def embedding_dim_for(cardinality: int, cap: int) -> int:
    """Embedding width for a categorical column: min(cap, round(1.6 * cardinality ** 0.56)), >= 2."""
    return max(2, min(cap, int(round(1.6 * cardinality ** 0.56))))


class HeadBank(nn.Module):
    """K independent heads on a shared representation, computed as one batched op.

    With `hidden > 0` each head is Linear(H, hidden) -> ReLU -> Linear(hidden, 1); otherwise Linear(H, 1).
    Output: N x K."""

    def __init__(self, in_dim: int, n_heads: int, hidden: int):
        super().__init__()
        self.hidden = int(hidden)
        if self.hidden > 0:
            self.w1 = nn.Parameter(torch.empty(n_heads, in_dim, self.hidden))
            self.b1 = nn.Parameter(torch.zeros(n_heads, self.hidden))
            self.w2 = nn.Parameter(torch.empty(n_heads, self.hidden))
            self.b2 = nn.Parameter(torch.zeros(n_heads))
            bound1 = 1.0 / math.sqrt(in_dim)
            bound2 = 1.0 / math.sqrt(self.hidden)
            nn.init.uniform_(self.w1, -bound1, bound1)
            nn.init.uniform_(self.w2, -bound2, bound2)
        else:
            self.w2 = nn.Parameter(torch.empty(n_heads, in_dim))
            self.b2 = nn.Parameter(torch.zeros(n_heads))
            nn.init.uniform_(self.w2, -1.0 / math.sqrt(in_dim), 1.0 / math.sqrt(in_dim))

    def numpy_heads(self):
        """`forward` for one row in NumPy float64: a callable h (H,) -> (K,)."""
        if self.hidden <= 0:
            w2, b2 = numpy_of(self.w2), numpy_of(self.b2)
            return lambda h: w2 @ h + b2
        k, h_dim, d = self.w1.shape
        w1 = numpy_of(self.w1).transpose(1, 0, 2).reshape(h_dim, k * d)  # h @ w1: every head's hidden layer at once
        b1, w2, b2 = numpy_of(self.b1).ravel(), numpy_of(self.w2), numpy_of(self.b2)

        def heads(h):
            z = h @ w1
            z += b1
            np.maximum(z, 0.0, out=z)
            return (z.reshape(k, d) * w2).sum(1) + b2

        return heads

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.hidden > 0:
            z = torch.relu(torch.einsum("nh,khd->nkd", h, self.w1) + self.b1)
            return (z * self.w2).sum(-1) + self.b2
        return h @ self.w2.T + self.b2


class FeatureEmbedding(nn.Module):
    """One embedding per categorical column (index 0 = unknown bucket), concatenated with x_num."""

    def __init__(self, n_numeric: int, cardinalities: list[int], embedding_dim: int):
        super().__init__()
        self.dims = [embedding_dim_for(c, embedding_dim) for c in cardinalities]
        self.embeddings = nn.ModuleList(nn.Embedding(c, d) for c, d in zip(cardinalities, self.dims))
        self.out_dim = int(n_numeric + sum(self.dims))

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        parts = [x_num] + [emb(x_cat[:, j]) for j, emb in enumerate(self.embeddings)]
        return torch.cat(parts, dim=1)


def mlp(in_dim: int, hidden: tuple[int, ...]) -> tuple[nn.Module, int]:
    layers: list[nn.Module] = []
    d = in_dim
    for h in hidden:
        layers += [nn.Linear(d, int(h)), nn.ReLU()]
        d = int(h)
    return nn.Sequential(*layers), d


@register_architecture("s_learner")
class SLearnerNet(nn.Module):
    """Shared MLP + K response heads (+ K cost heads when `cost_heads`); `curves` -> link-scale N x K."""

    def __init__(self, n_numeric: int, cardinalities: list[int], n_levels: int, hidden=(64, 32),
                 head_hidden: int = 16, embedding_dim: int = 8, cost_heads: bool = False,
                 response_init: float = 0.0):
        super().__init__()
        self.features = FeatureEmbedding(n_numeric, list(cardinalities), embedding_dim)
        self.trunk, h = mlp(self.features.out_dim, tuple(hidden))
        self.response_heads = HeadBank(h, n_levels, head_hidden)
        with torch.no_grad():
            self.response_heads.b2.fill_(float(response_init))
        self.has_cost_head = bool(cost_heads)
        self.cost_heads = HeadBank(h, n_levels, head_hidden) if cost_heads else None

    def numpy_curves(self):
        """`curves` for one user in NumPy float64 (`TrainedModel._numpy_pass`): a callable (x_num (P,)
        float32, x_cat (Q,) int64) -> (response raw (K,), cost raw (K,) or None); None when the trunk
        is not a plain Linear -> ReLU stack."""
        trunk = numpy_relu_mlp(self.trunk)
        if trunk is None:
            return None
        tables = [numpy_of(e.weight) for e in self.features.embeddings]
        response = self.response_heads.numpy_heads()
        cost = self.cost_heads.numpy_heads() if self.cost_heads is not None else None

        def curves(x_num: np.ndarray, x_cat: np.ndarray):
            h = relu_mlp(np.concatenate([x_num, *[t[c] for t, c in zip(tables, x_cat.tolist())]]), trunk)
            return response(h), (cost(h) if cost is not None else None)

        return curves

    def curves(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.trunk(self.features(x_num, x_cat))
        return self.response_heads(h), (self.cost_heads(h) if self.cost_heads is not None else None)


def _s_learner_loss(kind: str, has_cost: bool) -> Callable:
    def loss_fn(module: SLearnerNet, batch: dict[str, torch.Tensor], step: int | None):
        resp, cost = module.curves(batch["x_num"], batch["x_cat"])
        lvl = batch["level"].unsqueeze(1)
        loss = response_loss(resp.gather(1, lvl).squeeze(1), batch["response"], kind)
        if has_cost:
            loss = loss + cost_loss(cost.gather(1, lvl).squeeze(1), batch["cost"])
        return loss, None
    return loss_fn


def initial_link(kind: str, mean_response: float) -> float:
    """Link-scale value of the mean training response, used to initialise output biases."""
    if kind == "binary":
        p = min(max(mean_response, 1e-4), 1 - 1e-4)
        return math.log(p / (1 - p))
    if kind == "count":
        return math.log(max(mean_response, 1e-4))
    return 0.0


def train_s_learner(frame: pd.DataFrame, config: CampaignConfig, numeric: list[str], categorical: list[str],
                    weighted: bool = True, seed: int = 0, max_epochs: int | None = None,
                    log: Callable[[str], None] | None = None, **hparams: Any) -> TrainedModel:
    """Train the 2K-head DNN S-learner (end-to-end paper §3.2, Eq. 1) on `frame`'s 'train' rows,
    early-stopping on its 'validation' rows. `hparams` override the defaults of `SLearner` (hidden,
    head_hidden, embedding_dim, lr, batch_size, max_epochs, patience, weight_decay). Returns a
    TrainedModel named 's_learner'."""
    defaults = SLearner().network_params()
    unknown = sorted(set(hparams) - set(defaults))
    if unknown:
        raise ModelInputError(f"unknown S-learner hyper-parameters: {unknown}; known: {sorted(defaults)}")
    hp = {**defaults, **hparams}
    hp["hidden"] = tuple(int(h) for h in hp["hidden"])
    epochs = resolve_max_epochs(hp["max_epochs"], max_epochs)
    prep = prepare_frame(frame, config, list(numeric), list(categorical), weighted)
    kind = config.response
    has_cost = config.cost == "column"
    arch_kwargs = dict(n_numeric=prep.encoder.n_numeric, cardinalities=prep.encoder.cardinalities,
                       n_levels=config.n_levels, hidden=hp["hidden"], head_hidden=int(hp["head_hidden"]),
                       embedding_dim=int(hp["embedding_dim"]), cost_heads=has_cost,
                       response_init=initial_link(kind, float(prep.train["response"].mean())))
    with seeded(seed):
        net = SLearnerNet(**arch_kwargs)
    tc = TrainingConfig(max_epochs=epochs, batch_size=int(hp["batch_size"]), lr=float(hp["lr"]),
                        weight_decay=float(hp["weight_decay"]), patience=int(hp["patience"]))
    loss_fn = _s_learner_loss(kind, has_cost)
    t0 = time.perf_counter()
    loss = WeightedLoss(loss_fn, "weight" if weighted else None)
    fit = fit_torch_model(net, loss, MiniBatches(prep.train, tc.batch_size, seed),
                          ValidationLoss(loss, prep.validation, prep.train), tc, log=log, label="s_learner")
    metrics = fit_metrics(fit, prep, net, weighted, t0)
    if has_cost and prep.n_validation:
        metrics["validation_response_loss"] = evaluate_loss(
            net, _s_learner_loss(kind, False), prep.validation, "weight" if weighted else None)
    hp_out = {**hp, "hidden": list(hp["hidden"]), "max_epochs": epochs, "seed": seed, "weighted": bool(weighted)}
    arch_kwargs["hidden"] = list(arch_kwargs["hidden"])
    return TrainedModel("s_learner", net, prep.encoder, config, prep.targets,
                        TrainingRecord(hp_out, metrics, fit.history), arch_kwargs)


@dataclass(frozen=True)
class SLearnerParams:
    """The S-learner's hyper-parameters (campaign.yaml `models.params.s_learner`)."""

    hidden: tuple[int, ...] = (64, 32)
    head_hidden: int = 16
    embedding_dim: int = 8
    lr: float = 2e-3
    batch_size: int = 256
    max_epochs: int = 60
    patience: int = 6
    weight_decay: float = 0.0
    seed: int = 0
    ips_weighting: bool = True


class SLearner(TorchResponseModel):
    """Registry entry `s_learner`: the 2K-head DNN S-learner (`train_s_learner`) as an estimator.

    Hyper-parameters: `hidden` (widths of the shared MLP), `head_hidden` (width of each level's head;
    0: a linear head), `embedding_dim` (cap on a categorical column's embedding width), `lr`,
    `batch_size`, `max_epochs` (capped by PROMO_MAX_EPOCHS), `patience` (early stopping),
    `weight_decay`, `seed`, `ips_weighting` (weight the loss by the training frame's IPS weights)."""

    name = "s_learner"
    title = "DNN S-learner (TSM-SL): shared MLP, one response and one cost head per level, IPS-weighted"
    source = "end-to-end paper §3.2, Eq. 1"
    rules = {"hidden": WIDTHS, "head_hidden": (lambda x: is_int(x) and x >= 0, "an integer >= 0"),
             "embedding_dim": COUNT, "lr": POSITIVE, "batch_size": COUNT, "max_epochs": COUNT, "patience": COUNT,
             "weight_decay": NON_NEGATIVE, "seed": SEED, "ips_weighting": FLAG}
    Params = SLearnerParams

    def network_params(self) -> dict[str, Any]:
        """The keyword arguments of `train_s_learner` (everything but the seed and the weighting)."""
        return {k: v for k, v in self.get_params().items() if k not in ("seed", "ips_weighting")}

    def _fit_phase(self, data: TrainingData, phase: str, previous, log) -> TrainedModel:
        return train_s_learner(data.frame, data.config, list(data.numeric), list(data.categorical),
                               weighted=self.params.ips_weighting, seed=self.params.seed, log=log,
                               **self.network_params())


_WARM: dict[tuple, TrainedModel] = {}


def warm_start(data: TrainingData, seed: int, max_epochs: int | None, weighted: bool, log) -> TrainedModel:
    """The trained S-learner a decision-focused fine-tuning starts from (the end-to-end and DFCL
    models): `train_s_learner` with the campaign's `s_learner` network (campaign.yaml
    `models.params.s_learner`, the rest at `SLearner`'s defaults), this `seed` and weighting, and
    `max_epochs` in place of the s_learner's own (None: its own); so it is the campaign's `s_learner`
    model when the seed, the weighting and the epochs agree. Kept per process for the frame version,
    the config and these settings, so that the models of one run train it once; callers get a copy."""
    config = data.config
    network = SLearner(**(config.models.params.get("s_learner") or {})).network_params()
    if max_epochs is not None:
        network["max_epochs"] = max_epochs
    key = (config.campaign, data.frame_version, seed, max_epochs, settings.max_epochs(), bool(weighted),
           repr(config.to_dict()))
    if data.frame_version is None or key not in _WARM:
        model = train_s_learner(data.frame, config, list(data.numeric), list(data.categorical), weighted=weighted,
                                seed=seed, log=log, **network)
        if data.frame_version is None:
            return model
        _WARM.clear()
        _WARM[key] = model
    elif log is not None:
        log("warm start: the S-learner already trained in this process for this frame version")
    return copy.deepcopy(_WARM[key])
