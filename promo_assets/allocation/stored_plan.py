"""A model's `BudgetPlan` (allocation/plan.py) run against the warehouse: the budgets solved over
the stored population coefficients and stored (`solve_and_store`), the stored solution read back
(`read_stored`), and the population decided at it and stored chunk by chunk (`decide_and_store`).

These are the steps of a model's chain `budget_dual` → `allocation`; the Dagster assets call them
inside their results transaction and show what they return. No dagster here (domain code).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from promo_assets.allocation.errors import AllocationInputError
from promo_assets.allocation.plan import BudgetPlan, Stored
from promo_assets.allocation.stored import StoredCoefficients
from promo_assets.store import models as models_store, results


@dataclass(frozen=True)
class ModelRun:
    """One model version of a campaign, as a run of its chain works on it: the run's id and the name
    its budget_dual asset shows in messages (`<model>/budget_dual`)."""

    campaign: str
    model: str
    version: str
    run_id: str = ""
    dual_asset: str = "budget_dual"


def population_arrays(con, run: ModelRun, n_levels: int, several: bool):
    """(user ids, response, cost) of the population's stored coefficients, in memory: what several
    budgets are solved over (None for one budget, solved chunk by chunk from the store)."""
    if not several:
        return None
    return models_store.coefficient_arrays(con, run.campaign, run.model, run.version, "population", n_levels)


def population_source(con, run: ModelRun, n_levels: int, chunk_rows: Callable[[int], int]) -> StoredCoefficients:
    """The population's stored coefficients as a streamed chunk source (`chunk_rows(users)`: the rows
    per chunk)."""
    source = StoredCoefficients(con, run.campaign, run.model, run.version, "population", n_levels)
    source.rows = chunk_rows(source.n_users)
    return source


@dataclass(frozen=True)
class SolveRecord:
    """What `solve_and_store` stored: the duals' rows, the frontier points, the infeasible budgets'
    rows, the multipliers' rows (several budgets) and a warning per infeasible budget."""

    duals: list[dict]
    frontier: list[dict]
    infeasible: list[dict]
    multipliers: list[dict]
    warnings: list[str] = field(default_factory=list)


def solve_and_store(con, run: ModelRun, plan: BudgetPlan, source, population=None, *, client=None,
                    log=None) -> SolveRecord:
    """Solve every budget (`plan.solve`) and store it: λ* and the tie share per budget in budget_dual,
    every multiplier and its predicted use in budget_multipliers (several budgets), the infeasible
    budgets in infeasible_budget."""
    solution = plan.solve(source, population, client=client, log=log)
    rows, table, infeasible, warnings = [], [], [], []
    for got in solution.solved:
        b = got.budget_per_capita
        models_store.record_dual(con, run.campaign, run.model, run.version, got, run.run_id)
        rows.append(got.row())
        if plan.several:
            models_store.record_multipliers(con, run.campaign, run.model, run.version, "population",
                                            pd.DataFrame(got.multiplier_rows()), run.run_id)
            table += [{"budget_per_capita": b, "budget": r["constraint_name"], "multiplier": float(f"{r['multiplier']:.6g}"),
                       "use / budget": round(r["use_over_budget"], 4)} for r in got.multiplier_rows()]
    for b, exc in solution.infeasible:
        warnings.append(f"{run.model}: budget_per_capita {b:g} skipped: {exc}; the other budgets are solved")
        infeasible.append(results.record_infeasible(con, run.campaign, run.model, run.version, b, exc, run.run_id))
    return SolveRecord(rows, solution.frontier, infeasible, table, warnings)


@dataclass(frozen=True)
class StoredRun:
    """What budget_dual stored in one run: the solution (λ* and tie share per budget; the multipliers
    for several budgets), the infeasible budgets with their message, the lineage (model version,
    budget_dual's run and version) and the λ* rows to show."""

    stored: Stored
    infeasible: list[tuple[float, str]]
    lineage: dict
    lambdas: list[dict]


def read_stored(con, run: ModelRun, dual_run: str, dual_version: str | None, plan: BudgetPlan) -> StoredRun:
    """What budget_dual stored in run `dual_run` for `run`'s model version; an AllocationInputError
    naming the asset to re-materialize when the run left nothing (or solved other budgets)."""
    duals, infeasible = models_store.duals_of_run(con, run.campaign, run.model, run.version, dual_run)
    if not duals and not infeasible:
        raise AllocationInputError(f"{run.dual_asset} of run {dual_run} left no λ* for {run.model} {run.version} (its run "
                                   "failed and its rows were removed): re-materialize it")
    lineage = {"model_version": run.version, "budget_dual_run": dual_run, "budget_dual_version": dual_version}
    lambdas = [{"budget_per_capita": float(b), "lambda_": float(f"{lam:.6g}"), "tie_share": round(float(s), 4)}
               for b, lam, s in duals]
    multipliers = read_multipliers(con, run, dual_run, plan.names()) if plan.several else {}
    return StoredRun(Stored({float(b): (lam, s) for b, lam, s in duals}, multipliers),
                     [(float(b), m) for b, m in infeasible], lineage, lambdas)


def read_multipliers(con, run: ModelRun, dual_run: str, names: list[str]) -> dict:
    """{budget: multipliers in `names` order} that budget_dual stored in run `dual_run` (several budgets)."""
    out: dict[float, dict] = {}
    for b, name, mu in models_store.multipliers_of_run(con, run.campaign, run.model, run.version, dual_run):
        out.setdefault(float(b), {})[name] = float(mu)
    for b, got in out.items():
        if list(got) != names:
            raise AllocationInputError(f"{run.dual_asset} of run {dual_run} solved the budgets {', '.join(got)}, "
                                       f"campaign.yaml now has {', '.join(names)}: re-materialize it")
    return {b: [got[n] for n in names] for b, got in out.items()}


def decide_and_store(con, run: ModelRun, plan: BudgetPlan, stored: Stored, source, population=None, *, config,
                     client=None) -> list[dict]:
    """The population's levels at the stored solution (`plan.decide`), written to allocation chunk by
    chunk; the rows to show (users, cost and level shares per budget; each budget's use for several)."""
    incentives = np.asarray(config.incentives, dtype=np.float64)

    def sink_for(b: float):
        def sink(i, first, levels, ids):
            models_store.add_allocation(con, [run.campaign, run.model, run.version, b, run.run_id], pd.DataFrame(
                {"user_id": ids, "level": levels.astype(np.int32), "incentive": incentives[levels]}))
        return sink

    decided = plan.decide(stored, source, population, sink_for=sink_for, client=client)
    rows = []
    for b, got in decided.items():
        n = max(got["users"], 1)
        uses = ({f"{name} use / budget": round(float(u / t), 4) if t > 0 else 0.0
                 for name, u, t in zip(plan.names(), got["use"], got["totals"])} | {"solved again": got["resolved"]}
                if plan.several else {})
        rows.append({"budget_per_capita": b, "users": got["users"], "cost_per_capita": got["cost"] / n, **uses,
                     **{f"share {lab}": round(float(s), 3) for lab, s in zip(config.labels, got["level_counts"] / n)}})
    return rows


def multiplier_rows(plan: BudgetPlan, stored: Stored) -> list[dict]:
    """The stored multipliers of every budget, one row per budget (several budgets)."""
    return [{"budget_per_capita": b, **{n: float(f"{m:.6g}") for n, m in zip(plan.names(), mu)}}
            for b, mu in stored.multipliers.items()]
