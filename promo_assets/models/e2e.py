"""End-to-end learning of the marketing goal (end-to-end paper §3.3-§3.5, Algorithm 2): `e2e_fd`, `e2e_nes`.

The 2K-head DNN S-learner (models.s_learner, TSM-SL) is first trained as usual (the warm start,
`s_learner.warm_start`: the campaign's `s_learner` hyper-parameters, this model's seed and
`warm_max_epochs`, the same data: with the defaults it is the `s_learner` model), then fine-tuned
on the regularized objective (Eq. 7)

    L_R = L_SL - gamma * Q(v_hat, c_hat)

where Q is the EOM value of the KKT allocation on the mini-batch's RCT rows at a per-capita budget
drawn uniformly from `budget_range` at every step (Algorithm 2), v_hat / c_hat the network's expected
response and cost per row x level (the campaign's cost rule: 'column' the cost heads, 'redeemed'
incentive x v_hat, 'assigned' the incentive, then constant). dQ/dv_hat and dQ/dc_hat (for costs the
network predicts) are estimated by finite differences on F' = `entries` random entries with step
`h` (Eq. 8; `e2e_fd`) or NES with `directions` = N' antithetic directions of scale `sigma` (Eq. 10;
`e2e_nes`) (promo_assets.models.decision_loss) and enter the network through the surrogate loss
(Eq. 11): the per-sample S-learner loss plus the penalty gamma * (-Tr[v^T sg(g_v)] - Tr[c^T sg(g_c)]),
one Adam step per mini-batch of `batch_size` training rows in the project's one training loop
(`fit_torch_model`; the penalty is its per-batch `penalty` hook). The epoch kept is the one with the
lowest validation L_R (the S-learner loss minus gamma x the mean Q over the low, middle and high
budget of the range on all validation rows; `fit_torch_model`'s `monitor` hook), the warm start
itself included (epoch 0); a fine-tuned epoch is then kept only when its validation Q gain over the
warm start exceeds `keep_margin` (2) paired bootstrap standard errors (`QGainCheck`: 200 resamples
of the validation rows), else the warm start is. Without that guard the lowest L_R picked, on
`e2e_synthetic`, epochs whose validation Q gain was 0.5-1.2 standard errors, noise, and which
trailed the warm start on the holdout users by up to 2.1 points of the oracle
(benchmarks/e2e_selection.py).

Choices the paper leaves open (ours, documented): the mini-batch's EOM uses the training frame's
IPS weights as inverse propensities (self-normalized, as evaluation.eom); `budget_range` null means
the campaign's smallest to largest `budget_per_capita`; alpha_max of each step's bisection is twice
`lambda_upper_bound` of the batch's predictions, the same for every perturbed copy; F' entries are
drawn for v and again for c; NES perturbs v and c jointly; `center` (off by default) removes each
row's mean over the levels from the estimates (Q ignores per-row shifts:
`decision_loss.remove_level_shifts`), and `project_scale` (on by default) also their components
along the centered predicted v and c (Q ignores their global scale: `decision_loss.
remove_invariant_directions`; without it the fine-tuning drifted the scale of the predicted cost
uplifts and with it the spend made at a budget); the loss and Q share one forward pass per step
(`_Computed`); the learning rate and epochs of the fine-tuning are their own
hyper-parameters (the paper trains from scratch with lr 1e-4, 10 epochs,
gamma 200, B 10,000, F' 4,000, h 3e-4, N' 2,000, sigma 1e-3, on 14M rows; our defaults are for
campaigns of 10^4-10^5 events on CPU). Per-step Q cost is measured (`q_seconds_per_step`).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from promo_assets.config.campaign import CampaignConfig
from promo_assets.models import decision_loss as dl
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
from promo_assets.models.protocol import COUNT, FLAG, NON_NEGATIVE, SEED, TrainingData
from promo_assets.models.s_learner import _s_learner_loss, warm_start
from promo_assets.models.training import Metric, MiniBatches, TrainingConfig, WeightedLoss, fit_torch_model


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def common_problems(p: dict[str, Any]) -> list[str]:
    out = []
    if not (_number(p["gamma"]) and p["gamma"] > 0):
        out.append(f"gamma = {p['gamma']!r}: must be a number > 0 (the weight of Q in Eq. 7)")
    if not (isinstance(p["epochs"], int) and p["epochs"] >= 1):
        out.append(f"epochs = {p['epochs']!r}: must be an integer >= 1")
    if not (_number(p["lr"]) and p["lr"] > 0):
        out.append(f"lr = {p['lr']!r}: must be a number > 0")
    if not (isinstance(p["batch_size"], int) and p["batch_size"] >= 2):
        out.append(f"batch_size = {p['batch_size']!r}: must be an integer >= 2")
    if not (isinstance(p["max_iter"], int) and p["max_iter"] >= 1):
        out.append(f"max_iter = {p['max_iter']!r}: must be an integer >= 1")
    if not isinstance(p["center"], bool):
        out.append(f"center = {p['center']!r}: must be true or false")
    if not isinstance(p["project_scale"], bool):
        out.append(f"project_scale = {p['project_scale']!r}: must be true or false")
    r = p["budget_range"]
    if r is not None:
        if not (isinstance(r, (list, tuple)) and len(r) == 2 and all(_number(x) for x in r)):
            out.append(f"budget_range = {r!r}: must be null or [low, high], two numbers")
        elif r[0] < 0:
            out.append(f"budget_range = {list(r)!r}: budgets must be >= 0")
        elif r[0] > r[1]:
            out.append(f"budget_range = {list(r)!r} is empty: low {r[0]} > high {r[1]}")
    return out


def budget_bounds(p: dict[str, Any], config: CampaignConfig) -> tuple[float, float]:
    if p["budget_range"] is not None:
        return float(p["budget_range"][0]), float(p["budget_range"][1])
    budgets = list(config.budget_per_capita)
    if not budgets:
        raise ModelInputError(f"campaign {config.campaign!r} has no budget_per_capita: set "
                              "models.params.<e2e model>.budget_range")
    return min(budgets), max(budgets)


def predicted_curves(module, x_num, x_cat, config: CampaignConfig, targets: dict[str, float], curves=None):
    """The network's expected response and cost (B x K tensors, with grad) as TrainedModel.predict
    computes them; the cost is None when the rule makes it a constant ('assigned'). `curves`: the
    module's link-scale `curves(x_num, x_cat)` already computed (one forward pass per step)."""
    raw, cost_raw = module.curves(x_num, x_cat) if curves is None else curves
    values = response_mean(raw, config.response) * targets["response_scale"] + targets["response_mean"]
    incentives = torch.as_tensor(config.incentives, dtype=values.dtype)[None, :]
    if config.cost == "redeemed":
        return values, values * incentives
    if config.cost == "assigned":
        return values, None
    return values, F.softplus(cost_raw) * targets["cost_scale"]


def rct_batch(batch: dict[str, torch.Tensor], config: CampaignConfig, targets: dict[str, float]) -> dl.RCTBatch:
    """The mini-batch's logged arrays in campaign units (response, cost) with its IPS weights."""
    level = batch["level"]
    y = batch["response"].double() * targets["response_scale"] + targets["response_mean"]
    inc = torch.as_tensor(config.incentives, dtype=torch.float64)[level]
    if config.cost == "column":
        z = batch["cost"].double() * targets["cost_scale"]
    else:
        z = inc * y if config.cost == "redeemed" else inc
    w = batch["weight"].double() if "weight" in batch else torch.as_tensor(
        dl.inverse_propensity(level.numpy()), dtype=torch.float64)
    return dl.RCTBatch(level, y, z, w)


@dataclass(frozen=True)
class QGainCheck:
    """How a fine-tuned model's decision gain is judged: on the RCT `batch` (the validation rows),
    the mean Q over `budgets` (bisection `max_iter`), its paired bootstrap standard error over
    `draws` resamples of the rows drawn with `seed`."""

    batch: dl.RCTBatch
    budgets: list[float]
    max_iter: int
    seed: int
    draws: int = 200

    def q(self, curves: tuple[torch.Tensor, torch.Tensor], lambda_max: float, rows=None) -> float:
        """The mean Q over the budgets of `curves` (response, cost) on the batch (or its `rows`)."""
        (response, cost), b = curves, self.batch
        if rows is not None:
            response, cost = response[rows], cost[rows]
            b = dl.RCTBatch(b.logged[rows], b.response[rows], b.cost[rows], b.ipw[rows])
        return float(torch.nan_to_num(dl.q_at_budgets(response, cost, b, self.budgets, lambda_max=lambda_max,
                                                      max_iter=self.max_iter)).mean())

    def gain(self, before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, float]:
        """Q(after) - Q(before) on the batch (as the monitor measures them) and its bootstrap standard
        error (the same resampled rows for both; each side's alpha_max from all the rows)."""
        lam_b, lam_a = dl.q_lambda_max(*before), dl.q_lambda_max(*after)
        gain = self.q(after, lam_a) - self.q(before, lam_b)
        rng = np.random.default_rng([self.seed, 16])
        n = self.batch.n
        diffs = []
        for _ in range(self.draws):
            rows = torch.as_tensor(rng.integers(0, n, n))
            diffs.append(self.q(after, lam_a, rows) - self.q(before, lam_b, rows))
        return gain, float(np.std(diffs, ddof=1)) if self.draws > 1 else float("inf")


class _Computed:
    """Stands in for the network in the S-learner's loss with the curves of this step's forward pass,
    so that the loss and Q's predictions share one forward (and one backward) pass."""

    def __init__(self, curves):
        self._curves = curves

    def curves(self, x_num, x_cat):
        return self._curves


class _E2EBase(TorchResponseModel):
    """The end-to-end models as estimators. Hyper-parameters: `gamma` (weight of Q), `budget_range`
    (null: the campaign's budgets), `epochs` (fine-tuning epochs, capped by PROMO_MAX_EPOCHS), `lr`,
    `batch_size`, `max_iter` (bisection iterations), `center`, `project_scale` (module docstring),
    `keep_margin` (the fine-tuned epoch is kept only when its validation Q gain over the warm start
    exceeds this many bootstrap standard errors; 0: always), the estimator's own (FD: `entries`, `h`; NES: `directions`, `sigma`), `warm_max_epochs` (the
    warm-start S-learner's epoch cap), `seed`, `ips_weighting`."""

    gradient_estimator: ClassVar[str]  # "fd" or "nes"
    source = "end-to-end paper §3.3-§3.5, Eq. 7, 8/10, 11, Algorithm 2"
    default = False
    rules = {"keep_margin": NON_NEGATIVE, "warm_max_epochs": COUNT, "seed": SEED, "ips_weighting": FLAG}

    def _check_values(self) -> list[str]:
        p = self.get_params()
        return common_problems(p) + self.estimator_problems(p)

    def estimator_problems(self, p: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def gradient(self, response, cost, batch: dl.RCTBatch, budget: float, hp: dict, gen: torch.Generator):
        raise NotImplementedError

    def _keep_or_revert(self, net, warm_state: dict, best_epoch: int, validation_curves, check: "QGainCheck",
                        log) -> dict[str, Any]:
        """Keep the fine-tuned parameters (epoch `best_epoch` > 0) only when their validation Q gain
        over the warm start exceeds `keep_margin` paired bootstrap standard errors; else load the
        warm start back into `net`. Returns the metrics that record the decision."""
        margin = float(self.params.keep_margin)
        if best_epoch == 0 or margin == 0:
            return {"kept": "warm_start" if best_epoch == 0 else "fine_tuned"}
        tuned = copy.deepcopy(net.state_dict())
        _, v1, c1 = validation_curves(net)
        net.load_state_dict(warm_state)
        _, v0, c0 = validation_curves(net)
        gain, se = check.gain((v0, c0), (v1, c1))
        keep = gain > margin * se
        if keep:
            net.load_state_dict(tuned)
        if log is not None:
            log(f"{self.name}: epoch {best_epoch} raises the validation Q by {gain:.5f} (bootstrap SE {se:.5f}): "
                + ("kept" if keep else f"within {margin:g} SE, the warm start kept"))
        return {"kept": "fine_tuned" if keep else "warm_start", "validation_q_gain": gain, "validation_q_gain_se": se,
                "fine_tuned_best_epoch": best_epoch}

    def _fit_phase(self, data: TrainingData, phase: str, previous, log) -> TrainedModel:
        config, hp, seed, weighted = data.config, self.get_params(), self.params.seed, self.params.ips_weighting
        t_start = time.perf_counter()
        warm = warm_start(data, seed, self.params.warm_max_epochs, weighted, log)
        net, targets = warm.module, warm.targets
        prep = prepare_frame(data.frame, config, list(data.numeric), list(data.categorical), weighted,
                             encoder=warm.encoder, targets=targets)
        low, high = budget_bounds(hp, config)
        budget_rng = np.random.default_rng([int(seed), 15])
        gen = torch.Generator().manual_seed(int(seed))
        base_loss = _s_learner_loss(config.response, config.cost == "column")
        gamma = float(hp["gamma"])
        q_time = {"seconds": 0.0, "steps": 0}

        def loss_fn(module, batch, step):
            curves = module.curves(batch["x_num"], batch["x_cat"])  # one forward for both terms
            per_sample, _ = base_loss(_Computed(curves), batch, step)
            if step is None:
                return per_sample, None
            v, c = predicted_curves(module, batch["x_num"], batch["x_cat"], config, targets, curves=curves)
            t0 = time.perf_counter()
            budget = float(budget_rng.uniform(low, high))
            g_v, g_c = self.gradient(v, c if c is not None else torch.as_tensor(
                config.incentives, dtype=v.dtype)[None, :].expand_as(v), rct_batch(batch, config, targets),
                budget, hp, gen, wrt_costs=c is not None)
            if hp["project_scale"]:
                g_v = dl.remove_invariant_directions(g_v, v)
                g_c = dl.remove_invariant_directions(g_c, c) if c is not None else g_c
            elif hp["center"]:
                g_v, g_c = dl.remove_level_shifts(g_v), dl.remove_level_shifts(g_c)
            q_time["seconds"] += time.perf_counter() - t0
            q_time["steps"] += 1
            return per_sample, gamma * dl.surrogate_loss(v, c, g_v, g_c)

        val_batch = rct_batch(prep.validation, config, targets) if prep.n_validation else None
        val_budgets = sorted({low, 0.5 * (low + high), high})

        part = prep.validation if val_batch is not None else prep.train
        batch = val_batch if val_batch is not None else rct_batch(prep.train, config, targets)

        @torch.no_grad()
        def validation_curves(module):
            """(the S-learner loss, v, c) of the validation rows (the training rows without them)."""
            was = module.training
            module.eval()
            curves = module.curves(part["x_num"], part["x_cat"])
            per_sample, _ = base_loss(_Computed(curves), part, None)
            w = part.get("weight")
            sl = float((per_sample * w).sum() / w.sum()) if w is not None else float(per_sample.mean())
            v, c = predicted_curves(module, part["x_num"], part["x_cat"], config, targets, curves=curves)
            c = c if c is not None else torch.as_tensor(config.incentives, dtype=v.dtype)[None, :].expand_as(v)
            module.train(was)
            return sl, v, c

        def monitor(module) -> float:
            sl, v, c = validation_curves(module)
            qs = torch.nan_to_num(dl.q_at_budgets(v, c, batch, val_budgets, lambda_max=dl.q_lambda_max(v, c),
                                                  max_iter=int(hp["max_iter"])))
            return sl - gamma * float(qs.mean())

        epochs = resolve_max_epochs(int(hp["epochs"]))
        tc = TrainingConfig(max_epochs=epochs, batch_size=int(hp["batch_size"]), lr=float(hp["lr"]),
                            patience=epochs + 1)
        t0 = time.perf_counter()
        warm_state = copy.deepcopy(net.state_dict())
        fit = fit_torch_model(net, WeightedLoss(loss_fn, "weight" if weighted else None),
                              MiniBatches(prep.train, tc.batch_size, seed), Metric(monitor), tc, log=log, label=self.name)
        guard = self._keep_or_revert(net, warm_state, fit.best_epoch, validation_curves,
                                     QGainCheck(batch, val_budgets, int(hp["max_iter"]), int(seed)), log)
        metrics = fit_metrics(fit, prep, net, weighted, t0, **guard,
                              q_seconds_per_step=q_time["seconds"] / max(q_time["steps"], 1),
                              q_steps=q_time["steps"], warm_seconds_per_epoch=warm.metrics["seconds_per_epoch"],
                              warm_epochs=warm.metrics["epochs"], warm_validation_loss=warm.metrics["validation_loss"],
                              total_seconds=time.perf_counter() - t_start)
        history = [{**h, "phase": "warm_start"} for h in warm.history] + [{**h, "phase": self.name} for h in fit.history]
        hp_out = {**warm.hparams, **{f"e2e_{k}": (list(v) if isinstance(v, tuple) else v) for k, v in hp.items()},
                  "e2e_epochs": epochs, "budget_low": low, "budget_high": high}
        return TrainedModel(self.name, net, warm.encoder, config, targets, TrainingRecord(hp_out, metrics, history),
                            warm.arch_kwargs)


# The constructors' defaults were chosen on tuning campaigns (seeds 100-104 of e2e_synthetic and uplift_two_arm, never the
# reported seeds 0-4; benchmarks/e2e_paper.py): h 0.02 flips decisions of the piecewise-constant
# Q where 0.003 and 0.001 mostly do not; more steps (batch 1024, lr 1e-3) than before; batch 1024
# and 20 bisection iterations (and NES N' 16) keep an epoch within 3x the S-learner's (batch 512 took
# 4.2x (FD) / 5.2x (NES), NES N' 32 at batch 1024 3.6x on e2e_synthetic).
@dataclass(frozen=True)
class E2EParams:
    """The hyper-parameters the end-to-end models share (see `_E2EBase`); each adds its estimator's."""

    gamma: float = 50.0
    budget_range: tuple[float, float] | None = None
    epochs: int = 8
    lr: float = 1e-3
    batch_size: int = 1024
    max_iter: int = 20
    center: bool = False
    project_scale: bool = True
    keep_margin: float = 2.0
    warm_max_epochs: int = 60
    seed: int = 0
    ips_weighting: bool = True


@dataclass(frozen=True)
class E2EFiniteDifferenceParams(E2EParams):
    """e2e_fd's hyper-parameters (campaign.yaml `models.params.e2e_fd`): F' `entries` and the step `h`."""

    entries: int = 512
    h: float = 0.02


@dataclass(frozen=True)
class E2ENaturalEvolutionParams(E2EParams):
    """e2e_nes's hyper-parameters (campaign.yaml `models.params.e2e_nes`): N' `directions`, the scale
    `sigma`, and its own gamma."""

    gamma: float = 0.5
    directions: int = 16
    sigma: float = 0.01


class E2EFiniteDifference(_E2EBase):
    """Registry entry `e2e_fd`: the S-learner fine-tuned on L_SL - gamma Q with finite-difference gradients."""

    name = "e2e_fd"
    title = "S-learner fine-tuned end-to-end on the marketing goal Q(v, c): finite-difference gradients (Eq. 8)"
    gradient_estimator = "fd"

    Params = E2EFiniteDifferenceParams

    def estimator_problems(self, p: dict[str, Any]) -> list[str]:
        out = []
        if not (_number(p["h"]) and p["h"] > 0):
            out.append(f"h = {p['h']!r}: the finite-difference step must be a number > 0")
        if not (isinstance(p["entries"], int) and p["entries"] >= 1):
            out.append(f"entries = {p['entries']!r}: F' must be an integer >= 1")
        elif isinstance(p["batch_size"], int) and p["entries"] > p["batch_size"]:
            out.append(f"entries = {p['entries']} (F') is larger than the batch (batch_size = {p['batch_size']})")
        return out

    def gradient(self, response, cost, batch, budget, hp, gen, wrt_costs):
        return dl.fd_gradient(response, cost, batch, budget, dl.FiniteDifferences(int(hp["entries"]), float(hp["h"])),
                              gen, wrt_costs=wrt_costs, search=dl.Bisection(max_iter=int(hp["max_iter"])))


class E2ENaturalEvolution(_E2EBase):
    """Registry entry `e2e_nes`: the S-learner fine-tuned on L_SL - gamma Q with NES (antithetic) gradients."""

    name = "e2e_nes"
    title = "S-learner fine-tuned end-to-end on the marketing goal Q(v, c): NES gradients, antithetic (Eq. 10)"
    gradient_estimator = "nes"

    Params = E2ENaturalEvolutionParams

    def estimator_problems(self, p: dict[str, Any]) -> list[str]:
        out = []
        if not (_number(p["sigma"]) and p["sigma"] > 0):
            out.append(f"sigma = {p['sigma']!r}: the NES scale must be a number > 0")
        d = p["directions"]
        if not (isinstance(d, int) and not isinstance(d, bool) and d >= 2 and d % 2 == 0):
            out.append(f"directions = {d!r}: N' must be an even integer >= 2 (antithetic pairs)")
        return out

    def gradient(self, response, cost, batch, budget, hp, gen, wrt_costs):
        return dl.nes_gradient(response, cost, batch, budget, dl.NES(int(hp["directions"]), float(hp["sigma"])), gen,
                               wrt_costs=wrt_costs, search=dl.Bisection(max_iter=int(hp["max_iter"])))
