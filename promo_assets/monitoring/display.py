"""What a person is shown of a monitoring run (`monitor`'s result): the summary values and the
`days`, `effect_over_days` and `drift` tables as typed, described columns and their records (numbers
to 4 significant digits, dates as dates, yes / no for flags), and its checks. No dagster here (domain
code): the `outcomes` asset turns them into its metadata and check results.
"""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd

from promo_assets.core.display import CheckResult, Table
from promo_assets.monitoring.run import effect_headline

DAY_COLUMNS = (  # the `days` table: name in the outcomes row, type, description
    ("day", "date", "the decided day"),
    ("status", "string", "ok, or refused (the reason in the table outcomes)"),
    ("joined", "int", "events joined to the day's decision"),
    ("compliance", "float", "share of joined events at their decided level"),
    ("realized_response", "float", "realized response per event"),
    ("predicted_response", "float", "the champion's prediction for those users and levels"),
    ("realized_cost", "float", "realized spend per event"),
    ("predicted_cost", "float", "the champion's predicted spend per event"),
    ("within_manifest", "string", "realized response inside the manifest's interval (yes / no / -)"),
    ("effect", "float", "the day's effect against random levels at equal spend, per user"),
)
EFFECT_COLUMNS = (
    ("day", "date", "as of this deployed day"),
    ("days", "int", "deployed days so far"),
    ("events", "int", "events so far"),
    ("effect", "float", "champion minus random levels at equal spend, per user"),
    ("low", "float", "confidence sequence, lower end"),
    ("high", "float", "confidence sequence, upper end"),
    ("vs_cheapest", "float", "champion minus the cheapest level, per user"),
    ("dm_effect", "float", "plain difference of means, champion minus explore group"),
)
DRIFT_COLUMNS = (("feature", "string"), ("kind", "string"), ("psi", "float"), ("out of range", "float"),
                 ("new share", "float"), ("new categories", "string"), ("flagged", "bool"))


def shown_value(value):
    """A value as a table shows it: None for missing or non-finite, dates as ISO text, yes / no for
    booleans, floats to 4 significant digits."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, (dt.date, pd.Timestamp)):
        return str(pd.Timestamp(value).date())
    if isinstance(value, bool):
        return "yes" if value else "no"
    return float(f"{value:.4g}") if isinstance(value, float) else value


def records(columns, rows: list[dict]) -> list[dict]:
    """`rows` as the records of a table of `columns` (name, type, ...): '-' for a missing text cell."""
    return [{name: (("-" if r.get(name) is None else shown_value(r.get(name))) if kind == "string"
                    else shown_value(r.get(name))) for name, kind, *_ in columns} for r in rows]


def outcome_summary(result, confidence: float) -> dict:
    """The monitoring run's headline values: the effect, the deployed and refused days, the decision's
    age and the days whose events are late."""
    return {
        "effect": effect_headline(result.effect, confidence),
        "deployed_days": len(result.ok_rows), "refused_days": len(result.refused),
        "decision_age_days": None if result.decision_age_days is None else round(result.decision_age_days, 3),
        "late_days": ", ".join(map(str, result.late)) or "none",
    }


def outcome_tables(result) -> dict[str, Table]:
    """The `days`, `effect_over_days` and `drift` tables, by name."""
    day_rows = [{"day": d.day, "status": d.status, **d.row} for d in result.days]
    effect_rows = [dict(e) for e in result.effect]
    drift = [{"feature": f.feature, "kind": f.kind, "psi": f.psi, "out of range": f.out_of_range_share,
              "new share": f.new_share, "new categories": ", ".join(f.new_categories[:5]), "flagged": f.flagged}
             for f in result.drift]
    return {"days": Table(DAY_COLUMNS, records(DAY_COLUMNS, day_rows)),
            "effect_over_days": Table(EFFECT_COLUMNS, records(EFFECT_COLUMNS, effect_rows)),
            "drift": Table(DRIFT_COLUMNS, [{k: (shown_value(v) if not isinstance(v, (bool, str)) else v)
                                            for k, v in r.items()} for r in drift])}


def outcome_check_results(result) -> list[CheckResult]:
    """The monitoring checks of the run: each with its message, its reaction and the change day it found."""
    return [CheckResult(c.name, c.passed, severity=c.severity,
                         metadata={"message": c.message, "reaction": c.reaction,
                                   **({"change_day": str(c.change_day)} if c.change_day else {})})
            for c in result.checks]
