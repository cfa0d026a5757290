"""Cross-fitted evidence for the champion: out-of-fold predictions over the training and validation
days, so that the decision loss and the DR values rest on every logged event, not only the holdout's.

Every model was trained on the training days, so its predictions for those events are in-sample and
cannot be judged on them. Cross-fitting splits the training days' events (splits `train` and
`validation`) into folds and scores each fold with a fit that did not see it:

- `day` folds (rolling origin, default): the training days in order, cut into K + 1 consecutive blocks;
  block j + 1 is scored by a fit on blocks 0..j only (the first block is never scored: nothing precedes it);
- `user` folds: K groups of users by a stable hash of the user id (salted apart from the train /
  validation split); fold f is scored by a fit on the other K - 1 folds' events (all days).

What is refitted per fold (`refit`, default every candidate of kind `lightgbm`, cheap with early
stopping): each such model, with campaign.yaml's `models.params`, and the doubly robust outcome model,
so that the pseudo-outcomes of a fold's events are also out-of-fold. A refitted torch model trains on a
fold for at most the epochs its full fit took to its best epoch (`fold_epochs: full_fit`, default;
`epoch_caps`), each phase's `max_epochs` capped by that phase's `best_epoch`: the fold fit then skips
the epochs in which early stopping only waited for an improvement that did not come. A model that is
not refitted has no honest prediction for a training-day event: it has no coefficients in the
cross-fitted evidence, and the champion compares it on the holdout only
(`promo_assets.evaluation.champion`, "Cross-fitted evidence"). The propensities are the logged ones
(RCT logs), used exactly as on the holdout.

No dagster here (domain code).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.causal.split import user_hash_unit
from promo_assets.evaluation.champion import Evidence
from promo_assets.evaluation.eom import EvaluationError
from promo_assets.evaluation.inputs import fit_outcome

__all__ = ["FOLD_KINDS", "CrossFit", "Folds", "check_folds", "cross_fitted_evidence", "epoch_caps", "fold_of_rows",
           "full_fit_epochs", "refit_model", "refitted_models"]

FOLD_KINDS = ("user", "day")
LEARNING_SPLITS = ("train", "validation")
_SALT = "champion-folds"


def check_folds(folds: int, by: str) -> None:
    """EvaluationError naming the setting when `folds` / `by` (campaign.yaml champion.folds, fold_by) is not allowed."""
    if by not in FOLD_KINDS:
        raise EvaluationError(f"champion.fold_by must be one of {', '.join(FOLD_KINDS)}, got {by!r}")
    if int(folds) < 2:
        raise EvaluationError(f"champion.folds must be an integer >= 2, got {folds!r}")


def fold_of_rows(frame: pd.DataFrame, folds: int, by: str) -> np.ndarray:
    """The fold (0..folds-1) of each learning row of `frame` (columns user_id, event_date), -1 for a row
    that is never scored (`day` folds: the first block of days); module docstring."""
    check_folds(folds, by)
    k = int(folds)
    if by == "user":
        return np.minimum((user_hash_unit(frame["user_id"].to_numpy(), _SALT) * k).astype(np.int64), k - 1)
    days = pd.to_datetime(frame["event_date"]).dt.normalize()
    order = np.sort(days.unique())
    if len(order) < 2:
        raise EvaluationError(f"champion.fold_by: day needs at least two training days, there are {len(order)}")
    blocks = np.array_split(np.arange(len(order)), min(k + 1, len(order)))
    block_of_day = {order[i]: b for b, idx in enumerate(blocks) for i in idx}
    return np.asarray([block_of_day[d] - 1 for d in days.to_numpy()], dtype=np.int64)


def refitted_models(models: Sequence[str], refit: Sequence[str] | None) -> list[str]:
    """The models refitted per fold: `refit` (campaign.yaml champion.refit) among `models`, default
    every one of kind `lightgbm`."""
    from promo_assets.models import registry

    if refit is not None:
        return [m for m in models if m in set(refit)]
    return [m for m in models if "lightgbm" in registry.get(m).kinds]


def full_fit_epochs(name: str, metrics: Mapping) -> dict[str, int]:
    """The hyper-parameters that stop a fold fit of model `name` at its full fit's best epoch: each
    `<phase>best_epoch` the full fit recorded (`metrics`, model_registry; e.g. DIPN's `best_epoch` and
    `bias_best_epoch`) becomes the model's `<phase>max_epochs`, at least 1. {} for a model that records
    no epochs (LightGBM) or has no such parameter."""
    from promo_assets.models import registry

    params = registry.get(name).defaults()
    out = {}
    for key, value in metrics.items():
        param = key[:-len("best_epoch")] + "max_epochs"
        if key.endswith("best_epoch") and param in params and isinstance(value, (int, float)) and value == value:
            out[param] = max(1, int(value))
    return out


def epoch_caps(full_fits: Mapping[str, Mapping] | None) -> dict[str, dict[str, int]]:
    """{model: `full_fit_epochs`} of the models of `full_fits` ({model: the metrics of the version being
    judged}) that record epochs; {} for None (each fold fit early-stops on its own)."""
    caps = {name: full_fit_epochs(name, metrics) for name, metrics in (full_fits or {}).items()}
    return {name: c for name, c in caps.items() if c}


def refit_model(config, caps: Mapping[str, Mapping[str, int]] | None = None) -> Callable:
    """`fit_model(name, data)` for `cross_fitted_evidence`: the registry's model `name` with campaign.yaml's
    parameters and the hyper-parameters `caps[name]` (`epoch_caps`: its epochs capped at its full fit's),
    fitted on `data`."""
    from promo_assets.models import registry

    return lambda name, data: registry.for_campaign(name, config, **(caps or {}).get(name, {})).fit(data)


@dataclass
class CrossFit:
    """The cross-fitted evidence (None when no model is refitted or no fold could be fitted) and what was
    done: events scored per fold, the fits' training events per fold, the models refitted, why a
    fold was skipped, and the user of each evidence event (`user_ids`, in the evidence's order)."""

    evidence: Evidence | None
    models: list[str]
    fold_by: str
    folds: int
    scored: list[int] = field(default_factory=list)
    trained_on: list[int] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    user_ids: np.ndarray | None = None

    @property
    def n(self) -> int:
        return 0 if self.evidence is None else self.evidence.n


@dataclass(frozen=True)
class Folds:
    """How the training days are cross-fitted (campaign.yaml `champion.folds`, `fold_by`, `refit`):
    `count` folds, by `day` or `user`, refitting the models `refit` (None: the LightGBM models)."""

    count: int = 3
    by: str = "day"
    refit: tuple[str, ...] | None = None

    @classmethod
    def of(cls, block) -> "Folds":
        """From campaign.yaml's `champion:` block."""
        return cls(int(block.folds), str(block.fold_by), None if block.refit is None else tuple(block.refit))


def cross_fitted_evidence(frame: pd.DataFrame, numeric: list[str], categorical: list[str], config,
                          models: Sequence[str], *, folds: Folds = Folds(), log: Callable[[str], None] | None = None,
                          fit_model=None) -> CrossFit:
    """Out-of-fold evidence over the learning rows of the training `frame` (module docstring): per fold,
    every refitted model and the outcome model fitted on the rows the fold may learn from, and their
    predictions for the fold's rows; the events' logged level, response, cost and propensity.
    `fit_model(name, TrainingData) -> fitted model`: how a model is refitted (default: the registry's model
    with campaign.yaml's parameters, early-stopping on its own; `refit_model` caps its epochs at the full
    fit's)."""
    from promo_assets.models.protocol import TrainingData

    n_folds, fold_by = int(folds.count), folds.by
    names = refitted_models(models, folds.refit)
    out = CrossFit(None, names, fold_by, n_folds)
    if not names:
        return out
    learn = frame[frame["split"].astype(str).isin(LEARNING_SPLITS)].reset_index(drop=True)
    if learn.empty:
        out.skipped.append("no training-day events")
        return out
    if fold_by == "day" and pd.to_datetime(learn["event_date"]).dt.normalize().nunique() < 2:
        check_folds(n_folds, fold_by)
        out.skipped.append("fold_by day needs at least two training days: the holdout only")
        return out
    fold = fold_of_rows(learn, n_folds, fold_by)
    fit_model = fit_model or refit_model(config)
    k = config.n_levels
    parts, users, failed = [], [], {}
    for f in range(n_folds):
        scored = np.flatnonzero(fold == f)
        seen = np.flatnonzero((fold != f) & (fold < f) if fold_by == "day" else fold != f)
        if not len(scored) or not len(seen):
            out.skipped.append(f"fold {f}: {len(scored)} events to score, {len(seen)} to fit on")
            continue
        train, rows = learn.iloc[seen], learn.iloc[scored]
        data = TrainingData(config=config, frame=train.reset_index(drop=True), numeric=list(numeric),
                            categorical=list(categorical))
        coefs = {}
        for name in names:
            if name in failed:
                continue
            try:
                v, c = fit_model(name, data).predict(rows)
            except Exception as exc:  # a refit that fails leaves that model out of the cross-fitted evidence
                failed[name] = f"{name} could not be refitted on fold {f}: {type(exc).__name__}: {exc}"
                continue
            coefs[name] = (np.asarray(v, dtype=np.float64), np.asarray(c, dtype=np.float64))
        dm = fit_outcome(config, train, rows, (list(numeric), list(categorical)))
        dm_v = dm.dm_values if dm.dm_values is not None else np.zeros((len(rows), k))
        dm_c = dm.dm_costs if dm.dm_costs is not None else np.zeros((len(rows), k))
        parts.append(Evidence(rows["level"].to_numpy(), rows["response"].to_numpy(dtype=float),
                              rows["cost"].to_numpy(dtype=float), rows["propensity"].to_numpy(dtype=float),
                              dm_v, dm_c, coefs, np.full(len(rows), f"fold {f}")))
        users.append(rows["user_id"].to_numpy())
        out.scored.append(int(len(scored)))
        out.trained_on.append(int(len(seen)))
        if log:
            log(f"champion evidence, fold {f} of {n_folds} ({fold_by}): {', '.join(coefs) or 'no model'} and the "
                f"outcome model fitted on {len(seen)} events, {len(scored)} events scored")
    out.skipped.extend(failed.values())
    out.models = [m for m in names if m not in failed]
    parts = [p.only(out.models) for p in parts]
    if not out.models:
        parts = []
    out.evidence = Evidence.concat(parts) if parts else None
    out.user_ids = np.concatenate(users) if users else None
    return out
