"""Monotone response models over multi-attribute incentive levels (issue #17): DNN-M, FPM, CMNN and
CoMAN, registered as `dnn_m`, `fpm`, `cmnn`, `coman`.

Every network scores a user at any incentive attributes: `response_at(x_num, x_cat, attrs)` with
`attrs` (N, M, A) raw attribute values (columns: `CampaignConfig.attribute_names`) returns the
link-scale response (N, M), monotone in each attribute by construction in its declared direction
(`attribute_signs`: +1 / -1; 0 = unconstrained). `curves` evaluates it at the campaign's K levels, so
the models plug into `TrainedModel.predict` and the rest of the pipeline like the S-learner.
Attributes are divided by their largest absolute level value (a positive scale keeps every direction).

- DNN-M (classical baseline): sign-constrained weights on the attributes, non-negative weights
  after the first layer, sigmoid activations.
- FPM: a user network outputs the four parameters (r0, rmax, x0, k) and a non-negative weight per
  attribute; the response is `fpm_response` of the incentive index s = sum_a t_a w_a x_a.
- SBBM-style logistic head (`fpm` with `curve: logistic`; Zhao et al. 2019's semi-black-box logit
  demand curve, the CoMAN paper's SBBM baseline): logit r = alpha_i + s_i with the same per-user index
  s = sum_a t_a w_a x_a (w_a >= 0): a logistic curve in the level, per-user parameters from the network.
- CMNN: `MonotoneStack` with [convex | concave | saturated] blocks of one convex activation
  (relu / elu / clu, hyper-parameter `activation`), sigmoid link for binary responses.
- CoMAN (promo_assets.models.coman): spatio-temporal modules, Adaptive Activation, S-t Attention.

Training: the S-learner's loss (the logged level's response, IPS-weighted; `logged_level_loss` scores
only the logged level) through the one training loop (`fit_torch_model`); cost heads (a `HeadBank` on the user representation) only for cost rule
'column', as in the S-learner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from promo_assets.config.campaign import CampaignConfig
from promo_assets.models.base import (
    TorchResponseModel, TrainedModel, TrainingRecord, build_network, cost_loss, fit_metrics, prepare_frame, register_architecture, resolve_max_epochs,
    response_loss,
)
from promo_assets.models.errors import ModelInputError
from promo_assets.models.monotone import CONVEX_ACTIVATIONS, MonotoneStack, fpm_response
from promo_assets.models.protocol import (
    COUNT, FLAG, NON_NEGATIVE, POSITIVE, SEED, WIDTHS, TrainingData,
)
from promo_assets.models.s_learner import FeatureEmbedding, HeadBank, initial_link, mlp
from promo_assets.models.training import MiniBatches, TrainingConfig, ValidationLoss, WeightedLoss, fit_torch_model, seeded

def no_monotone_attribute(config: CampaignConfig) -> str | None:
    """None when the campaign has incentive attributes to be monotone in, else the reason."""
    if not config.attribute_names:
        return ("needs incentive attributes with a monotone direction (treatments: levels, or levels with "
                "attributes:); this campaign has unordered arms")
    if not np.any(config.attribute_signs() != 0):
        return "every incentive attribute is declared monotone: none"
    return None


class AttributeCurves(nn.Module):
    """Base of the attribute-scored networks: the level grid and attribute scales as buffers, `curves`
    (N x K at the levels), optional cost heads on the user representation."""

    def _init_levels(self, level_attributes: Sequence[Sequence[float]], signs: Sequence[int], rep_dim: int,
                     cost_heads: bool) -> None:
        levels = torch.as_tensor(np.asarray(level_attributes, dtype=np.float32))
        scale = levels.abs().amax(dim=0)
        self.register_buffer("levels", levels)
        self.register_buffer("scale", torch.where(scale > 1e-9, scale, torch.ones_like(scale)))
        self.signs = [int(s) for s in signs]
        self.register_buffer("box_corners", self._corners(), persistent=False)
        self.has_cost_head = bool(cost_heads)
        self.cost_heads = HeadBank(rep_dim, levels.shape[0], 16) if cost_heads else None

    def _corners(self) -> torch.Tensor:
        """(2, A) scaled attributes of the least and the most generous corner of the levels' box: per
        attribute the smallest / largest level value if increasing, the largest / smallest if
        decreasing, the mean level value if unconstrained (a fixed point: the FPM's normalisation
        then depends on the user only, never on the queried attributes)."""
        a = self.levels / self.scale
        t = torch.as_tensor(self.signs, dtype=a.dtype, device=a.device)
        lo, hi, mid = a.amin(0), a.amax(0), a.mean(0)
        return torch.stack([torch.where(t > 0, lo, torch.where(t < 0, hi, mid)),
                            torch.where(t > 0, hi, torch.where(t < 0, lo, mid))])

    def unit_index(self, index: Callable[[torch.Tensor], torch.Tensor], attrs: torch.Tensor) -> torch.Tensor:
        """The FPM's normalised incentive index: `index` (N, M', A) -> (N, M') monotone scores, evaluated
        at `attrs` (N, M, A) and at the two `box_corners` (`_corners`) in one call; returns (s - s_lo) / (s_hi - s_lo + 1e-3)
        (N, M): 0 at the least, 1 at the most generous corner, non-decreasing in s."""
        n, m = attrs.shape[0], attrs.shape[1]
        s = index(torch.cat([attrs, self.box_corners.to(attrs.dtype).expand(n, -1, -1)], dim=1))
        lo, hi = s[:, m:m + 1], s[:, m + 1:m + 2]
        return (s[:, :m] - lo) / ((hi - lo).clamp_min(0.0) + 1e-3)

    def representation(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> Any:
        raise NotImplementedError

    def respond(self, attrs: torch.Tensor, rep: Any) -> torch.Tensor:
        """(N, M, A) scaled attributes, the user representation -> link-scale (N, M)."""
        raise NotImplementedError

    def response_at(self, x_num: torch.Tensor, x_cat: torch.Tensor, attrs: torch.Tensor) -> torch.Tensor:
        """Link-scale response (N, M) of each user at M attribute vectors `attrs` (N, M, A), raw values."""
        return self.respond(attrs.to(self.scale.dtype) / self.scale, self.representation(x_num, x_cat))

    def curves(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        rep = self.representation(x_num, x_cat)
        n = x_num.shape[0]
        attrs = (self.levels / self.scale).unsqueeze(0).expand(n, -1, -1)
        cost = self.cost_heads(rep if isinstance(rep, torch.Tensor) else rep[0]) if self.cost_heads is not None else None
        return self.respond(attrs, rep), cost

    def at_logged(self, x_num: torch.Tensor, x_cat: torch.Tensor, level: torch.Tensor):
        """Link-scale response (N,) and cost (N,) or None of each user at its logged `level` (N,) only: the
        training loss needs one level per row, so the monotone layers run on 1 (+ the FPM's 2 corner)
        attribute vectors per user instead of K (+ 2). Equal to `curves(...)` gathered at `level`."""
        rep = self.representation(x_num, x_cat)
        resp = self.respond((self.levels / self.scale)[level].unsqueeze(1), rep).squeeze(1)
        if self.cost_heads is None:
            return resp, None
        cost = self.cost_heads(rep if isinstance(rep, torch.Tensor) else rep[0])
        return resp, cost.gather(1, level.unsqueeze(1)).squeeze(1)


def logged_level_loss(kind: str, has_cost: bool) -> Callable:
    """The S-learner's loss (`s_learner._s_learner_loss`: the logged level's response and cost) computed
    with `AttributeCurves.at_logged`, without scoring the other levels."""
    def loss_fn(module: AttributeCurves, batch: dict[str, torch.Tensor], step: int | None):
        resp, cost = module.at_logged(batch["x_num"], batch["x_cat"], batch["level"])
        loss = response_loss(resp, batch["response"], kind)
        return (loss + cost_loss(cost, batch["cost"]) if has_cost else loss), None
    return loss_fn


@dataclass(frozen=True)
class MonotoneShape:
    """MonotoneNet's shape and starting point (its artefact's `arch_kwargs`)."""

    n_numeric: int
    cardinalities: list[int]
    level_attributes: list[list[float]]
    signs: list[int]
    head: str = "cmnn"
    activation: str = "clu"
    hidden: tuple[int, ...] | list[int] = (64, 32)
    mono_hidden: tuple[int, ...] | list[int] = (32, 16)
    embedding_dim: int = 8
    binary: bool = True
    cost_heads: bool = False
    response_init: float = 0.0


@register_architecture("monotone")
class MonotoneNet(AttributeCurves):
    """DNN-M (`head='dnn_m'`), FPM (`head='fpm'`), the SBBM-style logistic head (`head='sbbm'`) or CMNN (`head='cmnn'`, `activation`) on the
    S-learner's user trunk (FeatureEmbedding + MLP)."""

    # 2: the FPM head reads the index normalised to the levels' attribute box (r0 at no incentive, rmax
    # at the most generous design): a version-1 fpm artefact would predict with the wrong formula
    architecture_version = 2

    Shape = MonotoneShape

    def __init__(self, shape: MonotoneShape):
        super().__init__()
        s = shape
        n_numeric, cardinalities, level_attributes, signs = s.n_numeric, s.cardinalities, s.level_attributes, s.signs
        head, activation, hidden, mono_hidden = s.head, s.activation, s.hidden, s.mono_hidden
        embedding_dim, binary, cost_heads, response_init = s.embedding_dim, s.binary, s.cost_heads, s.response_init
        self.features = FeatureEmbedding(n_numeric, list(cardinalities), embedding_dim)
        self.trunk, h = mlp(self.features.out_dim, tuple(hidden))
        self._init_levels(level_attributes, signs, h, cost_heads)
        self.head, self.binary = head, bool(binary)
        a = len(self.signs)
        if head == "sbbm":
            self.params_out = nn.Linear(h, 1 + a)
            with torch.no_grad():
                self.params_out.bias[0] = float(response_init)
        elif head == "fpm":
            self.params_out = nn.Linear(h, 4 + a)
            with torch.no_grad():
                self.params_out.bias[0] = float(response_init)
        elif head in ("cmnn", "dnn_m"):
            self.stack = MonotoneStack(self.signs, h, tuple(mono_hidden), "sigmoid" if head == "dnn_m" else activation)
            with torch.no_grad():  # DNN-M's sigmoid units start near 1/2: centre its output on the mean response
                offset = 0.5 * float(self.stack.output.weight.abs().sum()) if head == "dnn_m" else 0.0
                self.stack.output.bias.fill_(float(response_init) - offset)
        else:
            raise ModelInputError(f"unknown monotone head {head!r}; expected dnn_m, fpm, sbbm or cmnn")

    def representation(self, x_num, x_cat):
        return self.trunk(self.features(x_num, x_cat))

    def respond(self, attrs, rep):
        if self.head == "sbbm":  # logit-linear in the index: sigmoid(alpha + s) for a binary response
            p = self.params_out(rep)
            return p[:, :1] + attribute_index(attrs, p[:, 1:], self.signs)
        if self.head == "fpm":
            p = self.params_out(rep)
            u = self.unit_index(lambda a: attribute_index(a, p[:, 4:], self.signs), attrs)
            return fpm_response(p[:, None, :4], u, self.binary)
        return self.stack(attrs, rep).squeeze(-1)


def attribute_index(attrs: torch.Tensor, raw_weights: torch.Tensor, signs: Sequence[int]) -> torch.Tensor:
    """FPM's incentive index s = sum_a t_a softplus(w_a) x_a (+ w_a x_a for t_a = 0): attrs (N, M, A),
    raw_weights (N, A) per user -> (N, M); monotone in each attribute with t_a != 0."""
    t = torch.as_tensor(list(signs), dtype=attrs.dtype, device=attrs.device)
    w = torch.where(t != 0, t * torch.nn.functional.softplus(raw_weights), raw_weights)
    return (attrs * w[:, None, :]).sum(-1)


def train_attribute_model(name: str, architecture: str, data: TrainingData, hp: dict[str, Any],
                          arch: Callable[[Any], dict[str, Any]], *, weighted: bool = True, seed: int = 0,
                          log: Callable[[str], None] | None = None) -> TrainedModel:
    """Train an attribute-scored network (registered `architecture`, built from `arch(prep)` plus the
    common keyword arguments) with the S-learner's loss on the 'train' rows of `data`'s frame (with
    its config and feature columns), early-stopping on 'validation'. `hp`: the model's
    hyper-parameters (`get_params()`). Returns a TrainedModel named `name` whose `predict` gives
    response and cost per user x level."""
    frame, config, numeric, categorical = data.frame, data.config, data.numeric, data.categorical
    reason = no_monotone_attribute(config)
    if reason is not None:
        raise ModelInputError(f"{name}: {reason}")
    epochs = resolve_max_epochs(hp["max_epochs"])
    prep = prepare_frame(frame, config, list(numeric), list(categorical), weighted)
    kind, has_cost = config.response, config.cost == "column"
    arch_kwargs = dict(n_numeric=prep.encoder.n_numeric, cardinalities=prep.encoder.cardinalities,
                       level_attributes=config.attribute_matrix().tolist(), signs=config.attribute_signs().tolist(),
                       binary=kind == "binary", cost_heads=has_cost,
                       response_init=initial_link(kind, float(prep.train["response"].mean())), **arch(prep))
    with seeded(seed):
        net = build_network(architecture, arch_kwargs)
    tc = TrainingConfig(max_epochs=epochs, batch_size=int(hp["batch_size"]), lr=float(hp["lr"]),
                        weight_decay=float(hp["weight_decay"]), patience=int(hp["patience"]))
    t0 = time.perf_counter()
    # seeded: CoMAN's dropout draws from torch's global generator; without it one seed's model depended on
    # whatever ran before it in the process (in benchmarks/coman_paper.py: the variants trained before it)
    with seeded(seed):
        loss = WeightedLoss(logged_level_loss(kind, has_cost), "weight" if weighted else None)
        fit = fit_torch_model(net, loss, MiniBatches(prep.train, tc.batch_size, seed),
                              ValidationLoss(loss, prep.validation, prep.train), tc, log=log, label=name)
    metrics = fit_metrics(fit, prep, net, weighted, t0)
    hp_out = {**hp, "max_epochs": epochs, "seed": seed, "weighted": bool(weighted)}
    return TrainedModel(name, net, prep.encoder, config, prep.targets, TrainingRecord(hp_out, metrics, fit.history),
                        arch_kwargs)


def _list(value) -> list[int]:
    return [int(v) for v in value]


@dataclass(frozen=True)
class MonotoneParams:
    """The hyper-parameters of dnn_m (campaign.yaml `models.params.dnn_m`); fpm and cmnn add one each."""

    hidden: tuple[int, ...] = (64, 32)
    mono_hidden: tuple[int, ...] = (32, 16)
    embedding_dim: int = 8
    lr: float = 2e-3
    batch_size: int = 256
    max_epochs: int = 60
    patience: int = 6
    weight_decay: float = 0.0
    seed: int = 0
    ips_weighting: bool = True


@dataclass(frozen=True)
class FPMParams(MonotoneParams):
    """fpm's hyper-parameters: the monotone models' and `curve` (four_parameter or logistic)."""

    curve: str = "four_parameter"


@dataclass(frozen=True)
class CMNNParams(MonotoneParams):
    """cmnn's hyper-parameters: the monotone models' and `activation` (relu, elu or clu)."""

    activation: str = "clu"


class _MonotoneModel(TorchResponseModel):
    """Shared estimator glue of dnn_m / fpm / cmnn: off by default, applies to campaigns with a
    monotone attribute. Hyper-parameters: `hidden` (the user network), `mono_hidden` (the monotone
    layers), `embedding_dim`, `lr`, `batch_size`, `max_epochs` (capped by PROMO_MAX_EPOCHS),
    `patience`, `weight_decay`, `seed`, `ips_weighting` (+ the model's own)."""

    default = False
    monotone = True
    applies = "incentive attributes with a monotone direction (ordered levels or `attributes:`)"
    source = "CoMAN paper §5.1 baselines"
    head = "cmnn"
    rules = {"hidden": WIDTHS, "mono_hidden": WIDTHS, "embedding_dim": COUNT, "lr": POSITIVE, "batch_size": COUNT,
             "max_epochs": COUNT, "patience": COUNT, "weight_decay": NON_NEGATIVE, "seed": SEED, "ips_weighting": FLAG}

    Params = MonotoneParams

    @classmethod
    def applies_to(cls, config: CampaignConfig) -> str | None:
        return no_monotone_attribute(config)

    def arch(self) -> Callable[[Any], dict[str, Any]]:
        p = self.params
        return lambda prep: dict(head=self.head, activation=getattr(p, "activation", "clu"),
                                 hidden=_list(p.hidden), mono_hidden=_list(p.mono_hidden),
                                 embedding_dim=int(p.embedding_dim))

    def _fit_phase(self, data: TrainingData, phase: str, previous, log) -> TrainedModel:
        return train_attribute_model(self.name, "monotone", data, self.get_params(), self.arch(),
                                     weighted=self.params.ips_weighting, seed=self.params.seed, log=log)


class DNNM(_MonotoneModel):
    name = "dnn_m"
    head = "dnn_m"
    title = "DNN-M: sign-constrained weights on the incentive attributes, sigmoid layers (monotone by construction)"


class FPM(_MonotoneModel):
    name = "fpm"
    head = "fpm"
    title = ("Four-parameter model: per-user r0, rmax, inflection x0 and slope k of a sigmoid response curve "
             "(curve: logistic = the SBBM-style logit demand curve)")
    CURVES = {"four_parameter": "fpm", "logistic": "sbbm"}
    rules = {**_MonotoneModel.rules, "curve": (lambda x: x in FPM.CURVES, "one of four_parameter, logistic")}

    Params = FPMParams

    def arch(self) -> Callable[[Any], dict[str, Any]]:
        base = super().arch()
        return lambda prep: {**base(prep), "head": self.CURVES[self.params.curve]}


class CMNN(_MonotoneModel):
    name = "cmnn"
    head = "cmnn"
    title = "CMNN: constrained monotonic layers, convex / concave / saturated blocks of one activation (relu, elu, clu)"
    source = "Runje & Shankaranarayana 2023; CoMAN paper §4"
    rules = {**_MonotoneModel.rules,
             "activation": (lambda x: x in CONVEX_ACTIVATIONS, f"one of {', '.join(CONVEX_ACTIVATIONS)}")}

    Params = CMNNParams
