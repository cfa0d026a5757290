"""A campaign's `BudgetPlan` (promo_assets.allocation.plan) built from campaign.yaml and the
warehouse: the per-capita budgets and, with campaign.yaml `constraints:`, the further budgets over
the users decided for (their group features from the population file, else the holdout events) or
over the holdout events a model is evaluated on.

`plan_for_users` is what a model's budget_dual and allocation solve and decide with, `plan_for_holdout`
and `holdout_decisions` what its policy_evaluation applies. No dagster here (domain code): a bad
`constraints:` block raises `DecisionError` naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.allocation.plan import BudgetPlan, Holdout
from promo_assets.allocation.stored_plan import ModelRun, StoredRun, population_arrays, read_stored
from promo_assets.decisions.exploration import Constraints, DecisionError
from promo_assets.ingestion import constraint_feature_problems
from promo_assets.ingestion.targets import population_rows
from promo_assets.store import frames as frames_store, models as models_store


def group_features(con, campaign: str, config) -> list[str]:
    """The feature columns campaign.yaml `constraints.groups` cap on; DecisionError naming a group whose
    column the loaded events lack (a cap on a column that is not there: never a query on it, no
    decision at all)."""
    features = sorted({g.feature for g in config.constraints.groups.values()}) if config.constraints else []
    if features:
        missing = constraint_feature_problems(config, frames_store.loaded_features(con, campaign),
                                              f"the loaded events of campaign '{campaign}'")
        if missing:
            raise DecisionError("campaign.yaml: " + "; ".join(missing))
    return features


def constraints_for_users(con, landing: Path, campaign: str, config, users) -> Constraints | None:
    """campaign.yaml `constraints:` for the users decided for (the group features from the population
    file, else the holdout events), or None when none is configured."""
    block = config.constraints
    if block is None:
        return None
    frame = pd.DataFrame(index=pd.Index(users, name="user_id"))
    if block.groups:
        features = group_features(con, campaign, config)
        rows = population_rows(con, landing, campaign, features)
        missing = [f for f in features if f not in rows.columns]
        if missing:
            raise DecisionError(f"campaign.yaml constraints.groups: the users decided for have no feature "
                                f"{', '.join(map(repr, missing))}")
        rows = rows.assign(user_id=rows["user_id"].astype(str)).drop_duplicates("user_id", keep="last")
        frame = rows.set_index("user_id")[features].reindex(pd.Index(users, dtype=str))
    return Constraints.build(block, frame, config.n_levels)


def plan_for_users(con, landing: Path, campaign: str, config, users=None) -> BudgetPlan:
    """The campaign's budgets, with campaign.yaml `constraints:` for `users` (the decisions' reading of
    the users' group features) when it has some."""
    constraints = (constraints_for_users(con, landing, campaign, config, [str(u) for u in users])
                   if config.constraints is not None else None)
    return BudgetPlan.of(config.budget_per_capita, constraints, campaign)


def plan_for_holdout(con, campaign: str, config, n_events: int) -> BudgetPlan:
    """The campaign's budgets, with campaign.yaml `constraints:` over the `n_events` holdout events
    (their group features read from the warehouse) when it has some."""
    constraints = None
    if config.constraints is not None:
        features = group_features(con, campaign, config)
        frame = (frames_store.holdout_segments(con, campaign, features) if features
                 else pd.DataFrame(index=pd.RangeIndex(n_events)))
        constraints = Constraints.build(config.constraints, frame, config.n_levels)
    return BudgetPlan.of(config.budget_per_capita, constraints, campaign)


@dataclass(frozen=True)
class PopulationPlan:
    """A model's population as its budgets are solved and decided over: its stored coefficients in
    memory (user ids, response, cost) for several budgets (None for one budget: streamed from the
    store), and the campaign's plan for those users."""

    population: tuple | None
    plan: BudgetPlan


def population_plan(con, landing: Path, run: ModelRun, config) -> PopulationPlan:
    """The population of `run`'s model version and the campaign's plan for it."""
    population = population_arrays(con, run, config.n_levels, config.constraints is not None)
    return PopulationPlan(population, plan_for_users(con, landing, run.campaign, config,
                                                     None if population is None else population[0]))


@dataclass(frozen=True)
class HoldoutDecisions:
    """A model's stored solution applied to the holdout: its coefficients per holdout event (`response`,
    `cost`), {budget: levels per event, or why the budget cannot be met} and, for several budgets, the
    rows of each budget's use (table budget_multipliers)."""

    response: np.ndarray
    cost: np.ndarray
    decisions: dict
    use_rows: list[dict]


@dataclass(frozen=True)
class HoldoutRun:
    """What a model's allocation applied, read back to be applied to the holdout: the holdout's plan,
    the holdout users and the stored solution (with its lineage)."""

    plan: BudgetPlan
    holdout: Holdout
    stored: StoredRun

    def evaluate(self, *, client=None, chunk_rows: int | None = None) -> HoldoutDecisions:
        """The stored solution applied to the holdout by the plan (several budgets: each budget's use
        measured); an infeasible budget keeps its reason in place of levels."""
        levels, use_rows = self.plan.evaluate(self.stored.stored, self.holdout, client=client, chunk_rows=chunk_rows)
        decided = {**levels, **{b: f"budget {b:g} per capita cannot be met: {m}" for b, m in self.stored.infeasible}}
        return HoldoutDecisions(self.holdout.event_response, self.holdout.event_cost, decided, use_rows)


def holdout_run(con, run: ModelRun, config, ev, made: dict) -> HoldoutRun:
    """What the allocation applied (`made`: its metadata, naming budget_dual's run and version), read
    back with the holdout's plan and the holdout users' coefficients aligned with the events of `ev`."""
    users, values, costs = models_store.coefficient_arrays(con, run.campaign, run.model, run.version, "holdout",
                                                           config.n_levels)
    plan = plan_for_holdout(con, run.campaign, config, ev.n)
    stored = read_stored(con, run, made["budget_dual_run"], made["budget_dual_version"], plan)
    v, c = ev.align(users, values, costs, run.model)
    holdout = Holdout(values, costs, v, c, lambda levels: ev.align_levels(users, levels), ev.true_costs)
    return HoldoutRun(plan, holdout, stored)
