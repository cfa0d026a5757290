"""Budget allocation: the multiple-choice knapsack (MCKP) over users x incentive levels.

Given the predicted ``response`` and ``cost`` per user x level (N x K arrays, float32 or
float64, never copied to float64 wholesale), choose one level per user to maximize total value
under a budget. All solvers return the exact optimum of the LP relaxation with its certificate.

Public API
----------
``solve(response, cost, budget, per_capita=False, seed=0, *, rounding="sample", log=None) -> Allocation``
    One budget (DIPN Eq. 2; per capita, Eq. 5: total = budget x N). Exact: each user's upper
    convex hull of (cost, value) and the greedy by incremental efficiency (Sinha-Zoltners); for
    large N, lambda* is bracketed from a user sample first and only users whose level changes
    inside the bracket enter the greedy. At most one user is fractional in the LP optimum; it
    is resolved by seeded sampling (DIPN §3.1; ``rounding="down"`` always stays within budget).
``Allocation``
    Frozen dataclass: ``levels`` (int32, N), ``lambda_``, ``response`` (total predicted response),
    ``cost``, ``budget``, ``lp_response``, ``lp_cost``, ``dual_bound`` (= lambda*·B + sum_i max_j
    (v_ij - lambda*·c_ij)), ``gap`` (dual_bound - response), ``relative_gap``, ``fractional_user`` (index or None),
    ``fraction``, ``fractional_levels``, ``rounded_up``, ``feasible``, ``kind``, ``ratio``,
    ``info``; ``summary()`` gives the scalars as a dict.
``solve_ratio(response, cost, ratio, seed=0, ...) -> Allocation``
    Ratio budget of the GNN/hazard paper (Eq. 16): sum c x / sum v x <= ratio, solved as
    sum (c - ratio·v) x <= 0.
``solve_multi(response, cost, budgets, groups=None, per_capita=False, seed=0, ...) -> MultiAllocation``
    Several budgets (DIPN Eq. 4): M cost types (list of N x K arrays or N x K x M), and/or
    overlapping user groups (N x M boolean masks), each with its own budget. Smoothed-dual
    L-BFGS-B then exact column generation with HiGHS on the undecided users; returns the
    ``multipliers``, ``levels``, ``response``, ``usage``, ``lp_response``, ``dual_bound``, ``gap``.
``frontier(response, cost, log=None) -> Frontier``
    The whole budget-value curve of the LP: arrays ``lambdas`` (inf, then decreasing),
    ``costs`` and ``response`` (totals, non-decreasing) at every breakpoint; ``response_at(budget)``,
    ``lambda_at(budget)``, ``levels_at(budget)``, ``allocation(budget)`` reuse it without
    re-solving; ``to_frame()`` for plots.
``BudgetPlan.of(budgets, constraints)``
    The budgets a campaign's allocation keeps, one or several per incentive budget: ``solve``,
    ``decide``, ``evaluate`` (``allocation.plan``).
``decide(response, cost, lambda_, ratio=None)``, ``dual_objective(response, cost, lambda_, budget)``
    The per-user argmax rule and the dual function, for evaluation code.
``tie_share(response, cost, lambda_, budget)``, ``decide_at(response, cost, lambda_, share, seed)``
    The decision at a stored λ* with the rule for users tied at λ* (the LP optimum's fractional
    part): what the allocation and the policy evaluation apply instead of solving again.
Errors: ``AllocationInputError`` (shapes, dtypes, NaN/inf, negative costs, empty input),
``SolveTooLargeError`` (one of them: more users x levels than PROMO_MAX_SOLVE_CELLS per solve;
``check_solve_size(n_users, n_levels)`` checks it up front) and ``InfeasibleBudgetError`` (budget
below sum_i min_j c_ij; ``.minimum_budget``), all ValueError.
"""

from ._checks import check_solve_size
from .errors import AllocationInputError, InfeasibleBudgetError, SolveTooLargeError
from .frontier import Frontier, frontier
from .multi import MultiAllocation, solve_multi
from .plan import BudgetPlan
from .at_lambda import decide_at, tie_share
from .decision import decide, decide_at_lambdas
from .solver import Allocation, dual_objective, solve, solve_ratio

__all__ = [
    "Allocation",
    "BudgetPlan",
    "decide_at_lambdas",
    "AllocationInputError",
    "SolveTooLargeError",
    "check_solve_size",
    "Frontier",
    "InfeasibleBudgetError",
    "MultiAllocation",
    "decide",
    "decide_at",
    "dual_objective",
    "frontier",
    "solve",
    "solve_multi",
    "solve_ratio",
    "tie_share",
]
