"""Errors raised by the allocation package (both are ``ValueError`` subclasses)."""

from __future__ import annotations

from promo_assets.core.errors import DomainError


class AllocationInputError(DomainError, ValueError):
    """Bad coefficients or arguments: wrong shape or dtype, NaN/inf entries, negative costs, empty input."""


class SolveTooLargeError(AllocationInputError):
    """More users x levels than one solve may take (PROMO_MAX_SOLVE_CELLS); the message says why and
    what to do."""


class InfeasibleBudgetError(DomainError, ValueError):
    """The budget is below the cheapest possible allocation (every user at their cheapest level).

    ``minimum_budget`` holds the smallest feasible budget (in the same units as the budget that was
    passed: total, or per capita when ``per_capita=True``); ``constraint`` names the violated budget
    for several budgets.
    """

    def __init__(self, message: str, minimum_budget: float, constraint: int | None = None):
        super().__init__(message)
        self.minimum_budget = float(minimum_budget)
        self.constraint = constraint
