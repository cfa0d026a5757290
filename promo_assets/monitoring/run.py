"""One monitoring pass over a campaign: every decided day whose events came back, the cumulative effect,
the population's drift, freshness and the checks (what the `outcomes` asset materializes).

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import json
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from promo_assets.monitoring import exported
from promo_assets.monitoring.checks import CheckOutcome, check_z, cumulative, late_days, run_checks, segments_off
from promo_assets.monitoring.drift import DriftFrames, FeatureDrift, feature_drift
from promo_assets.monitoring.exported import EXPORTED, STOPPED
from promo_assets.monitoring.outcomes import Candidate, DayOutcome, OutcomeError, choose_decision, day_outcome
from promo_assets.store import decisions as decisions_store, monitoring as store


@dataclass
class MonitorResult:
    days: list[DayOutcome]
    carried: list[dict]                 # outcome rows of days whose decisions retention removed
    effect: list[dict]                  # cumulative effect per deployed day
    drift: list[FeatureDrift]
    checks: list[CheckOutcome]
    decision_age_days: float | None
    late: list[dt.date]
    change_day: dt.date | None = None   # the training window's start carried on (retrain)
    change_segments: tuple[tuple[str, str], ...] = ()  # the segments whose response changed then (() = all)
    log: list[str] = field(default_factory=list)

    def new_reactions(self, before: dt.date | None, acted_before: set,
                      before_segments: tuple[tuple[str, str], ...] = ()) -> list[CheckOutcome]:
        """The acting reactions that act now (each once: retrain for a change day after `before`, the
        others when (check, reaction) was not acting in the previous run); sets `change_day` and
        `change_segments` (the segments off in the failures of that change day; `before_segments` for
        the window carried on)."""
        acting = [c for c in self.checks if c.acts]
        retrain = [c for c in acting if c.reaction == "retrain" and c.change_day is not None]
        self.change_day = max([d for d in [before, *(c.change_day for c in retrain)] if d is not None], default=None)
        now = [c for c in retrain if c.change_day == self.change_day]
        self.change_segments = (tuple(sorted({s for c in now for s in c.segments})) if now
                                else tuple(before_segments) if self.change_day is not None else ())
        return [c for c in acting
                if ((c.change_day is not None and (before is None or c.change_day > before)) if c.reaction == "retrain"
                    else (c.name, c.reaction) not in acted_before)]

    @property
    def ok_rows(self) -> list[dict]:
        rows = [{"day": d.day, **d.row} for d in self.days if d.status == "ok"]
        return sorted(rows + [r for r in self.carried if r.get("status", "ok") == "ok"], key=lambda r: r["day"])

    @property
    def refused(self) -> list[dict]:
        return [{"day": d.day, "reason": d.reason} for d in self.days if d.status == "refused"]

    def tables(self) -> dict[str, pd.DataFrame]:
        """The rows of the warehouse tables (store.monitoring.record)."""
        out_rows, level_rows = [], []
        for d in self.days:
            out_rows.append({"decision_date": d.day, "status": d.status, "reason": d.reason,
                             "decisions_run_id": d.run_id, "budget_per_capita": d.budget,
                             **{k: v for k, v in d.row.items() if k != "segments"}, "carried": False})
            for i, seg in enumerate(d.row.get("segments", [])):
                level_rows.append({"decision_date": d.day, "kind": "segment", "bin": i, "outcome_segment": seg["segment"],
                                   "events": seg["events"], "realized": seg["realized"], "predicted": seg["predicted"],
                                   "realized_cost": seg["realized_cost"], "predicted_cost": seg["predicted_cost"]})
            for frame, kind, col in ((d.levels, "level", "level"), (d.deciles, "uplift_decile", "decile")):
                if frame is None:
                    continue
                for r in frame.itertuples(index=False):
                    r = r._asdict()
                    level_rows.append({"decision_date": d.day, "kind": kind, "bin": int(r[col]), "events": int(r["events"]),
                                       "realized": r.get("realized_response", r.get("realized_uplift")),
                                       "predicted": r.get("predicted_response", r.get("predicted_uplift")),
                                       "realized_cost": r.get("realized_cost"), "predicted_cost": r.get("predicted_cost")})
        for r in self.carried:
            out_rows.append({**{k: v for k, v in r.items() if k not in ("day", "run_id", "campaign", "computed_at")},
                             "decision_date": r["day"], "carried": True})
        effect = pd.DataFrame([{"decision_date": e["day"], **{k: v for k, v in e.items() if k != "day"}} for e in self.effect])
        drift = pd.DataFrame([{"decision_date": None, "feature": f.feature, "kind": f.kind, "psi": f.psi,
                               "out_of_range_share": f.out_of_range_share, "new_share": f.new_share,
                               "new_categories": json.dumps(list(f.new_categories)), "flagged": f.flagged}
                              for f in self.drift])
        checks = [{"check_name": c.name, "passed": c.passed, "severity": c.severity, "message": c.message,
                   "reaction": c.reaction, "change_day": c.change_day} for c in self.checks]
        if self.change_day is not None:
            where = ("; the response changed in " + ", ".join(f"{f}={v}" for f, v in self.change_segments)
                     if self.change_segments else "")
            checks.append({"check_name": "training_window", "passed": True, "severity": "WARN",
                           "message": f"training events before {self.change_day} down-weighted (retrain reaction{where})",
                           "reaction": "retrain", "change_day": self.change_day,
                           "change_segments": json.dumps([list(s) for s in self.change_segments])})
        return {"outcomes": pd.DataFrame(out_rows), "levels": pd.DataFrame(level_rows), "effect": effect,
                "drift": drift, "checks": pd.DataFrame(checks)}


def decision_candidates(con, campaign: str, rows: pd.DataFrame) -> list[Candidate]:
    """The decisions a day's events may answer: one per row of `store.decided_days` (run, budget)."""
    return [Candidate(r.run_id, float(r.budget_per_capita), store.decisions(con, campaign, r.run_id, float(r.budget_per_capita)),
                      store.manifest_entry(r.decision_manifest)) for r in rows.itertuples(index=False)]


def decided_times(decided: pd.DataFrame) -> dict[dt.date, dt.datetime]:
    """{decided day: when its newest decision was made} of `store.decided_days` rows (for `late_days`)."""
    return {pd.Timestamp(day).date(): max(pd.Timestamp(x).to_pydatetime() for x in rows["decided_at"])
            for day, rows in decided.groupby("decision_date", sort=True)}


def deployed_decision(con, campaign: str, rows: pd.DataFrame, events: pd.DataFrame, budget: float | None,
                      records: dict) -> Candidate:
    """The decision a decided day's events answer, of the day's decisions (`rows`: store.decided_days, oldest
    first): only the decisions runs exported to the outbox when one was, never one whose export was stopped
    (`records`: exported.export_records); at the deployed budget the latest export recorded, else `budget`
    (campaign.yaml monitoring.budget); then `choose_decision`. OutcomeError when none answers."""
    state = [records[str(r)].state if str(r) in records else "" for r in rows["run_id"]]
    out = rows[[s == EXPORTED for s in state]]
    keep = out if len(out) else rows[[s != STOPPED for s in state]]
    if keep.empty:
        raise OutcomeError("every decision made for this day was kept out of the outbox (export stopped by "
                           "monitoring): the events answer no exported decision")
    recorded = records[str(out["run_id"].iloc[-1])].deployed_budget if len(out) else None
    if recorded is not None:
        return choose_decision(events, decision_candidates(con, campaign, keep), recorded,
                               "the deployed budget recorded with the export")
    return choose_decision(events, decision_candidates(con, campaign, keep), budget)


def _predictions(con, campaign: str, cand: Candidate):
    got = store.decision_coefficients(con, campaign, cand.run_id)
    if got is None:
        return None
    users, response, cost = got
    pos = pd.Index(users).get_indexer(cand.frame["user_id"].astype(str))
    if (pos < 0).any():
        return None
    return response[pos], cost[pos]


def monitor(con, campaign: str, config, *, drift: DriftFrames, now: dt.datetime, previous: pd.DataFrame | None = None,
            log=None, own_run: str = "") -> MonitorResult:
    """The monitoring pass (module docstring). `drift`: the features of the latest users decided for
    and the training events' (`DriftFrames`); `previous`: the latest outcomes run's rows (days whose
    decisions retention removed are carried from it); `own_run`: the run doing this pass, whose decision
    (stored, not yet exported) counts for freshness."""
    population, reference, categorical = drift.population, drift.reference, drift.categorical
    settings = config.monitoring
    decided = store.decided_days(con, campaign, own_run)
    records = exported.export_records(con, campaign)
    loaded = store.event_days(con, campaign)
    level_costs = list(config.incentives)
    cheapest = int(np.argmin(level_costs))
    days: list[DayOutcome] = []
    say = log or (lambda _m: None)
    decided_at = decided_times(decided)
    for day, rows in decided.groupby("decision_date", sort=True):
        day = pd.Timestamp(day).date()
        if day not in loaded:
            continue
        events = store.day_events(con, campaign, day, categorical)
        try:
            cand = deployed_decision(con, campaign, rows, events, settings.budget, records)
        except OutcomeError as exc:
            days.append(DayOutcome(day=day, status="refused", reason=str(exc), run_id=str(rows["run_id"].iloc[-1])))
            continue
        out = day_outcome(day, events, cand, _predictions(con, campaign, cand), level_costs, cheapest, categorical)
        if out.status == "ok":  # kept with the day: a carried day keeps its segments' verdict
            out.row["segments_off"] = len(segments_off(out.row, settings.realized_tolerance, check_z(settings)))
        days.append(out)
        say(f"{day}: {out.status}" + (f" ({out.reason})" if out.reason else
                                      f", {out.row['joined']} events, effect {out.row['effect']:+.4g}"))
    seen = {d.day for d in days}
    carried = []
    if previous is not None and not previous.empty:
        for r in previous.to_dict("records"):
            day = pd.Timestamp(r["decision_date"]).date()
            if day not in seen and day not in decided_at and r["status"] == "ok":
                carried.append({**r, "day": day})
    result = MonitorResult(days=days, carried=carried, effect=[], drift=[], checks=[], decision_age_days=None, late=[])
    result.effect = cumulative(result.ok_rows, settings.confidence, settings.planned_events)
    if population is not None and reference is not None and not population.empty and not reference.empty:
        result.drift = feature_drift(reference, population, drift.numeric, categorical, psi_threshold=settings.psi_threshold,
                                     range_threshold=settings.out_of_range_share,
                                     new_category_threshold=settings.new_category_share)
    state = exported.export_state(con, campaign, own_run)
    result.decision_age_days = state.age_days(now)
    result.late = late_days(list(decided_at.items()), loaded, now, settings.grace_days)
    result.checks = run_checks(settings, result.ok_rows, result.refused, result.drift, result.late,
                               result.decision_age_days, state.stopped_line(now))
    if any(c.acts and c.reaction == "fallback" for c in result.checks) and not _has_previous_champion(con, campaign,
                                                                                                      own_run):
        result.checks = [without_previous(c, settings.fallback_without_previous)
                         if c.acts and c.reaction == "fallback" else c for c in result.checks]
        say(f"monitoring reaction fallback: no previous champion, so {settings.fallback_without_previous} instead "
            "(campaign.yaml monitoring.fallback_without_previous)")
    return result


def _has_previous_champion(con, campaign: str, own_run: str) -> bool:
    current = decisions_store.latest_champion(con, campaign, or_run=own_run)
    return bool(len(current)) and store.previous_champion(con, campaign, current["champion"].iloc[0]) is not None


def without_previous(check: CheckOutcome, second: str) -> CheckOutcome:
    """A failed check whose reaction is `fallback` when the campaign has had no other champion: it reacts
    with `second` (campaign.yaml monitoring.fallback_without_previous) and says so."""
    note = (f"reaction fallback: the campaign has had no other champion to fall back to, so {second} instead "
            "(campaign.yaml monitoring.fallback_without_previous)" + ("; the champion keeps deciding"
                                                                      if second == "warn" else ""))
    return dataclasses.replace(check, message=f"{check.message}; {note}", reaction=second,
                               severity="WARN" if second == "warn" else "ERROR")


def effect_headline(effect_rows: list[dict], confidence: float) -> str:
    """One line: the effect so far, per 1,000 users, with its interval (a confidence sequence)."""
    if not effect_rows or not math.isfinite(effect_rows[-1]["effect"]):
        return "no deployed day has come back yet"
    e = effect_rows[-1]
    return (f"the champion brought {1000 * e['effect']:+.1f} responses per 1,000 users over random levels at the same "
            f"spend [{1000 * e['low']:+.1f}, {1000 * e['high']:+.1f}] ({confidence:.0%} confidence sequence, "
            f"{e['days']} deployed day(s), {e['events']} events)")
