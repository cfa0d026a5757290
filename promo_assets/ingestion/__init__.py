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
import functools
import hashlib
import json
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from promo_assets.config import settings
from promo_assets.config.campaign import (
    CampaignConfig,
    CampaignConfigError,
    campaign_yaml_text,
    parse_campaign_yaml,
    usable_campaign_folder,
)
from promo_assets.core import files
from promo_assets.core.errors import DomainError
from promo_assets.store import ingest as ingest_store
from promo_assets.store.frames import loaded_features  # noqa: F401  (ingestion's reading of the loaded features)
from promo_assets.store.ingest import forget_partition, loaded_days  # noqa: F401  (re-exported)
from promo_assets.store.warehouse import schema_columns, table_columns, transaction

REQUIRED = ("user_id", "treatment", "response")
OPTIONAL = ("cost", "propensity", "merchant_id", "event_time")
LANDING_COLUMNS = (*REQUIRED, *OPTIONAL)
# Names the loading queries add to a file's rows (sql/ingest.sql, sql/graph.sql); with every
# warehouse column they make up `reserved_columns()`. Names starting with '__' are reserved too.
INTERNAL_COLUMNS = ("file_row_number", "__source_row", "__reason", "__raw")
KINDS = ("events", "edges", "population", "merchants", "merchant_population")
_NUMERIC_TYPES = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|DOUBLE|REAL|DECIMAL.*)$"
)
_DAY_FILE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.(parquet|csv)$")


log = logging.getLogger(__name__)


class IngestError(DomainError, ValueError):
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
    """Campaign ids: sub-folders of the landing root holding a campaign.yaml (of any kind: a
    campaign.yaml that is a folder, a link or a FIFO is refused when the campaign is run, naming
    it), sorted. Skipped with a warning naming them: a folder whose name breaks the campaign-name
    rule (`usable_campaign_folder`) and a symbolic link (links are not followed, docs/operations.md)."""
    if not landing.exists():
        return []
    found = []
    for p in sorted(landing.iterdir()):
        if p.is_symlink():
            if p.name[:1] != ".":
                log.warning("%s: skipped: %s", p, files.problem(p, landing, want="dir"))
            continue
        if p.is_dir() and os.path.lexists(p / "campaign.yaml") and usable_campaign_folder(p):
            found.append(p.name)
    return found


@dataclass(frozen=True)
class SkippedFile:
    """A file of a campaign's `<kind>/` folder that is not loaded, and why (the rule it breaks)."""

    path: Path
    reason: str
    day: dt.date | None = None  # the day its name gives, when it is a valid YYYY-MM-DD day file name

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
    the rule it breaks (docs/data-contract.md, "Day files"). Skipped, each on its own, the other days unaffected:
    a name that is not `YYYY-MM-DD.parquet|.csv` (e.g. `notadate.csv`), a name that is not a real
    date (`2026-13-45.parquet`), a day after today (UTC: no events can have been logged yet), a day
    before PROMO_PARTITIONS_START when that is set, and both files of a day that has two
    (`<day>.csv` and `<day>.parquet`). Only regular files are read (docs/operations.md): a symbolic link
    (wherever it points), a named pipe (FIFO), socket or device is skipped with that reason, by its
    name, without being opened; a `<kind>/` folder that is a link is skipped as a whole. Hidden files
    (names starting with '.') and folders are ignored."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    folder = landing / campaign / kind
    scan = DayScan()
    if folder.is_symlink():
        scan.skipped.append(SkippedFile(folder, files.problem(folder, landing / campaign, want="dir")))
        return scan
    if not folder.is_dir():
        return scan
    today = today or today_utc()
    start = settings.partitions_start()
    found: dict[dt.date, list[Path]] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        m = _DAY_FILE.match(path.name)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:  # deleted while we looked
            continue
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):  # a link, FIFO, socket or device: named, never opened
            day = _valid_day(m.group(1)) if m else None
            scan.skipped.append(SkippedFile(path, files.problem(path, folder) or "not a regular file", day))
            continue
        if not m:
            scan.skipped.append(SkippedFile(path, "not a day file (expected YYYY-MM-DD.parquet or YYYY-MM-DD.csv)"))
            continue
        day = _valid_day(m.group(1))
        if day is None:
            scan.skipped.append(SkippedFile(path, f"'{m.group(1)}' is not a valid date (expected YYYY-MM-DD)"))
            continue
        if day > today:
            scan.skipped.append(SkippedFile(path, f"dated in the future (today is {today}, UTC); loaded once that day has come", day))
        elif start is not None and day < start:
            scan.skipped.append(SkippedFile(path, f"dated before PROMO_PARTITIONS_START={start}", day))
        else:
            found.setdefault(day, []).append(path)
    for day, paths in sorted(found.items()):
        if len(paths) == 1:
            scan.files[day] = paths[0]
        else:
            names = " and ".join(p.name for p in paths)
            scan.skipped.extend(SkippedFile(p, f"two files for {day} ({names}); keep one, the day is skipped", day)
                                for p in paths)
    return scan


def _valid_day(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return None


def skipped_side_files(landing: Path, campaign: str) -> list[SkippedFile]:
    """The skipped files of a campaign's folders other than events/ (edges/, population/, ...)."""
    return [s for kind in KINDS if kind != "events" for s in scan_day_files(landing, campaign, kind).skipped]


def day_files(landing: Path, campaign: str, kind: str = "events") -> dict[dt.date, Path]:
    """{day: file} of one campaign's loadable `<kind>/<YYYY-MM-DD>.parquet|.csv` files
    (`scan_day_files` says which files are skipped and why)."""
    return scan_day_files(landing, campaign, kind).files


def load_config(landing: Path, campaign: str) -> CampaignConfig:
    """The campaign's campaign.yaml, validated: its schema (`CampaignConfig.load`) and what its
    `models:` and `champion:` blocks name, checked by the model registry (`registry.check_config`:
    registered model names, each model's hyper-parameters and their values). CampaignConfigError
    names every problem. This is where the pipeline and the CLI read a campaign's config."""
    path = _campaign_yaml(landing, campaign)
    return _validated_config(path, campaign, campaign_yaml_text(path))


def cached_config(landing: Path, campaign: str) -> CampaignConfig:
    """`load_config`, parsed and validated once per content of the file: campaign.yaml's text is
    read (bounded, like every read) and hashed at each call, and a text already validated in this
    process returns the same (immutable) CampaignConfig without parsing it again. The assets of a
    run read their campaign's config here (`LandingResource.config`): one parse per campaign and
    run, and a changed file is read as changed."""
    path = _campaign_yaml(landing, campaign)
    text = campaign_yaml_text(path)
    key = (str(path), campaign, hashlib.sha256(text.encode()).hexdigest())
    config = _CONFIGS.get(key)
    if config is None:
        config = _validated_config(path, campaign, text)
        if len(_CONFIGS) >= _CONFIGS_KEPT:
            _CONFIGS.clear()
        _CONFIGS[key] = config
    return config


def _campaign_yaml(landing: Path, campaign: str) -> Path:
    """The campaign's campaign.yaml path; CampaignConfigError naming the folder when the campaign has
    no landing folder (e.g. a partition added with "Add partition" in the UI: it creates no folder)."""
    folder = Path(landing) / campaign
    if not folder.is_dir() and not folder.is_symlink():
        raise CampaignConfigError(
            f"{folder / 'campaign.yaml'}: campaign.yaml not found: campaign '{campaign}' has no landing folder {folder}. "
            "A campaign is a folder of the landing folder (campaign.yaml and events/<day> files); a partition "
            "added in the UI creates none: create the folder, or leave the partition (the landing sensor removes "
            "partitions that have no folder and never loaded a day)")
    return folder / "campaign.yaml"


_CONFIGS: dict[tuple[str, str, str], CampaignConfig] = {}  # (path, campaign, sha256 of the text) -> config
_CONFIGS_KEPT = 256


def _validated_config(path: Path, campaign: str, text: str) -> CampaignConfig:
    from promo_assets.models import registry  # the models know the campaign config, never the other way round

    raw = parse_campaign_yaml(text, path)
    config = CampaignConfig.from_dict({} if raw is None else raw, campaign=campaign, source=str(path))
    problems = registry.check_config(config)
    if problems:
        head = f"{len(problems)} problems: " if len(problems) > 1 else ""
        raise CampaignConfigError(f"{path}: {head}" + "; ".join(problems))
    return config


# --------------------------------------------------------------------------------------------
# events


def check_landing_file(path: Path, below: Path | None = None) -> Path:
    """`path` when it is a regular file reached without a symbolic link from `below` (default: its
    campaign's folder, two folders up; `files.check_file`), checked again right before DuckDB or
    pyarrow opens it; IngestError otherwise."""
    try:
        return files.check_file(path, below)
    except files.UnsafeFileError as exc:
        raise IngestError(f"{exc}; only regular files in the landing folder are read") from None


CSV_ENCODING_RULE = ("CSV files are read as UTF-8 (a UTF-8 byte-order mark is fine): save the file as UTF-8, "
                     "or write Parquet")


def csv_encoding_problem(path: Path, head_bytes: int = 1 << 20) -> str | None:
    """Why a CSV landing file is not UTF-8 text, in its first `head_bytes` bytes (the encoding it
    looks like, the first bad byte and its line), or None."""
    import codecs

    with open(check_landing_file(path), "rb") as fh:
        head = fh.read(head_bytes)
    for bom, name in ((codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
                      (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32")):
        if head.startswith(bom) and not head.startswith(codecs.BOM_UTF8):
            return f"the file is {name} encoded (byte-order mark {bom.hex(' ').upper()}); {CSV_ENCODING_RULE}"
    if b"\x00" in head[:4096]:
        return f"the file holds NUL bytes near its start (UTF-16 without a byte-order mark, or not text); {CSV_ENCODING_RULE}"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=len(head) < head_bytes)
    except UnicodeDecodeError as exc:
        line = head.count(b"\n", 0, exc.start) + 1
        return (f"not UTF-8 text: byte 0x{head[exc.start]:02X} on line {line} (the file looks latin-1 / Windows-1252 "
                f"encoded); {CSV_ENCODING_RULE}")
    return None


def read_problem(path: Path, fmt: str, exc: Exception) -> str:
    """An IngestError message for a file DuckDB / pyarrow could not read: the encoding and the rule
    for a CSV that is not UTF-8 (DuckDB only says 'CSV Error on Line: 2'), else their first line."""
    text = str(exc)
    if fmt == "csv" and ("not utf-8 encoded" in text.lower() or "invalid unicode" in text.lower()
                         or isinstance(exc, UnicodeDecodeError)):
        line = re.search(r"Line: (\d+)", text)
        return f"{path}: " + (csv_encoding_problem(path) or
                              f"not UTF-8 text{f' (line {line.group(1)})' if line else ''}; {CSV_ENCODING_RULE}")
    return f"{path}: cannot be read as {fmt}: {(text.splitlines() or [type(exc).__name__])[0]}"


def _source_columns(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    """{column: DuckDB type} of a landing file, after checking its header: a name written twice
    (case-insensitively, as DuckDB compares names) fails the file with an IngestError naming it."""
    fmt = ingest_store.file_format(path)
    check_landing_file(path)
    try:
        rows = ingest_store.describe_file(con, path)
        if fmt == "csv":  # the header line as written: DuckDB renames a repeated name to name_1
            skipped = ingest_store.csv_skipped_lines(con, path)
            if skipped:
                raise IngestError(
                    f"{path}: line(s) 1 to {skipped} do not fit the rest of the file (DuckDB's CSV sniffer would "
                    "skip them): the header must be the first line and every line needs the same number of fields"
                )
            header = ingest_store.csv_header(con, path)
        else:
            header = pq.read_schema(path).names
    except (duckdb.Error, OSError, pa.ArrowException) as exc:
        raise IngestError(read_problem(path, fmt, exc)) from None
    seen: dict[str, str] = {}
    for name in header:
        if name.lower() in seen:
            twice = name if name == seen[name.lower()] else f"{seen[name.lower()]}' and '{name}"
            raise IngestError(
                f"{path}: column '{twice}' appears twice in the header (column names are compared "
                f"case-insensitively); every column needs its own name"
            )
        seen[name.lower()] = name
    return {name: dtype for name, dtype in rows}


@functools.cache
def reserved_columns() -> frozenset[str]:
    """Lower-cased names a landing file may not use for a feature column: every column of every
    warehouse table (sql/schema.sql: campaign, level, split, ips_weight, model_version, ...) and the
    names the loading queries add (`file_row_number`, anything starting with `__`), except the
    landing columns themselves (user_id, treatment, response, cost, ...)."""
    names = {n.lower() for n in schema_columns()} | set(INTERNAL_COLUMNS)
    return frozenset(names - set(LANDING_COLUMNS))


def check_column_names(path: Path, source: dict[str, str], landing: tuple[str, ...] = LANDING_COLUMNS,
                       reserved: frozenset[str] | None = None) -> None:
    """IngestError naming the first column of `source` that is reserved: a name of `reserved`
    (default `reserved_columns()`), one starting with '__', or one that differs only in case from a
    landing column (DuckDB compares names case-insensitively)."""
    reserved = reserved_columns() if reserved is None else reserved
    lowered = {c.lower(): c for c in landing}
    for col in source:
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in col):
            raise IngestError(f"{path}: column {col!r} has a control character (newline, tab, ...) in its name; rename it")
        if col in landing:
            continue
        low = col.lower()
        if low in lowered:
            raise IngestError(f"{path}: column '{col}' differs only in case from the column '{lowered[low]}'; "
                              f"rename it (column names are compared case-insensitively)")
        if low in reserved or low.startswith("__"):
            raise IngestError(
                f"{path}: column '{col}' is a reserved name (the pipeline uses it internally); rename it. "
                "Reserved: every column of the warehouse tables and names starting with '__' "
                "(docs/data-contract.md)"
            )


_NESTED_TYPE = re.compile(r"^(STRUCT|MAP|UNION)\b|\[\d*\]$")
_UNREADABLE_TYPES = ("BLOB", "BIT")


def check_column_types(path: Path, source: dict[str, str]) -> None:
    """IngestError naming the first column of a nested type (a Parquet struct, list, map or union)
    or of raw bytes: their values would be stored as text such as "{'lat': 1.0, 'lon': 2.0}".
    Rule (docs/operations.md): every column holds plain numbers, text, booleans, dates or times."""
    for col, dtype in source.items():
        if _NESTED_TYPE.search(dtype):
            raise IngestError(f"{path}: column '{col}' is a nested type ({dtype[:120]}); write it as plain "
                              "columns, one number or text each")
        if dtype in _UNREADABLE_TYPES:
            raise IngestError(f"{path}: column '{col}' holds raw bytes ({dtype}); write it as a number or a text")


def _feature_kinds(
    con: duckdb.DuckDBPyConnection, config: CampaignConfig, source: dict[str, str], path: Path,
    day: dt.date | None = None,
) -> dict[str, str]:
    """numeric/categorical per feature column: declared in campaign.yaml `features:`, else as in the
    campaign's loaded days, else from the file's column type. Conflicts raise IngestError, among them
    a column of numbers in this file (day `day`) that other loaded days hold as text: the type is
    decided from every loaded day, whichever came first, never by turning numbers into categories."""
    declared = config.features
    known = loaded_features(con, config.campaign)
    others = {}
    for feature, kind, campaign in ingest_store.all_feature_kinds(con):
        if campaign != config.campaign:
            others.setdefault(feature, (kind, campaign))
    kinds = {}
    for col, dtype in source.items():
        if col in LANDING_COLUMNS:
            continue
        here = "numeric" if _NUMERIC_TYPES.match(dtype) else "categorical"
        kind = declared.get(col) or known.get(col) or here
        if kind not in ("numeric", "categorical"):
            raise IngestError(f"campaign.yaml features.{col}: kind must be 'numeric' or 'categorical', got {kind!r}")
        if col not in declared and known.get(col) == "categorical" and here == "numeric":
            # numbers here, text on the campaign's earlier days: never turned into the categories '0', '1', ...
            days = [str(d) for d in ingest_store.feature_days(con, config.campaign, col) if d != day]
            if not days:  # only this day had it (a reload): the stored column's type decides
                kinds[col] = here
                continue
            raise IngestError(
                f"{path}: feature column '{col}' holds numbers here ({dtype}) but text on the loaded day(s) "
                f"{', '.join(days[:5]) + (' ...' if len(days) > 5 else '')} (stored as categorical); a "
                "column has one type on every day: fix the file(s), or declare it under 'features:' in campaign.yaml "
                f"('{col}: numeric' or '{col}: categorical')")
        if col in others and others[col][0] != kind:
            raise IngestError(
                f"{path}: feature column '{col}' is {kind} here but {others[col][0]} in campaign "
                f"'{others[col][1]}'; the warehouse keeps one type per column name: rename it or declare "
                f"its kind under 'features:' in campaign.yaml"
            )
        kinds[col] = kind
    return kinds


def _events_query(
    con, config: CampaignConfig, day: dt.date, path: Path, repeated: bool = False
) -> tuple[dict[str, str], ingest_store.EventsFile]:
    """Check the file's columns and build the query typing and validating its rows
    (`store.ingest.EventsFile`): (feature kinds {column: numeric | categorical}, the query). With
    `repeated`, the rows of users that occur more than once are compared first (temp table
    repeated_rows) and the query refuses exact copies and contradicting rows. Temp tables it stages
    (treatment_grid, repeated_rows) live outside the load's transaction."""
    source = _source_columns(con, path)
    missing = [c for c in REQUIRED if c not in source]
    if missing:
        raise IngestError(
            f"{path}: missing required column(s) {', '.join(repr(c) for c in missing)} "
            f"(required: {', '.join(REQUIRED)}; found: {', '.join(source) or 'none'})"
        )
    if config.cost == "column" and "cost" not in source:
        raise IngestError(f"{path}: missing column 'cost' (campaign.yaml says cost: column)")
    check_column_names(path, source)
    check_column_types(path, source)
    if config.ordered and source["treatment"] == "BOOLEAN":
        raise IngestError(f"{path}: column 'treatment' is boolean (true / false); campaign.yaml gives incentive "
                          f"amounts ({', '.join(config.labels)}): write the amount of each row's level, not a flag")
    kinds = _feature_kinds(con, config, source, path, day)

    ingest_store.stage_level_grid(con, config.labels, config.incentives)
    query = ingest_store.EventsFile(path, day, tuple(source), kinds, cost=config.cost, response=config.response,
                                    ordered=config.ordered, repeated=repeated)
    if repeated:
        try:
            ingest_store.stage_repeated_rows(con, path, source)
        except duckdb.Error as exc:
            raise IngestError(read_problem(path, ingest_store.file_format(path), exc)) from None
    return kinds, query


def _problems(con, labels) -> list[dict]:
    """The staged rejections summarized per (column, problem); `labels`: every column name a reason
    can start with."""
    rows = ingest_store.rejection_summary(con, labels)
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


def _add_feature_columns(con, path: Path, campaign: str, kinds: dict[str, str]) -> None:
    """Add the feature columns rct_events lacks and register the campaign's features. The schema is
    changed only for a new column (an ALTER TABLE is a catalog write on every call: most of a small
    day's load time when repeated for each day's known columns)."""
    existing = table_columns(con, "rct_events")
    registered = ingest_store.campaign_feature_kinds(con, campaign)
    for col, kind in kinds.items():
        want = ingest_store.feature_dtype(kind)
        if col in existing and existing[col] != want:
            raise IngestError(f"{path}: feature column '{col}' is {kind} but rct_events stores it as {existing[col]}")
        if col not in existing:
            ingest_store.add_feature_column(con, col, kind)
        if registered.get(col) != kind:
            ingest_store.register_feature(con, campaign, col, kind)


class _RepeatedUsers(Exception):
    """A user appears twice among the loaded rows: roll back and load again, comparing their rows."""


class _Refused(Exception):
    """More rows refused than max_rejected_fraction allows: roll the load back, then record them."""


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
    problems: list[dict] = []
    # Users are nearly always unique in a day file: the first attempt loads without comparing rows,
    # then counts repeated users among the loaded rows (cheaper than a pass over the file); only when
    # there are some is the load rolled back and redone with the rows of those users compared.
    for repeated in (False, True):
        kinds, query = _events_query(con, config, day, path, repeated)
        try:
            with transaction(con):  # the partition replaced and the refused rows recorded, or nothing
                try:
                    n_rows = ingest_store.row_count(con, query)
                    if n_rows == 0:
                        raise IngestError(f"{path}: the file has no rows")
                    _add_feature_columns(con, path, campaign, kinds)
                    loaded = ingest_store.replace_events(con, campaign, query)
                    if not repeated and ingest_store.repeats_loaded(con, campaign, day):
                        raise _RepeatedUsers
                    n_rejected = n_rows - loaded
                    if n_rejected:
                        ingest_store.stage_rejected(con, query)
                        problems = _problems(con, [*LANDING_COLUMNS, *kinds])
                except duckdb.Error as exc:
                    raise IngestError(read_problem(path, ingest_store.file_format(path), exc)) from None
                failed = n_rejected / n_rows > config.max_rejected_fraction
                if failed:
                    raise _Refused  # roll the partition replace back
                ingest_store.record_rejections(con, campaign, day, str(path), n_rejected, loaded, None)
        except _RepeatedUsers:
            continue  # rolled back: load again, comparing the rows of the repeated users
        except _Refused:
            pass
        break
    if failed:  # the partition replace was rolled back; stage the refused rows again to record them
        message = (
            f"{n_rejected} of {n_rows} rows rejected (max_rejected_fraction={config.max_rejected_fraction:g}); "
            f"nothing was loaded for campaign '{campaign}' day {day}. "
            + format_problems(path, problems)
            + ". The rejected rows and their reasons are in the warehouse table rejected_events."
        )
        with transaction(con):
            ingest_store.stage_rejected(con, query)
            ingest_store.record_rejections(con, campaign, day, str(path), n_rejected, 0, message)
        raise IngestError(message)
    counts = ingest_store.level_counts(con, campaign, day)
    return IngestResult(campaign, day, str(path), loaded, n_rejected, counts, problems, kinds)


# --------------------------------------------------------------------------------------------
# edges


def ingest_edges_day(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, path: Path) -> IngestResult:
    """Load one `edges/<day>` file (user_id, merchant_id, optional weight, optional amount) into
    payment_edges. `amount` (the payment amount, summed by the graph's history features) is stored
    when the file has the column (an empty cell as NULL) and NULL otherwise; a non-numeric, NaN or
    negative amount refuses the file, naming the column and the first bad row."""
    path = Path(path)
    source = _source_columns(con, path)
    missing = [c for c in ("user_id", "merchant_id") if c not in source]
    if missing:
        raise IngestError(f"{path}: missing required column(s) {', '.join(repr(c) for c in missing)} (required: user_id, merchant_id)")
    weight_column = next((c for c in ("weight", "n_payments", "amount") if c in source), None)
    ingest_store.stage_edges(con, path, weight_column, "amount" in source)
    bad, bad_amounts, first = ingest_store.staged_edge_problems(con)
    if bad:
        raise IngestError(f"{path}: {bad} edge rows with a missing id or a missing, NaN or negative weight")
    if bad_amounts:
        raise IngestError(f"{path}: column 'amount': {bad_amounts} edge row(s) with a non-numeric, NaN or negative "
                          f"amount (first: data row {first}); an empty amount is allowed (stored as NULL)")
    n = ingest_store.staged_edge_count(con)
    ingest_store.replace_edges(con, campaign, day, path, n)
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


def read_landing_cursor(cursor: str | None) -> tuple[dict[str, dict[str, str]] | None, list[str]]:
    """(file inventory, skipped files) the landing sensor kept at its last tick (`landing_cursor`);
    (None, []) on the first tick."""
    state = json.loads(cursor) if cursor else None
    if state is not None and "files" not in state:  # cursor of an earlier version: the inventory only
        state = {"files": state, "skipped": []}
    return (state["files"], state["skipped"]) if state else (None, [])


def landing_cursor(files: dict[str, dict[str, str]], skipped: list[str]) -> str:
    """The landing sensor's cursor: the file inventory (`landing_scan`) and the skipped files, as text."""
    return json.dumps({"files": files, "skipped": skipped}, sort_keys=True)


def landing_warnings(before: dict | None, now: dict, skipped_before: list[str], skipped_now: list[str]) -> list[str]:
    """One warning for each newly skipped landing file and each removed day file."""
    return [f"skipped landing file {line}" for line in sorted(set(skipped_now) - set(skipped_before))] + [
        f"landing file of campaign '{campaign}' day {day} is gone; its loaded rows stay until the campaign's next "
        f"ingestion (`promo run`, a new day file) or `promo forget --campaign {campaign} --day {day}`"
        for campaign, day in landing_removed(before or {}, now)]


def modified_seconds(fingerprint: str) -> float:
    """The modification time (seconds since the epoch) in a `landing_scan` fingerprint ('<size>-<mtime_ns>')."""
    return int(fingerprint.rsplit("-", 1)[1]) / 1e9


# --------------------------------------------------------------------------------------------
# what is loaded: the feature set and the partitions of a campaign, and forgetting a partition

def constraint_feature_problems(config: CampaignConfig, features: Iterable[str], where: str) -> list[str]:
    """campaign.yaml `constraints.groups`: one problem per group whose `feature` is not among
    `features` (the feature columns of `where`), naming the key. A cap on a column that does not exist
    would be a cap on an empty group; it is refused before anything is decided."""
    groups = config.constraints.groups if config.constraints else {}
    have = sorted(set(map(str, features)) - set(REQUIRED) - set(OPTIONAL))
    shown = ", ".join(have) if have else "none"
    return [f"'constraints.groups.{name}.feature' = {g.feature!r}: {where} have no such feature column "
            f"(features: {shown})" for name, g in groups.items() if g.feature not in have]


def events_file_columns(landing: Path, campaign: str) -> set[str]:
    """The column names of the campaign's events day files in the landing folder (each file's header,
    read by DuckDB without loading a row; a file that cannot be read adds nothing: ingestion names it)."""
    names: set[str] = set()
    con = duckdb.connect()
    try:
        for path in scan_day_files(landing, campaign, "events").files.values():
            try:
                names.update(_source_columns(con, path))
            except IngestError:
                continue
    finally:
        con.close()
    return names


def check_constraint_features(landing: Path, campaign: str, config: CampaignConfig) -> None:
    """CampaignConfigError naming every `constraints.groups.<name>.feature` that is no feature column
    of the campaign's events day files (`promo run` checks it with campaign.yaml, before any run)."""
    if not (config.constraints and config.constraints.groups):
        return
    problems = constraint_feature_problems(config, events_file_columns(landing, campaign),
                                           f"the events day files of campaign '{campaign}'")
    if problems:
        head = f"{len(problems)} problems: " if len(problems) > 1 else ""
        raise CampaignConfigError(f"{_campaign_yaml(landing, campaign)}: {head}" + "; ".join(problems))
