"""Ingesting a campaign's day files as a whole: every new or changed day of a range in one call.

The landing folder is the truth and the warehouse mirrors it. `ingest_campaign_days` compares the
campaign's `<kind>/<YYYY-MM-DD>` files with the ledger `landing_files` (the content hash of each
file and of campaign.yaml at its last load attempt) and

- loads the days whose file is new, changed, or validated under another campaign.yaml (each day
  through the per-day loader, which replaces exactly that (campaign, day) in one transaction);
- leaves the others alone (`unchanged`), so the cost of a run grows with the rows that changed, not
  with the number of days the campaign has;
- forgets the days whose file is gone (`forgotten`: their rows removed), except when the kind's
  folder is refused as a whole (unreadable is not gone) or a skipped file of that day is still
  there;
- records a file that fails (`failed`, with its message) and goes on with the other days: the
  day's earlier rows, if any, stay; the file is tried again once it or campaign.yaml changes.

`days=(first, last)` limits loading to a range (forgetting is not limited); `reload=True` loads
every day of the range again whatever the ledger says.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from promo_assets.ingestion import (
    IngestResult,
    SkippedFile,
    check_landing_file,
    forget_partition,
    loaded_days,
    scan_day_files,
)
from promo_assets.store import ingest as ingest_store
from promo_assets.store.ingest import failed_files, forget_ledger_day, ledger  # noqa: F401  (re-exported)

TABLES = {"events": "rct_events", "edges": "payment_edges", "merchants": "merchant_events"}
GONE = "its events file is gone from the landing folder"

# loads one day file: (con, day, path) -> IngestResult; raises on a refused file
DayLoader = Callable[[duckdb.DuckDBPyConnection, dt.date, Path], IngestResult]


@dataclass
class DayOutcome:
    day: dt.date
    file: str
    status: str  # loaded | unchanged | forgotten | failed
    rows: int = 0
    rejected: int = 0
    message: str | None = None


@dataclass
class CampaignDays:
    campaign: str
    kind: str
    days: list[DayOutcome] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    results: list[IngestResult] = field(default_factory=list)  # of the days loaded by this call

    def count(self, status: str) -> int:
        return sum(d.status == status for d in self.days)

    @property
    def failed(self) -> list[DayOutcome]:
        return [d for d in self.days if d.status == "failed"]

    def summary(self) -> str:
        parts = [f"{self.count(s)} {s}" for s in ("loaded", "unchanged", "forgotten", "failed") if self.count(s)]
        rows = sum(d.rows for d in self.days if d.status == "loaded")
        return f"{self.campaign} {self.kind}: " + (", ".join(parts) or "no day files") + f" ({rows} rows loaded)"


def file_sha256(path: Path) -> str:
    """The content hash of a landing file, read without following a link (checked like every read)."""
    path = check_landing_file(Path(path))
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def config_sha256(landing: Path, campaign: str) -> str:
    return file_sha256(Path(landing) / campaign / "campaign.yaml")


def _stored_days(con: duckdb.DuckDBPyConnection, campaign: str, kind: str) -> set[dt.date]:
    if kind == "events":  # rct_events, rejected_events and the side tables: forget_partition's days

        return set(loaded_days(con, campaign))
    return ingest_store.table_days(con, TABLES[kind], campaign)


def _forget(con, campaign: str, kind: str, day: dt.date) -> dict[str, int]:
    """Remove a day whose file is gone: every per-day table for events, the kind's table otherwise.
    Returns {table: rows removed}."""
    if kind == "events":
        removed = forget_partition(con, campaign, day, GONE)
        forget_ledger_day(con, campaign, day)
        return removed
    return {TABLES[kind]: ingest_store.forget_day_of_kind(con, TABLES[kind], kind, campaign, day)}


def ingest_campaign_days(
    con: duckdb.DuckDBPyConnection,
    landing: Path,
    campaign: str,
    kind: str,
    load_day: DayLoader,
    days: tuple[dt.date | None, dt.date | None] = (None, None),
    reload: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> CampaignDays:
    """Load the new or changed `<kind>/` day files of a campaign, forget the days whose file is gone
    (module docstring). A day whose loader raises is recorded `failed` with the error's text; the
    error of a file is the file's, so the other days go on."""
    first, last = days
    landing = Path(landing)
    scan = scan_day_files(landing, campaign, kind)
    out = CampaignDays(campaign, kind, skipped=list(scan.skipped))
    known = ledger(con, campaign, kind)
    config_hash = config_sha256(landing, campaign)
    folder_refused = any(s.path == landing / campaign / kind for s in scan.skipped)
    present = set(scan.files) | {s.day for s in scan.skipped if s.day is not None}
    if not folder_refused:
        for day in sorted((_stored_days(con, campaign, kind) | set(known)) - present):
            removed = _forget(con, campaign, kind, day)
            text = "removed " + ", ".join(f"{n} {t}" for t, n in removed.items())
            log(f"{campaign}: forgot {day} ({GONE if kind == 'events' else f'its {kind} file is gone'}): {text}")
            out.days.append(DayOutcome(day, "", "forgotten", rows=removed.get(TABLES[kind], 0), message=text))
    for day, path in sorted(scan.files.items()):
        if (first is not None and day < first) or (last is not None and day > last):
            continue
        content_hash = file_sha256(path)
        before = known.get(day)
        if not reload and before is not None and before[0] == str(path) and before[1:3] == (content_hash, config_hash):
            status, rows, rejected, message = before[3:7]
            out.days.append(DayOutcome(day, str(path), "failed" if status == "failed" else "unchanged",
                                       rows, rejected, message))
            continue
        try:
            result = load_day(con, day, path)
        except Exception as exc:  # noqa: BLE001 (one file's error: recorded with its text, the other days go on)
            message = str(exc) or type(exc).__name__
            ingest_store.ledger_upsert(con, [campaign, kind, day, str(path), content_hash, config_hash, 0, 0, "failed",
                                             message])
            log(f"{campaign} {day}: FAILED {path}: {message}")
            out.days.append(DayOutcome(day, str(path), "failed", message=message))
            continue
        ingest_store.ledger_upsert(con, [campaign, kind, day, str(path), content_hash, config_hash, result.rows_loaded,
                                         result.rows_rejected, "loaded", None])
        out.results.append(result)
        out.days.append(DayOutcome(day, str(path), "loaded", result.rows_loaded, result.rows_rejected))
    out.days.sort(key=lambda d: d.day)
    return out
