"""The champion's allocation with an exploration share: what leaves the system for one budget.

Deploying a policy to every user would end the campaign's randomization: the next days' events
would all sit at the policy's levels, and neither the models nor inverse propensity scoring could
learn or correct anything. `decide_with_exploration` keeps a randomized share in every decision:

1. **Who explores.** Exactly m = round(share x N) users, a seeded uniform draw without replacement
   (the seed and the decision date: another day explores other users), so every user is explored
   with probability s = m / N.
2. **What they get.** A level drawn from `mix` (K probabilities; default uniform over the levels).
3. **What the others get.** The champion's allocation of the remaining budget: the explored users'
   predicted cost (of the level each one drew) is taken off the budget B x N first and the
   multiple-choice knapsack (`promo_assets.allocation.solve`, exact LP optimum, its one fractional
   user rounded down) allocates the rest to the other users, so the predicted spend stays within
   the budget. λ is the solve's multiplier; the policy's level of user i is pi_i = argmax_j
   (v_ij - λ c_ij) (the solved level for the users who do not explore).
4. **The propensity written** for every user is the probability with which this mechanism gives
   the user the level it got:  p_i = (1 - s) 1{level_i = pi_i} + s mix[level_i]
   — for a user who follows the policy that is 1 - s + s mix[pi_i]; for an explored user who drew
   a level other than pi_i it is s mix[level_i]. With s = 0 every propensity is 1 (a deterministic
   policy: no randomization is kept, as configured).
5. **The value given up** is the champion's predicted value of its allocation of the whole budget
   to every user minus the predicted value of the decision with exploration (both per capita).

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np

from promo_assets.allocation import decide, solve, solve_multi
from promo_assets.allocation.budgets import budget_matrices, budget_names, reduced_levels
from promo_assets.allocation.errors import InfeasibleBudgetError
from promo_assets.config.campaign import ConstraintsBlock
from promo_assets.core.errors import DomainError


class DecisionError(DomainError, ValueError):
    """A decision cannot be made as configured (budget too small for the exploration, bad mix)."""


@dataclass(frozen=True)
class Exploration:
    """campaign.yaml `exploration:`: the share of users whose level is drawn at random, the seed of
    the draws and the mix (K probabilities) the levels are drawn from (None: uniform). `share_key` is the
    campaign.yaml key the share comes from, named when the share cannot be paid for (after a detected
    change, monitoring.change_explore_share)."""

    share: float = 0.05
    seed: int = 0
    mix: tuple[float, ...] | None = None
    tolerance: float = 0.005
    share_key: str = "exploration.share"

    @classmethod
    def from_config(cls, block) -> "Exploration":
        """From campaign.yaml's `exploration:` block (`CampaignConfig.exploration`, an `ExplorationBlock`)."""
        return cls(share=float(block.share), seed=int(block.seed), mix=tuple(block.mix) if block.mix else None,
                   tolerance=float(block.tolerance))

    def weights(self, n_levels: int) -> np.ndarray:
        """The level mix as K probabilities (uniform when none is configured)."""
        if self.mix is None:
            return np.full(n_levels, 1.0 / n_levels)
        w = np.asarray(self.mix, dtype=np.float64)
        if w.shape != (n_levels,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise DecisionError(f"exploration.mix must be {n_levels} numbers >= 0 (one per level) with a positive "
                                f"sum, got {list(self.mix)}")
        return w / w.sum()


@dataclass(frozen=True)
class Constraints:
    """campaign.yaml `constraints:` for the users decided for: further cost types (name -> (K costs,
    budget per user)) and group caps (name -> (N membership mask, budget per member)). The decision
    keeps them together with the incentive budget (`promo_assets.allocation.solve_multi`, DIPN Eq. 4)."""

    costs: dict
    groups: dict

    @classmethod
    def build(cls, block: ConstraintsBlock, users_features, n_levels: int) -> "Constraints":
        """From campaign.yaml's `constraints:` block, a frame of the users' features (one row per user
        decided for) and the campaign's number of levels."""
        costs = {name: (np.asarray(levels, dtype=np.float64), budget)
                 for name, (levels, budget) in block.cost_types(n_levels).items()}
        groups = {}
        for name, g in block.groups.items():
            if g.feature not in users_features.columns:
                raise DecisionError(f"constraints.groups.{name}: the users decided for have no feature {g.feature!r} "
                                    f"(features: {', '.join(map(str, users_features.columns))})")
            column = users_features[g.feature]
            mask = (column.astype(str) == str(g.equals)).to_numpy()
            if column.dtype.kind in "fi" and isinstance(g.equals, (int, float)):
                mask = (column == g.equals).to_numpy()
            groups[name] = (mask, g.budget_per_capita)
        return cls(costs, groups)

    def names(self) -> list[str]:
        return budget_names(self.costs, self.groups)

    def matrices(self, cost: np.ndarray, budget_per_capita: float) -> tuple[list[np.ndarray], np.ndarray]:
        """([A_m N x K], [B_m totals]): the incentive budget first, then the cost types, then the groups."""
        return budget_matrices(cost, budget_per_capita, self.costs, self.groups)


@dataclass
class Decision:
    """One budget's decision for N users.

    levels (N, int), explore (N, bool: the user's level was drawn at random), propensity (N),
    policy_levels (N: the champion's level pi_i at `lambda_`), predicted response and cost of each
    user's level (N), the multiplier, the per-capita budget, and per-capita summaries: predicted
    value and cost of the decision, of the champion without exploration, the value given up and the
    explored users' predicted cost.
    """

    levels: np.ndarray
    explore: np.ndarray
    propensity: np.ndarray
    policy_levels: np.ndarray
    response: np.ndarray
    cost: np.ndarray
    lambda_: float
    budget_per_capita: float
    share: float
    value_per_capita: float
    cost_per_capita: float
    full_value_per_capita: float
    value_given_up_per_capita: float
    explore_cost_per_capita: float
    multipliers: dict | None = None      # with constraints: the multiplier of every budget (λ is 'budget')
    budget_use: dict | None = None       # with constraints: each budget's predicted use / the budget

    @property
    def n_users(self) -> int:
        return int(self.levels.shape[0])


def explore_mask(n: int, share: float, seed: int, day: dt.date | None = None) -> np.ndarray:
    """Exactly round(share x n) users, a seeded uniform draw (the day changes the draw)."""
    m = int(round(float(share) * n))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 29, day.toordinal() if day else 0]))
    mask = np.zeros(n, dtype=bool)
    if m:
        mask[rng.choice(n, size=m, replace=False)] = True
    return mask


def decide_with_exploration(response, cost, budget_per_capita: float, exploration: Exploration,
                            day: dt.date | None = None, constraints: Constraints | None = None) -> Decision:
    """The decision for one budget (module docstring): values, costs N x K (the champion's
    predictions for the users decided for), the per-capita budget, the exploration settings and the
    decision date (it seeds the draws together with exploration.seed). With `constraints` the other
    budgets are kept too (`_decide_constrained`)."""
    v = np.asarray(response, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    if v.ndim != 2 or v.shape != c.shape or v.shape[0] == 0:
        raise DecisionError(f"values and costs must be two N x K arrays of the same shape, got {v.shape} and {c.shape}")
    n, k = v.shape
    b = float(budget_per_capita)
    if not math.isfinite(b) or b <= 0:
        raise DecisionError(f"budget_per_capita must be a finite number > 0, got {budget_per_capita!r}")
    s = float(exploration.share)
    if not 0 <= s < 1:
        raise DecisionError(f"{exploration.share_key} must be in [0, 1), got {exploration.share!r}")
    mix = exploration.weights(k)
    if constraints is not None and (constraints.costs or constraints.groups):
        return _decide_constrained(v, c, b, s, mix, exploration, day, constraints)
    rows = np.arange(n)
    full = solve(v, c, b, per_capita=True, seed=0, rounding="down")
    mask = explore_mask(n, s, exploration.seed, day)
    m = int(mask.sum())
    share = m / n
    levels = np.empty(n, dtype=np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(exploration.seed), 30, day.toordinal() if day else 0]))
    levels[mask] = rng.choice(k, size=m, p=mix)
    explore_cost = float(c[mask, levels[mask]].sum())
    left = b * n - explore_cost
    keep = ~mask
    cheapest = float(c[keep].min(axis=1).sum()) if keep.any() else 0.0
    if left < cheapest - 1e-9 * max(1.0, abs(cheapest)):
        raise DecisionError(
            f"budget {b:g} per capita cannot pay for the exploration share {s:g}: the explored users' levels cost "
            f"{explore_cost / n:.4g} per capita and the cheapest levels of the others {cheapest / n:.4g}; lower "
            f"{exploration.share_key}, give exploration.mix more weight on cheap levels, or raise the budget")
    if keep.any():
        rest = solve(v[keep], c[keep], max(left, cheapest), per_capita=False, seed=0, rounding="down")
        levels[keep] = rest.levels
        lam = float(rest.lambda_)
    else:
        lam = float(full.lambda_)
    policy = levels.copy()
    if m:
        policy[mask] = decide(v[mask], c[mask], lam) if math.isfinite(lam) else c[mask].argmin(axis=1)
    propensity = (1.0 - share) * (levels == policy) + share * mix[levels]
    val, cst = v[rows, levels], c[rows, levels]
    full_value = float(full.response) / n
    return Decision(levels=levels, explore=mask, propensity=propensity, policy_levels=policy, response=val, cost=cst,
                    lambda_=lam, budget_per_capita=b, share=share, value_per_capita=float(val.mean()),
                    cost_per_capita=float(cst.mean()), full_value_per_capita=full_value,
                    value_given_up_per_capita=full_value - float(val.mean()), explore_cost_per_capita=explore_cost / n)


def _decide_constrained(v, c, b, s, mix, exploration: Exploration, day, constraints: Constraints) -> Decision:
    """`decide_with_exploration` under several budgets: the same exploration draws; the explored users'
    use of every budget is taken off it first, and `solve_multi` (exact LP optimum, its fractional users
    rounded down) allocates the rest; the champion's level of an explored user is
    argmax_j v_ij − Σ_m μ_m A_m(i, j) at the solve's multipliers μ (λ = μ of the incentive budget)."""
    n, k = v.shape
    rows = np.arange(n)
    mats, totals = constraints.matrices(c, b)
    names = constraints.names()
    try:
        full = solve_multi(v, mats, totals, rounding="down")
    except InfeasibleBudgetError as exc:
        raise DecisionError(f"the budgets cannot be kept together ({', '.join(names)}): {exc}") from None
    mask = explore_mask(n, s, exploration.seed, day)
    m = int(mask.sum())
    levels = np.empty(n, dtype=np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(exploration.seed), 30, day.toordinal() if day else 0]))
    levels[mask] = rng.choice(k, size=m, p=mix)
    keep = ~mask
    left = totals - np.array([float(a[mask, levels[mask]].sum()) for a in mats])
    for name, a, room in zip(names, mats, left):
        cheapest = float(a[keep].min(axis=1).sum()) if keep.any() else 0.0
        if room < cheapest - 1e-9 * max(1.0, abs(cheapest)):
            raise DecisionError(f"budget '{name}' cannot pay for the exploration share {s:g}: the explored users use "
                                f"{totals[names.index(name)] - room:.4g} of its {totals[names.index(name)]:.4g} and the "
                                f"others need at least {cheapest:.4g}; lower {exploration.share_key} or raise the "
                                "budget")
    mu = np.asarray(full.multipliers, dtype=np.float64)
    if keep.any():
        kept = [a[keep] for a in mats]
        rest = solve_multi(v[keep], kept, np.maximum(left, 0.0), rounding="down")
        mu = np.asarray(rest.multipliers, dtype=np.float64)
        # the rule the service applies (ties to the cheaper level) where it keeps every budget: the LP
        # picks any of a user's tied levels; otherwise the LP's own levels
        rule = reduced_levels(v[keep], c[keep], kept, mu)
        rows_k = np.arange(len(rule))
        fits = all(float(a[rows_k, rule].sum()) <= room + 1e-9 * max(1.0, abs(room)) for a, room in zip(kept, left))
        levels[keep] = rule if fits else rest.levels
    policy = levels.copy()
    if m:
        policy[mask] = reduced_levels(v[mask], c[mask], [a[mask] for a in mats], mu)
    share = m / n
    propensity = (1.0 - share) * (levels == policy) + share * mix[levels]
    val, cst = v[rows, levels], c[rows, levels]
    use = {name: float(a[rows, levels].sum()) / t if t > 0 else 0.0 for name, a, t in zip(names, mats, totals)}
    full_value = float(full.response) / n
    return Decision(levels=levels, explore=mask, propensity=propensity, policy_levels=policy, response=val, cost=cst,
                    lambda_=float(mu[0]), budget_per_capita=b, share=share, value_per_capita=float(val.mean()),
                    cost_per_capita=float(cst.mean()), full_value_per_capita=full_value,
                    value_given_up_per_capita=full_value - float(val.mean()),
                    explore_cost_per_capita=float(c[mask, levels[mask]].sum()) / n,
                    multipliers={name: float(x) for name, x in zip(names, mu)}, budget_use=use)
