"""What travels together through the evaluation: the logged events, the truth, the outcome model's
predictions, and the holdout that holds the three.

- `LoggedEvents`: the randomized holdout as logged, one value per user: the level received
  (`logged`, t), the observed `response` (y) and `cost` (z), and the logging `propensity` (p; None for
  the empirical level shares, a scalar, or N values).
- `Truth`: the simulator's expected `response` and `cost` of every user at every level (N x K each),
  known for simulated campaigns only.
- `OutcomePredictions`: the doubly robust estimator's direct-method outcome model, its predicted
  `response` and `cost` of every holdout user at every level (N x K each, `fit_outcome_model(...)
  .predict`, fitted on the training days only).
- `Holdout`: the logged events with the optional truth and outcome predictions, what a policy is
  evaluated on.

The containers hold what they are given; the functions that take them check shapes and values and
raise `EvaluationError` naming the field (`logged`, `true_response`, `dm_values`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LoggedEvents", "Truth", "OutcomePredictions", "Holdout"]


@dataclass(frozen=True)
class LoggedEvents:
    """The logged RCT records of N users: `logged` (the level each received), `response`, `cost` and
    `propensity` (None: the empirical level shares N_t / N; a scalar; or N values in (0, 1])."""

    logged: np.ndarray
    response: np.ndarray
    cost: np.ndarray
    propensity: np.ndarray | float | None = None

    @classmethod
    def of_frame(cls, events) -> "LoggedEvents":
        """The events of a frame of logged events (the warehouse's and the landing folder's columns
        `level`, `response`, `cost`, `propensity`)."""
        return cls(events["level"].to_numpy(), *(events[c].to_numpy(dtype=float) for c in ("response", "cost", "propensity")))


@dataclass(frozen=True)
class Truth:
    """The simulator's expected `response` and `cost` of every user at every level (N x K each)."""

    response: np.ndarray
    cost: np.ndarray


@dataclass(frozen=True)
class OutcomePredictions:
    """The outcome model's predicted `response` and `cost` of every holdout user at every level
    (N x K each), the direct-method part of the doubly robust estimates."""

    response: np.ndarray
    cost: np.ndarray


@dataclass(frozen=True)
class Holdout:
    """What a policy is evaluated on: the logged `events`, with the `truth` (simulated campaigns) and
    the `outcome` model's predictions (the doubly robust figures) when known."""

    events: LoggedEvents
    truth: Truth | None = None
    outcome: OutcomePredictions | None = None
