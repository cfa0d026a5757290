"""One training phase of a registered model for a campaign, as its phase asset runs it: nothing to
learn (the training frame's blocking data checks) or a model that does not apply (`ModelSkipped`)
gives the reason instead of a model. No dagster here (domain code).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from promo_assets.causal.checks import cannot_learn, frame_checks
from promo_assets.models import registry
from promo_assets.models.protocol import ModelSkipped, ResponseModel, TrainingData


@dataclass(frozen=True)
class PhaseRun:
    """A phase trained (`fitted`, saved, and the seconds it took) or why not (`reason`)."""

    fitted: ResponseModel | None
    reason: str | None = None
    seconds: float = 0.0


def train_phase(model: str, phase: str, data: TrainingData, previous: ResponseModel | None = None, *,
                log=None) -> PhaseRun:
    """Train `phase` of `model` built with campaign.yaml's `models.params.<model>` (`data.config`) on
    `data`, after `previous` (the fitted earlier phase, or None), and save it (content-addressed: the
    same weights always get the same version)."""
    blocked = cannot_learn(frame_checks(data.frame, data.config))  # training_frame's data checks
    if blocked is not None:
        return PhaseRun(None, blocked)
    start = time.perf_counter()
    try:
        fitted = registry.for_campaign(model, data.config).fit_phase(data, phase, previous, log=log)
        fitted.save()
    except ModelSkipped as exc:
        return PhaseRun(None, str(exc))
    return PhaseRun(fitted, None, time.perf_counter() - start)
