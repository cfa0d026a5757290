"""What the campaign's leaderboard gathers besides the Dagster records of each model's chain: every
evaluated model's stored rows and holdout coefficients (`assemble`), their use of each kept budget
(`budgets_kept`), the deployed champion's members (`current_champion`), its plots (`board_plots`) and
the notes under it (`board_notes`). No dagster here (domain code).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from promo_assets.core.text import markdown_text
from promo_assets.evaluation.curves import policy_curves
from promo_assets.evaluation.inputs import budget_use_rows
from promo_assets.evaluation.plots import plot_frontier, plot_response_by_level
from promo_assets.store import decisions as decisions_store, models as models_store


@dataclass(frozen=True)
class Assembled:
    """Every evaluated model's stored evaluation rows, and {model: (version, response, cost)} of its
    holdout coefficients aligned with the holdout events (for the plots)."""

    frames: list[pd.DataFrame]
    specs: dict


@dataclass(frozen=True)
class ChainRecord:
    """Where a model's chain stands for a campaign: why campaign.yaml leaves it out (`left_out`:
    `registry.skip_reason`), else what the orchestrator recorded: the skip reason of its first phase's
    latest event when that is a skip, else its latest evaluation (model version, run id and the
    training frame it was made on), else nothing."""

    left_out: str | None = None
    skipped_reason: str | None = None
    model_version: str | None = None
    evaluation_run_id: str | None = None
    frame_version: str | None = None


def board_entry(name: str, record: ChainRecord, frame_version: str | None = None) -> dict:
    """Where model `name` stands: 'skipped' (campaign.yaml leaves it out or it does not apply; or its
    chain's latest event is a skip), 'evaluated' (its latest evaluation), 'stale'
    (that evaluation is of another training frame than `frame_version`, the current one: the model's
    chain failed or did not run since; not ranked) or 'missing'."""
    entry = {"model": name, "model_version": None, "evaluation_run_id": None, "status": "missing", "reason": None}
    if record.left_out is not None:
        return {**entry, "status": "skipped", "reason": record.left_out}
    if record.skipped_reason is not None:
        return {**entry, "status": "skipped", "reason": record.skipped_reason}
    if record.evaluation_run_id is None:
        return {**entry, "reason": "no evaluation yet (its chain failed or has not run)"}
    run_id = record.evaluation_run_id
    evaluated = {**entry, "model_version": record.model_version, "evaluation_run_id": run_id}
    if frame_version is not None and record.frame_version is not None and record.frame_version != frame_version:
        return {**evaluated, "status": "stale",
                "reason": f"stale: its latest evaluation (run {run_id[:8]}) is of an earlier training frame "
                          f"({record.frame_version}, now {frame_version}); its chain failed or has not run since, "
                          "so it is not ranked"}
    return {**evaluated, "status": "evaluated"}


def assemble(con, campaign: str, entries: list[dict], ev, n_levels: int) -> Assembled:
    """Every evaluated model's stored rows and its holdout coefficients; an entry whose rows were
    removed or whose coefficients are of another campaign.yaml is marked missing or stale in place."""
    frames, specs = [], {}
    for e in entries:
        if e["status"] != "evaluated":
            continue
        rows = models_store.model_evaluation(con, campaign, e["model"], e["evaluation_run_id"])
        if rows.empty:
            e.update(status="missing", reason=f"its evaluation of run {e['evaluation_run_id']} was removed (the run failed)")
            continue
        try:
            users, values, costs = models_store.coefficient_arrays(con, campaign, e["model"], e["model_version"],
                                                                   "holdout", n_levels)
        except ValueError:  # scored for another number of levels: campaign.yaml changed since
            e.update(status="stale", reason=f"stale: its latest evaluation (run {e['evaluation_run_id'][:8]}) was made "
                                            f"for another campaign.yaml (not {n_levels} levels); its chain failed or has not "
                                            "run since, so it is not ranked")
            continue
        frames.append(rows)
        specs[e["model"]] = (e["model_version"], *ev.align(users, values, costs, e["model"]))
    return Assembled(frames, specs)


def budgets_kept(con, campaign: str, entries: list[dict]) -> list[dict]:
    """campaign.yaml `constraints:`: every evaluated model's use of each budget on the holdout (its
    policy_evaluation's rows of budget_multipliers), as one table to compare the models by."""
    out = []
    for e in entries:
        if e["status"] == "evaluated":
            rows = models_store.budget_use_of_evaluation(con, campaign, e["model"], e["evaluation_run_id"])
            out += [{"model": e["model"], **r}
                    for r in budget_use_rows(rows.astype(object).where(rows.notna(), None).to_dict("records"))]
    return out


def current_champion(con, campaign: str) -> dict[str, float]:
    """{member: weight} of the campaign's deployed champion ({} before the first)."""
    rows = decisions_store.latest_champion(con, campaign)
    if rows.empty:
        return {}
    members = json.loads(rows.iloc[0]["champion_members"])
    return dict(zip(members.get("members", []), map(float, members.get("weights", []))))


def board_plots(board: pd.DataFrame, specs: dict, ev, config, campaign: str) -> tuple[bytes, bytes]:
    """(the cost–response frontier, the average response per level) of the board's models on the
    holdout events, as PNG."""
    on = ev.evaluated_on()
    logged, response, prop = on.events.logged, on.events.response, on.events.propensity
    curves = policy_curves(specs, on.events, truth=on.truth)
    frontier_png = plot_frontier(curves, board, title=f"{campaign}: cost–response frontier on the holdout days")
    levels_png = plot_response_by_level(
        {m: s[1] for m, s in specs.items()}, true_values=ev.true_values, logged=logged, response=response,
        propensity=prop, incentives=list(config.incentives) if config.ordered else None,
        labels=None if config.ordered else list(config.labels), title=f"{campaign}: average response per level")
    return frontier_png, levels_png


def board_notes(checks: list, entries: list[dict]) -> str:
    """The lines under the leaderboard (Markdown, every name escaped): each failed data check and each
    stale model with its reason."""
    failed = [f"**data check {markdown_text(c.name)} failed ({markdown_text(c.severity)})**: {markdown_text(c.message)}"
              for c in checks if not c.passed]
    stale = [f"**{markdown_text(e['model'])}** {markdown_text(e['reason'])}" for e in entries if e["status"] == "stale"]
    return "".join(f"\n\n{line}" for line in failed + stale)
