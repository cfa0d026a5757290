"""Checks of a campaign's training frame: is there anything to learn from? (docs/operations.md,
"Degenerate campaigns").

Three checks over the learning rows (splits 'train' and 'validation'; the holdout is only evaluated):

- `events_per_level`: every configured level (or arm) has at least `min_events_per_level` logged
  events (campaign.yaml, default 30). Blocking (severity ERROR) when fewer than two levels have any
  event: nothing shows how the response changes with the incentive, so no model is trained (each is
  skipped with this reason). Otherwise a warning naming the levels below the minimum; a model that
  needs events at every level (the T-learner) is skipped for a level without any.
- `response_varies`: the response is not the same in every row. Blocking: a constant response
  (all 0, all 1) teaches nothing, and an allocation built on it spends the budget blindly.
- `response_rate`: the mean response lies in campaign.yaml's `plausible_response_rate` (default
  [0.001, 0.95] for a binary response; no range for count / continuous unless given). A warning:
  a rate outside it usually means a wrong column or a broken logger.

`frame_checks` computes them (plain pandas, no dagster); the `training_frame` asset reports them as
Dagster asset checks, the model phase assets skip every model on a blocking failure
(`cannot_learn`), `promo run` and the leaderboard show the failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from promo_assets.config.campaign import CampaignConfig

LEARNING_SPLITS = ("train", "validation")
CHECKS = {
    "events_per_level": "every level (or arm) has at least campaign.yaml's min_events_per_level logged events in the "
                        "training days; an ERROR when fewer than two levels have any (no model is trained)",
    "response_varies": "the response is not the same in every training row; an ERROR when it is (no model is trained)",
    "response_rate": "the mean response lies in campaign.yaml's plausible_response_rate (default [0.001, 0.95] for a "
                     "binary response)",
}


@dataclass(frozen=True)
class FrameCheck:
    """One check's outcome: `passed`, `blocking` (a failure means no model can learn: severity
    ERROR; otherwise WARN), the `message` in the user's terms and numbers for the UI (`metadata`)."""

    name: str
    passed: bool
    blocking: bool
    message: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def severity(self) -> str:
        return "ERROR" if self.blocking else "WARN"


def level_counts(frame: pd.DataFrame, config: CampaignConfig) -> np.ndarray:
    """Logged events per level (K ints) among the learning rows of the training frame."""
    rows = frame[frame["split"].astype(str).isin(LEARNING_SPLITS)] if "split" in frame.columns else frame
    level = pd.to_numeric(rows["level"], errors="coerce").dropna().astype(np.int64)
    level = level[(level >= 0) & (level < config.n_levels)]
    return np.bincount(level.to_numpy(), minlength=config.n_levels)[: config.n_levels]


def _labels(config: CampaignConfig, levels) -> str:
    return ", ".join(f"'{config.labels[k]}'" for k in levels)


def frame_checks(frame: pd.DataFrame, config: CampaignConfig) -> list[FrameCheck]:
    """The three checks of the module doc on `frame` (columns level, response, split)."""
    counts = level_counts(frame, config)
    minimum = config.min_events_per_level
    low = [k for k in range(config.n_levels) if counts[k] < minimum]
    logged = [k for k in range(config.n_levels) if counts[k] > 0]
    what = "arm" if not config.ordered and not config.attributes else "level"
    per_level = {str(config.labels[k]): int(counts[k]) for k in range(config.n_levels)}
    if len(logged) < 2:
        only = f"only {what} {_labels(config, logged)} was logged" if logged else "no event was logged"
        msg = (f"{only} in the training days ({int(counts.sum())} events): nothing shows how the response changes with "
               f"the incentive, so no model is trained")
        checks = [FrameCheck("events_per_level", False, True, msg, {"events_per_level": per_level, "minimum": minimum})]
    elif low:
        msg = (f"{what}(s) {_labels(config, low)} have fewer than min_events_per_level={minimum} logged events in the "
               f"training days ({', '.join(str(int(counts[k])) for k in low)}); predictions for them rest on the "
               f"other {what}s" + ("; a model that needs events at every level is skipped"
                                   if any(counts[k] == 0 for k in low) else ""))
        checks = [FrameCheck("events_per_level", False, False, msg, {"events_per_level": per_level, "minimum": minimum})]
    else:
        checks = [FrameCheck("events_per_level", True, False,
                             f"every {what} has at least {minimum} logged events in the training days",
                             {"events_per_level": per_level, "minimum": minimum})]

    rows = frame[frame["split"].astype(str).isin(LEARNING_SPLITS)] if "split" in frame.columns else frame
    y = pd.to_numeric(rows["response"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    y = y[np.isfinite(y)]
    if y.size and np.all(y == y[0]):
        checks.append(FrameCheck("response_varies", False, True,
                                 f"the response is {y[0]:g} in all {y.size} training rows: there is nothing to learn, "
                                 "so no model is trained (is the response column the right one?)",
                                 {"value": float(y[0]), "rows": int(y.size)}))
    else:
        checks.append(FrameCheck("response_varies", True, False, "the response varies", {"rows": int(y.size)}))

    bounds = config.plausible_response_rate
    mean = float(y.mean()) if y.size else float("nan")
    if bounds is None:
        checks.append(FrameCheck("response_rate", True, False,
                                 f"mean response {mean:.4g} (no plausible_response_rate for a {config.response} response)",
                                 {"mean_response": mean}))
    elif y.size and not bounds[0] <= mean <= bounds[1]:
        checks.append(FrameCheck("response_rate", False, False,
                                 f"the mean response {mean:.4g} is outside campaign.yaml's plausible_response_rate "
                                 f"[{bounds[0]:g}, {bounds[1]:g}]: check that the response column is the right one",
                                 {"mean_response": mean, "low": bounds[0], "high": bounds[1]}))
    else:
        checks.append(FrameCheck("response_rate", True, False,
                                 f"mean response {mean:.4g} within [{bounds[0]:g}, {bounds[1]:g}]",
                                 {"mean_response": mean, "low": bounds[0], "high": bounds[1]}))
    return checks


def cannot_learn(checks: list[FrameCheck]) -> str | None:
    """The reason no model can learn from the frame (the blocking failures), or None."""
    reasons = [c.message for c in checks if c.blocking and not c.passed]
    return "; ".join(reasons) if reasons else None
