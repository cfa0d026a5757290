"""What the outbox holds: each decisions run's export state, the decision in force, and since when an export
is stopped.

Every decisions run's decision ends in one of two export states (table decision_exports, written by the
`outbox` asset and `promo export`): **exported** (its files went to the outbox, with the deployed budget: the
budget whose file the coupon system applies, when known) or **stopped** (a monitoring reaction `stop_export`
kept it out; the reason names the checks). A decision not yet exported (the run is still going) is neither.

- **The decision in force** is the newest decision whose export was not stopped: what the outbox holds and
  what `promo serve` serves. Its age is the decision's age for the `freshness` check, for `promo report` and
  for `/health`, each computed at the time it is asked (a stop that lasts days shows the exported decision
  ageing). The outcomes of a run count that run's own decision, stored but not yet exported.
- **Export stopped since** the first stopped decision newer than the one in force, while there is one.

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import pandas as pd

from promo_assets.core.errors import DomainError
from promo_assets.store import decisions as store

EXPORTED, STOPPED = "exported", "stopped"
CLI = "promo export"  # exported_by of an export written by the command


@dataclass(frozen=True)
class ExportBy:
    """Who writes an export (`who`: the outbox asset's Dagster run, or 'promo export') and whether it writes a
    decision whose export monitoring stopped (`despite_stop`: `promo export --despite-stop`)."""

    who: str = CLI
    despite_stop: bool = False


class ExportStateError(DomainError, ValueError):
    """An export state that cannot be recorded (a decisions run without decisions)."""


@dataclass(frozen=True)
class DecisionRef:
    """One decisions run's decision: the run, the day it is for, when it was decided and the reason its export
    was stopped ('' otherwise)."""

    run_id: str
    day: dt.date
    decided_at: dt.datetime
    stop_reason: str = ""

    def age_days(self, now: dt.datetime) -> float:
        return max(0.0, (now - self.decided_at).total_seconds() / 86400.0)


@dataclass(frozen=True)
class ExportState:
    """The campaign's decisions as the outbox sees them (module docstring)."""

    newest: DecisionRef | None            # the newest stored decision (None: no decision yet)
    in_force: DecisionRef | None          # the newest decision whose export was not stopped
    stopped: tuple[DecisionRef, ...] = ()  # the stopped decisions newer than `in_force`, oldest first

    @property
    def is_stopped(self) -> bool:
        return bool(self.stopped)

    @property
    def stopped_since(self) -> dt.datetime | None:
        return self.stopped[0].decided_at if self.stopped else None

    def age_days(self, now: dt.datetime) -> float | None:
        """The age of the decision in force (None: none)."""
        return None if self.in_force is None else self.in_force.age_days(now)

    def stopped_line(self, now: dt.datetime) -> str | None:
        """'export stopped since …, serving …' while the export is stopped (None otherwise)."""
        if not self.stopped:
            return None
        last = self.stopped[-1]
        serving = (f"serving the decision for {self.in_force.day} made {self.in_force.age_days(now):.1f} days ago"
                   if self.in_force is not None else "no exported decision to serve")
        return (f"EXPORT STOPPED since {self.stopped_since:%Y-%m-%d %H:%M} ({len(self.stopped)} decision(s) kept out "
                f"of the outbox, the newest for {last.day}: {last.stop_reason}); {serving}")

    def describe(self, now: dt.datetime) -> dict:
        """The export state as a mapping (`/health`, the outbox asset's metadata)."""
        out: dict = {"export": "stopped" if self.stopped else "exported" if self.in_force else "none"}
        if self.stopped:
            out.update({"export_stopped_since": self.stopped_since.isoformat(timespec="seconds"),
                        "export_stopped_reason": self.stopped[-1].stop_reason,
                        "newest_decision_date": self.stopped[-1].day.isoformat(),
                        "decisions_kept_out": len(self.stopped)})
        return out


def export_state(con, campaign: str, own_run: str = "") -> ExportState:
    """The campaign's export state from the warehouse (`own_run`: a run in progress whose stored decision
    counts, not yet exported)."""
    records = export_records(con, campaign)
    return state_of([DecisionRef(str(r.run_id), pd.Timestamp(r.decision_date).date(),
                                 pd.Timestamp(r.decided_at).to_pydatetime(),
                                 records[str(r.run_id)].reason if str(r.run_id) in records
                                 and records[str(r.run_id)].state == STOPPED else "")
                     for r in store.decision_runs(con, campaign, own_run).itertuples(index=False)])


def state_of(refs: Sequence[DecisionRef]) -> ExportState:
    """The export state of decisions `refs` (oldest first; a non-empty `stop_reason` marks a stopped one)."""
    refs = sorted(refs, key=lambda r: (r.decided_at, r.run_id))
    if not refs:
        return ExportState(None, None)
    live = [i for i, r in enumerate(refs) if not r.stop_reason]
    if not live:
        return ExportState(refs[-1], None, tuple(refs))
    last = live[-1]
    return ExportState(refs[-1], refs[last], tuple(refs[last + 1:]))


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def deployed_budget(config, written: Sequence[float], paced: float | None = None,
                    chosen: Sequence[float] | None = None) -> float | None:
    """The budget whose decision file the coupon system applies, recorded with an export: campaign.yaml
    `monitoring.budget` when set, else the period budget's paced file (campaign.yaml `budget:`), else the only
    budget written, else the only budget `promo export --budget` was asked for; None when not known."""
    if config.monitoring.budget is not None:
        return float(config.monitoring.budget)
    if paced is not None:
        return float(paced)
    for some in (written, chosen or ()):
        if len(set(float(b) for b in some)) == 1:
            return float(some[0])
    return None


def record_exported(con, campaign: str, manifest: dict, deployed: float | None, exported_by: str,
                    folder: str) -> None:
    """Record that decisions run `manifest["decisions_run_id"]` went to the outbox (`folder`)."""
    store.record_export(con, campaign, store.ExportRow(
        manifest["decisions_run_id"], manifest["date"], EXPORTED, deployed,
        [e["budget_per_capita"] for e in manifest["budgets"]], folder, exported_by))


def record_stopped(con, campaign: str, decisions_run_id: str, reason: str, exported_by: str) -> ExportState:
    """Record that decisions run `decisions_run_id`'s decision was kept out of the outbox (`reason`: the
    checks whose reaction stop_export acts); returns the campaign's export state after it."""
    runs = store.decision_runs(con, campaign, decisions_run_id)
    day = runs.loc[runs["run_id"] == decisions_run_id, "decision_date"]
    if day.empty:
        raise ExportStateError(f"decisions run {decisions_run_id} of campaign '{campaign}' left no decisions to stop")
    store.record_export(con, campaign, store.ExportRow(decisions_run_id, pd.Timestamp(day.iloc[0]).date(), STOPPED,
                                                       None, [], reason, exported_by))
    return export_state(con, campaign, decisions_run_id)


class ExportRecord(NamedTuple):
    """A decisions run's export state as recorded: 'exported' or 'stopped', the deployed budget (None: not
    known) and the reason (stopped: the checks; exported: the outbox folder)."""

    state: str
    deployed_budget: float | None
    reason: str


def export_records(con, campaign: str) -> dict[str, ExportRecord]:
    """{decisions run: its ExportRecord} of every decisions run with an export state."""
    return {str(r.decisions_run_id): ExportRecord(str(r.export_state),
                                                  None if _missing(r.deployed_budget) else float(r.deployed_budget),
                                                  str(r.export_reason))
            for r in store.decision_exports(con, campaign).itertuples(index=False)}
