"""What the campaign report shows, read from the warehouse (no dagster): one leaderboard run (its
policy_evaluation rows, the models it listed, the data checks it saw), the frontier of every policy
and the mean response per level recomputed from the stored holdout coefficients, the champion and its
evidence, the latest decisions and their exploration share, the per-segment results and, where
campaign.yaml `budget:` paces a period, the spend per day as the decisions run saw it (table pacing)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.core.coefficients import Coefficients
from promo_assets.core.errors import DomainError
from promo_assets.evaluation.curves import policy_curves
from promo_assets.evaluation.records import LoggedEvents, Truth
from promo_assets.store import decisions as decisions_store, frames as frames_store, models as models_store
from promo_assets.monitoring.exported import export_state
from promo_assets.monitoring.status import status_lines
from promo_assets.store import monitoring as monitoring_store, runs, warehouse


class ReportError(DomainError, ValueError):
    """The campaign has nothing to report yet (no leaderboard of a succeeded run)."""


@dataclass
class ReportData:
    campaign: str
    board_run: str
    board_started: dt.datetime | None
    labels: list[str]
    budgets: list[float]
    board: pd.DataFrame                      # policy_evaluation rows of the leaderboard run
    entries: pd.DataFrame                    # model, model_version, evaluation_run_id, status, reason
    checks: list[tuple] = field(default_factory=list)   # failed data checks: name, severity, message
    curves: pd.DataFrame | None = None       # policy_curves: every model, 'random' and ('oracle')
    per_level: pd.DataFrame | None = None    # model, level, label, mean_response (holdout users)
    champion: dict | None = None             # the latest champion row
    evidence: pd.DataFrame | None = None     # its champion_evidence rows
    decisions: pd.DataFrame | None = None    # per budget: users, exploration share, expected response / cost
    decision_levels: pd.DataFrame | None = None  # budget, level, label, policy, users
    segments: pd.DataFrame | None = None     # segment_evaluation rows
    period_budget: dict | None = None        # campaign.yaml `budget:` (None: no period paced)
    decisions_run: str | None = None         # the decisions run shown
    pacing: pd.DataFrame | None = None       # its rows of table pacing (one per paced day)
    notes: list[str] = field(default_factory=list)  # what could not be shown, and why
    outcomes: pd.DataFrame | None = None     # the latest outcomes run: one row per decided day (table outcomes)
    outcome_effect: pd.DataFrame | None = None   # its effect so far per deployed day, with the confidence sequence
    monitoring_checks: pd.DataFrame | None = None  # its checks
    monitoring_confidence: float = 0.9
    status: list[str] = field(default_factory=list)  # the status block of `promo report`, when gathered
    export_stopped: str | None = None        # 'EXPORT STOPPED since …; serving …' while monitoring stops the export


def _has(con, table: str) -> bool:
    return bool(warehouse.table_columns(con, table))


def latest_board_run(con, campaign: str, finished=()) -> tuple[str, dt.datetime | None]:
    """The campaign's latest succeeded leaderboard run (`finished`: run ids that count as succeeded)."""
    succeeded = runs.succeeded_runs(con, campaign, list(finished))
    if not succeeded:
        raise ReportError(f"no leaderboard of a succeeded run for campaign '{campaign}': run `promo run` first")
    return succeeded[0][0], succeeded[0][1]


def gather(con, landing: Path, campaign: str, config, board_run: str | None = None, finished=(),
           champion_run: str | None = None, decisions_run: str | None = None) -> ReportData:
    """Everything the report shows for `campaign` (its parsed campaign.yaml `config`), of leaderboard
    run `board_run` (default: the latest succeeded one), the champion of run `champion_run` and the
    decisions of run `decisions_run` (default: the latest visible ones)."""
    started = None
    if board_run is None:
        board_run, started = latest_board_run(con, campaign, finished)
    board = runs.run_evaluation(con, campaign, board_run)
    if board.empty:
        raise ReportError(f"leaderboard run {board_run} of campaign '{campaign}' has no evaluation rows")
    data = ReportData(campaign, board_run, started, [str(x) for x in config.labels],
                      list(config.budget_per_capita), board, runs.board_entries(con, campaign, board_run))
    data.checks = runs.run_failed_checks(con, campaign, board_run)
    _curves(con, landing, campaign, config, data)
    _champion(con, campaign, data, champion_run)
    _decisions(con, campaign, data, decisions_run)
    data.segments = runs.run_segments(con, campaign, board_run)
    data.period_budget = None if config.budget is None else config.budget.model_dump(mode="json")
    if data.decisions_run is not None:
        pacing = runs.pacing_of_run(con, campaign, data.decisions_run)
        data.pacing = pacing if len(pacing.columns) else None
    _outcomes(con, campaign, config, data)
    now = dt.datetime.now()
    data.status = status_lines(con, campaign, now, config.monitoring)
    data.export_stopped = export_state(con, campaign).stopped_line(now)
    return data


def _outcomes(con, campaign: str, config, data: ReportData) -> None:
    """The latest outcomes run's days, effect and checks (promo_assets.monitoring)."""
    if not _has(con, "monitoring_checks"):
        return
    run = monitoring_store.latest_run(con, campaign)
    if run is None:
        return
    data.outcomes = monitoring_store.of_run(con, campaign, run, "outcomes")
    data.outcome_effect = monitoring_store.of_run(con, campaign, run, "outcome_effect")
    data.monitoring_checks = monitoring_store.of_run(con, campaign, run, "checks")
    data.monitoring_confidence = float(config.monitoring.confidence)


def _aligned(con, campaign: str, model: str, version: str, target_users: np.ndarray, k: int):
    """The model's holdout Coefficients (response, cost: N x K) in the order of `target_users`, or None."""
    try:
        users, response, cost = models_store.coefficient_arrays(con, campaign, model, version, "holdout", k)
    except ValueError:  # not k levels per user: scored for another campaign.yaml
        return None
    if not len(users):
        return None
    idx = pd.Series(np.arange(len(users)), index=users).reindex(target_users).to_numpy()
    if np.isnan(idx).any():
        return None
    idx = idx.astype(int)
    return Coefficients(response[idx], cost[idx])


def _curves(con, landing: Path, campaign: str, config, data: ReportData) -> None:
    from promo_assets.simulation import truth_arrays

    holdout = frames_store.holdout_events(con, campaign)
    if holdout.empty:
        data.notes.append("no holdout events: no frontier and no response per level")
        return
    k = config.n_levels
    users = holdout["user_id"].to_numpy()
    specs = {}
    evaluated = data.entries[(data.entries["status"] == "evaluated") & (data.entries["model"] != "random")]
    for model, version in zip(evaluated["model"], evaluated["model_version"]):
        got = _aligned(con, campaign, model, version, users, k)
        if got is None:
            data.notes.append(f"{model}: its holdout coefficients of version {version} are no longer stored "
                              "(kept runs: PROMO_KEEP_RUNS); not in the plots")
            continue
        specs[model] = got
    true_values = true_costs = None
    if (landing / campaign / "truth" / "response.parquet").exists():
        true_values, true_costs = truth_arrays(landing / campaign, holdout["user_id"].tolist())
    t, y = holdout["level"].to_numpy(), holdout["response"].to_numpy(dtype=float)
    z, p = holdout["cost"].to_numpy(dtype=float), holdout["propensity"].to_numpy(dtype=float)
    if specs or true_values is not None:
        data.curves = policy_curves(specs, LoggedEvents(t, y, z, p),
                                    truth=None if true_values is None else Truth(true_values, true_costs))
    rows = []
    for k_ in range(k):
        label = data.labels[k_] if k_ < len(data.labels) else str(k_)
        for model, (v, _) in specs.items():
            rows.append({"model": model, "level": k_, "label": label, "mean_response": float(v[:, k_].mean())})
        if true_values is not None:
            rows.append({"model": "truth", "level": k_, "label": label, "mean_response": float(true_values[:, k_].mean())})
        at = t == k_
        if at.any():  # randomized logging: the mean observed response of the events logged at the level
            rows.append({"model": "observed", "level": k_, "label": label, "mean_response": float(y[at].mean())})
    data.per_level = pd.DataFrame(rows)


def _champion(con, campaign: str, data: ReportData, run_id: str | None) -> None:
    if not _has(con, "champion"):
        return
    rows = decisions_store.latest_champion(con, campaign) if run_id is None else \
        decisions_store.champion_of_run(con, campaign, run_id)
    if rows.empty:
        data.notes.append("no champion yet: the champion asset has not run for this campaign")
        return
    data.champion = rows.iloc[0].to_dict()
    data.evidence = decisions_store.champion_evidence_of_run(con, campaign, data.champion["run_id"])


def _decisions(con, campaign: str, data: ReportData, run_id: str | None) -> None:
    if not _has(con, "decision_budgets"):
        return
    if run_id is None:
        run_id = runs.latest_decisions_run(con, campaign)
        if run_id is None:
            data.notes.append("no decisions yet: the decisions asset has not run for this campaign")
            return
    data.decisions_run = run_id
    budgets = runs.decision_budgets_of_run(con, campaign, run_id)
    rows = []
    for _, r in budgets.iterrows():
        entry = json.loads(r["decision_manifest"]).get("entry", {})
        explore = entry.get("exploration", {})
        rows.append({"budget_per_capita": float(r["budget_per_capita"]), "decision_date": str(pd.Timestamp(r["decision_date"]).date()),
                     "champion": r["champion"], "users": entry.get("users"),
                     "exploration_share": explore.get("share"), "exploration_users": explore.get("users"),
                     "expected_response_per_capita": entry.get("expected_response", {}).get("per_capita"),
                     "expected_cost_per_capita": entry.get("expected_cost", {}).get("per_capita"),
                     "value_given_up_per_capita": explore.get("value_given_up_per_capita"),
                     "decided_for": r["decision_users"]})
    data.decisions = pd.DataFrame(rows)
    data.decision_levels = runs.decision_levels(con, campaign, run_id)
