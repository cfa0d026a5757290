"""The per-campaign status an operator reads every morning (the first block of `promo report`).

    status: last data day 2026-01-20; decision for 2026-01-21 made 0.2 h ago (0.0 days)
      realized vs predicted (2026-01-20): response 0.412 vs 0.431 (-4.4%), spend 0.81 vs 0.86 (-5.8%)
      effect so far: the champion brought +61.3 responses per 1,000 users over random levels at the same spend
        [+12.0, +110.6] (90% confidence sequence, 17 deployed day(s), 8,450 events)
      drift: none; compliance 100.0%
      checks failing: none

While monitoring keeps decisions out of the outbox (a `stop_export` reaction) the first line says so and
names the decision served instead: "EXPORT STOPPED since …; serving the decision for … made … days ago".
`freshness` is judged again at the time the block is asked (`checks.freshness_check`, the same rule as the
outcomes asset's): a decision that aged since the last run fails it here.

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd

from promo_assets.config.campaign import MonitoringBlock
from promo_assets.monitoring.exported import export_state
from promo_assets.monitoring.checks import freshness_check, late_days
from promo_assets.monitoring.run import decided_times, effect_headline
from promo_assets.store import monitoring as store


def status_lines(con, campaign: str, now: dt.datetime | None = None, monitoring=None) -> list[str]:
    """The status block (module docstring), or [] when the campaign has no outcomes run yet;
    `monitoring`: campaign.yaml's `monitoring:` block (MonitoringBlock; its defaults when None)."""
    try:
        run = store.latest_run(con, campaign)
    except Exception:  # noqa: BLE001 (a warehouse from before the monitoring tables)
        return []
    settings = monitoring if monitoring is not None else MonitoringBlock()
    now = now or dt.datetime.now()
    days = sorted(store.event_days(con, campaign))
    decided = store.decided_days(con, campaign)
    state = export_state(con, campaign)
    lines = []
    head = f"   status: last data day {days[-1] if days else 'none'}"
    if state.is_stopped:
        head += "; " + state.stopped_line(now)
    elif state.in_force is not None:
        age_h = (now - state.in_force.decided_at).total_seconds() / 3600
        head += (f"; decision for {state.in_force.day} made {age_h:.1f} h ago ({age_h / 24:.1f} days)")
    else:
        head += "; no decision yet"
    lines.append(head)
    if run is None:
        lines.append("     outcomes: none yet (no decided day has come back)")
        return lines
    out = store.of_run(con, campaign, run, "outcomes")
    ok = out[out["status"] == "ok"]
    if out.empty:
        lines.append("     outcomes: none yet (no decided day has come back)")
    if len(ok):
        r = ok.iloc[-1]

        def gap(a, b):
            return f"{(a - b) / b:+.1%}" if b else "n/a"
        lines.append(f"     realized vs predicted ({pd.Timestamp(r['decision_date']).date()}): response "
                     f"{r['realized_response']:.4g} vs {r['predicted_response']:.4g} "
                     f"({gap(r['realized_response'], r['predicted_response'])}), spend {r['realized_cost']:.4g} vs "
                     f"{r['predicted_cost']:.4g} ({gap(r['realized_cost'], r['predicted_cost'])}); compliance "
                     f"{r['compliance']:.1%}")
    effect = store.of_run(con, campaign, run, "outcome_effect")
    rows = [{**e, "day": e["decision_date"]} for e in effect.to_dict("records")]
    if rows:
        lines.append("     effect so far: " + effect_headline(rows, settings.confidence))
    drift = store.of_run(con, campaign, run, "drift")
    flagged = drift[drift["flagged"]] if len(drift) else drift
    lines.append("     drift: " + ("none" if not len(flagged) else "; ".join(
        f"{f.feature} (PSI {f.psi:.2f}" + (f", {f.new_share:.1%} new categories" if f.new_share > 0 else "")
        + (f", {f.out_of_range_share:.1%} out of range" if f.out_of_range_share > 0 else "") + ")"
        for f in flagged.itertuples())))
    checks = store.of_run(con, campaign, run, "checks")
    failing = [f"{c.check_name} ({c.severity}, reaction {c.reaction}): {c.message}"
               for c in checks.itertuples() if not c.passed and c.check_name != "freshness"]
    fresh = freshness_check(settings, late_days(list(decided_times(decided).items()), set(days), now, settings.grace_days),
                            state.age_days(now), state.stopped_line(now))
    if not fresh.passed:
        failing.append(f"freshness (as of now; {fresh.severity}, reaction {fresh.reaction}): {fresh.message}")
    lines.append("     checks failing: " + ("; ".join(failing) if failing else "none"))
    refused = out[out["status"] == "refused"]
    if len(refused):
        lines.append(f"     refused days: {len(refused)} (latest {pd.Timestamp(refused.iloc[-1]['decision_date']).date()}: "
                     f"{refused.iloc[-1]['reason']})")
    return lines


def outcome_line(con, campaign: str, confidence: float = 0.9) -> str | None:
    """The line under `deploy:`: the deployed champion's measured effect so far (None: nothing back yet)."""
    try:
        run = store.latest_run(con, campaign)
    except Exception:  # noqa: BLE001
        return None
    if run is None:
        return None
    effect = store.of_run(con, campaign, run, "outcome_effect")
    if effect.empty or not math.isfinite(effect.iloc[-1]["effect"]):
        return None

    rows = [{**e, "day": e["decision_date"]} for e in effect.to_dict("records")]
    return "   measured: " + effect_headline(rows, confidence)
