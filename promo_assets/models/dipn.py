"""DIPN: the deep isotonic promotion network (DIPN paper §4), trained in two phases (§4.4).

Architecture (Figure 5), over the campaign's K ordered levels d_0 < ... < d_{K-1}:

- Isotonic embedding (Eq. 9): e_j(c) = 1 if c >= d_j else 0, so level l switches on digits 0..l.
- Bias net: the categorical features are embedded (one shared width, one table, index 0 of each
  column = unknown bucket) and the embeddings summed; the sum is concatenated with the dense
  (numeric) features and fed to ONE fully connected layer with a single output, activated by
  leaky ReLU: that is the bias logit b(x).
- Uplift net: its own summed embeddings + dense features + the bias prediction b(x) (frozen in this
  phase) -> an MLP with `hidden` layers (hidden=() is the paper's single FC layer; the benchmark uses
  the S-learner's hidden sizes for an equal-size comparison) -> K pre-activations z_j(x). The uplift
  weights are chained, each fed into the next:  q_0 = ReLU(z_0),  q_j = ReLU(z_j + u_j q_{j-1})
  (with `signed_offset` the chain starts at j = 1), and w_j = unit * q_j with the constant unit =
  uplift_scale / K (q is O(1), so Adam's steps stay small relative to the weights; without it the
  O(1/K) weights of a 100-level grid die at their first ReLU zero). Every w_j(x) >= 0 for j >= 1.
  The chain, the isotonic sum of Eq. 12 and the smoothness loss run in one compiled pass per user,
  forward and backward (`promo_assets.models.isotonic_kernel`, numba; measured reason there). The
  frozen bias b(x) is computed once per row for the whole uplift phase, not per step.
- Our documented deviation, `signed_offset=True` (default): w_0 = unit * z_0 is left unconstrained.
  Its digit e_0 is on at every level, so w_0 is an offset of the whole curve, never an uplift, and
  its sign cannot break monotonicity (Eq. 11 only sums w_j, j >= 1). It lets the uplift phase move
  the frozen bias down as well as up: with the paper's 100-level grid the bias phase sees 1% of the
  samples and its bias is nearly constant; with w_0 >= 0 users whose true level-0 response lies
  below it could never be fitted (measured: curve MAE 0.21 -> 0.08 on dipn_synthetic_2).
  `signed_offset=False` is the paper's literal w_0 = ReLU(z_0).
- Output (Eq. 12): f(x, c) = sigmoid(sum_j w_j(x) e_j(c) + b(x)), i.e. for level l the logit is
  b(x) + cumsum(w)_l. Because every w_j >= 0 and sigmoid is increasing, f is non-decreasing in the
  level by construction, whatever the weights (RPR = 0 exactly).
- Regression variant (documented choice) for `response: count` the same isotonic sum is the
  log-rate (f = exp(.), Poisson NLL) and for `response: continuous` it is the standardized response
  itself (identity link, squared error); both links are increasing, so monotonicity is kept.
- Cost for rule 'column' (our choice; the paper models the response only): a second isotonic head
  in the uplift net, cost_l = softplus(a(x) + cumsum(v)_l) with v = ReLU(.) >= 0, trained with squared
  error in the uplift phase. 'redeemed' and 'assigned' costs follow the rule (see base.py).

Loss (Eq. 14-16): L = (1/M) sum_i w^IPS_i log_loss(f(x_i, c_i), y_i) + alpha * smoothness_loss(w(x)),
with smoothness_loss(w) = (1/D) sum_j (s_{j+1} - s_j)^2 / (s_{j+1} s_j + eps) over the uplift slopes
s_j = (w_j / unit) * (mean gap / (d_j - d_{j-1})), j >= 1. For equally spaced levels (the paper's
setting) s_j is w_j up to a common factor, and the ratio is scale-free, so this is Eq. 16 up to eps;
for unequal spacing it compares uplift per unit of incentive. w_0 is left out: its digit is on at
every level, so it is an offset, not an uplift. eps (default 0.05, in units of the uplift unit) keeps
the ratio finite when a ReLU weight is 0 (the paper's formula is undefined there; with a tiny eps the
penalty drove neighbouring weights to 0 as well). alpha decays with the global step as Eq. 17:
alpha = max(alpha_l, alpha_u - gamma * global_step); by default gamma is set so that alpha reaches
alpha_l after `alpha_decay_epochs` (10) epochs of optimizer steps (`alpha_decay` sets gamma directly).

Phases (§4.4): `train_dipn_bias` trains the bias net on the lowest-level samples only (BLP);
`train_dipn_uplift` trains the uplift net on all samples with the bias net frozen (ULP).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from promo_assets.config.campaign import CampaignConfig
from promo_assets.models.base import (
    TorchResponseModel, TrainedModel, TrainingRecord, cost_loss, fit_metrics, frozen_for_scoring, numpy_of,
    numpy_relu_mlp, prepare_frame, register_architecture, relu_mlp, resolve_max_epochs, response_loss,
    summed_embedding_input,
)
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import (
    COUNT, FLAG, NON_NEGATIVE, POSITIVE, SEED, ModelSkipped, TrainingData, is_number, non_negative_number,
    positive_int,
)
from promo_assets.models.isotonic_kernel import chain_cum, isotonic_chain
from promo_assets.models.s_learner import initial_link, mlp
from promo_assets.models.training import MiniBatches, TrainingConfig, ValidationLoss, WeightedLoss, fit_torch_model, seeded

BIAS_DEFAULTS: dict[str, Any] = {
    "embedding_dim": 8,
    "leaky_slope": 0.1,
    "lr": 1e-2,
    "batch_size": 256,
    "max_epochs": 60,
    "patience": 6,
}
UPLIFT_DEFAULTS: dict[str, Any] = {
    "hidden": (64, 32),
    "embedding_dim": 8,
    "lr": 5e-3,
    "batch_size": 256,
    "max_epochs": 80,
    "patience": 6,
    "alpha_upper": 1.0,      # alpha_u of Eq. 17
    "alpha_lower": 0.01,     # alpha_l of Eq. 17
    "alpha_decay": None,     # gamma of Eq. 17 (per optimizer step); None: from alpha_decay_epochs
    "alpha_decay_epochs": 10,  # gamma = (alpha_u - alpha_l) / (this many epochs' optimizer steps)
    "smooth_eps": 0.05,
    "chain_init": 0.0,       # initial carry factor u_j of the uplift chain
    "signed_offset": True,
    "uplift_scale": 4.0,
}


class SummedEmbedding(nn.Module):
    """Categorical columns one-hot encoded, mapped to one width and summed (DIPN Figure 5)."""

    def __init__(self, cardinalities: list[int], dim: int):
        super().__init__()
        self.register_buffer("offsets", summed_embedding_input(list(cardinalities)), persistent=False)
        self.n_fields = len(cardinalities)
        self.dim = int(dim)
        self.table = nn.Embedding(max(1, int(sum(cardinalities))), self.dim)
        nn.init.normal_(self.table.weight, std=0.1)

    def forward(self, x_cat: torch.Tensor) -> torch.Tensor:
        if self.n_fields == 0:
            return torch.zeros(x_cat.shape[0], self.dim)
        return self.table(x_cat + self.offsets).sum(1)


@dataclass(frozen=True)
class DIPNShape:
    """DIPNNet's shape and starting point (its artefact's `arch_kwargs`)."""

    n_numeric: int
    cardinalities: list[int]
    incentives: list[float]
    hidden: tuple[int, ...] | list[int] = (64, 32)
    bias_embedding_dim: int = 8
    uplift_embedding_dim: int = 8
    leaky_slope: float = 0.1
    cost_head: bool = False
    phase: str = "bias"
    bias_init: float = 0.0
    chain_init: float = 0.0
    signed_offset: bool = False
    uplift_scale: float = 4.0


@dataclass(frozen=True)
class _Chain:
    """One pass of the uplift chain: `q` the chained uplift weights in units of `unit` (w = unit q),
    `cum` their isotonic sum (cumsum over the levels), `smooth` the Eq. 16 loss
    (models.isotonic_kernel; NaN when not computed) and `h` the trunk output."""

    q: torch.Tensor
    cum: torch.Tensor
    smooth: torch.Tensor
    h: torch.Tensor


@register_architecture("dipn")
class DIPNNet(nn.Module):
    """Bias net + uplift net + isotonic layer. `phase` 'bias' predicts b(x) at every level (the
    BLP model); 'full' predicts Eq. 12."""

    # 2: compiled chain (models.isotonic_kernel); with signed_offset the chain starts at j = 1
    architecture_version = 2

    Shape = DIPNShape

    def __init__(self, shape: DIPNShape):
        super().__init__()
        n_numeric, cardinalities, incentives, hidden = shape.n_numeric, shape.cardinalities, shape.incentives, shape.hidden
        bias_embedding_dim, uplift_embedding_dim = shape.bias_embedding_dim, shape.uplift_embedding_dim
        leaky_slope, cost_head, phase, bias_init = shape.leaky_slope, shape.cost_head, shape.phase, shape.bias_init
        chain_init, signed_offset, uplift_scale = shape.chain_init, shape.signed_offset, shape.uplift_scale
        if phase not in ("bias", "full"):
            raise ModelInputError(f"DIPN phase must be 'bias' or 'full', got {phase!r}")
        self.phase = phase
        self.n_levels = len(incentives)
        gaps = np.diff(np.asarray(incentives, dtype=np.float64))
        if (gaps <= 0).any():
            raise ModelInputError("DIPN needs strictly ascending incentive levels")
        # slope factor per level (Eq. 16 on uplift per mean gap; all ones for equally spaced levels)
        self.slope_factor = np.concatenate([[1.0], gaps.mean() / gaps]).astype(np.float32)
        self.leaky_slope = float(leaky_slope)
        # bias net: summed embeddings + dense -> one FC -> leaky ReLU logit
        self.bias_embedding = SummedEmbedding(list(cardinalities), bias_embedding_dim)
        self.bias_fc = nn.Linear(bias_embedding_dim + n_numeric, 1)
        with torch.no_grad():
            # start at the lowest level's mean response: leaky_relu(b) = bias_init
            b = float(bias_init)
            self.bias_fc.bias.fill_(b if b >= 0 else b / self.leaky_slope)
        # uplift net: summed embeddings + dense + bias prediction -> MLP -> K chained ReLU weights
        self.uplift_embedding = SummedEmbedding(list(cardinalities), uplift_embedding_dim)
        self.uplift_trunk, h = mlp(uplift_embedding_dim + n_numeric + 1, tuple(hidden))
        self.uplift_out = nn.Linear(h, self.n_levels)
        self.signed_offset = bool(signed_offset)
        # carry factors u_j of the uplift chain q_j = ReLU(z_j + u_j q_{j-1}) (u_0 unused), any sign
        self.chain = nn.Parameter(torch.full((self.n_levels,), float(chain_init)))
        # w_j = unit * q_j with q_j the chained ReLU outputs: q is O(1), so Adam's steps are small
        # relative to it (a constant positive factor keeps w_j >= 0 and the ReLU activation)
        self.unit = float(uplift_scale) / self.n_levels
        with torch.no_grad():
            # start from a straight, live logit curve: q_j = 0.5 for every level
            self.uplift_out.weight.mul_(0.1)
            self.uplift_out.bias.fill_(0.5)
            if chain_init != 0:
                self.uplift_out.bias[1:] = 0.5 * (1.0 - float(chain_init))
        self.has_cost_head = bool(cost_head)
        if cost_head:
            self.cost_out = nn.Linear(h, self.n_levels + 1)

    def bias_parameters(self) -> list[nn.Parameter]:
        return list(self.bias_embedding.parameters()) + list(self.bias_fc.parameters())

    def uplift_parameters(self) -> list[nn.Parameter]:
        bias_ids = {id(p) for p in self.bias_parameters()}
        return [p for p in self.parameters() if id(p) not in bias_ids]

    def bias_logit(self, x_num: torch.Tensor, x_cat: torch.Tensor) -> torch.Tensor:
        """b(x): leaky-ReLU output of the bias net's single FC layer, shape (N,)."""
        z = self.bias_fc(torch.cat([self.bias_embedding(x_cat), x_num], dim=1)).squeeze(1)
        return F.leaky_relu(z, self.leaky_slope)

    def _chain(self, x_num: torch.Tensor, x_cat: torch.Tensor, bias: torch.Tensor, smooth_eps: float | None) -> "_Chain":
        """The chained uplift weights, their isotonic sum, the Eq. 16 loss and the trunk output (`_Chain`)."""
        h = self.uplift_trunk(torch.cat([self.uplift_embedding(x_cat), x_num, bias.unsqueeze(1)], dim=1))
        z = self.uplift_out(h)
        q, cum, smooth = isotonic_chain(z, self.chain, self.slope_factor, self.signed_offset, smooth_eps)
        return _Chain(q, cum, smooth, h)

    def uplift(self, x_num: torch.Tensor, x_cat: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(uplift weights w(x) (N x K), trunk representation h); w_j >= 0 for j >= 1, and for j = 0
        too unless `signed_offset`."""
        chain = self._chain(x_num, x_cat, bias, None)
        return chain.q * self.unit, chain.h

    def forward_all(self, x_num: torch.Tensor, x_cat: torch.Tensor, bias: torch.Tensor | None = None,
                    smooth_eps: float | None = None):
        """(response logits N x K, cost raw N x K or None, smoothness loss (Eq. 16) or None). `bias`:
        the frozen bias net's b(x) when the caller has it already (the uplift phase computes it once);
        `smooth_eps`: compute the smoothness loss with this eps (None: skip it, as for scoring)."""
        b = self.bias_logit(x_num, x_cat) if bias is None else bias
        if self.phase == "bias":
            return b.unsqueeze(1).expand(-1, self.n_levels), None, None
        chain = self._chain(x_num, x_cat, b.detach(), smooth_eps)
        smooth = None if smooth_eps is None else chain.smooth
        logits = chain.cum * self.unit + b.unsqueeze(1)    # Eq. 12 with e_j(d_l) = [j <= l]
        cost = None
        if self.has_cost_head:
            c = self.cost_out(chain.h)
            cost = c[:, :1] + torch.cumsum(torch.relu(c[:, 1:]), dim=1)
        return logits, cost, smooth

    def curves(self, x_num: torch.Tensor, x_cat: torch.Tensor):
        logits, cost, _ = self.forward_all(x_num, x_cat)
        return logits, cost

    def numpy_curves(self):
        """`curves` for one user in NumPy float64 (`TrainedModel._numpy_pass`), the uplift chain by its
        float32 kernel (`chain_cum`, as the traced pass): a callable (x_num (P,) float32, x_cat (Q,)
        int64) -> (logits (K,), cost raw (K,) or None); None when the trunk is not a plain Linear ->
        ReLU stack."""
        k, slope = self.n_levels, self.leaky_slope
        bias_table, offsets = numpy_of(self.bias_embedding.table.weight), self.bias_embedding.offsets.numpy().copy()
        bias_w, bias_b = numpy_of(self.bias_fc.weight)[0], float(self.bias_fc.bias.detach()[0])
        fields, dim = self.bias_embedding.n_fields, self.uplift_embedding.dim

        def bias(x_num, x_cat):
            e = bias_table[x_cat + offsets].sum(0) if fields else np.zeros(self.bias_embedding.dim)
            z = float(bias_w @ np.concatenate([e, x_num])) + bias_b
            return z if z >= 0 else slope * z

        if self.phase == "bias":
            return lambda x_num, x_cat: (np.full(k, bias(x_num, x_cat)), None)
        trunk = numpy_relu_mlp(self.uplift_trunk)
        if trunk is None:
            return None
        table = numpy_of(self.uplift_embedding.table.weight)
        out_w, out_b = numpy_of(self.uplift_out.weight), numpy_of(self.uplift_out.bias)
        u = self.chain.detach().float().numpy().copy()
        factor, signed, unit = np.asarray(self.slope_factor, dtype=np.float32), bool(self.signed_offset), self.unit
        cost_w, cost_b = ((numpy_of(self.cost_out.weight), numpy_of(self.cost_out.bias)) if self.has_cost_head
                          else (None, None))

        def curves(x_num: np.ndarray, x_cat: np.ndarray):
            b = bias(x_num, x_cat)
            e = table[x_cat + offsets].sum(0) if fields else np.zeros(dim)
            h = relu_mlp(np.concatenate([e, x_num, [b]]), trunk)
            z = out_w @ h + out_b
            logits = chain_cum(z.astype(np.float32).reshape(1, k), u, factor, signed)[0].astype(np.float64) * unit + b
            if cost_w is None:
                return logits, None
            c = cost_w @ h + cost_b
            return logits, c[0] + np.cumsum(np.maximum(c[1:], 0.0))

        return curves

    def traced_curves(self, x_num: torch.Tensor, x_cat: torch.Tensor):
        """`curves` for scoring with the networks around the uplift chain traced by TorchScript (the
        chain, a numba kernel, cannot be traced; `TrainedModel.compile` keeps this only when it gives
        exactly `curves`' numbers), or None for the bias phase (its `curves` traces whole)."""
        if self.phase != "full":
            return None
        trunk = frozen_for_scoring(torch.jit.trace(_Trunk(self).eval(), (x_num, x_cat), check_trace=False))
        unit, factor, signed, cost_head = self.unit, np.asarray(self.slope_factor, dtype=np.float32), \
            bool(self.signed_offset), self.has_cost_head
        u = self.chain.detach().float().numpy()  # a view of the chain's parameter, as isotonic_chain reads it

        def curves(a: torch.Tensor, b: torch.Tensor):  # scoring only (inference mode): the chain's kernel called directly
            bias, z, h = trunk(a, b)
            cum = torch.from_numpy(chain_cum(z.contiguous().numpy(), u, factor, signed))
            logits = cum * unit + bias.unsqueeze(1)
            if not cost_head:
                return (logits,)
            c = self.cost_out(h)
            return logits, c[:, :1] + torch.cumsum(torch.relu(c[:, 1:]), dim=1)

        return curves


class _Trunk(nn.Module):
    """DIPN's scoring pass up to its uplift chain: (b(x), the chain's pre-activations z, the trunk's h)."""

    def __init__(self, net: DIPNNet):
        super().__init__()
        self.net = net

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor):
        b = self.net.bias_logit(x_num, x_cat)
        h = self.net.uplift_trunk(torch.cat([self.net.uplift_embedding(x_cat), x_num, b.unsqueeze(1)], dim=1))
        return b, self.net.uplift_out(h), h

def isotonic_embedding(levels: np.ndarray | torch.Tensor, n_levels: int) -> torch.Tensor:
    """Eq. 9 over level indices: e_j(l) = 1 if j <= l else 0 (N x K float)."""
    lv = torch.as_tensor(levels, dtype=torch.int64).reshape(-1, 1)
    return (torch.arange(n_levels).reshape(1, -1) <= lv).to(torch.float32)


def alpha_at(step: int, alpha_upper: float, alpha_lower: float, alpha_decay: float) -> float:
    """Eq. 17: alpha = max(alpha_l, alpha_u - gamma * global_step)."""
    return max(alpha_lower, alpha_upper - alpha_decay * step)


def _check_ordered(config: CampaignConfig) -> None:
    if not config.ordered:
        raise ModelInputError(f"DIPN needs ordered incentive levels; campaign {config.campaign!r} has unordered arms")


def _check_hparams(hparams: dict, defaults: dict, what: str) -> dict:
    unknown = sorted(set(hparams) - set(defaults))
    if unknown:
        raise ModelInputError(f"unknown {what} hyper-parameters: {unknown}; known: {sorted(defaults)}")
    return {**defaults, **hparams}


def train_dipn_bias(data: TrainingData, *, weighted: bool = True, seed: int = 0, max_epochs: int | None = None,
                    log: Callable[[str], None] | None = None, hidden=(64, 32), uplift_embedding_dim: int = 16,
                    **hparams: Any) -> TrainedModel:
    """Bias-net learning phase (DIPN §4.4, BLP) on `data` (its frame, config and feature columns): fit
    the encoder on all 'train' rows, then train the
    bias net on the lowest-level (level 0) rows only, IPS-weighted log loss (or the regression loss),
    early-stopping on the lowest-level 'validation' rows. `hidden` and `uplift_embedding_dim` fix the
    uplift net's shape for the next phase. `hparams` override BIAS_DEFAULTS. Returns a TrainedModel
    named 'dipn_bias' whose predictions are b(x) at every level."""
    frame, config, numeric, categorical = data.frame, data.config, data.numeric, data.categorical
    _check_ordered(config)
    hp = _check_hparams(hparams, BIAS_DEFAULTS, "DIPN bias-phase")
    epochs = resolve_max_epochs(hp["max_epochs"], max_epochs)
    prep = prepare_frame(frame, config, list(numeric), list(categorical), weighted,
                         row_filter=lambda f: f["level"].astype("int64") == 0)
    if prep.n_train == 0:  # skipped, not failed: the other models still run
        raise ModelSkipped(f"level {config.labels[0]!r} (the lowest, index 0) of campaign {config.campaign!r} has no "
                           "training events (never logged in the training days); DIPN learns its baseline at that level")
    kind = config.response
    arch_kwargs = dict(n_numeric=prep.encoder.n_numeric, cardinalities=prep.encoder.cardinalities,
                       incentives=list(config.incentives), hidden=[int(h) for h in hidden],
                       bias_embedding_dim=int(hp["embedding_dim"]), uplift_embedding_dim=int(uplift_embedding_dim),
                       leaky_slope=float(hp["leaky_slope"]), cost_head=config.cost == "column", phase="bias",
                       bias_init=initial_link(kind, float(prep.train["response"].mean())))
    with seeded(seed):
        net = DIPNNet(DIPNShape(**arch_kwargs))

    def loss_fn(module: DIPNNet, batch, step):
        return response_loss(module.bias_logit(batch["x_num"], batch["x_cat"]), batch["response"], kind), None

    tc = TrainingConfig(max_epochs=epochs, batch_size=int(hp["batch_size"]), lr=float(hp["lr"]),
                        patience=int(hp["patience"]))
    t0 = time.perf_counter()
    loss = WeightedLoss(loss_fn, "weight" if weighted else None)
    fit = fit_torch_model(net, loss, MiniBatches(prep.train, tc.batch_size, seed),
                          ValidationLoss(loss, prep.validation, prep.train), tc, parameters=net.bias_parameters(),
                          log=log, label="dipn_bias")
    metrics = fit_metrics(fit, prep, net, weighted, t0)
    hp_out = {**hp, "hidden": [int(h) for h in hidden], "uplift_embedding_dim": int(uplift_embedding_dim),
              "max_epochs": epochs, "seed": seed, "weighted": bool(weighted),
              "numeric": list(numeric), "categorical": list(categorical)}
    return TrainedModel("dipn_bias", net, prep.encoder, config, prep.targets,
                        TrainingRecord(hp_out, metrics, fit.history), arch_kwargs)


def train_dipn_uplift(bias_model: TrainedModel, frame: pd.DataFrame, weighted: bool = True, seed: int = 0,
                      max_epochs: int | None = None, log: Callable[[str], None] | None = None,
                      **hparams: Any) -> TrainedModel:
    """Uplift-net learning phase (DIPN §4.4, ULP): all 'train' rows, bias net frozen (copied from
    `bias_model`, a 'dipn_bias' TrainedModel, whose encoder is reused unchanged). Loss: IPS-weighted
    log loss of Eq. 12 (or the regression loss) + alpha * smoothness (Eq. 16), alpha decaying per
    Eq. 17; early stopping on the weighted validation loss without the penalty. `hparams` override
    UPLIFT_DEFAULTS except `hidden`/`embedding_dim`, fixed by the bias phase. Returns a TrainedModel
    named 'dipn'."""
    if not isinstance(bias_model, TrainedModel) or bias_model.name != "dipn_bias":
        raise ModelInputError("train_dipn_uplift needs the TrainedModel returned by train_dipn_bias")
    config = bias_model.config
    _check_ordered(config)
    fixed = {"hidden", "embedding_dim"} & set(hparams)
    if fixed:
        raise ModelInputError(f"{sorted(fixed)} are fixed by the bias phase; pass them to train_dipn_bias")
    hp = _check_hparams(hparams, UPLIFT_DEFAULTS, "DIPN uplift-phase")
    hp["hidden"] = list(bias_model.arch_kwargs["hidden"])
    hp["embedding_dim"] = bias_model.arch_kwargs["uplift_embedding_dim"]
    epochs = resolve_max_epochs(hp["max_epochs"], max_epochs)
    enc = bias_model.encoder
    prep = prepare_frame(frame, config, enc.numeric, enc.categorical, weighted, encoder=enc,
                         targets=bias_model.targets)
    kind = config.response
    has_cost = config.cost == "column"
    arch_kwargs = {**bias_model.arch_kwargs, "phase": "full", "chain_init": float(hp["chain_init"]),
                   "signed_offset": bool(hp["signed_offset"]),
                   "uplift_scale": float(hp["uplift_scale"])}
    with seeded(seed):
        net = DIPNNet(DIPNShape(**arch_kwargs))
    # the bias net comes from the bias phase; the uplift net is drawn fresh with this phase's seed
    bias_state = {k: v.detach().clone() for k, v in bias_model.module.state_dict().items()
                  if k.startswith(("bias_embedding.", "bias_fc."))}
    missing = net.load_state_dict(bias_state, strict=False)
    if missing.unexpected_keys:
        raise ModelInputError(f"bias model state does not fit the DIPN net: {missing.unexpected_keys}")
    for p in net.bias_parameters():
        p.requires_grad_(False)
    # the bias net is frozen, so b(x) is a constant of this phase: computed once per row, not per step
    with torch.no_grad():
        for part in (prep.train, prep.validation):
            if part["x_num"].shape[0]:
                part["bias"] = net.bias_logit(part["x_num"], part["x_cat"])
            else:
                part["bias"] = part["x_num"].new_zeros(0)
    a_u, a_l, eps = float(hp["alpha_upper"]), float(hp["alpha_lower"]), float(hp["smooth_eps"])
    if hp["alpha_decay"] is not None:
        gamma = float(hp["alpha_decay"])
    else:
        steps_per_epoch = max(1, math.ceil(prep.n_train / int(hp["batch_size"])))
        gamma = (a_u - a_l) / max(1e-12, float(hp["alpha_decay_epochs"]) * steps_per_epoch)
    hp["alpha_decay"] = gamma

    def loss_fn(module: DIPNNet, batch, step):
        training = step is not None
        logits, cost, smooth = module.forward_all(batch["x_num"], batch["x_cat"], bias=batch["bias"],
                                                  smooth_eps=eps if training else None)
        lvl = batch["level"].unsqueeze(1)
        loss = response_loss(logits.gather(1, lvl).squeeze(1), batch["response"], kind)
        if has_cost:
            loss = loss + cost_loss(cost.gather(1, lvl).squeeze(1), batch["cost"])
        penalty = None
        if training:
            penalty = alpha_at(step, a_u, a_l, gamma) * smooth
        return loss, penalty

    tc = TrainingConfig(max_epochs=epochs, batch_size=int(hp["batch_size"]), lr=float(hp["lr"]),
                        patience=int(hp["patience"]))
    t0 = time.perf_counter()
    loss = WeightedLoss(loss_fn, "weight" if weighted else None)
    fit = fit_torch_model(net, loss, MiniBatches(prep.train, tc.batch_size, seed),
                          ValidationLoss(loss, prep.validation, prep.train), tc, parameters=net.uplift_parameters(),
                          log=log, label="dipn_uplift")
    for p in net.parameters():
        p.requires_grad_(True)
    metrics = {
        **fit_metrics(fit, prep, net, weighted, t0, final_alpha=alpha_at(fit.steps, a_u, a_l, gamma)),
        "bias_validation_loss": bias_model.metrics.get("validation_loss"),
        "bias_epochs": bias_model.metrics.get("epochs"),
        "bias_best_epoch": bias_model.metrics.get("best_epoch"),
        "bias_version": bias_model.version,
    }
    if "seconds_per_epoch" in bias_model.metrics:
        metrics["bias_seconds_per_epoch"] = bias_model.metrics["seconds_per_epoch"]
    hp_out = {**hp, "max_epochs": epochs, "seed": seed, "weighted": bool(weighted),
              "bias_hparams": bias_model.hparams}
    history = [{**h, "phase": "bias"} for h in bias_model.history] + [{**h, "phase": "uplift"} for h in fit.history]
    return TrainedModel("dipn", net, enc, config, prep.targets, TrainingRecord(hp_out, metrics, history), arch_kwargs)


def train_dipn(data: TrainingData, *, weighted: bool = True, seed: int = 0, max_epochs: int | None = None,
               log: Callable[[str], None] | None = None, hidden=(64, 32), bias: dict | None = None,
               **uplift_hparams: Any) -> TrainedModel:
    """Both phases in one call on `data`: train_dipn_bias then train_dipn_uplift (same seed, same epoch
    cap). `bias` holds bias-phase hyper-parameters (BIAS_DEFAULTS keys); the rest go to the uplift phase."""
    bias_model = train_dipn_bias(data, weighted=weighted, seed=seed, max_epochs=max_epochs, log=log, hidden=hidden,
                                 uplift_embedding_dim=int(uplift_hparams.pop("embedding_dim", 16)),
                                 **(bias or {}))
    return train_dipn_uplift(bias_model, data.frame, weighted=weighted, seed=seed, max_epochs=max_epochs, log=log,
                             **uplift_hparams)


@dataclass(frozen=True)
class DipnParams:
    """DIPN's hyper-parameters (campaign.yaml `models.params.dipn`): the uplift phase's, then the bias
    phase's (`bias_*`), the seed of both phases and the IPS weighting."""

    hidden: tuple[int, ...] = (64, 32)
    embedding_dim: int = 16
    lr: float = 5e-3
    batch_size: int = 256
    max_epochs: int = 80
    patience: int = 6
    alpha_upper: float = 1.0
    alpha_lower: float = 0.01
    alpha_decay: float | None = None
    alpha_decay_epochs: float = 10
    smooth_eps: float = 0.05
    chain_init: float = 0.0
    signed_offset: bool = True
    uplift_scale: float = 4.0
    bias_embedding_dim: int = 8
    bias_leaky_slope: float = 0.1
    bias_lr: float = 1e-2
    bias_batch_size: int = 256
    bias_max_epochs: int = 60
    bias_patience: int = 6
    seed: int = 0
    ips_weighting: bool = True


class DIPN(TorchResponseModel):
    """Registry entry `dipn`: DIPN's two phases as an estimator, one asset each: "bias_net"
    (`train_dipn_bias`, a fitted 'dipn_bias') then "uplift_net" (`train_dipn_uplift` on the bias net,
    the 'dipn' model). Ordered levels only.

    Hyper-parameters: the uplift net's `hidden` widths and `embedding_dim`, its phase's `lr`,
    `batch_size`, `max_epochs`, `patience`, the smoothness loss's `alpha_upper`, `alpha_lower`,
    `alpha_decay` (gamma of Eq. 17 per step; null: from `alpha_decay_epochs`), `smooth_eps`, the
    uplift chain's `chain_init`, `signed_offset` and `uplift_scale` (module docstring); the bias
    phase's `bias_embedding_dim`, `bias_leaky_slope`, `bias_lr`, `bias_batch_size`, `bias_max_epochs`,
    `bias_patience`; `seed` (both phases) and `ips_weighting`."""

    name = "dipn"
    title = "DIPN: bias net, then uplift net with isotonic embedding (monotone in the level), smoothness loss"
    source = "DIPN paper §4 (two-phase training §4.4)"
    phases = ("bias_net", "uplift_net")
    applies = "ordered incentive levels (`treatments: levels`)"
    monotone = True
    rules = {"hidden": (lambda x: isinstance(x, (list, tuple)) and all(positive_int(v) for v in x),
                        "a list of integers >= 1 (empty: the paper's single layer)"),
             "embedding_dim": COUNT, "lr": POSITIVE, "batch_size": COUNT, "max_epochs": COUNT, "patience": COUNT,
             "alpha_upper": NON_NEGATIVE, "alpha_lower": NON_NEGATIVE,
             "alpha_decay": (lambda x: x is None or non_negative_number(x), "null or a number >= 0"),
             "alpha_decay_epochs": POSITIVE, "smooth_eps": POSITIVE, "chain_init": (is_number, "a number"),
             "signed_offset": FLAG, "uplift_scale": POSITIVE, "bias_embedding_dim": COUNT,
             "bias_leaky_slope": NON_NEGATIVE, "bias_lr": POSITIVE, "bias_batch_size": COUNT, "bias_max_epochs": COUNT,
             "bias_patience": COUNT, "seed": SEED, "ips_weighting": FLAG}

    Params = DipnParams

    def _check_values(self) -> list[str]:
        p = self.params
        if is_number(p.alpha_upper) and is_number(p.alpha_lower) and p.alpha_lower > p.alpha_upper:
            return [f"alpha_lower = {p.alpha_lower!r}: expected at most alpha_upper ({p.alpha_upper!r})"]
        return []

    @classmethod
    def applies_to(cls, config: CampaignConfig) -> str | None:
        if config.ordered:
            return None
        if config.multi_attribute:
            return (f"needs one increasing incentive amount (its isotonic embedding is monotone in a single input); "
                    f"this campaign's levels have {len(config.attribute_names)} attributes "
                    f"({', '.join(config.attribute_names)})")
        return "needs ordered incentive levels (campaign.yaml treatments: levels); this campaign has unordered arms"

    def phase_params(self, phase: str) -> dict[str, Any]:
        """The keyword arguments of `train_dipn_bias` ("bias_net") or `train_dipn_uplift` ("uplift_net")."""
        p = self.params
        if phase == "bias_net":
            return {"hidden": tuple(p.hidden), "uplift_embedding_dim": int(p.embedding_dim),
                    **{k: getattr(p, f"bias_{k}") for k in BIAS_DEFAULTS}}
        return {k: getattr(p, k) for k in UPLIFT_DEFAULTS if k not in ("hidden", "embedding_dim")}

    def _fit_phase(self, data: TrainingData, phase: str, previous, log) -> TrainedModel:
        weighted, seed = self.params.ips_weighting, self.params.seed
        if phase == "bias_net":
            return train_dipn_bias(data, weighted=weighted, seed=seed, log=log, **self.phase_params(phase))
        return train_dipn_uplift(previous, data.frame, weighted=weighted, seed=seed, log=log,
                                 **self.phase_params(phase))

    @classmethod
    def _phase_of(cls, fitted) -> str:
        return "bias_net" if fitted.name == "dipn_bias" else "uplift_net"
