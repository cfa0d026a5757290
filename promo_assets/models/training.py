"""The one training loop of the project: every torch model (S-learner, DIPN, the graph models) uses it.

`fit_torch_model` runs mini-batch Adam on per-sample losses weighted by per-sample weights (the IPS
weights), early-stops on the weighted validation loss with a patience, restores the best epoch's
parameters and reports one log line per epoch. It is deterministic for a given seed (the batch order
comes from its own `torch.Generator`; model initialization is seeded by the caller, see
`seeded`). Torch's thread settings are left as they are.

Full-batch models (the customer–merchant graph: every node is embedded in one forward pass) pass a
`full_batch` step function instead of per-sample batches: one optimizer step per epoch on the
objective it returns, and early stopping per *part* (e.g. the customer and the merchant side):
each part keeps the parameters of its own best epoch (`FitResult.best_states`), training stops
when no part improved for `patience` epochs.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass, field, fields
from typing import Callable, Iterator, Mapping

import torch

from promo_assets.models.errors import ModelInputError

Batch = dict[str, torch.Tensor]
# loss_fn(module, batch, step) -> (per-sample loss (B,), penalty scalar or None).
# `step` is the global optimizer step during training and None during evaluation (penalties ignored).
LossFn = Callable[[torch.nn.Module, Batch, "int | None"], "tuple[torch.Tensor, torch.Tensor | None]"]


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
    """What `fit_torch_model` returns. `history` has one dict per epoch:
    {"epoch", "train_loss", "validation_loss", "seconds"} (epochs counted from 1); a full-batch fit
    has its step's part losses instead of "validation_loss" (e.g. "validation_loss_c").
    `best_epochs` / `best_losses` / `best_states`: per monitored part, its best epoch (0: the
    parameters before training), loss and parameters; `best_epoch` / `best_validation_loss` are
    those of the first part."""

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


@dataclass
class FullBatchStep:
    """What a full-batch step function returns for one epoch: the `objective` to minimize (a scalar
    tensor with grad), named training losses to report (`train`, e.g. {"train_loss_c": ...}) and the
    monitored losses per part (`monitored`, e.g. {"validation_loss_c": ..., "validation_loss_m": ...})
    of the parameters *before* this step (computed in the same forward pass, so monitoring costs no
    second pass; an improvement is credited to the previous epoch's parameters)."""

    objective: torch.Tensor
    train: dict[str, float]
    monitored: dict[str, float]


# full_batch(module, step) -> FullBatchStep, called once per epoch in train mode
FullBatchFn = Callable[[torch.nn.Module, int], FullBatchStep]


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with torch's global RNG seeded, restoring the caller's RNG state afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


def _n_rows(tensors: Mapping[str, torch.Tensor]) -> int:
    sizes = {k: int(v.shape[0]) for k, v in tensors.items()}
    if len(set(sizes.values())) > 1:
        raise ModelInputError(f"tensors have different numbers of rows: {sizes}")
    return next(iter(sizes.values())) if sizes else 0


def weighted_mean(per_sample: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """sum(w * l) / sum(w) (plain mean when `weight` is None)."""
    if weight is None:
        return per_sample.mean()
    return (per_sample * weight).sum() / weight.sum().clamp_min(1e-12)


@torch.no_grad()
def evaluate_loss(module: torch.nn.Module, loss_fn: LossFn, tensors: Mapping[str, torch.Tensor],
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
        per_sample, _ = loss_fn(module, batch, None)
        w = batch.get(weight_key) if weight_key else None
        if w is None:
            num += float(per_sample.sum())
            den += float(per_sample.shape[0])
        else:
            num += float((per_sample * w).sum())
            den += float(w.sum())
    module.train(was_training)
    return num / max(den, 1e-12)


def _monitored(module: torch.nn.Module, monitor: Callable[[torch.nn.Module], float]) -> float:
    """`monitor(module)` in eval mode without gradients (the module's mode is restored)."""
    was_training = module.training
    module.eval()
    with torch.no_grad():
        value = float(monitor(module))
    module.train(was_training)
    return value


def fit_torch_model(
    module: torch.nn.Module,
    loss_fn: LossFn | None,
    train: Mapping[str, torch.Tensor] | None,
    validation: Mapping[str, torch.Tensor] | None,
    config: TrainingConfig | None = None,
    *,
    seed: int = 0,
    weight_key: str | None = "weight",
    parameters: list[torch.nn.Parameter] | None = None,
    log: Callable[[str], None] | None = None,
    label: str = "model",
    full_batch: FullBatchFn | None = None,
    monitor: Callable[[torch.nn.Module], float] | None = None,
) -> FitResult:
    """Train `module` in place and return its history.

    - `train` / `validation`: dicts of equally long tensors (features, level, targets, and the
      per-sample weights under `weight_key`; weights None/absent = unweighted).
    - `loss_fn(module, batch, step)` returns the per-sample loss (B,) and an optional penalty scalar
      that is added to the training objective only (e.g. DIPN's smoothness loss, Eq. 16).
    - Objective per mini-batch: sum(w * l) / sum(w) + penalty, minimized with Adam over `parameters`
      (default: every parameter that requires grad); gradients clipped to `config.grad_clip`; the
      learning rate multiplied by `config.lr_decay` after every epoch when set.
    - Early stopping: after each epoch the weighted validation loss is computed; training stops after
      `config.patience` epochs without an improvement of at least `min_delta`, and the parameters of
      the best epoch are restored. Without validation rows the training loss is monitored instead.
    - `full_batch(module, step) -> FullBatchStep` replaces `loss_fn` / `train` / `validation`: one
      step per epoch on its objective, early stopping per monitored part (see the module docstring);
      the first part's best parameters are restored, every part's are in `best_states`.
    - `monitor(module) -> float` (per-sample batches only; lower is better) replaces the weighted
      validation loss as the early-stopping criterion, e.g. a decision metric of a fine-tuning loss
      (DFCL). It is called in eval mode before the first epoch too: the starting parameters are
      epoch 0 and are kept when no epoch beats them (a fine-tune that only hurts changes nothing).
    - `log(line)` is called every `config.log_every` epochs with epoch, losses and seconds.
    """
    config = config or TrainingConfig()
    config.validate()
    if full_batch is None:
        n = _n_rows(train or {})
        if n == 0:
            raise ModelInputError(f"{label}: no training rows")
        has_val = validation is not None and _n_rows(validation) > 0
    params = parameters if parameters is not None else [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ModelInputError(f"{label}: no trainable parameters")
    optimizer = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = (torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=config.lr_decay)
                 if config.lr_decay is not None else None)
    generator = torch.Generator().manual_seed(int(seed))

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
        for part, loss in monitored.items():
            if loss < result.best_losses.get(part, math.inf) - config.min_delta:
                result.best_losses[part], result.best_epochs[part] = loss, epoch
                result.best_states[part] = copy.deepcopy(module.state_dict())
                better = True
        return better

    result = FitResult()
    initial_state = copy.deepcopy(module.state_dict())
    bad_epochs = 0
    step = 0
    if monitor is not None and full_batch is None:
        improved({"validation_loss": _monitored(module, monitor)}, 0)
    for epoch in range(1, config.max_epochs + 1):
        t0 = time.perf_counter()
        module.train()
        if full_batch is not None:
            out = full_batch(module, step)
            train_loss = float(out.objective.detach())
            monitored, extra = dict(out.monitored), dict(out.train)
            better = improved(monitored, epoch - 1)  # the parameters before this step
            optimizer_step(out.objective, epoch)
        else:
            order = torch.randperm(n, generator=generator)
            total = 0.0
            total_w = 0.0
            for start in range(0, n, config.batch_size):
                idx = order[start:start + config.batch_size]
                batch = {k: v[idx] for k, v in train.items()}
                per_sample, penalty = loss_fn(module, batch, step)
                w = batch.get(weight_key) if weight_key else None
                loss = weighted_mean(per_sample, w)
                optimizer_step(loss if penalty is None else loss + penalty, epoch)
                bw = float(w.sum()) if w is not None else float(per_sample.shape[0])
                total += float(loss.detach()) * bw
                total_w += bw
            train_loss = total / max(total_w, 1e-12)
            val_loss = (_monitored(module, monitor) if monitor is not None else
                        evaluate_loss(module, loss_fn, validation if has_val else train, weight_key,
                                      config.eval_batch_size))
            monitored, extra = {"validation_loss": val_loss}, {}
            better = improved(monitored, epoch)
        if scheduler is not None:
            scheduler.step()
        seconds = time.perf_counter() - t0
        result.history.append({"epoch": epoch, "train_loss": train_loss, **extra, **monitored, "seconds": seconds})
        if log is not None and (epoch == 1 or epoch % config.log_every == 0):
            if full_batch is None:
                log(f"{label} epoch {epoch}/{config.max_epochs}: train loss {train_loss:.5f}, "
                    f"validation loss {val_loss:.5f}{'' if has_val else ' (no validation rows: train loss)'}, "
                    f"{seconds:.2f}s")
            else:
                log(f"{label} epoch {epoch}/{config.max_epochs}: train loss {train_loss:.5f} ("
                    + ", ".join(f"{k} {v:.5f}" for k, v in {**extra, **monitored}.items()) + f"), {seconds:.2f}s")
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
        best = (f"validation loss {result.best_validation_loss:.5f}" if full_batch is None else
                ", ".join(f"{p} {result.best_losses[p]:.5f} at epoch {result.best_epochs[p]}" for p in monitored))
        log(f"{label}: restored best epoch {result.best_epoch} ({best}) after "
            f"{result.epochs} epochs{' (early stop)' if result.stopped_early else ''}")
    return result
