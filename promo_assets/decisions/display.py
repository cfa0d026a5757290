"""What the decision assets show (the champion, the day's decisions with their pacing, the decisions'
blocking checks), as plain values (promo_assets.core.display: numbers, text, Markdown, a typed
`Table`, check results); `promo_assets.defs` turns them into Dagster metadata. No dagster here
(domain code)."""

from __future__ import annotations

import numpy as np

from promo_assets.core.display import CheckResult, Table, md_table, png_markdown, rows_table
from promo_assets.decisions.champion_run import ChampionChoice
from promo_assets.decisions.daily import DayDecision, budget_rows
from promo_assets.decisions.pacing import plot_pacing
from promo_assets.evaluation.champion import headline_text, summary_tables

PACING_COLUMNS = (  # the `pacing` metadata table: pacing_table's keys, typed and described
    ("day", "date", "the paced decision day"),
    ("plan", "float", "the budget left over the days left, on that day"),
    ("lambda", "float", "λ of the day's paced decision"),
    ("predicted spend", "float", "the champion's predicted spend at λ for every user decided for"),
    ("realized spend", "float", "what the day's events reported (empty: not loaded yet)"),
    ("spend ratio", "float", "realized over predicted spend of the days back before it (the correction)"),
    ("cumulative spend", "float", "realized, else planned, up to and including the day"),
    ("even plan", "float", "total / days × days elapsed"),
    ("budget left", "float", "the total minus the cumulative spend"),
)


def champion_metadata(choice: ChampionChoice, budgets: list[float]) -> dict:
    """The champion asset's page: the champion with its members, weights and versions, its headline
    against the best single model, why, the candidates and comparisons; on simulated campaigns its
    and the best candidate's % of the oracle."""
    decision, pct = choice.decision, choice.pct
    champ, inc, members = decision.champion, decision.incumbent, decision.champion.to_dict()
    names, weights = members.get("members", []), members.get("weights", [])
    versions = members.get("versions") or [""] * len(names)
    versions = [versions.get(n, "") for n in names] if isinstance(versions, dict) else versions
    cands, comps = summary_tables(decision, pct)
    meta = {"champion": champ.name, "champion_version": champ.version,
            "members": md_table([{"member": n, "weight": round(float(w), 3), "version": v}
                                 for n, w, v in zip(names, weights, versions)]),
            "headline": headline_text(champ.name, budgets, decision.headline(), choice.settings.confidence),
            "chosen on": decision.decided_by, "reason": decision.reason,
            "changed": decision.changed, "incumbent": inc.name if inc else "(none: first champion)",
            "confidence": choice.settings.confidence, "evidence_events": choice.evidence_events,
            "leaderboard_run": choice.board_run, "candidates": rows_table(cands), "comparisons": rows_table(comps)}
    if pct:
        best = choice.best()
        meta.update({"pct_oracle": round(float(np.mean(pct[champ.name])), 4), "best_candidate": best,
                     "best_pct_oracle": round(float(np.mean(pct[best])), 4)})
    return meta


def pacing_metadata(budget, today, rows: list[dict]) -> dict:
    """The per-day pacing table (also in table pacing) and its plot, for the decisions asset's page."""
    records = [{k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in r.items()}
               for r in rows]  # realized spend None (not back yet): an empty cell
    return {"pacing": Table(PACING_COLUMNS, records),
            "pacing_plot": png_markdown(plot_pacing(rows, budget.total), "Spend per day and cumulative"),
            "paced_lambda": today.lambda_, "paced_plan": today.plan, "period_total": budget.total,
            "period_budget_left_before_today": rows[-1]["budget left"] + today.plan}


def decision_metadata(decided: DayDecision, pacing_rows: list[dict]) -> dict:
    """The decisions asset's page: the champion, the day, who, the exploration share, every budget's
    decision and, for a period budget, its pacing."""
    info = decided.inputs.info
    meta = {"champion": info["name"], "champion_version": info["version"], "decision_date": str(decided.inputs.day),
            "users": decided.who, "exploration_share": decided.exploration.share,
            "budgets": md_table(budget_rows(decided.made.entries))}
    if decided.paced is not None:
        meta.update(pacing_metadata(decided.paced.budget, decided.paced.today, pacing_rows))
    return meta


def decision_check_results(outcomes: dict) -> list[CheckResult]:
    """The decisions' blocking checks, each over every budget: {check name: [(budget or None, outcome)]}."""
    return [CheckResult(name, all(o.passed for _, o in got), metadata={
        "result": "; ".join((f"budget {b:g}: " if b is not None else "") + o.message for b, o in got)})
        for name, got in outcomes.items()]
