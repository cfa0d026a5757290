"""Decision rows, manifests and `promo export`: from a `Decision` to the rows stored in the warehouse,
and from the stored rows to the outbox files (never solving again).

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.errors import DomainError
from promo_assets.decisions.checks import CHECK_NAMES, check_decisions
from promo_assets.decisions.exploration import Constraints, Decision, Exploration, decide_with_exploration
from promo_assets.decisions.outbox import DECISION_COLUMNS, read_manifest, write_outbox
from promo_assets.monitoring import exported
from promo_assets.store import decisions as decisions_store, runs


class ExportError(DomainError, ValueError):
    """`promo export` cannot export (no champion or decisions yet, a budget not configured, a check
    that fails on the stored decisions)."""


def decision_frame(user_ids, decision: Decision, labels: Sequence[str], incentives: Sequence[float], model: str,
                   version: str) -> pd.DataFrame:
    """One budget's rows (DECISION_COLUMNS, and the champion's own level of each user, stored for the outcomes
    but not exported): the users in the order given."""
    lv = decision.levels
    return pd.DataFrame({
        "user_id": pd.Series(user_ids, dtype=str).to_numpy(),
        "level": lv.astype(np.int32),
        "label": np.asarray([str(x) for x in labels], dtype=object)[lv],
        "incentive": np.asarray(incentives, dtype=np.float64)[lv],
        "predicted_response": decision.response,
        "predicted_cost": decision.cost,
        "policy": np.where(decision.explore, "explore", "champion"),
        "propensity": decision.propensity,
        "model": model,
        "model_version": version,
        "champion_level": decision.policy_levels.astype(np.int32),
    })


def _finite(x) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def manifest_entry(decision: Decision, *, dr_value=None, dr_value_interval=(None, None), dr_cost=None,
                   dr_cost_interval=(None, None), mix: Sequence[float]) -> dict:
    """The manifest's entry of one budget (without file name, rows and checksum: added when written).

    expected_response / expected_cost: the champion's predicted per-capita response and cost of this
    decision (and their totals over the users), and the doubly robust estimate of the champion's
    policy at this budget on the evaluation events with its interval (the champion asset's evidence;
    the policy without exploration)."""
    n = decision.n_users
    multi = {} if decision.multipliers is None else {"multipliers": decision.multipliers,
                                                      "budget_use": decision.budget_use}
    return {
        **multi,
        "budget_per_capita": decision.budget_per_capita,
        "lambda_": _finite(decision.lambda_),
        "users": n,
        "expected_response": {
            "per_capita": decision.value_per_capita, "total": decision.value_per_capita * n,
            "dr_per_capita": _finite(dr_value), "dr_low": _finite(dr_value_interval[0]),
            "dr_high": _finite(dr_value_interval[1])},
        "expected_cost": {
            "per_capita": decision.cost_per_capita, "total": decision.cost_per_capita * n,
            "dr_per_capita": _finite(dr_cost), "dr_low": _finite(dr_cost_interval[0]),
            "dr_high": _finite(dr_cost_interval[1])},
        "exploration": {
            "share": decision.share, "users": int(decision.explore.sum()), "mix": [float(x) for x in mix],
            "expected_cost_per_capita": decision.explore_cost_per_capita,
            "value_given_up_per_capita": decision.value_given_up_per_capita,
            "value_given_up_total": decision.value_given_up_per_capita * n,
            "champion_value_without_exploration_per_capita": decision.full_value_per_capita},
    }


@dataclass(frozen=True)
class Population:
    """The users decided for (N ids) with the champion's predicted `response` and `cost` of each at
    every level (N x K each)."""

    users: Sequence
    response: np.ndarray
    cost: np.ndarray


@dataclass
class DecisionSet:
    """Every budget's decision of one champion: rows (budget -> DECISION_COLUMNS), manifest entries,
    check outcomes ({check name: [(budget, CheckOutcome)]}) and the dearest level of any user."""

    frames: dict
    entries: list
    outcomes: dict
    max_user_cost: float


def decide_budgets(population: Population, budgets: Sequence[float], exploration: Exploration, day: dt.date, *,
                   config: CampaignConfig, champion: Mapping, evidence: pd.DataFrame | None = None,
                   constraints: Constraints | None = None) -> DecisionSet:
    """Decide every budget for the `population` (`decide_with_exploration`), build its rows (the levels
    named by `config`'s labels and incentives) and manifest entry (with the champion's DR value and
    cost intervals at that budget from `evidence`, the champion_evidence rows of its run) and run the
    checks of `check_decisions` on each."""
    users, response, cost = population.users, population.response, population.cost
    labels, incentives = config.labels, config.incentives
    frames, entries = {}, []
    outcomes: dict[str, list] = {name: [] for name in CHECK_NAMES}
    max_user_cost = float(np.max(cost)) if np.size(cost) else 0.0
    mine = None
    if evidence is not None and len(evidence):
        mine = evidence[(evidence["evidence_kind"] == "candidate") & (evidence["champion_candidate"] == champion["name"])]
    for b in budgets:
        decided = decide_with_exploration(response, cost, float(b), exploration, day, constraints)
        frame = decision_frame(users, decided, labels, incentives, champion["name"], champion["version"])
        dr = None
        if mine is not None:
            at = mine[mine["budget_per_capita"] == float(b)]
            dr = at.iloc[0] if len(at) else None
        entries.append(manifest_entry(
            decided, dr_value=None if dr is None else dr["value"],
            dr_value_interval=(None, None) if dr is None else (dr["value_low"], dr["value_high"]),
            dr_cost=None if dr is None else dr["dr_cost"],
            dr_cost_interval=(None, None) if dr is None else (dr["dr_cost_low"], dr["dr_cost_high"]),
            mix=exploration.weights(np.shape(response)[1])))
        frames[float(b)] = frame
        for outcome in check_decisions(frame, users=users, budget_per_capita=float(b), labels=labels,
                                       incentives=incentives, max_user_cost=max_user_cost, share=exploration.share,
                                       tolerance=exploration.tolerance):
            outcomes[outcome.name].append((float(b), outcome))
    return DecisionSet(frames, entries, outcomes, max_user_cost)


def manifest(campaign: str, date: str, champion: dict, users_source: str, entries: list[dict], run_id: str) -> dict:
    """The manifest of one export (outbox.write_outbox adds each file's name, rows and checksum)."""
    return {"campaign": campaign, "date": date, "champion": champion["name"], "champion_version": champion["version"],
            "members": champion.get("members"), "weights": champion.get("weights"),
            "member_versions": champion.get("versions"), "users": users_source, "decisions_run_id": run_id,
            "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "budgets": entries,
            "propensity": "P(level given | user) of the decision: (1 - s) 1{level = champion's level} + s mix[level], "
                          "s = the exploration share (docs/decisions.md)"}


def export_stored(con, campaign: str, outbox: Path, *, config, budgets: Sequence[float] | None = None,
                  fmt: str = "parquet", run_id: str | None = None,
                  by: exported.ExportBy = exported.ExportBy()) -> tuple[Path, dict, list]:
    """Write stored decisions to the outbox, after checking them again: those of decisions run
    `run_id` (the `outbox` asset), else the campaign's latest visible (succeeded) decisions run
    (`promo export`). Never solves again. The manifest names the deployed budget
    (`exported.deployed_budget`), and the export is recorded in table decision_exports (`by`: the asset's
    run or `promo export`; `con` must be writable). Returns (folder, manifest, [(budget, checks)]).
    Raises ExportError: no decisions yet, a decision whose export monitoring stopped (unless
    `by.despite_stop`), a budget not configured or not stored, a check that fails (nothing is written then);
    OutboxError when the outbox cannot be written."""
    if run_id is None:
        run_id = runs.latest_decisions_run(con, campaign)
        if run_id is None:
            has_champion = not decisions_store.latest_champion(con, campaign).empty
            raise ExportError(f"campaign '{campaign}' has no stored decisions yet"
                              + ("" if has_champion else " and no champion")
                              + f": run `promo run --campaign {campaign}` first")
    stored = runs.decision_budgets_of_run(con, campaign, run_id)
    if stored.empty:
        raise ExportError(f"decisions run {run_id} of campaign '{campaign}' left no decisions (its run failed)")
    record = exported.export_records(con, campaign).get(run_id)
    if record is not None and record.state == exported.STOPPED and not by.despite_stop:
        raise ExportError(f"the export of the decisions for {pd.Timestamp(stored['decision_date'].iloc[0]).date()} "
                          f"(run {run_id}) was stopped by monitoring ({record.reason}); the outbox keeps the last "
                          "exported decision. `promo export --despite-stop` writes them anyway")
    paced = [float(b) for b, m in zip(stored["budget_per_capita"], stored["decision_manifest"])
             if "pacing" in json.loads(m)["entry"]]  # campaign.yaml `budget:`: today's paced decision
    configured = list(config.budget_per_capita) + paced
    available = [float(b) for b in stored["budget_per_capita"]]
    shown = ", ".join(f"{b:g}" for b in configured)
    if budgets:
        wanted = [float(b) for b in budgets]
        unknown = [b for b in wanted if b not in configured]
        if unknown:
            raise ExportError(f"budget {', '.join(f'{b:g}' for b in unknown)} is not configured for campaign "
                              f"'{campaign}' (campaign.yaml budget_per_capita: {shown})")
        absent = [b for b in wanted if b not in available]
        if absent:
            raise ExportError(f"no stored decisions at budget {', '.join(f'{b:g}' for b in absent)} for campaign "
                              f"'{campaign}' (stored: {', '.join(f'{b:g}' for b in available)}): run `promo run` first")
    else:
        wanted = [b for b in available if b in configured]
        if not wanted:
            raise ExportError(f"the stored decisions of campaign '{campaign}' are for budgets "
                              f"{', '.join(f'{b:g}' for b in available)}, none configured now ({shown}): run `promo run`")
    files, entries, outcomes = {}, [], []
    champion = None
    for b in wanted:
        row = stored[stored["budget_per_capita"] == b].iloc[0]
        stored_json = json.loads(row["decision_manifest"])
        entry, champion = stored_json["entry"], stored_json["champion"]
        frame = decisions_store.decisions_of_run(con, campaign, run_id, b)
        checks = check_decisions(frame, users=frame["user_id"].unique(), budget_per_capita=b, labels=config.labels,
                                 incentives=config.incentives, max_user_cost=float(stored_json["max_user_cost"]),
                                 share=entry["exploration"]["share"], tolerance=float(config.exploration.tolerance))
        failed = [c for c in checks if not c.passed]
        if failed:
            raise ExportError(f"the stored decisions at budget {b:g} fail {', '.join(c.name for c in failed)}: "
                              + "; ".join(c.message for c in failed) + " (nothing was written)")
        outcomes.append((b, checks))
        files[b] = frame[list(DECISION_COLUMNS)]
        entries.append(entry)
    first = stored.iloc[0]
    body = manifest(campaign, str(pd.Timestamp(first["decision_date"]).date()), champion, str(first["decision_users"]),
                    entries, run_id)
    body["deployed_budget"] = exported.deployed_budget(config, wanted, paced[0] if paced else None, budgets)
    folder = write_outbox(outbox, campaign, body["date"], files, body, fmt=fmt)
    written = read_manifest(folder)
    exported.record_exported(con, campaign, written, body["deployed_budget"], by.who, str(folder))
    return folder, written, outcomes
