"""The budgets a campaign's allocation keeps, as one object: `BudgetPlan`.

A campaign has one or more per-capita incentive budgets (campaign.yaml `budget_per_capita`), and may
keep further budgets next to each one (campaign.yaml `constraints:`: other cost types, caps on groups
of users). The two are solved differently:

- one budget: one multiplier λ* per budget, solved exactly chunk by chunk over the stored population
  (on a Dask cluster when there is one); the users tied at λ* take the dearer level up to the stored
  share (`decide_at`);
- several budgets: every multiplier of a budget solved together (`solve_multi`, rounded down) over
  the population's coefficients in memory; the decision is the rule at the stored multipliers, solved
  again only where users tied at them would exceed a budget (`decide_budgets_at`).

`solve`, `decide` and `evaluate` hide which: the Dagster assets build the plan from the config, call
them and store what they return. No dagster here (domain code).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from promo_assets.allocation._checks import check_solve_size
from promo_assets.allocation.at_lambda import decide_at
from promo_assets.allocation.budgets import budget_names, decide_budgets_at, evaluate_budgets, solve_budgets
from promo_assets.allocation.chunked import ArraySource, decide_at_chunked
from promo_assets.allocation.errors import AllocationInputError, InfeasibleBudgetError
from promo_assets.allocation.stored import frontier_points, solve_budgets_chunked

#: a sink receives each decided chunk: (chunk index, its first row, its levels, its user ids)
Sink = Callable[[int, int, np.ndarray, np.ndarray], None]


@dataclass(frozen=True)
class SolvedBudget:
    """One incentive budget solved: `result` has lambda_, response, cost and dual_bound (an
    `Allocation` for one budget, a `SeveralBudgets` with every multiplier for several)."""

    budget_per_capita: float
    result: Any
    tie_share: float
    n_users: int

    def row(self) -> dict:
        """What budget_dual shows of it, per capita."""
        n, res, several = max(self.n_users, 1), self.result, hasattr(self.result, "respected")
        return {"budget_per_capita": self.budget_per_capita, "lambda_": float(res.lambda_),
                **({} if several else {"tie_share": self.tie_share}),
                "response_per_capita": float(res.response) / n, "cost_per_capita": float(res.cost) / n,
                "dual_gap": float(res.dual_bound - res.response), **({"every_budget_kept": res.respected} if several else {})}

    def multiplier_rows(self) -> list[dict]:
        """Every budget's multiplier and predicted use (several budgets; none for one)."""
        return self.result.rows() if hasattr(self.result, "rows") else []


@dataclass(frozen=True)
class Solution:
    """What `BudgetPlan.solve` found: the solved budgets, the infeasible ones with their error, and
    the points of the budget–response frontier."""

    solved: list[SolvedBudget]
    infeasible: list[tuple[float, InfeasibleBudgetError]]
    frontier: list[dict]


@dataclass(frozen=True)
class Stored:
    """What was solved and stored, read back for deciding: {budget: (λ*, tie share)} and, for several
    budgets, {budget: the multipliers in `BudgetPlan.names()` order}."""

    duals: Mapping[float, tuple[float, float]]
    multipliers: Mapping[float, Sequence[float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Holdout:
    """Users a stored solution is evaluated on: their coefficients per user (`response`, `cost`: how
    one budget decides), per logged event (`event_response`, `event_cost`: what is evaluated),
    `to_events` mapping per-user levels to the events, and the true incentive costs per event when
    known (simulated campaigns)."""

    response: np.ndarray
    cost: np.ndarray
    event_response: np.ndarray
    event_cost: np.ndarray
    to_events: Callable[[np.ndarray], np.ndarray]
    true_costs: np.ndarray | None = None


@dataclass(frozen=True)
class BudgetPlan:
    """The per-capita incentive budgets, and the further budgets kept next to each one (`cost_types`:
    name -> (K costs, budget per user); `groups`: name -> (N membership mask, budget per member))."""

    budgets: tuple[float, ...]
    cost_types: Mapping = field(default_factory=dict)
    groups: Mapping = field(default_factory=dict)

    @classmethod
    def of(cls, budgets: Sequence[float], constraints: Any = None, campaign: str = "") -> BudgetPlan:
        """From campaign.yaml's budgets and the decisions' `Constraints` for the users (or None)."""
        if not budgets:
            raise AllocationInputError(f"campaign {campaign!r} has no budget_per_capita in campaign.yaml")
        return cls(tuple(float(b) for b in budgets), dict(constraints.costs) if constraints else {},
                   dict(constraints.groups) if constraints else {})

    @property
    def several(self) -> bool:
        """Budgets next to the incentive budget (campaign.yaml `constraints:`)."""
        return bool(self.cost_types or self.groups)

    def names(self) -> list[str]:
        """The budgets of one incentive budget, in multiplier order: 'budget', the cost types, 'group:<name>'."""
        return budget_names(self.cost_types, self.groups)

    def solve(self, source, population=None, *, client=None, log=None) -> Solution:
        """Every budget solved over the population (`source`: its stored coefficients, streamed; for
        several budgets also `population`, its (user ids, response, cost) in memory)."""
        if self.several:
            _, response, cost = population
            frontier = frontier_points(source, client=client)
            solved, infeasible = solve_budgets(response, cost, self.budgets, self.cost_types, self.groups, log=log)
            return Solution([SolvedBudget(s.budget_per_capita, s, 0.0, len(response)) for s in solved], infeasible,
                            frontier)
        check_solve_size(source.n_users, source.n_levels)  # the cap per solve, before the frontier's passes
        frontier = frontier_points(source, client=client)
        solved, infeasible = [], []
        for b, *got in solve_budgets_chunked(source, self.budgets, client=client, log=log):
            if isinstance(got[0], InfeasibleBudgetError):
                infeasible.append((b, got[0]))
            else:
                solved.append(SolvedBudget(b, got[0], got[1], source.n_users))
        return Solution(solved, infeasible, frontier)

    def decide(self, stored: Stored, source, population=None, *, sink_for: Callable[[float], Sink],
               client=None) -> dict[float, dict]:
        """The population's levels at the stored solution, budget by budget, handed chunk by chunk to
        `sink_for(budget)`: {budget: {"users", "cost", "level_counts"} and, for several budgets, "use"
        (each budget's predicted use), "totals" and "resolved" (solved again for users tied at the
        multipliers)}."""
        out = {}
        if not self.several:
            for b, (lam, share) in stored.duals.items():
                out[b] = decide_at_chunked(source, lam, share, seed=0, client=client, sink=sink_for(b))
            return out
        ids, response, cost = population
        k = np.asarray(cost).shape[1]
        for b, got in decide_budgets_at(response, cost, stored.multipliers, self.cost_types, self.groups).items():
            levels = got["levels"]
            sink_for(b)(0, 0, levels, ids)
            out[b] = {"users": len(levels), "cost": float(got["use"][0]), "level_counts": np.bincount(levels, minlength=k),
                      "use": got["use"], "totals": got["totals"], "resolved": got["resolved"]}
        return out

    def evaluate(self, stored: Stored, holdout: Holdout, *, client=None, chunk_rows: int | None = None
                 ) -> tuple[dict[float, np.ndarray], list[dict]]:
        """The stored solution applied to other users (the holdout): ({budget: levels per logged
        event}, for several budgets the rows of each budget's use: predicted, and true and at matched
        true spend when the holdout has `true_costs`). One budget decides per user, as the
        population was decided, then maps the levels to the events; several budgets apply their
        multipliers to the events (the group caps are over the events' features)."""
        if self.several:
            return evaluate_budgets(holdout.event_response, holdout.event_cost, stored.multipliers, self.cost_types,
                                    self.groups, holdout.true_costs)
        response, cost = holdout.response, holdout.cost
        levels = {}
        for b, (lam, share) in stored.duals.items():
            if client is None:
                per_user = decide_at(response, cost, lam, share, seed=0)
            else:
                per_user = decide_at_chunked(ArraySource(response, cost, chunk_rows or len(response)), lam, share,
                                             seed=0, client=client)
            levels[b] = holdout.to_events(per_user)
        return levels, []
