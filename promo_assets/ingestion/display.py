"""What the ingestion assets show (a campaign's day files, what a run loaded, rct_events' checks), as
plain values (promo_assets.core.display: numbers, text, Markdown, a typed `Table`, check outcomes);
`promo_assets.defs` turns them into Dagster metadata. No dagster here (domain code)."""

from __future__ import annotations

from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.display import CheckResult, Table, md_table
from promo_assets.ingestion.checks import EventChecks
from promo_assets.ingestion.days import CampaignDays

DAY_COLUMNS = (  # the `days` table: name, type, description
    ("day", "date", "the day of the file (its name)"),
    ("status", "string", "loaded by this run, unchanged since it was loaded, forgotten (file gone), or failed "
     "(the day's earlier rows stay)"),
    ("rows", "int", "rows loaded (by this run or when the file was loaded)"),
    ("rejected", "int", "rows rejected (rejected_events has their reasons)"),
    ("file", "string"),
    ("message", "string", "why the file failed"),
)


def days_metadata(days: CampaignDays) -> dict:
    """An ingestion asset's metadata: the campaign's days as a typed table (day, status, rows, rejected,
    file, message) and the counts of this run."""
    loaded = [d for d in days.days if d.status in ("loaded", "unchanged")]
    return {
        "days": Table(DAY_COLUMNS, [{"day": d.day.isoformat(), "status": d.status, "rows": int(d.rows or 0),
                                     "rejected": int(d.rejected or 0), "file": d.file, "message": d.message or ""}
                                    for d in days.days]),
        "days_loaded_now": days.count("loaded"),
        "days_unchanged": days.count("unchanged"),
        "days_forgotten": days.count("forgotten"),
        "days_failed": days.count("failed"),
        "rows_loaded_now": sum(d.rows for d in days.days if d.status == "loaded"),
        "first_day": loaded[0].day.isoformat() if loaded else "",
        "last_day": loaded[-1].day.isoformat() if loaded else "",
    }


def events_metadata(days: CampaignDays, config: CampaignConfig) -> dict:
    """rct_events' metadata: the days, and what this run loaded (levels, rejections, features)."""
    distribution: dict[int, int] = {}
    for r in days.results:
        for level, n in r.level_counts.items():
            distribution[level] = distribution.get(level, 0) + n
    features = {f: k for r in days.results for f, k in r.features.items()}
    return {
        **days_metadata(days),
        "rows_rejected_now": sum(d.rejected for d in days.days if d.status == "loaded"),
        "treatment_distribution_now": md_table(
            [{"level": lvl, "incentive": config.incentives[lvl], "label": config.labels[lvl], "rows": n}
             for lvl, n in sorted(distribution.items())]),
        "rejections_now": md_table([p for r in days.results for p in r.problems]),
        "features": Table([("feature", "string", "a feature column of the loaded days"),
                           ("kind", "string", "numeric or categorical")],
                          [{"feature": str(f), "kind": str(k)} for f, k in sorted(features.items())]),
    }


def event_check_results(got: EventChecks, days: CampaignDays) -> list[CheckResult]:
    """rct_events' asset checks over every loaded day, and the day files that failed."""
    failed = days.failed
    return [
        CheckResult("row_count", got.rows > 0, metadata={"rows": got.rows}),
        CheckResult("treatment_on_grid", got.off_grid + got.incentive_mismatch == 0,
                     metadata={"off_grid": got.off_grid, "incentive_mismatch": got.incentive_mismatch}),
        CheckResult("response_and_cost_range", got.bad_response + got.bad_cost == 0,
                     metadata={"bad_response": got.bad_response, "bad_cost": got.bad_cost}),
        CheckResult("propensity_range", got.bad_propensity == 0, metadata={"bad_propensity": got.bad_propensity}),
        CheckResult("day_files_loaded", not failed, severity="ERROR",
                     metadata={"failed_days": len(failed),
                               "failures": md_table([{"day": d.day.isoformat(), "file": d.file, "message": d.message}
                                                     for d in failed])}),
    ]
