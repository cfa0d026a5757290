"""Several budgets for every configured incentive budget (campaign.yaml `constraints:`).

Next to the incentive budget B (per user), a campaign may keep further cost types (a fixed cost per
level and a budget per user: an SMS sent with every incentive) and caps on the incentive cost of
groups of users (a budget per member of the group). For N users with incentive costs C (N x K):

    A_0 = C                  total B x N                 ('budget': the incentive budget, its μ is λ)
    A_t = 1 c_t^T            total b_t x N               (cost type t, one row of K costs)
    A_g = C * 1{i in g}      total b_g x |g|             ('group:<g>')

`solve_budgets` solves each incentive budget with all of them (`solve_multi`, DIPN Eq. 4: the exact
LP optimum through its dual, one multiplier μ_m per budget, its fractional users rounded down so
that every budget is kept); `decide_at_multipliers` is the decision at stored multipliers (DIPN
Eq. 7 with M multipliers: argmax_j v_ij − Σ_m μ_m A_m(i, j), ties to the cheaper incentive), what
the allocation and the evaluation apply instead of solving again; `use_at_matched_spend` measures
each budget's true use when the incentive budgets are scaled until the true incentive spend equals
the incentive budget (the several-budget form of "at matched true spend").

No dagster here (domain code).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InfeasibleBudgetError
from .multi import solve_multi

#: name of the incentive budget among the several budgets (its multiplier is the λ of budget_dual)
INCENTIVE = "budget"


def budget_names(cost_types: Mapping, groups: Mapping) -> list[str]:
    """The budgets' names in order: the incentive budget, the cost types, then `group:<name>`."""
    return [INCENTIVE, *cost_types, *(f"group:{g}" for g in groups)]


def budget_matrices(cost: np.ndarray, budget_per_capita: float, cost_types: Mapping,
                    groups: Mapping) -> tuple[list[np.ndarray], np.ndarray]:
    """([A_m N x K], [B_m totals]) in `budget_names` order. `cost_types`: name -> (K costs, budget per
    user); `groups`: name -> (N membership mask, budget per member)."""
    n, k = cost.shape
    mats = [cost] + [np.broadcast_to(np.asarray(vec, dtype=np.float64), (n, k)) for vec, _ in cost_types.values()] + \
           [cost * np.asarray(mask, dtype=bool)[:, None] for mask, _ in groups.values()]
    totals = [float(budget_per_capita) * n] + [float(b) * n for _, b in cost_types.values()] + \
             [float(b) * float(np.asarray(mask, dtype=bool).sum()) for mask, b in groups.values()]
    return mats, np.asarray(totals, dtype=np.float64)


def reduced_levels(response, cost, mats, multipliers) -> np.ndarray:
    """argmax_j v_ij − Σ_m μ_m A_m(i, j) per user, ties (within 1e-9, relative) to the cheaper incentive
    cost, then the lower level: the online rule under several budgets (DIPN Eq. 7 with M multipliers)."""
    reduced = response - sum(mu * a for mu, a in zip(multipliers, mats))
    top = reduced.max(axis=1, keepdims=True)
    tied = reduced >= top - 1e-9 * np.maximum(1.0, np.abs(top))
    return np.where(tied, cost, np.inf).argmin(axis=1)


def usage(mats: Sequence[np.ndarray], levels: np.ndarray) -> np.ndarray:
    """Each budget's use by `levels` (one level per user)."""
    rows = np.arange(len(levels))
    return np.array([float(a[rows, levels].sum()) for a in mats])


def within(use, totals, rel: float = 1e-9) -> bool:
    """Every use at most its budget (up to `rel`, relative)."""
    use, totals = np.asarray(use, dtype=np.float64), np.asarray(totals, dtype=np.float64)
    return bool(np.all(use <= totals + rel * np.maximum(1.0, np.abs(totals))))


@dataclass(frozen=True)
class SeveralBudgets:
    """One incentive budget solved with the others: the multiplier, total and predicted use of every
    budget (`names` order), the allocation's predicted response and incentive cost, the LP's dual
    bound, and the levels (rounded down: every budget kept)."""

    budget_per_capita: float
    names: tuple[str, ...]
    multipliers: np.ndarray
    totals: np.ndarray
    use: np.ndarray
    response: float
    cost: float
    dual_bound: float
    n_users: int
    levels: np.ndarray

    @property
    def lambda_(self) -> float:
        return float(self.multipliers[0])

    @property
    def respected(self) -> bool:
        return within(self.use, self.totals)

    def rows(self) -> list[dict]:
        """One row per budget: name, multiplier, total, predicted use and use / budget."""
        return [{"budget_per_capita": self.budget_per_capita, "constraint_name": name, "multiplier": float(mu),
                 "budget": float(t), "predicted_use": float(u), "use_over_budget": float(u / t) if t > 0 else 0.0}
                for name, mu, t, u in zip(self.names, self.multipliers, self.totals, self.use)]


def solve_budgets(response: np.ndarray, cost: np.ndarray, budgets_per_capita: Sequence[float], cost_types: Mapping,
                  groups: Mapping, *, log: Callable[[str], None] | None = None
                  ) -> tuple[list[SeveralBudgets], list[tuple[float, InfeasibleBudgetError]]]:
    """Every incentive budget solved together with the further budgets (`solve_multi`, rounded down):
    (the solved ones, [(budget, error)] for those that cannot be kept together)."""
    v = np.asarray(response, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    names = tuple(budget_names(cost_types, groups))
    solved, infeasible = [], []
    for b in budgets_per_capita:
        mats, totals = budget_matrices(c, float(b), cost_types, groups)
        try:
            res = solve_multi(v, mats, totals, rounding="down")
        except InfeasibleBudgetError as exc:
            name = names[exc.constraint] if exc.constraint is not None else "together"
            infeasible.append((float(b), InfeasibleBudgetError(f"budget '{name}': {exc}", exc.minimum_budget,
                                                               constraint=exc.constraint)))
            continue
        levels = np.asarray(res.levels, dtype=np.int64)
        solved.append(SeveralBudgets(
            budget_per_capita=float(b), names=names, multipliers=np.asarray(res.multipliers, dtype=np.float64),
            totals=totals, use=np.asarray(res.usage, dtype=np.float64), response=float(res.response),
            cost=float(c[np.arange(len(levels)), levels].sum()), dual_bound=float(res.dual_bound), n_users=len(v),
            levels=levels))
        if log:
            log(f"budget {b:g} per capita with {len(names) - 1} further budgets: multipliers "
                + ", ".join(f"{n} {m:.4g}" for n, m in zip(names, res.multipliers)))
    return solved, infeasible


def decide_at_multipliers(response: np.ndarray, cost: np.ndarray, mats: Sequence[np.ndarray], totals: np.ndarray,
                          multipliers: Sequence[float], *, keep: bool = True) -> tuple[np.ndarray, bool]:
    """(levels, resolved): the decision at stored multipliers (`reduced_levels`). With `keep`, where the
    rule exceeds a budget (users tied at the multipliers: the LP splits up to M of them) the budgets are
    solved again (`solve_multi`, rounded down) and `resolved` is True; without, the rule as is (the
    evaluation applies the population's multipliers to other users)."""
    v = np.asarray(response, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    levels = reduced_levels(v, c, mats, np.asarray(multipliers, dtype=np.float64))
    if not keep or within(usage(mats, levels), totals):
        return levels, False
    return np.asarray(solve_multi(v, list(mats), totals, rounding="down").levels, dtype=np.int64), True


def use_at_matched_spend(response: np.ndarray, cost: np.ndarray, true_mats: Sequence[np.ndarray], budget_per_capita: float,
                         cost_types: Mapping, groups: Mapping, *, iterations: int = 10, tol: float = 0.005
                         ) -> dict:
    """Each budget's true use at matched true incentive spend: the incentive budget and the group caps
    (the budgets on incentive cost) scaled by one factor s (bisection on [0.25, 4]) until the allocation's
    true incentive spend (`true_mats[0]`) is the incentive budget within `tol`; the cost types' budgets
    as they are. {"scale", "true_use", "budget", "true_use_over_budget", "levels"} of the last allocation
    within the incentive budget (None when none was found)."""
    v = np.asarray(response, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    n_types = len(cost_types)
    mats, totals = budget_matrices(c, budget_per_capita, cost_types, groups)
    scaled = np.array([1.0] + [0.0] * n_types + [1.0] * len(groups))  # which budgets s scales
    target = totals[0]
    lo, hi, best = 0.25, 4.0, None
    for _ in range(iterations):
        s = float(np.sqrt(lo * hi))
        try:
            res = solve_multi(v, mats, totals * (1 + scaled * (s - 1)), rounding="down")
        except InfeasibleBudgetError:
            lo = s
            continue
        lv = np.asarray(res.levels, dtype=np.int64)
        true_use = usage(true_mats, lv)
        if true_use[0] > target:
            hi = s
        else:
            lo, best = s, (s, true_use, lv)
            if true_use[0] >= target * (1 - tol):
                break
    if best is None:
        return {"scale": None, "true_use": None, "budget": totals.tolist(), "true_use_over_budget": None, "levels": None}
    s, true_use, lv = best
    return {"scale": s, "true_use": true_use.tolist(), "budget": totals.tolist(),
            "true_use_over_budget": [float(u / t) if t > 0 else 0.0 for u, t in zip(true_use, totals)], "levels": lv}


def decide_budgets_at(response: np.ndarray, cost: np.ndarray, multipliers: Mapping[float, Sequence[float]],
                      cost_types: Mapping, groups: Mapping, *, keep: bool = True) -> dict[float, dict]:
    """Every incentive budget's decision at its stored multipliers (`decide_at_multipliers`):
    {budget: {"levels", "use" (each budget's predicted use), "totals", "resolved"}}."""
    v = np.asarray(response, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    out = {}
    for b, mu in multipliers.items():
        mats, totals = budget_matrices(c, float(b), cost_types, groups)
        levels, resolved = decide_at_multipliers(v, c, mats, totals, mu, keep=keep)
        out[float(b)] = {"levels": levels, "use": usage(mats, levels), "totals": totals, "resolved": resolved}
    return out


def evaluate_budgets(response: np.ndarray, cost: np.ndarray, multipliers: Mapping[float, Sequence[float]],
                     cost_types: Mapping, groups: Mapping, true_costs: np.ndarray | None = None
                     ) -> tuple[dict[float, np.ndarray], list[dict]]:
    """The stored multipliers applied to other users (the holdout) and every budget's use there:
    ({budget: levels}, rows of budget, constraint, multiplier, budget total, predicted use and, with
    `true_costs` (N x K incentive cost in truth; the cost types' costs are exact), true use and true use
    at matched true incentive spend (`use_at_matched_spend`) with its scale)."""
    names = budget_names(cost_types, groups)
    decided = decide_budgets_at(response, cost, multipliers, cost_types, groups, keep=False)
    levels, rows = {}, []
    for b, got in decided.items():
        levels[b] = got["levels"]
        true_use = matched = None
        if true_costs is not None:
            tc = np.asarray(true_costs, dtype=np.float64)
            true_mats, _ = budget_matrices(tc, b, cost_types, groups)
            true_use = usage(true_mats, got["levels"])
            matched = use_at_matched_spend(response, cost, true_mats, b, cost_types, groups)
        for m, name in enumerate(names):
            rows.append({"budget_per_capita": b, "constraint_name": name, "multiplier": float(multipliers[b][m]),
                         "budget": float(got["totals"][m]), "predicted_use": float(got["use"][m]),
                         "true_use": None if true_use is None else float(true_use[m]),
                         "matched_true_use": None if not matched or matched["true_use"] is None
                         else float(matched["true_use"][m]),
                         "matched_scale": None if not matched else matched["scale"]})
    return levels, rows
