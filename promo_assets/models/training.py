"""The one training loop of the project: every torch model (S-learner, DIPN, the monotone models, the
decision-focused fine-tunings, the graph models) uses it.

`fit_torch_model(module, loss, batches, monitor, config)` runs Adam over the batches the *batch
source* yields each epoch, minimizing what the *loss* returns for each batch, and early-stops on what
the *monitor* measures (lower is better) with a patience, restoring the best epoch's parameters. It
reports one log line per epoch. The three hooks are small objects, one of each kind per model:

- a loss `loss(module, batch, step) -> Step`: the objective of one optimizer step and the training
  loss to report. `WeightedLoss(per_sample)` is the usual one: the per-sample loss (B,) averaged with
  the batch's per-sample weights (the IPS weights), plus an optional penalty added to the objective
  only (DIPN's smoothness loss, a decision loss). A full-graph model returns its own `Step`.
- a batch source, called once per epoch: `MiniBatches(train, batch_size, seed)` (shuffled mini-batches
  of a dict of equally long tensors, in an order drawn from its own `torch.Generator`, so a fit is
  deterministic for a seed) or `FullBatch()` (one step per epoch, the loss reads the whole graph).
- a monitor: `ValidationLoss(loss, validation, train)` (the weighted validation loss after each epoch,
  the training loss when there are no validation rows), `Metric(fn)` (any score of the module, e.g. a
  decision metric; measured before the first epoch too, so the starting parameters are epoch 0 and a
  fine-tune that only hurts changes nothing) or `SamePass()` (the losses the loss measured in the
  step's own forward pass, of the parameters *before* that step; with several parts, e.g. the
  customer and the merchant side of the graph, each part keeps the parameters of its own best epoch in
  `FitResult.best_states` and training stops when no part improved for `patience` epochs).

Model initialization is seeded by the caller (`seeded`). Torch's thread settings are left as they are.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass, field, fields
from typing import Callable, Iterator, Mapping, Protocol

import torch

from promo_assets.models.errors import ModelInputError

Batch = dict[str, torch.Tensor]
# per_sample(module, batch, step) -> (per-sample loss (B,), penalty scalar or None).
# `step` is the global optimizer step during training and None during evaluation (penalties ignored).
PerSampleLoss = Callable[[torch.nn.Module, Batch, "int | None"], "tuple[torch.Tensor, torch.Tensor | None]"]


@dataclass
class TrainingConfig:
    """Hyper-parameters of the loop. `max_epochs` is the cap; early stopping usually ends sooner."""

    max_epochs: int = 50
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float = 0.0
    patience: int = 5
    min_delta: float = 1e-5
    grad_clip: float | None = 10.0
    eval_batch_size: int = 8192
    lr_decay: float | None = None  # multiply the learning rate by this after every epoch (None: constant)
    log_every: int = 1  # one log line every this many epochs (and the first)

    def validate(self) -> None:
        if self.max_epochs < 1:
            raise ModelInputError(f"max_epochs must be >= 1, got {self.max_epochs}")
        if self.batch_size < 1:
            raise ModelInputError(f"batch_size must be >= 1, got {self.batch_size}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ModelInputError(f"lr must be a positive number, got {self.lr}")
        if self.patience < 1:
            raise ModelInputError(f"patience must be >= 1, got {self.patience}")
        if self.lr_decay is not None and not 0 < self.lr_decay <= 1:
            raise ModelInputError(f"lr_decay must be in (0, 1], got {self.lr_decay}")
        if self.log_every < 1:
            raise ModelInputError(f"log_every must be >= 1, got {self.log_every}")


@dataclass
class FitResult:
    """What `fit_torch_model` returns. `history` has one dict per epoch: {"epoch", "train_loss",
    the loss's further training losses, the monitored losses (e.g. "validation_loss"), "seconds"}
    (epochs counted from 1). `best_epochs` / `best_losses` / `best_states`: per monitored part, its
    best epoch (0: the parameters before training), loss and parameters; `best_epoch` /
    `best_validation_loss` are those of the first part."""

    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0
    best_validation_loss: float = float("nan")
    epochs: int = 0
    stopped_early: bool = False
    steps: int = 0
    best_epochs: dict[str, int] = field(default_factory=dict)
    best_losses: dict[str, float] = field(default_factory=dict)
    best_states: dict[str, dict] = field(default_factory=dict, repr=False)

    @property
    def seconds_per_epoch(self) -> float:
        secs = [h["seconds"] for h in self.history]
        return float(sum(secs) / len(secs)) if secs else float("nan")

    def to_dict(self) -> dict:
        """Plain values (no parameters)."""
        d = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "best_states"}
        d["seconds_per_epoch"] = self.seconds_per_epoch
        return d


# ---------------------------------------------------------------------------------------- losses
@dataclass
class Step:
    """What a loss returns for one batch: the `objective` to minimize (a scalar tensor with grad), the
    batch's training `loss` to report and its `weight` in the epoch's mean, further training losses to
    report (`train`, e.g. {"train_loss_c": ...}) and, for a `SamePass` monitor, the monitored losses of
    the parameters before this step measured in the same forward pass (`monitored`)."""

    objective: torch.Tensor
    loss: float
    weight: float = 1.0
    train: dict[str, float] = field(default_factory=dict)
    monitored: dict[str, float] | None = None


class Loss(Protocol):
    def __call__(self, module: torch.nn.Module, batch: Batch | None, step: int) -> Step: ...


def weighted_mean(per_sample: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """sum(w * l) / sum(w) (plain mean when `weight` is None)."""
    if weight is None:
        return per_sample.mean()
    return (per_sample * weight).sum() / weight.sum().clamp_min(1e-12)


class WeightedLoss:
    """The loss of the per-sample models: `per_sample(module, batch, step)` -> (loss (B,), penalty or
    None); the objective is sum(w l) / sum(w) + penalty with w the batch's `weight_key` tensor (the IPS
    weights; None or absent: unweighted), and the reported loss the weighted mean without the penalty,
    weighted in the epoch's mean by sum(w)."""

    def __init__(self, per_sample: PerSampleLoss, weight_key: str | None = "weight"):
        self.per_sample = per_sample
        self.weight_key = weight_key

    def weights(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor | None:
        return batch.get(self.weight_key) if self.weight_key else None

    def __call__(self, module: torch.nn.Module, batch: Batch, step: int) -> Step:
        per_sample, penalty = self.per_sample(module, batch, step)
        w = self.weights(batch)
        loss = weighted_mean(per_sample, w)
        weight = float(w.sum()) if w is not None else float(per_sample.shape[0])
        return Step(loss if penalty is None else loss + penalty, float(loss.detach()), weight)

    @torch.no_grad()
    def evaluate(self, module: torch.nn.Module, tensors: Mapping[str, torch.Tensor], batch_size: int = 8192) -> float:
        """Weighted mean per-sample loss of `module` over `tensors` (no penalty), in eval mode."""
        return evaluate_loss(module, self.per_sample, tensors, self.weight_key, batch_size)


@torch.no_grad()
def evaluate_loss(module: torch.nn.Module, per_sample: PerSampleLoss, tensors: Mapping[str, torch.Tensor],
                  weight_key: str | None = "weight", batch_size: int = 8192) -> float:
    """Weighted mean per-sample loss of `module` over `tensors` (no penalty), in eval mode."""
    n = _n_rows(tensors)
    if n == 0:
        return float("nan")
    was_training = module.training
    module.eval()
    num = 0.0
    den = 0.0
    for start in range(0, n, batch_size):
        batch = {k: v[start:start + batch_size] for k, v in tensors.items()}
        loss, _ = per_sample(module, batch, None)
        w = batch.get(weight_key) if weight_key else None
        if w is None:
            num += float(loss.sum())
            den += float(loss.shape[0])
        else:
            num += float((loss * w).sum())
            den += float(w.sum())
    module.train(was_training)
    return num / max(den, 1e-12)


# ---------------------------------------------------------------------------------------- batch sources
def _n_rows(tensors: Mapping[str, torch.Tensor]) -> int:
    sizes = {k: int(v.shape[0]) for k, v in tensors.items()}
    if len(set(sizes.values())) > 1:
        raise ModelInputError(f"tensors have different numbers of rows: {sizes}")
    return next(iter(sizes.values())) if sizes else 0


class MiniBatches:
    """Shuffled mini-batches of `tensors` (a dict of equally long tensors), a new order every epoch
    drawn from a `torch.Generator` seeded with `seed`."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], batch_size: int, seed: int = 0):
        self.tensors = tensors
        self.batch_size = int(batch_size)
        self.n_rows = _n_rows(tensors)
        self.generator = torch.Generator().manual_seed(int(seed))

    def __call__(self) -> Iterator[Batch]:
        order = torch.randperm(self.n_rows, generator=self.generator)
        for start in range(0, self.n_rows, self.batch_size):
            idx = order[start:start + self.batch_size]
            yield {k: v[idx] for k, v in self.tensors.items()}


class FullBatch:
    """One step per epoch on the whole data set, which the loss holds itself (e.g. every node of a
    graph embedded in one forward pass): the loss is called with batch None."""

    n_rows = None

    def __call__(self) -> Iterator[None]:
        yield None


# ---------------------------------------------------------------------------------------- monitors
class Monitor(Protocol):
    """The early-stopping criterion: named losses, lower is better. `at_start`: also measured before
    the first epoch (epoch 0). `before_step(step)`: the losses a step measured of the parameters
    before it (or None); `after_epoch(module)`: the losses after an epoch (or None). `note`: said in
    the log lines."""

    at_start: bool
    note: str

    def before_step(self, step: Step) -> dict[str, float] | None: ...

    def after_epoch(self, module: torch.nn.Module) -> dict[str, float] | None: ...


class ValidationLoss:
    """The weighted loss (without penalty) on `validation` after each epoch; on `train` when there
    are no validation rows."""

    at_start = False

    def __init__(self, loss: WeightedLoss, validation: Mapping[str, torch.Tensor] | None,
                 train: Mapping[str, torch.Tensor], batch_size: int = 8192):
        has_val = validation is not None and _n_rows(validation) > 0
        self.loss, self.tensors, self.batch_size = loss, (validation if has_val else train), int(batch_size)
        self.note = "" if has_val else " (no validation rows: train loss)"

    def before_step(self, step: Step) -> None:
        return None

    def after_epoch(self, module: torch.nn.Module) -> dict[str, float]:
        return {"validation_loss": self.loss.evaluate(module, self.tensors, self.batch_size)}


class Metric:
    """`fn(module) -> float` (lower is better) in eval mode without gradients, after each epoch and
    before the first (epoch 0: the starting parameters are kept when no epoch beats them)."""

    at_start = True
    note = ""

    def __init__(self, fn: Callable[[torch.nn.Module], float]):
        self.fn = fn

    def before_step(self, step: Step) -> None:
        return None

    def after_epoch(self, module: torch.nn.Module) -> dict[str, float]:
        was_training = module.training
        module.eval()
        with torch.no_grad():
            value = float(self.fn(module))
        module.train(was_training)
        return {"validation_loss": value}


class SamePass:
    """The losses each step measured in its own forward pass (`Step.monitored`), of the parameters
    before that step: an improvement is credited to the epoch before."""

    at_start = False
    note = ""

    def before_step(self, step: Step) -> dict[str, float]:
        if step.monitored is None:
            raise ModelInputError("the SamePass monitor needs a loss whose Step carries its monitored losses")
        return dict(step.monitored)

    def after_epoch(self, module: torch.nn.Module) -> None:
        return None


# ---------------------------------------------------------------------------------------- the loop
@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with torch's global RNG seeded, restoring the caller's RNG state afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


def fit_torch_model(module: torch.nn.Module, loss: Loss, batches: MiniBatches | FullBatch | Callable[[], Iterator],
                    monitor: Monitor, config: TrainingConfig | None = None, *,
                    parameters: list[torch.nn.Parameter] | None = None,
                    log: Callable[[str], None] | None = None, label: str = "model") -> FitResult:
    """Train `module` in place and return its history.

    Each epoch: for every batch of `batches()`, `loss(module, batch, step)` gives the objective of one
    Adam step over `parameters` (default: every parameter that requires grad), gradients clipped to
    `config.grad_clip`; the learning rate is multiplied by `config.lr_decay` after every epoch when set.
    Early stopping: after each epoch (and before each step, for `SamePass`) the monitor's losses are
    compared with each part's best; training stops after `config.patience` epochs in which no part
    improved by at least `min_delta`, and the first part's best parameters are restored (every part's
    are in `FitResult.best_states`). `log(line)` is called every `config.log_every` epochs."""
    config = config or TrainingConfig()
    config.validate()
    if getattr(batches, "n_rows", None) == 0:
        raise ModelInputError(f"{label}: no training rows")
    params = parameters if parameters is not None else [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ModelInputError(f"{label}: no trainable parameters")
    optimizer = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay, foreach=True)
    scheduler = (torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=config.lr_decay)
                 if config.lr_decay is not None else None)

    def optimizer_step(objective: torch.Tensor, epoch: int) -> None:
        nonlocal step
        if not torch.isfinite(objective):
            raise FloatingPointError(f"{label}: non-finite training loss at epoch {epoch}, step {step}")
        optimizer.zero_grad(set_to_none=True)
        objective.backward()
        if config.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer.step()
        step += 1

    def improved(monitored: dict[str, float], epoch: int) -> bool:
        """Record each part's best loss, epoch and parameters; True when any part improved."""
        better = False
        for part, value in monitored.items():
            if value < result.best_losses.get(part, math.inf) - config.min_delta:
                result.best_losses[part], result.best_epochs[part] = value, epoch
                result.best_states[part] = copy.deepcopy(module.state_dict())
                better = True
        return better

    result = FitResult()
    initial_state = copy.deepcopy(module.state_dict())
    bad_epochs = 0
    step = 0
    monitored: dict[str, float] = {}
    if monitor.at_start:
        improved(monitor.after_epoch(module), 0)
    for epoch in range(1, config.max_epochs + 1):
        t0 = time.perf_counter()
        module.train()
        total = total_w = 0.0
        extra: dict[str, float] = {}
        better = False
        for batch in batches():
            out = loss(module, batch, step)
            before = monitor.before_step(out)
            if before is not None:
                monitored = before
                better = improved(before, epoch - 1) or better  # the parameters before this step
            optimizer_step(out.objective, epoch)
            total += out.loss * out.weight
            total_w += out.weight
            extra = dict(out.train)
        train_loss = total / max(total_w, 1e-12)
        after = monitor.after_epoch(module)
        if after is not None:
            monitored = after
            better = improved(after, epoch) or better
        if scheduler is not None:
            scheduler.step()
        seconds = time.perf_counter() - t0
        result.history.append({"epoch": epoch, "train_loss": train_loss, **extra, **monitored, "seconds": seconds})
        if log is not None and (epoch == 1 or epoch % config.log_every == 0):
            parts = f" ({', '.join(f'{k} {v:.5f}' for k, v in extra.items())})" if extra else ""
            watched = ", ".join(f"{k.replace('_', ' ') if k == 'validation_loss' else k} {v:.5f}"
                                for k, v in monitored.items())
            log(f"{label} epoch {epoch}/{config.max_epochs}: train loss {train_loss:.5f}{parts}, {watched}"
                f"{monitor.note}, {seconds:.2f}s")
        bad_epochs = 0 if better else bad_epochs + 1
        if bad_epochs >= config.patience:
            result.stopped_early = True
            break
    first = next(iter(monitored))
    for part in monitored:
        result.best_states.setdefault(part, initial_state)
        result.best_epochs.setdefault(part, 0)
        result.best_losses.setdefault(part, math.inf)
    module.load_state_dict(result.best_states[first])
    module.eval()
    result.best_epoch = result.best_epochs[first]
    result.best_validation_loss = result.best_losses[first]
    result.epochs = len(result.history)
    result.steps = step
    if log is not None:
        best = (f"validation loss {result.best_validation_loss:.5f}" if list(monitored) == ["validation_loss"] else
                ", ".join(f"{p} {result.best_losses[p]:.5f} at epoch {result.best_epochs[p]}" for p in monitored))
        log(f"{label}: restored best epoch {result.best_epoch} ({best}) after "
            f"{result.epochs} epochs{' (early stop)' if result.stopped_early else ''}")
    return result
