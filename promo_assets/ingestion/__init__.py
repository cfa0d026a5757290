"""Landing-folder discovery and validated, atomic loading of day files into the warehouse.

One landing day file (`events/<YYYY-MM-DD>.parquet|.csv`) is one partition of `rct_events`.
Loading it:

1. reads its columns (a missing required column fails the file with a message naming it);
2. types every column and computes each row's rejection reason in a single DuckDB pass
   (unknown treatment, NaN / non-numeric / out-of-range response, negative cost, propensity outside
   (0, 1], text in a numeric feature, ...);
3. in one transaction replaces exactly that partition (delete + insert, so re-loading never
   duplicates) and records the rejected rows, with their reason and raw values, in
   `rejected_events`.

When more rows are rejected than the campaign's `max_rejected_fraction` allows (default 0: any),
`rct_events` is left untouched, the rejected rows are still recorded, and an `IngestError` names the
file, the columns and the problems.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from promo_assets import settings
from promo_assets.campaign import CampaignConfig, usable_campaign_folder
from promo_assets.warehouse import quote_ident, sql, table_columns, transaction

REQUIRED = ("user_id", "treatment", "response")
OPTIONAL = ("cost", "propensity", "merchant_id", "event_time")
KINDS = ("events", "edges", "population", "merchants", "merchant_population")
_NUMERIC_TYPES = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|DOUBLE|REAL|DECIMAL.*)$"
)
_DAY_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.(parquet|csv)$")


class IngestError(ValueError):
    """A landing file could not be loaded; the message names the file, the column and the problem."""


@dataclass
class IngestResult:
    campaign: str
    event_date: dt.date
    source_file: str
    rows_loaded: int
    rows_rejected: int
    level_counts: dict[int, int] = field(default_factory=dict)
    problems: list[dict] = field(default_factory=list)
    features: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# discovery


def discover_campaigns(landing: Path) -> list[str]:
    """Campaign ids: sub-folders of the landing root holding a campaign.yaml, sorted; a folder whose
    name breaks the campaign-name rule is skipped with a warning naming it (`usable_campaign_folder`)."""
    if not landing.exists():
        return []
    return sorted(p.name for p in landing.iterdir()
                  if p.is_dir() and (p / "campaign.yaml").exists() and usable_campaign_folder(p))


@dataclass(frozen=True)
class SkippedFile:
    """A file of a campaign's `<kind>/` folder that is not loaded, and why (the rule it breaks)."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class DayScan:
    files: dict[dt.date, Path] = field(default_factory=dict)  # {day: file} of the loadable day files
    skipped: list[SkippedFile] = field(default_factory=list)


def today_utc() -> dt.date:
    return dt.datetime.now(dt.timezone.utc).date()


def scan_day_files(landing: Path, campaign: str, kind: str = "events", today: dt.date | None = None) -> DayScan:
    """The loadable `<kind>/<YYYY-MM-DD>.parquet|.csv` files of one campaign, and every other file with
    the rule it breaks (README, "Day files"). Skipped, each on its own, the other days unaffected:
    a name that is not `YYYY-MM-DD.parquet|.csv` (e.g. `notadate.csv`), a name that is not a real
    date (`2026-13-45.parquet`), a day after today (UTC: no events can have been logged yet), a day
    before PROMO_PARTITIONS_START when that is set, and both files of a day that has two
    (`<day>.csv` and `<day>.parquet`). Hidden files (names starting with '.') and folders are ignored."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    folder = landing / campaign / kind
    scan = DayScan()
    if not folder.is_dir():
        return scan
    today = today or today_utc()
    start = settings.partitions_start()
    found: dict[dt.date, list[Path]] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.is_dir():
            continue
        m = _DAY_FILE.match(path.name)
        if not m:
            scan.skipped.append(SkippedFile(path, "not a day file (expected YYYY-MM-DD.parquet or YYYY-MM-DD.csv)"))
            continue
        try:
            day = dt.date.fromisoformat(m.group(1))
        except ValueError:
            scan.skipped.append(SkippedFile(path, f"'{m.group(1)}' is not a valid date (expected YYYY-MM-DD)"))
            continue
        if day > today:
            scan.skipped.append(SkippedFile(path, f"dated in the future (today is {today}, UTC); loaded once that day has come"))
        elif start is not None and day < start:
            scan.skipped.append(SkippedFile(path, f"dated before PROMO_PARTITIONS_START={start}"))
        else:
            found.setdefault(day, []).append(path)
    for day, paths in sorted(found.items()):
        if len(paths) == 1:
            scan.files[day] = paths[0]
        else:
            names = " and ".join(p.name for p in paths)
            scan.skipped.extend(SkippedFile(p, f"two files for {day} ({names}); keep one, the day is skipped") for p in paths)
    return scan


def skipped_side_files(landing: Path, campaign: str) -> list[SkippedFile]:
    """The skipped files of a campaign's folders other than events/ (edges/, population/, ...)."""
    return [s for kind in KINDS if kind != "events" for s in scan_day_files(landing, campaign, kind).skipped]


def day_files(landing: Path, campaign: str, kind: str = "events") -> dict[dt.date, Path]:
    """{day: file} of one campaign's loadable `<kind>/<YYYY-MM-DD>.parquet|.csv` files
    (`scan_day_files` says which files are skipped and why)."""
    return scan_day_files(landing, campaign, kind).files


def load_config(landing: Path, campaign: str) -> CampaignConfig:
    return CampaignConfig.load(landing / campaign / "campaign.yaml", campaign=campaign)


# --------------------------------------------------------------------------------------------
# events


def _source_columns(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    fmt = "parquet" if path.suffix == ".parquet" else "csv"
    try:
        rows = con.execute(sql("meta", f"describe_{fmt}"), [str(path)]).fetchall()
    except duckdb.Error as exc:
        raise IngestError(f"{path}: cannot be read as {fmt}: {str(exc).splitlines()[0]}") from None
    return {name: dtype for name, dtype in rows}


def _num(col: str) -> str:
    return f"TRY_CAST(src.{quote_ident(col)} AS DOUBLE)"


def _numeric_checks(col: str, extra: list[tuple[str, str]]) -> str:
    """CASE expression giving '<col>: <problem> (<value>)' or NULL for one numeric column."""
    q, v = f"src.{quote_ident(col)}", _num(col)
    raw = f"CAST({q} AS VARCHAR)"
    arms = [
        f"WHEN {q} IS NULL THEN '{col}: missing'",
        f"WHEN {v} IS NULL THEN '{col}: not a number (' || {raw} || ')'",
        f"WHEN isnan({v}) OR isinf({v}) THEN '{col}: NaN or infinite (' || {raw} || ')'",
    ]
    arms += [f"WHEN {cond.format(v=v)} THEN '{col}: {problem} (' || {raw} || ')'" for cond, problem in extra]
    return "CASE " + " ".join(arms) + " END"


def _response_rules(response_type: str) -> list[tuple[str, str]]:
    if response_type == "binary":
        return [("{v} NOT IN (0, 1)", "not 0 or 1 for a binary response")]
    if response_type == "count":
        return [("{v} < 0 OR {v} <> floor({v})", "not a non-negative whole number for a count response")]
    return []


def _feature_kinds(
    con: duckdb.DuckDBPyConnection, config: CampaignConfig, source: dict[str, str], path: Path
) -> dict[str, str]:
    """numeric/categorical per feature column: declared in campaign.yaml `features:`, else as in the
    campaign's loaded days, else from the file's column type. Conflicts raise IngestError."""
    declared = config.extra.get("features") or {}
    known = loaded_features(con, config.campaign)
    others = {}
    for feature, kind, campaign in con.execute(sql("ingest", "all_feature_kinds")).fetchall():
        if campaign != config.campaign:
            others.setdefault(feature, (kind, campaign))
    kinds = {}
    for col, dtype in source.items():
        if col in REQUIRED or col in OPTIONAL:
            continue
        kind = declared.get(col) or known.get(col) or ("numeric" if _NUMERIC_TYPES.match(dtype) else "categorical")
        if kind not in ("numeric", "categorical"):
            raise IngestError(f"campaign.yaml features.{col}: kind must be 'numeric' or 'categorical', got {kind!r}")
        if col in others and others[col][0] != kind:
            raise IngestError(
                f"{path}: feature column '{col}' is {kind} here but {others[col][0]} in campaign "
                f"'{others[col][1]}'; the warehouse keeps one type per column name: rename it or declare "
                f"its kind under 'features:' in campaign.yaml"
            )
        kinds[col] = kind
    return kinds


def _events_query(con, config: CampaignConfig, path: Path) -> tuple[dict[str, str], str, str]:
    """(feature kinds, the typed-rows-with-reasons query of the file, the stored column list)."""
    source = _source_columns(con, path)
    missing = [c for c in REQUIRED if c not in source]
    if missing:
        raise IngestError(
            f"{path}: missing required column(s) {', '.join(repr(c) for c in missing)} "
            f"(required: {', '.join(REQUIRED)}; found: {', '.join(source) or 'none'})"
        )
    if config.cost == "column" and "cost" not in source:
        raise IngestError(f"{path}: missing column 'cost' (campaign.yaml says cost: column)")
    kinds = _feature_kinds(con, config, source, path)

    con.execute(sql("ingest", "create_grid"))
    con.executemany(
        sql("ingest", "insert_grid"),
        [[i, label, inc] for i, (label, inc) in enumerate(zip(config.labels, config.incentives))],
    )
    if config.ordered:
        grid_join = "TRY_CAST(src.\"treatment\" AS DOUBLE) = g.incentive"
    else:
        grid_join = "trim(CAST(src.\"treatment\" AS VARCHAR)) = g.label"

    uid = 'src."user_id"'
    typed = [
        "src.__source_row AS source_row",
        f"trim(CAST({uid} AS VARCHAR)) AS user_id",
        "g.level AS level",
        "g.incentive AS incentive",
        f"{_num('response')} AS response",
    ]
    reasons = [
        f"CASE WHEN {uid} IS NULL OR trim(CAST({uid} AS VARCHAR)) = '' THEN 'user_id: missing' END",
        "CASE WHEN g.level IS NULL THEN 'treatment: unknown treatment (' || coalesce(CAST(src.\"treatment\" AS VARCHAR), 'NULL') || ')' END",
        _numeric_checks("response", _response_rules(config.response)),
    ]
    if "cost" in source:
        reasons.append(_numeric_checks("cost", [("{v} < 0", "negative")]))
    if config.cost == "redeemed":
        typed.append(f"g.incentive * {_num('response')} AS cost")
    elif config.cost == "assigned":
        typed.append("g.incentive AS cost")
    else:
        typed.append(f"{_num('cost')} AS cost")
    if "propensity" in source:
        p, q = _num("propensity"), 'src."propensity"'
        typed.append(f"{p} AS propensity")
        reasons.append(
            f"CASE WHEN {q} IS NULL THEN NULL WHEN {p} IS NULL OR isnan({p}) OR {p} <= 0 OR {p} > 1 "
            f"THEN 'propensity: outside 0 < p <= 1 (' || CAST({q} AS VARCHAR) || ')' END"
        )
    if "merchant_id" in source:
        typed.append('CAST(src."merchant_id" AS VARCHAR) AS merchant_id')
    if "event_time" in source:
        t, q = 'TRY_CAST(src."event_time" AS TIMESTAMP)', 'src."event_time"'
        typed.append(f"{t} AS event_time")
        reasons.append(f"CASE WHEN {q} IS NOT NULL AND {t} IS NULL THEN 'event_time: not a timestamp (' || CAST({q} AS VARCHAR) || ')' END")
    for col, kind in kinds.items():
        q = f"src.{quote_ident(col)}"
        if kind == "numeric":
            typed.append(f"{_num(col)} AS {quote_ident(col)}")
            reasons.append(
                f"CASE WHEN {q} IS NOT NULL AND {_num(col)} IS NULL "
                f"THEN '{col}: not a number (' || CAST({q} AS VARCHAR) || ')' END"
            )
        else:
            typed.append(f"CAST({q} AS VARCHAR) AS {quote_ident(col)}")

    raw_cols = ", ".join(f"{quote_ident(c)} := src.{quote_ident(c)}" for c in source)
    rows = sql(
        "ingest",
        "read_parquet" if path.suffix == ".parquet" else "read_csv",
        typed=", ".join(typed),
        reasons=", ".join(reasons),
        raw=f"CASE WHEN __reason <> '' THEN CAST(to_json(struct_pack({raw_cols})) AS VARCHAR) END",
        grid_join=grid_join,
    )
    stored = ", ".join(c.split(" AS ")[-1] for c in typed)
    return kinds, rows, stored


def _problems(con) -> list[dict]:
    rows = con.execute(sql("ingest", "rejection_summary")).fetchall()
    return [
        {"column": c, "problem": p, "rows": int(n), "first_row": int(r), "example": e}
        for c, p, n, r, e in rows
    ]


def format_problems(path: Path | str, problems: list[dict]) -> str:
    parts = []
    for pr in problems:
        example = f", e.g. {pr['example']!r}" if pr.get("example") not in (None, "") else ""
        parts.append(
            f"column '{pr['column']}': {pr['problem']} ({pr['rows']} row{'s' if pr['rows'] != 1 else ''}, "
            f"first at row {pr['first_row']}{example})"
        )
    return f"{path}: " + "; ".join(parts)


def _row_count(con, path: Path, rows: str) -> int:
    """Rows in the file: from the Parquet footer (no scan), else by counting."""
    if path.suffix == ".parquet":
        return int(con.execute(sql("ingest", "parquet_rows"), [str(path)]).fetchone()[0] or 0)
    return int(con.execute(sql("ingest", "scan_counts", rows=rows), [str(path)]).fetchone()[0])


def _add_feature_columns(con, path: Path, campaign: str, kinds: dict[str, str]) -> None:
    existing = table_columns(con, "rct_events")
    for col, kind in kinds.items():
        want = "DOUBLE" if kind == "numeric" else "VARCHAR"
        if col in existing and existing[col] != want:
            raise IngestError(f"{path}: feature column '{col}' is {kind} but rct_events stores it as {existing[col]}")
        con.execute(sql("ingest", "add_feature_column", column=quote_ident(col), dtype=want))
        con.execute(sql("ingest", "insert_campaign_feature"), [campaign, col, kind])


def ingest_events_day(
    con: duckdb.DuckDBPyConnection, config: CampaignConfig, day: dt.date, path: Path
) -> IngestResult:
    """Load one events day file into `rct_events`, replacing that (campaign, day) partition.

    One transaction: replace the partition with the file's valid rows (typed and validated while
    they stream from the file), then, only when some rows were refused, stage those rows and
    their reasons. Raises IngestError, with `rct_events` rolled back unchanged, for an unreadable
    file, a missing column, or more rejected rows than `config.max_rejected_fraction` allows (the
    rejected rows are still recorded in `rejected_events`).
    """
    path = Path(path)
    campaign = config.campaign
    kinds, rows, stored = _events_query(con, config, path)
    params = [campaign, day, str(path)]
    problems: list[dict] = []
    con.execute("BEGIN TRANSACTION")
    try:
        try:
            n_rows = _row_count(con, path, rows)
            if n_rows == 0:
                raise IngestError(f"{path}: the file has no rows")
            _add_feature_columns(con, path, campaign, kinds)
            con.execute(sql("ingest", "delete_partition", table="rct_events"), [campaign, day])
            loaded = int(con.execute(sql("ingest", "insert_valid", columns=stored, rows=rows), [campaign, day, str(path)]).fetchone()[0])
            n_rejected = n_rows - loaded
            if n_rejected:
                con.execute(sql("ingest", "stage_rejected", rows=rows), [str(path)])
                problems = _problems(con)
        except duckdb.Error as exc:
            raise IngestError(f"{path}: cannot be read: {str(exc).splitlines()[0]}") from None
        failed = n_rejected / n_rows > config.max_rejected_fraction
        if failed:  # undo the partition replace; stage the refused rows again to record them
            con.execute("ROLLBACK")
            con.execute("BEGIN TRANSACTION")
            con.execute(sql("ingest", "stage_rejected", rows=rows), [str(path)])
        con.execute(sql("ingest", "delete_partition", table="rejected_events"), [campaign, day])
        message = None
        if n_rejected:
            con.execute(sql("ingest", "insert_rejected"), params)
        if failed:
            message = (
                f"{n_rejected} of {n_rows} rows rejected (max_rejected_fraction={config.max_rejected_fraction:g}); "
                f"nothing was loaded for campaign '{campaign}' day {day}. "
                + format_problems(path, problems)
                + ". The rejected rows and their reasons are in the warehouse table rejected_events."
            )
        con.execute(
            sql("ingest", "insert_ingest_log"),
            [campaign, day, "rct_events", str(path), 0 if failed else loaded, n_rejected,
             "failed" if failed else "loaded", message],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if failed:
        raise IngestError(message)
    counts = dict(con.execute(sql("ingest", "level_counts"), [campaign, day]).fetchall())
    return IngestResult(campaign, day, str(path), loaded, n_rejected, counts, problems, kinds)


# --------------------------------------------------------------------------------------------
# edges


def ingest_edges_day(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, path: Path) -> IngestResult:
    """Load one `edges/<day>` file (user_id, merchant_id, optional weight) into payment_edges."""
    path = Path(path)
    source = _source_columns(con, path)
    missing = [c for c in ("user_id", "merchant_id") if c not in source]
    if missing:
        raise IngestError(f"{path}: missing required column(s) {', '.join(repr(c) for c in missing)} (required: user_id, merchant_id)")
    weight = next((quote_ident(c) for c in ("weight", "n_payments", "amount") if c in source), "1.0")
    fmt = "parquet" if path.suffix == ".parquet" else "csv"
    con.execute(sql("ingest", f"stage_edges_{fmt}", weight=weight), [str(path)])
    bad = con.execute(sql("ingest", "bad_edges")).fetchone()[0]
    if bad:
        raise IngestError(f"{path}: {bad} edge rows with a missing id or a missing, NaN or negative weight")
    n = con.execute("SELECT count(*) FROM staged_edges").fetchone()[0]
    with transaction(con):
        con.execute(sql("ingest", "delete_partition", table="payment_edges"), [campaign, day])
        con.execute(sql("ingest", "insert_edges"), [campaign, day, str(path)])
        con.execute(sql("ingest", "insert_ingest_log"), [campaign, day, "payment_edges", str(path), n, 0, "loaded", None])
    return IngestResult(campaign, day, str(path), n, 0)


# --------------------------------------------------------------------------------------------
# change detection (used by the landing sensor and the daily schedule)


def landing_scan(landing: Path) -> tuple[dict[str, dict[str, str]], list[SkippedFile]]:
    """({campaign: {day: fingerprint}} of every loadable events day file, the skipped files).
    A fingerprint changes when the file is rewritten (size and modification time)."""
    out: dict[str, dict[str, str]] = {}
    skipped: list[SkippedFile] = []
    for campaign in discover_campaigns(landing):
        scan = scan_day_files(landing, campaign, "events")
        skipped += scan.skipped + skipped_side_files(landing, campaign)
        days = {}
        for day, path in scan.files.items():
            try:
                stat = path.stat()
            except FileNotFoundError:  # deleted while we looked: next time
                continue
            days[day.isoformat()] = f"{stat.st_size}-{stat.st_mtime_ns}"
        out[campaign] = days
    return out, skipped


def landing_inventory(landing: Path) -> dict[str, dict[str, str]]:
    """{campaign: {day: fingerprint}} of every loadable events day file (see `landing_scan`)."""
    return landing_scan(landing)[0]


def landing_removed(before: dict[str, dict[str, str]], now: dict[str, dict[str, str]]) -> list[tuple[str, str]]:
    """[(campaign, day)] of events day files present in `before` and gone (or skipped) in `now`."""
    return sorted((c, d) for c, days in before.items() for d in days if d not in now.get(c, {}))


def landing_changes(
    before: dict[str, dict[str, str]], now: dict[str, dict[str, str]]
) -> tuple[list[str], list[tuple[str, str]]]:
    """(new campaigns, [(campaign, day)] of day files that are new or changed since `before`)."""
    new_campaigns = sorted(set(now) - set(before))
    changed = sorted(
        (campaign, day)
        for campaign, days in now.items()
        for day, fp in days.items()
        if before.get(campaign, {}).get(day) != fp
    )
    return new_campaigns, changed


# --------------------------------------------------------------------------------------------
# what is loaded: the feature set and the partitions of a campaign, and forgetting a partition

PARTITION_TABLES = ("rct_events", "rejected_events", "payment_edges", "merchant_events")  # keyed by (campaign, event_date)


def loaded_features(con: duckdb.DuckDBPyConnection, campaign: str) -> dict[str, str]:
    """{feature: kind} of the campaign's registered feature columns that hold at least one value in
    its currently loaded rct_events partitions, sorted by name. A feature whose days were all
    forgotten or reloaded without it drops out; on a loaded day without the column it is NULL."""
    registered = dict(con.execute(sql("ingest", "campaign_feature_kinds"), [campaign]).fetchall())
    if not registered:
        return {}
    names = list(table_columns(con, "rct_events"))
    counts = con.execute(sql("ingest", "column_value_counts"), [campaign]).fetchone()
    present = {name for name, n in zip(names, counts) if n}
    return {f: kind for f, kind in sorted(registered.items()) if f in present}


def loaded_days(con: duckdb.DuckDBPyConnection, campaign: str) -> list[dt.date]:
    """Days with rows of the campaign in any per-day table (rct_events, rejected_events, ...)."""
    return [r[0] for r in con.execute(sql("ingest", "loaded_days"), [campaign]).fetchall()]


def forget_partition(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, reason: str) -> dict[str, int]:
    """Remove one (campaign, day) partition from every per-day table in one transaction, drop the
    campaign's feature registrations that no loaded day uses any more, and record the removal in
    ingest_log (status 'forgotten', `reason` as its message). Returns {table: rows removed}."""
    removed: dict[str, int] = {}
    con.execute("BEGIN TRANSACTION")
    try:
        for table in PARTITION_TABLES:
            removed[table] = int(con.execute(sql("ingest", "delete_partition", table=table), [campaign, day]).fetchone()[0])
        registered = [f for f, _ in con.execute(sql("ingest", "campaign_feature_kinds"), [campaign]).fetchall()]
        gone = sorted(set(registered) - set(loaded_features(con, campaign)))
        if gone:
            con.execute(sql("ingest", "delete_campaign_features"), [campaign, gone])
        con.execute(
            sql("ingest", "insert_ingest_log"),
            [campaign, day, "rct_events", "", 0, 0, "forgotten",
             f"{reason}; removed " + ", ".join(f"{n} {t}" for t, n in removed.items())
             + (f"; features no longer loaded: {', '.join(gone)}" if gone else "")],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return removed
