"""The common training loop every torch response model uses.

`fit_torch_model` runs mini-batch Adam on per-sample losses weighted by per-sample weights (the IPS
weights), early-stops on the weighted validation loss with a patience, restores the best epoch's
parameters and reports one log line per epoch. It is deterministic for a given seed (the batch order
comes from its own `torch.Generator`; model initialization is seeded by the caller, see
`seeded`). Torch's thread settings are left as they are.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass, field, asdict
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

    def validate(self) -> None:
        if self.max_epochs < 1:
            raise ModelInputError(f"max_epochs must be >= 1, got {self.max_epochs}")
        if self.batch_size < 1:
            raise ModelInputError(f"batch_size must be >= 1, got {self.batch_size}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ModelInputError(f"lr must be a positive number, got {self.lr}")
        if self.patience < 1:
            raise ModelInputError(f"patience must be >= 1, got {self.patience}")


@dataclass
class FitResult:
    """What `fit_torch_model` returns. `history` has one dict per epoch:
    {"epoch", "train_loss", "validation_loss", "seconds"} (epochs counted from 1)."""

    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0
    best_validation_loss: float = float("nan")
    epochs: int = 0
    stopped_early: bool = False
    steps: int = 0

    @property
    def seconds_per_epoch(self) -> float:
        secs = [h["seconds"] for h in self.history]
        return float(sum(secs) / len(secs)) if secs else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seconds_per_epoch"] = self.seconds_per_epoch
        return d


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


def fit_torch_model(
    module: torch.nn.Module,
    loss_fn: LossFn,
    train: Mapping[str, torch.Tensor],
    validation: Mapping[str, torch.Tensor] | None,
    config: TrainingConfig | None = None,
    *,
    seed: int = 0,
    weight_key: str | None = "weight",
    parameters: list[torch.nn.Parameter] | None = None,
    log: Callable[[str], None] | None = None,
    label: str = "model",
) -> FitResult:
    """Train `module` in place and return its history.

    - `train` / `validation`: dicts of equally long tensors (features, level, targets, and the
      per-sample weights under `weight_key`; weights None/absent = unweighted).
    - `loss_fn(module, batch, step)` returns the per-sample loss (B,) and an optional penalty scalar
      that is added to the training objective only (e.g. DIPN's smoothness loss, Eq. 16).
    - Objective per mini-batch: sum(w * l) / sum(w) + penalty, minimized with Adam over `parameters`
      (default: every parameter that requires grad).
    - Early stopping: after each epoch the weighted validation loss is computed; training stops after
      `config.patience` epochs without an improvement of at least `min_delta`, and the parameters of
      the best epoch are restored. Without validation rows the training loss is monitored instead.
    - `log(line)` is called once per epoch with epoch, train loss, validation loss and seconds.
    """
    config = config or TrainingConfig()
    config.validate()
    n = _n_rows(train)
    if n == 0:
        raise ModelInputError(f"{label}: no training rows")
    has_val = validation is not None and _n_rows(validation) > 0
    params = parameters if parameters is not None else [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ModelInputError(f"{label}: no trainable parameters")
    optimizer = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(int(seed))

    result = FitResult()
    best_state = copy.deepcopy(module.state_dict())
    best = math.inf
    bad_epochs = 0
    step = 0
    for epoch in range(1, config.max_epochs + 1):
        t0 = time.perf_counter()
        module.train()
        order = torch.randperm(n, generator=generator)
        total = 0.0
        total_w = 0.0
        for start in range(0, n, config.batch_size):
            idx = order[start:start + config.batch_size]
            batch = {k: v[idx] for k, v in train.items()}
            per_sample, penalty = loss_fn(module, batch, step)
            w = batch.get(weight_key) if weight_key else None
            loss = weighted_mean(per_sample, w)
            objective = loss if penalty is None else loss + penalty
            if not torch.isfinite(objective):
                raise FloatingPointError(f"{label}: non-finite training loss at epoch {epoch}, step {step}")
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            if config.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            optimizer.step()
            step += 1
            bw = float(w.sum()) if w is not None else float(per_sample.shape[0])
            total += float(loss.detach()) * bw
            total_w += bw
        train_loss = total / max(total_w, 1e-12)
        if has_val:
            val_loss = evaluate_loss(module, loss_fn, validation, weight_key, config.eval_batch_size)
        else:
            val_loss = evaluate_loss(module, loss_fn, train, weight_key, config.eval_batch_size)
        seconds = time.perf_counter() - t0
        result.history.append({"epoch": epoch, "train_loss": train_loss, "validation_loss": val_loss,
                               "seconds": seconds})
        if log is not None:
            log(f"{label} epoch {epoch}/{config.max_epochs}: train loss {train_loss:.5f}, "
                f"validation loss {val_loss:.5f}{'' if has_val else ' (no validation rows: train loss)'}, "
                f"{seconds:.2f}s")
        if val_loss < best - config.min_delta:
            best = val_loss
            result.best_epoch = epoch
            best_state = copy.deepcopy(module.state_dict())
            bad_epochs = 0
        else:
            bad_epochs += 1
            if bad_epochs >= config.patience:
                result.stopped_early = True
                break
    module.load_state_dict(best_state)
    module.eval()
    result.best_validation_loss = best
    result.epochs = len(result.history)
    result.steps = step
    if log is not None:
        log(f"{label}: restored best epoch {result.best_epoch} (validation loss {best:.5f}) after "
            f"{result.epochs} epochs{' (early stop)' if result.stopped_early else ''}")
    return result
