"""The decisions of one day, as a run of the `decisions` asset makes them: the champion's
coefficients for the users decided for (`read_decision_inputs`), the day's paced decision of a
period budget (`read_day_plan`), every budget decided with the exploration share (`decide_day`) and
the rows stored in one transaction (`store_day`). No dagster here (domain code): a problem raises a
`DecisionError` (or `PacingError`) naming what to re-materialize or fix.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.decisions.exploration import Constraints, DecisionError, Exploration, decide_with_exploration
from promo_assets.decisions.export import DecisionSet, Population, decide_budgets
from promo_assets.decisions.pacing import (
    PacingDay,
    PacingError,
    PeriodBudget,
    pace_day,
    pacing_table,
    prior_ratio,
    store_pacing,
    stored_history,
)
from promo_assets.decisions.plans import constraints_for_users
from promo_assets.ingestion import day_files
from promo_assets.store import decisions as decisions_store, models as models_store


def blend_coefficients(con, campaign: str, members: dict, n_levels: int):
    """(users, response, cost) of the champion for the population: the weighted mean of its members'
    population coefficients (the versions the champion was chosen with)."""
    users = values = costs = None
    for m, w, version in zip(members["members"], members["weights"], members["versions"]):
        u, v, c = models_store.coefficient_arrays(con, campaign, m, version, "population", n_levels)
        if len(u) == 0:
            raise DecisionError(f"no population coefficients of {m} {version}: re-materialize {m}/response_coefficients")
        if users is not None and not np.array_equal(u, users):
            raise DecisionError(f"the population coefficients of the champion's members differ in their users ({m}): "
                                "re-materialize their response_coefficients")
        users, values, costs = u, w * v + (0 if values is None else values), w * c + (0 if costs is None else costs)
    return users, values, costs


@dataclass(frozen=True)
class DecisionInputs:
    """What the decisions of champion run `info["run_id"]` are made from: its champion row, the
    champion's description (members, weights, versions, name, version, run id), the users decided for
    with the champion's coefficients, the decision day (the day after the last loaded day), the newest
    evaluation of every model and the champion's evidence rows."""

    champion_row: pd.Series
    info: dict
    users: np.ndarray
    response: np.ndarray
    cost: np.ndarray
    day: dt.date
    newest: list
    evidence: pd.DataFrame


def read_decision_inputs(con, campaign: str, champ_run: str, n_levels: int) -> DecisionInputs:
    """The decision inputs of champion run `champ_run`; DecisionError when that run's champion was removed."""
    rows = decisions_store.champion_of_run(con, campaign, champ_run)
    if rows.empty:
        raise DecisionError(f"the champion of run {champ_run} was removed (its run failed): re-materialize champion")
    row = rows.iloc[0]
    members = json.loads(row["champion_members"])
    users, values, costs = blend_coefficients(con, campaign, members, n_levels)
    last_day = decisions_store.last_event_day(con, campaign)
    newest = decisions_store.latest_evaluations(con, campaign, champ_run)
    evidence = decisions_store.champion_evidence_of_run(con, campaign, champ_run)
    day = (pd.Timestamp(last_day).date() if last_day is not None else dt.date.today()) + dt.timedelta(days=1)
    info = {**members, "name": row["champion"], "version": row["champion_version"], "run_id": champ_run}
    return DecisionInputs(row, info, users, values, costs, day, newest, evidence)


def users_decided_for(landing: Path, campaign: str, n: int) -> str:
    """Which users the decisions are for, in words (the manifest's `users`)."""
    files = day_files(landing, campaign, "population")
    if files:
        return f"the {n} users of the population file {files[max(files)].name}"
    return (f"the {n} users of the holdout days: campaign '{campaign}' has no population/ file (add "
            "population/<date>.parquet listing every user to decide for)")


@dataclass(frozen=True)
class Paced:
    """A period budget's decision for the day (campaign.yaml `budget:`): the budget, today's paced
    decision and the days paced before it in the period."""

    budget: PeriodBudget
    today: PacingDay
    history: list[PacingDay]

    def rows(self) -> list[dict]:
        """The per-day pacing rows, today's included (table pacing)."""
        return pacing_table(self.budget, [*self.history, self.today])


@dataclass(frozen=True)
class DayPlan:
    """What the day's decisions need from the warehouse besides the champion: the period budget's
    paced decision (None without campaign.yaml `budget:` or outside its period) and campaign.yaml
    `constraints:` for the users decided for (None without)."""

    paced: Paced | None
    constraints: Constraints | None


def read_day_plan(con, landing: Path, campaign: str, config, inputs: DecisionInputs) -> DayPlan:
    """The day's paced decision and constraints (the earlier days of the period and the spend ratio
    read from the warehouse; the group features from the population file, else the holdout events)."""
    paced = None
    if config.budget is not None:
        budget = PeriodBudget.from_config(config.budget)
        if budget.start <= inputs.day <= budget.end:
            history = [h for h in stored_history(con, campaign) if budget.start <= h.day < inputs.day]
            prior = prior_ratio(con, campaign, len(inputs.response))
            paced = Paced(budget, pace_day(budget, inputs.day, inputs.response, inputs.cost, history, prior), history)
    return DayPlan(paced, constraints_for_users(con, landing, campaign, config, inputs.users))


@dataclass(frozen=True)
class DayDecision:
    """The day's decisions: every budget's (`made`), the period budget's pacing (or None), the inputs
    they were made from, the exploration used and which users they are for, in words."""

    made: DecisionSet
    paced: Paced | None
    inputs: DecisionInputs
    exploration: Exploration
    who: str


def decide_day(inputs: DecisionInputs, plan: DayPlan, config, exploration: Exploration, who: str) -> DayDecision:
    """Every configured budget's decision, the day's paced decision of a period budget (its entry tagged
    `pacing`: the per-capita budget its λ spends, predicted) and the constraints kept in each."""
    paced = plan.paced
    budgets = list(config.budget_per_capita)
    if paced is not None:
        paced_b = round(paced.today.predicted / len(inputs.users), 10)
        if paced_b not in budgets:
            budgets.append(paced_b)
    try:
        made = decide_budgets(Population(inputs.users, inputs.response, inputs.cost), budgets, exploration,
                              inputs.day, config=config, champion=inputs.info, evidence=inputs.evidence,
                              constraints=plan.constraints)
    except DecisionError:
        if paced is not None:
            _check_paced(inputs, plan, exploration, paced_b)
        raise
    if paced is not None:
        for entry in made.entries:
            if entry["budget_per_capita"] == paced_b:
                entry["pacing"] = {**paced.today.to_dict(), "total": paced.budget.total,
                                   "start": paced.budget.start.isoformat(), "end": paced.budget.end.isoformat(),
                                   "controller": paced.budget.controller}
    return DayDecision(made, paced, inputs, exploration, who)


def _check_paced(inputs: DecisionInputs, plan: DayPlan, exploration: Exploration, paced_b: float) -> None:
    """PacingError naming campaign.yaml `budget.total` when the day's paced budget `paced_b` (per capita)
    is the one that cannot be decided (its share of the period total cannot pay for the exploration)."""
    try:
        decide_with_exploration(inputs.response, inputs.cost, paced_b, exploration, inputs.day, plan.constraints)
    except DecisionError as exc:
        budget = plan.paced.budget
        raise PacingError(f"campaign.yaml budget: the period total {budget.total:g} ({budget.start} .. {budget.end}) "
                          f"leaves {paced_b:.4g} per capita for {inputs.day}, and that paced budget cannot be decided: "
                          f"{exc}. Raise 'budget.total' (or 'budget.per_day'), or lower {exploration.share_key}"
                          ) from None


def store_day(con, campaign: str, run_id: str, decided: DayDecision) -> list[dict]:
    """The decisions, their budgets' manifest entries, the champion's coefficients they were made from
    and, for a period budget, the per-day pacing rows (table pacing), inside the caller's transaction;
    returns the pacing rows. The stored manifest also keeps the exploration's seed
    (`exploration_seed`): `promo serve` draws its online users with the exploration these decisions
    used, whatever campaign.yaml says later."""
    inputs, made, day = decided.inputs, decided.made, decided.inputs.day
    rows = decided.paced.rows() if decided.paced is not None else []
    decisions_store.record_decision_coefficients(con, campaign, run_id, day, inputs.users, inputs.response, inputs.cost)
    for entry in made.entries:
        b = float(entry["budget_per_capita"])
        decisions_store.record_decisions(con, campaign, run_id, day, b, made.frames[b], decided.who, {
            "entry": entry, "champion": inputs.info, "max_user_cost": made.max_user_cost,
            "exploration_seed": int(decided.exploration.seed)})
    if rows:
        store_pacing(con, campaign, run_id, day, decided.paced.budget, rows)
    return rows


def budget_rows(entries: list) -> list[dict]:
    """One row per decided budget: its users, λ, predicted response and cost per user, the users
    explored and the value given up, and each kept budget's multiplier and use (campaign.yaml `constraints:`)."""
    return [{"budget": e["budget_per_capita"], "users": e["users"], "lambda": e["lambda_"],
             "predicted response / user": e["expected_response"]["per_capita"],
             "predicted cost / user": e["expected_cost"]["per_capita"], "explored": e["exploration"]["users"],
             "value given up / user": e["exploration"]["value_given_up_per_capita"],
             **({"multipliers": ", ".join(f"{k} {v:.4g}" for k, v in e["multipliers"].items()),
                 "use / budget": ", ".join(f"{k} {v:.3f}" for k, v in e["budget_use"].items())}
                if "multipliers" in e else {})} for e in entries]
