"""Decision-focused causal learning (DFCL, Meituan KDD 2024, §4-§5; issue #16).

One model for every budget: the S-learner's network (models.s_learner.SLearnerNet), warm-started
from the trained S-learner (`train_s_learner`, same seed and hyper-parameters: the `s_learner`
model's weights), then fine-tuned on

    L = alpha * L_pred + L_dec

- L_pred: the IPW prediction loss (Eq. 3): the S-learner's own per-sample loss (cross-entropy /
  Poisson / squared error on the logged level's response head, squared error on its cost head),
  weighted by the frame's IPS weights `ips_weight` (for a uniform RCT proportional to 1 / N_t).
- L_dec: the dual decision loss (§5.1) averaged over a grid Lambda of multipliers. For one lambda
  and predictions v_hat, c_hat (N x K, expected response and cost in the campaign's units, cost by
  its cost rule) the decision is the project's one rule d_i(lambda) = argmax_j a_ij, a = v_hat -
  lambda c_hat (allocation/decision.py, its tie rule), and the loss is minus the RCT estimate of
  the dual objective V - lambda C of that decision. Its gradient comes from one of:
  * 'pl'  (§5.2, policy learning): L = -(1/|Lambda|) sum_lambda sum_i w_i (y_i - lambda z_i)
          p_{i,t_i}(lambda) / sum_i w_i, p_i(lambda) = softmax_j(a_ij): the softmax relaxation of
          the argmax with each level's reward read from the matched RCT samples (w: IPS weights,
          t_i the logged level, y_i / z_i the observed response and cost).
  * 'mer' (§5.3, maximum-entropy regularized): the same with softmax(a / tau), temperature tau > 0.
  * 'ifd' (§5.4 and App. D, improved finite differences): `ifd_gradient` below.
- The lambda grid (`lambda_grid`): `grid_size` budgets evenly spaced over the campaign's
  `budget_per_capita` range [min, max] (one budget: that budget; grid_size 1: the middle of the
  range); each budget's lambda* is the MCKP dual optimum (allocation.solve, per capita) of the
  warm-start S-learner's predictions on the training users. `lambdas` (a non-empty list) replaces
  the derived grid. So each lambda stands for one budget of the campaign (§4.2, §5.1).
- Early stopping / model selection: the mean over the grid of the EOM dual objective V - lambda C
  on the validation rows (what the authors' code selects on: the validation decision metric),
  starting from the warm start (epoch 0: kept when fine-tuning never beats it).

IFD, in reduced-value space (our formulation, equivalent to the paper's separate perturbations of
r_hat and c_hat before clipping): for each sample i and level j, delta_ij is the smallest change of
a_ij that flips i's decision (plus a tiny margin): a_{i,d} - a_ij for j != d (the decision becomes
j) and -(a_{i,d} - a_{i,s}) for j = d (it becomes the runner-up s, chosen by the same rule). The
change of the batch's EOM dual objective after that flip is computed incrementally (`eom_change`:
only i's term enters or leaves the self-normalized IPW sums; it is non-zero only when i starts or
stops matching its logged level), and g_ij = change / delta_ij (clipped: 'fix' uses +-h for the
entries with |delta| < h and drops the others, the reference implementation's rule; 'max' uses the
batch's largest |delta| for all; 'none' the raw delta). The surrogate -sum_ij a_ij stopgrad(g_ij)
has gradient -g on v_hat and +lambda g on c_hat: the paper's dQ/dr and dQ/dc.

No dagster here.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from promo_assets.allocation import solve
from promo_assets.allocation.decision import choose_levels, decide_at_lambdas
from promo_assets.allocation.errors import InfeasibleBudgetError
from promo_assets.config.campaign import CampaignConfig
from promo_assets.evaluation.eom import eom_batch, lambda_upper_bound
from promo_assets.models.base import (
    TorchResponseModel,
    TrainedModel,
    TrainingRecord,
    fit_metrics,
    prepare_frame,
    resolve_max_epochs,
    response_mean,
)
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import COUNT, FLAG, SEED, TrainingData
from promo_assets.models.s_learner import _s_learner_loss, warm_start
from promo_assets.models.training import Metric, MiniBatches, TrainingConfig, WeightedLoss, fit_torch_model

GRADIENTS = ("pl", "mer", "ifd")
CLIPS = ("fix", "max", "none")
FLIP_MARGIN = 1e-9  # added to the smallest flipping perturbation so that the decision strictly flips


# ----------------------------------------------------------------------------------- the grid
def check_grid_params(params: dict[str, Any]) -> list[str]:
    """Problems with DFCL's hyper-parameters (alpha, grid_size, lambdas, tau, clip, h, lr, ...)."""
    out = []
    alpha = params.get("alpha")
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha >= 0):
        out.append(f"alpha = {alpha!r}: the prediction-loss weight must be a finite number >= 0")
    size = params.get("grid_size")
    if not (isinstance(size, int) and not isinstance(size, bool) and 1 <= size <= 1000):
        out.append(f"grid_size = {size!r}: the number of lambda values must be an integer in 1..1000")
    lams = params.get("lambdas")
    if not isinstance(lams, (list, tuple)):
        out.append(f"lambdas = {lams!r}: must be a list of multipliers (empty: derived from the budgets)")
    else:
        bad = [x for x in lams if isinstance(x, bool) or not isinstance(x, (int, float))
               or not math.isfinite(x) or x < 0]
        if bad:
            out.append(f"lambdas = {list(lams)!r}: every multiplier must be a finite number >= 0 "
                       f"(bad: {bad[:3]!r})")
        elif len(set(map(float, lams))) != len(lams):
            out.append(f"lambdas = {list(lams)!r}: the grid has repeated values")
    if "tau" in params:
        tau = params["tau"]
        if not (isinstance(tau, (int, float)) and not isinstance(tau, bool) and math.isfinite(tau) and tau > 0):
            out.append(f"tau = {tau!r}: the temperature must be a finite number > 0")
    if "clip" in params and params["clip"] not in CLIPS:
        out.append(f"clip = {params['clip']!r}: must be one of {', '.join(CLIPS)}")
    if "h" in params:
        h = params["h"]
        if not (isinstance(h, (int, float)) and math.isfinite(h) and h > 0):
            out.append(f"h = {h!r}: the clipping threshold must be a finite number > 0")
    for key in ("lr",):
        v = params.get(key)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            out.append(f"{key} = {v!r}: must be a finite number > 0")
    for key in ("batch_size", "max_epochs", "patience"):
        v = params.get(key)
        if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            out.append(f"{key} = {v!r}: must be an integer >= 1")
    return out


def grid_budgets(budgets: list[float] | tuple[float, ...], grid_size: int) -> np.ndarray:
    """`grid_size` per-capita budgets evenly spaced over [min, max] of the campaign's budgets
    (grid_size 1: the middle of the range)."""
    b = np.asarray(sorted(float(x) for x in budgets), dtype=np.float64)
    if b.size == 0:
        raise ModelInputError("DFCL needs the campaign's budget_per_capita to derive its lambda grid")
    if grid_size < 1:
        raise ModelInputError(f"grid_size must be >= 1, got {grid_size}")
    if grid_size == 1:
        return np.array([0.5 * (b[0] + b[-1])])
    return np.linspace(b[0], b[-1], grid_size)


def lambda_grid(response: np.ndarray, cost: np.ndarray, budgets, grid_size: int) -> np.ndarray:
    """The lambda grid: lambda* (per-capita MCKP dual optimum, allocation.solve) of `values`,
    `costs` (N x K predictions) at each of `grid_budgets(budgets, grid_size)`, ascending, unique.
    A budget at or above the unconstrained cost gives lambda 0; one below the predicted cheapest
    allocation (a cost head that does not reach 0 early in training) gives the smallest lambda at
    which every user takes a cheapest level (evaluation.eom.lambda_upper_bound)."""
    lams = []
    for b in grid_budgets(budgets, grid_size):
        try:
            lam = float(solve(response, cost, float(b), per_capita=True).lambda_)
        except InfeasibleBudgetError:  # predicted cheapest allocation dearer than b: everyone cheapest
            lam = lambda_upper_bound(response, cost)
        lams.append(lam if math.isfinite(lam) else 0.0)
    return np.unique(np.asarray(lams, dtype=np.float64))


# ------------------------------------------------------------------------------ the surrogates
def reduced_values(response: torch.Tensor, cost: torch.Tensor, lambdas) -> torch.Tensor:
    """a = v - lambda c for every multiplier: L x N x K."""
    lam = torch.as_tensor(np.asarray(lambdas, dtype=np.float64), dtype=response.dtype).view(-1, 1, 1)
    return response.unsqueeze(0) - lam * cost.unsqueeze(0)


def policy_loss(coefficients, logged: torch.Tensor, response: torch.Tensor,
                cost: torch.Tensor, weight: torch.Tensor | None, lambdas, tau: float = 1.0) -> torch.Tensor:
    """PL (tau = 1, §5.2) / MER (temperature tau, §5.3) surrogate of the dual decision loss:
    -(1/L) sum_l sum_i w_i (y_i - lambda_l z_i) softmax_j(a_ij(lambda_l) / tau)[t_i] / sum_i w_i.

    `coefficients`: the predicted (response, cost) pair (N x K tensors); `logged`, `response`,
    `cost`: the logged level and outcomes of the batch."""
    if not tau > 0:
        raise ModelInputError(f"tau must be > 0, got {tau}")
    v, c = coefficients
    a = reduced_values(v, c, lambdas)
    p = torch.softmax(a / tau, dim=2)
    idx = logged.view(1, -1, 1).expand(a.shape[0], -1, 1)
    p_t = p.gather(2, idx).squeeze(2)                                     # L x N
    lam = torch.as_tensor(np.asarray(lambdas, dtype=np.float64), dtype=v.dtype).view(-1, 1)
    reward = response.unsqueeze(0) - lam * cost.unsqueeze(0)              # L x N
    w = torch.ones_like(response) if weight is None else weight
    return -((reward * p_t) * w.unsqueeze(0)).sum(1).div(w.sum().clamp_min(1e-12)).mean()


def eom_change(logged: np.ndarray, response: np.ndarray, cost: np.ndarray, weight: np.ndarray,
               decision: np.ndarray, lambda_: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Incremental EOM of the dual objective D = V - lambda C (self-normalized IPW over the users
    whose decision equals their logged level; weights `weight`, e.g. the IPS weights).

    Returns (D, add, remove): D of `decision`, and per user the change of D when that user alone
    starts matching (add_i, meaningful for the unmatched) or stops matching (remove_i, for the
    matched), from the three sums only (no re-evaluation). An empty match set has D = 0; a change
    that would empty it is 0 (undefined)."""
    m = decision == logged
    r = response - lambda_ * cost
    sw = float(weight[m].sum())
    sr = float((weight * r)[m].sum())
    d = sr / sw if sw > 0 else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        add = (sr + weight * r) / (sw + weight) - d
        left = sw - weight
        remove = np.where(left > 1e-12 * max(sw, 1.0), (sr - weight * r) / np.where(left > 0, left, 1.0) - d, 0.0)
    add = np.where(np.isfinite(add), add, 0.0)
    return d, add, remove


def flips(a: np.ndarray, cost: np.ndarray, decision: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For reduced values `a` (N x K, at one lambda, with the predicted `costs` for the tie rule) and
    the current `decision`: (delta N x K, new N x K). delta_ij is the smallest change of a_ij that
    flips user i's decision (with margin FLIP_MARGIN), new_ij the decision after it: j for j != d_i
    (raise a_ij just above a_{i,d}), the runner-up for j = d_i (lower a_{i,d} just below it).
    Without a runner-up (K = 1) delta is inf and nothing flips."""
    n, k = a.shape
    rows = np.arange(n)
    best = a[rows, decision]
    delta = best[:, None] - a
    margin = FLIP_MARGIN * np.maximum(1.0, np.abs(best))[:, None]
    delta = delta + margin
    new = np.broadcast_to(np.arange(k), (n, k)).copy()
    if k > 1:
        masked = a.copy()
        masked[rows, decision] = -np.inf
        runner = choose_levels(masked, cost, 0.0)  # the rule among the other levels (a already reduced)
        delta[rows, decision] = -(best - a[rows, runner]) - margin[:, 0]
        new[rows, decision] = runner
    else:
        delta[rows, decision] = np.inf
        new[rows, decision] = decision
    return delta, new


def ifd_gradient(coefficients, logged: np.ndarray, response: np.ndarray,
                 cost: np.ndarray, weight: np.ndarray, lambdas, clip: str = "fix", h: float = 0.01) -> np.ndarray:
    """IFD estimate of dD/da (L x N x K) for every multiplier (see the module docstring): the
    incremental EOM change after the smallest flipping perturbation of each entry, divided by the
    (clipped) perturbation; 0 where the flip does not change who matches. `coefficients`: the
    predicted (response, cost) pair (N x K); `logged`, `response`, `cost`: the logged RCT."""
    if clip not in CLIPS:
        raise ModelInputError(f"clip must be one of {CLIPS}, got {clip!r}")
    v, c = coefficients
    lams = np.atleast_1d(np.asarray(lambdas, dtype=np.float64))
    decisions = decide_at_lambdas(v, c, lams)
    out = np.zeros((lams.size, *v.shape))
    for l, lam in enumerate(lams):
        d = decisions[l]
        _, add, remove = eom_change(logged, response, cost, weight, d, float(lam))
        delta, new = flips(v - lam * c, c, d)
        matched = (d == logged)[:, None]
        matched_after = new == logged[:, None]
        change = np.where(matched & ~matched_after, remove[:, None],
                          np.where(~matched & matched_after, add[:, None], 0.0))
        finite = np.isfinite(delta) & (change != 0)
        if clip == "fix":
            near = finite & (np.abs(delta) < h)
            g = np.where(near, change / np.where(near, np.sign(delta) * h, 1.0), 0.0)
        elif clip == "max":
            top = float(np.abs(delta[finite]).max()) if finite.any() else 1.0
            g = np.where(finite, change / np.where(finite, np.sign(delta) * top, 1.0), 0.0)
        else:
            g = np.where(finite, change / np.where(finite, delta, 1.0), 0.0)
        out[l] = g
    return out


def ifd_loss(coefficients, logged: torch.Tensor, response: torch.Tensor,
             cost: torch.Tensor, weight: torch.Tensor | None, lambdas, clip: str, h: float) -> torch.Tensor:
    """The IFD surrogate -(1/L) sum_l sum_ij a_ij(lambda_l) stopgrad(g_ij(lambda_l)); `coefficients`:
    the predicted (response, cost) pair (N x K tensors)."""
    v, c = coefficients
    w = torch.ones_like(response) if weight is None else weight
    g = ifd_gradient((v.detach().double().numpy(), c.detach().double().numpy()), logged.numpy(),
                     response.detach().double().numpy(), cost.detach().double().numpy(),
                     w.detach().double().numpy(), lambdas, clip, h)
    a = reduced_values(v, c, lambdas)
    return -(a * torch.as_tensor(g, dtype=a.dtype)).sum(dim=(1, 2)).mean()


# ----------------------------------------------------------------------------- model outputs
class Curves:
    """Expected response and cost (campaign units, by the cost rule) from the network's link-scale
    outputs, in torch (differentiable), and the observed outcomes of a batch in the same units."""

    def __init__(self, config: CampaignConfig, targets: dict[str, float]):
        self.kind = config.response
        self.rule = config.cost
        self.incentives = torch.tensor(config.incentives, dtype=torch.float32)
        self.scale = float(targets["response_scale"])
        self.mean = float(targets["response_mean"])
        self.cost_scale = float(targets["cost_scale"])

    def expected(self, module, batch) -> tuple[torch.Tensor, torch.Tensor]:
        raw, cost_raw = module.curves(batch["x_num"], batch["x_cat"])
        v = response_mean(raw, self.kind) * self.scale + self.mean
        if self.rule == "redeemed":
            return v, v * self.incentives
        if self.rule == "assigned":
            return v, self.incentives.expand_as(v)
        return v, F.softplus(cost_raw) * self.cost_scale

    def observed(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        y = batch["response"] * self.scale + self.mean
        inc = self.incentives[batch["level"]]
        if self.rule == "redeemed":
            return y, inc * y
        if self.rule == "assigned":
            return y, inc
        return y, batch["cost"] * self.cost_scale


def dfcl_loss(gradient: str, kind: str, has_cost: bool, curves: Curves, lambdas, params: dict[str, Any]) -> Callable:
    """The training loop's loss function: per-sample alpha * L_pred and the decision loss as the
    batch's penalty (ignored by evaluation: model selection uses the decision metric). `params`: a
    DFCL model's `grid_params()` (alpha; tau, clip, h where the variant has them: 1.0, 'fix', 0.01
    otherwise)."""
    pred = _s_learner_loss(kind, has_cost)
    alpha, tau = float(params["alpha"]), float(params.get("tau", 1.0))
    clip, h = str(params.get("clip", "fix")), float(params.get("h", 0.01))

    def loss_fn(module, batch, step):
        per_sample, _ = pred(module, batch, step)
        if step is None:
            return alpha * per_sample, None
        v, c = curves.expected(module, batch)
        y, z = curves.observed(batch)
        w = batch.get("weight")
        if gradient == "ifd":
            dec = ifd_loss((v, c), batch["level"], y, z, w, lambdas, clip, h)
        else:
            dec = policy_loss((v, c), batch["level"], y, z, w, lambdas, tau if gradient == "mer" else 1.0)
        return alpha * per_sample, dec
    return loss_fn


def decision_metric(curves: Curves, tensors: dict[str, torch.Tensor], lambdas) -> Callable:
    """monitor(module) -> minus the mean over the grid of the EOM dual objective V - lambda C of
    the module's decisions on `tensors` (the validation rows), IPS-weighted (evaluation.eom)."""
    y, z = (x.double().numpy() for x in curves.observed(tensors))
    t = tensors["level"].numpy()
    w = tensors.get("weight")
    prop = None if w is None else 1.0 / np.clip(w.double().numpy(), 1e-12, None)
    lams = np.asarray(lambdas, dtype=np.float64)

    def monitor(module) -> float:
        v, c = curves.expected(module, tensors)
        decisions = decide_at_lambdas(v.double().numpy(), c.double().numpy(), lams)
        vals, costs, _ = eom_batch(decisions, t, y, z, prop / prop.max() if prop is not None else None)
        dual = np.nan_to_num(vals - lams * costs, nan=0.0)
        return -float(dual.mean())
    return monitor


# ------------------------------------------------------------------------------------ training
def train_dfcl(gradient: str, data: TrainingData, params: dict[str, Any], *, seed: int = 0, weighted: bool = True,
               warm_max_epochs: int | None = None, log=None, warm: TrainedModel | None = None) -> TrainedModel:
    """Fine-tune the warm-start S-learner on the DFCL loss with `gradient` ('pl', 'mer', 'ifd') and
    `params` (a DFCL model's `grid_params()`: alpha, grid_size, lambdas, lr, batch_size, max_epochs,
    patience + tau / clip, h). Returns a TrainedModel named 'dfcl_<gradient>'."""
    if gradient not in GRADIENTS:
        raise ModelInputError(f"unknown DFCL gradient {gradient!r}; one of {GRADIENTS}")
    problems = check_grid_params(params)
    if problems:
        raise ModelInputError(f"dfcl_{gradient}: " + "; ".join(problems))
    config = data.config
    if warm is None:
        warm = warm_start(data, seed, warm_max_epochs, weighted, log)
    net = copy.deepcopy(warm.module)
    prep = prepare_frame(data.frame, config, list(data.numeric), list(data.categorical), weighted,
                         encoder=warm.encoder, targets=warm.targets)
    if params["lambdas"]:
        lams = np.unique(np.asarray(params["lambdas"], dtype=np.float64))
    else:
        train_users = data.frame.loc[data.frame["split"].astype(str) == "train"]
        v, c = warm.predict(train_users)
        lams = lambda_grid(v, c, config.budget_per_capita, int(params["grid_size"]))
    curves = Curves(config, warm.targets)
    loss_fn = dfcl_loss(gradient, config.response, config.cost == "column", curves, lams, params)
    monitor = decision_metric(curves, prep.validation if prep.n_validation else prep.train, lams)
    with torch.no_grad():
        start_value = monitor(net.eval())
    epochs = resolve_max_epochs(int(params["max_epochs"]))
    tc = TrainingConfig(max_epochs=epochs, batch_size=int(params["batch_size"]), lr=float(params["lr"]),
                        patience=int(params["patience"]), min_delta=0.0)
    t0 = time.perf_counter()
    fit = fit_torch_model(net, WeightedLoss(loss_fn, "weight" if weighted else None),
                          MiniBatches(prep.train, tc.batch_size, seed), Metric(monitor), tc, log=log,
                          label=f"dfcl_{gradient}")
    metrics = fit_metrics(fit, prep, net, weighted, t0, lambdas=[float(x) for x in lams],
                          warm_start_version=warm.version, validation_dual_objective_warm_start=-start_value,
                          validation_dual_objective=-fit.best_validation_loss)
    hp = {**params, "lambdas": [float(x) for x in lams], "gradient": gradient, "max_epochs": epochs, "seed": seed,
          "weighted": bool(weighted)}
    return TrainedModel(f"dfcl_{gradient}", net, warm.encoder, config, warm.targets,
                        TrainingRecord(hp, metrics, fit.history), warm.arch_kwargs)


@dataclass(frozen=True)
class DFCLParams:
    """dfcl_pl's hyper-parameters (campaign.yaml `models.params.dfcl_pl`); dfcl_mer and dfcl_ifd add their own."""

    alpha: float = 1.0
    grid_size: int = 10
    lambdas: tuple[float, ...] = ()
    lr: float = 2e-4
    batch_size: int = 1024
    max_epochs: int = 20
    patience: int = 5
    warm_max_epochs: int = 60
    seed: int = 0
    ips_weighting: bool = True


@dataclass(frozen=True)
class DFCLMaxEntropyParams(DFCLParams):
    """dfcl_mer's hyper-parameters: DFCL's and the softmax temperature `tau`."""

    tau: float = 0.1


@dataclass(frozen=True)
class DFCLFiniteDifferenceParams(DFCLParams):
    """dfcl_ifd's hyper-parameters: DFCL's, the `clip` rule and the step `h`."""

    clip: str = "fix"
    h: float = 0.01


class _DFCL(TorchResponseModel):
    """Registry entries dfcl_pl / dfcl_mer / dfcl_ifd: `train_dfcl` as an estimator. Off by default
    (campaign.yaml `models.include`). Hyper-parameters: `alpha` (weight of the prediction loss),
    `grid_size` (budgets of the decision loss), `lambdas` (an explicit lambda grid; empty: derived),
    `lr`, `batch_size`, `max_epochs` (capped by PROMO_MAX_EPOCHS), `patience`, the variant's own
    (MER: `tau`; IFD: `clip`, `h`), `warm_max_epochs` (the warm-start S-learner's epoch cap), `seed`,
    `ips_weighting`."""

    gradient: str = "pl"
    source = "DFCL paper §4-§5"
    applies = "every campaign with budget_per_capita"
    default = False
    rules = {"warm_max_epochs": COUNT, "seed": SEED, "ips_weighting": FLAG}

    def _check_values(self) -> list[str]:
        return check_grid_params(self.grid_params())

    def grid_params(self) -> dict[str, Any]:
        """The DFCL loss's parameters (`train_dfcl`'s `params`)."""
        return {k: v for k, v in self.get_params().items() if k not in ("warm_max_epochs", "seed", "ips_weighting")}

    @classmethod
    def applies_to(cls, config: CampaignConfig) -> str | None:
        if not config.budget_per_capita:
            return "needs budget_per_capita (the lambda grid is derived from the campaign's budgets)"
        return None

    def _fit_phase(self, data: TrainingData, phase: str, previous, log) -> TrainedModel:
        p = self.params
        return train_dfcl(self.gradient, data, self.grid_params(), seed=p.seed, weighted=p.ips_weighting,
                          warm_max_epochs=p.warm_max_epochs, log=log)


class DFCLPolicyLearning(_DFCL):
    name = "dfcl_pl"
    gradient = "pl"
    title = "DFCL-PL: S-learner fine-tuned on alpha*IPW loss + policy-learning dual decision loss over a lambda grid"
    source = "DFCL paper §4, §5.1-5.2"

    Params = DFCLParams


class DFCLMaxEntropy(_DFCL):
    name = "dfcl_mer"
    gradient = "mer"
    title = "DFCL-MER: as DFCL-PL with the maximum-entropy (temperature tau) softmax"
    source = "DFCL paper §4, §5.1, §5.3"

    Params = DFCLMaxEntropyParams


class DFCLFiniteDifference(_DFCL):
    name = "dfcl_ifd"
    gradient = "ifd"
    title = "DFCL-IFD: dual decision loss with improved finite-difference gradients (incremental EOM, clipping)"
    source = "DFCL paper §4, §5.1, §5.4, App. D"

    Params = DFCLFiniteDifferenceParams
