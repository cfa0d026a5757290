"""The coefficients of a campaign: the predicted response and the predicted cost per user x level.

Every response model's `predict` returns them, the allocation decides from them, the evaluation
scores them against the logged RCT. They travel as one `Coefficients` pair (a named tuple, so
`response, cost = model.predict(users)` still unpacks it); a function that takes the pair as one
argument calls it `coefficients` and accepts any (response, cost) pair.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Coefficients(NamedTuple):
    """Predicted response and predicted cost per user x level (each N x K)."""

    response: np.ndarray
    cost: np.ndarray


def as_coefficients(coefficients) -> Coefficients:
    """`coefficients` (a Coefficients or any (response, cost) pair) as a Coefficients; the arrays are
    passed through as they are (no copy, no check: the callee checks shapes)."""
    if isinstance(coefficients, Coefficients):
        return coefficients
    try:
        response, cost = coefficients
    except (TypeError, ValueError):
        raise ValueError("coefficients must be a (response, cost) pair of N x K arrays, got "
                         f"{type(coefficients).__name__}") from None
    return Coefficients(response, cost)
