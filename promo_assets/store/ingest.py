"""Ingestion's warehouse statements (the `ingest` family of sql/ and the merchants' part of `graph`):
reading a landing file's columns, staging and typing its rows in one DuckDB pass, replacing a
(campaign, day) partition, recording rejected rows and the ingest log, the day ledger, forgetting a
partition. What is checked and refused, and the messages, are `promo_assets.ingestion`'s; these
functions run the statements. No name from a file reaches SQL text other than through `quote_ident`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import duckdb

from promo_assets.store.frames import loaded_features
from promo_assets.store.warehouse import quote_ident, sql, transaction

PARTITION_TABLES = ("rct_events", "rejected_events", "payment_edges", "merchant_events")  # keyed by (campaign, event_date)


def file_format(path: Path) -> str:
    return "parquet" if Path(path).suffix == ".parquet" else "csv"


# --------------------------------------------------------------------------------------------
# a landing file's header


def describe_file(con: duckdb.DuckDBPyConnection, path: Path) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a landing file, as DuckDB reads it."""
    return con.execute(sql("meta", f"describe_{file_format(path)}"), [str(path)]).fetchall()


def csv_skipped_lines(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Lines at the top of a CSV file DuckDB's sniffer would skip."""
    return con.execute(sql("ingest", "csv_skipped_lines"), [str(path)]).fetchone()[0]


def csv_header(con: duckdb.DuckDBPyConnection, path: Path) -> list[str]:
    """A CSV file's header line as written (DuckDB renames a repeated name to name_1)."""
    return [str(v) for v in (con.execute(sql("ingest", "csv_header"), [str(path)]).fetchone() or [])]


# --------------------------------------------------------------------------------------------
# features


def all_feature_kinds(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """(feature, kind, campaign) of every campaign's registered feature columns."""
    return con.execute(sql("ingest", "all_feature_kinds")).fetchall()


def feature_days(con: duckdb.DuckDBPyConnection, campaign: str, column: str) -> list[dt.date]:
    """The loaded days of the campaign whose rows hold a value in feature column `column`."""
    return [d for (d,) in con.execute(sql("ingest", "feature_days", col=quote_ident(column)), [campaign]).fetchall()]


def campaign_feature_kinds(con: duckdb.DuckDBPyConnection, campaign: str) -> dict[str, str]:
    """{feature: kind} of the campaign's registered feature columns."""
    return dict(con.execute(sql("ingest", "campaign_feature_kinds"), [campaign]).fetchall())


def feature_dtype(kind: str) -> str:
    """The column type of rct_events a feature of `kind` (numeric or categorical) is stored as."""
    return "DOUBLE" if kind == "numeric" else "VARCHAR"


def add_feature_column(con: duckdb.DuckDBPyConnection, column: str, kind: str) -> None:
    """A new feature column of rct_events for a feature of `kind` (numeric or categorical)."""
    con.execute(sql("ingest", "add_feature_column", column=quote_ident(column), dtype=feature_dtype(kind)))


def register_feature(con: duckdb.DuckDBPyConnection, campaign: str, column: str, kind: str) -> None:
    con.execute(sql("ingest", "insert_campaign_feature"), [campaign, column, kind])


# --------------------------------------------------------------------------------------------
# an events day file: the query typing and validating its rows


@dataclass(frozen=True)
class EventsFile:
    """An events day file and the rule its rows are typed and checked by: what the loading statements
    are built from (`_statements`). `columns`: the file's columns in order; `kinds`: its feature
    columns, numeric or categorical; `cost`, `response`, `ordered`: campaign.yaml's rule. With
    `repeated`, the rows of users that occur more than once are compared (`stage_repeated_rows`
    first) and exact copies and contradicting rows are refused."""

    path: Path
    day: dt.date
    columns: tuple[str, ...]
    kinds: dict
    cost: str
    response: str
    ordered: bool
    repeated: bool = False


def _source(f: EventsFile) -> str:
    """The file's rows (file_parquet / file_csv; parameter: the file)."""
    return sql("ingest", f"file_{file_format(f.path)}")


def _statements(f: EventsFile) -> tuple[str, list, str]:
    """(the typed rows of an events file with each row's rejection reason; that query's parameters, the
    file last; the rct_events columns it fills). A feature's name in a rejection reason is a bound
    parameter."""
    typed = [sql("ingest", "typed_required"), sql("ingest", f"typed_cost_{f.cost}")]
    stored = ["source_row", "user_id", "level", "incentive", "response", "cost"]
    rule = {"binary": "response_rule_binary", "count": "response_rule_count"}.get(f.response)
    src = _source(f)
    raw_fields = ", ".join(sql("ingest", "raw_field", col=quote_ident(c)) for c in f.columns)
    response_ok = sql("ingest", f"response_ok_{f.response}")
    reasons = [sql("ingest", "check_required"),
               sql("ingest", "check_response", response_rule=sql("ingest", rule) if rule else "",
                   response_ok=response_ok)]
    valid = [sql("ingest", "valid_required"), response_ok]  # a row passing these skips the reasons
    valid_params: list = []
    if f.repeated:  # an exact copy: the same trimmed id and the same other fields (stage_repeated_rows)
        reasons.append(sql("ingest", "check_repeated"))
        valid.append(sql("ingest", "valid_repeated"))
    params: list = []
    if "cost" in f.columns:
        reasons.append(sql("ingest", "check_cost", valid_cost=sql("ingest", "valid_cost")))
        valid.append(sql("ingest", "valid_cost"))
    for col in ("propensity", "merchant_id", "event_time"):
        if col in f.columns:
            typed.append(sql("ingest", f"typed_{col}"))
            stored.append(col)
    if "propensity" in f.columns:
        reasons.append(sql("ingest", "check_propensity"))
        valid.append(sql("ingest", "valid_propensity"))
    if "event_time" in f.columns:
        reasons.append(sql("ingest", "check_event_time"))
        params.append(f.day)
        valid.append(sql("ingest", "valid_event_time"))
        valid_params.append(f.day)
    for col, kind in f.kinds.items():
        typed.append(sql("ingest", f"typed_{kind}", col=quote_ident(col)))
        stored.append(col)
        reasons.append(sql("ingest", f"check_{kind}_feature", col=quote_ident(col)))
        params.append(col)
        valid.append(sql("ingest", f"valid_{kind}_feature", col=quote_ident(col)))
    rows = sql(
        "ingest", "typed_rows", typed=", ".join(typed), valid=" AND ".join(valid), reasons=", ".join(reasons),
        raw_fields=raw_fields, source=src, grid_join=sql("ingest", "grid_join_levels" if f.ordered else "grid_join_arms"),
        repeated_join=sql("ingest", "repeated_join") if f.repeated else "",
    )
    return rows, [*valid_params, *params, str(f.path)], ", ".join(map(quote_ident, stored))


def stage_level_grid(con: duckdb.DuckDBPyConnection, labels, incentives) -> None:
    """Temp table treatment_grid: every level's index, label and incentive (the typed rows join it)."""
    con.execute(sql("ingest", "create_grid"))
    con.executemany(sql("ingest", "insert_grid"), [[i, label, inc] for i, (label, inc) in enumerate(zip(labels, incentives))])


def stage_repeated_rows(con: duckdb.DuckDBPyConnection, path: Path, columns) -> None:
    """Temp table repeated_rows (source_row, reason): exact duplicate rows and the rows of a user
    whose rows of the day disagree on treatment or response (`columns`: the file's columns)."""
    src = sql("ingest", f"file_{file_format(path)}")
    other_fields = ", ".join(sql("ingest", "raw_field", col=quote_ident(c)) for c in columns if c != "user_id")
    con.execute(sql("ingest", "repeated_users", source=src), [str(path)])
    con.execute(sql("ingest", "repeated_rows", source=src, raw_fields=other_fields), [str(path)])


def row_count(con: duckdb.DuckDBPyConnection, f: EventsFile) -> int:
    """Rows in the file: from the Parquet footer (no scan), else by counting."""
    if file_format(f.path) == "parquet":
        return int(con.execute(sql("ingest", "parquet_rows"), [str(f.path)]).fetchone()[0] or 0)
    return int(con.execute(sql("ingest", "scan_counts", source=_source(f)), [str(f.path)]).fetchone()[0])


def replace_events(con: duckdb.DuckDBPyConnection, campaign: str, f: EventsFile) -> int:
    """The (campaign, day) partition of rct_events replaced by the file's valid rows; returns how many
    (call inside a transaction)."""
    rows, params, columns = _statements(f)
    delete_partition(con, "rct_events", campaign, f.day)
    return int(con.execute(sql("ingest", "insert_valid", columns=columns, rows=rows), [campaign, f.day, *params]).fetchone()[0])


def repeats_loaded(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date) -> int:
    """Users that occur more than once among the partition's loaded rows."""
    return con.execute(sql("ingest", "count_repeats_loaded"), [campaign, day]).fetchone()[0]


def stage_rejected(con: duckdb.DuckDBPyConnection, f: EventsFile) -> None:
    """Temp table of the file's refused rows with their reasons (what `record_rejections` stores)."""
    rows, params, _ = _statements(f)
    con.execute(sql("ingest", "stage_rejected", rows=rows), params)


def rejection_summary(con: duckdb.DuckDBPyConnection, labels) -> list[tuple]:
    """(column, problem, rows, first row, example) of the staged rejections; `labels`: every column
    name a reason can start with."""
    return con.execute(sql("ingest", "rejection_summary"), [sorted(labels, key=len, reverse=True)]).fetchall()


def record_rejections(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, path: str, n_rejected: int,
                      loaded: int, message: str | None) -> None:
    """Replace the day's rejected_events with the staged refused rows and log the load (inside the
    caller's transaction). `message` is None for a load, the refusal's text for a failed file."""
    delete_partition(con, "rejected_events", campaign, day)
    if n_rejected:
        con.execute(sql("ingest", "insert_rejected"), [campaign, day, path])
    log_load(con, campaign, day, LoadLog("rct_events", path, loaded, n_rejected,
                                         "loaded" if message is None else "failed", message))


@dataclass(frozen=True)
class LoadLog:
    """What one load of a day file did: the `table` it loaded, the file's `path`, the `rows` loaded and
    `rejected`, its `status` ('loaded', 'failed', 'forgotten') and a `message` (why, or None)."""

    table: str
    path: str
    rows: int
    rejected: int
    status: str
    message: str | None = None


def log_load(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, entry: LoadLog) -> None:
    """One row of ingest_log: the load `entry` of the (campaign, day) partition."""
    con.execute(sql("ingest", "insert_ingest_log"), [campaign, day, entry.table, entry.path, entry.rows, entry.rejected,
                                                     entry.status, entry.message])


def level_counts(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date) -> dict:
    """{level: rows} of the loaded partition."""
    return dict(con.execute(sql("ingest", "level_counts"), [campaign, day]).fetchall())


def delete_partition(con: duckdb.DuckDBPyConnection, table: str, campaign: str, day: dt.date) -> int:
    """Delete one (campaign, day) partition of a per-day table; returns the rows deleted."""
    return int(con.execute(sql("ingest", "delete_partition", table=quote_ident(table)), [campaign, day]).fetchone()[0])


# --------------------------------------------------------------------------------------------
# an edges day file


def stage_edges(con: duckdb.DuckDBPyConnection, path: Path, weight_column: str | None, amount: bool) -> None:
    """Temp table staged_edges from an edges file: the weight from `weight_column` (1.0 without one),
    the payment amount when the file has the column `amount` (NULL otherwise)."""
    weight = quote_ident(weight_column) if weight_column else "1.0"
    con.execute(sql("ingest", f"stage_edges_{file_format(path)}", weight=weight,
                    amount=quote_ident("amount") if amount else "NULL"), [str(path)])


def staged_edge_problems(con: duckdb.DuckDBPyConnection) -> tuple[int, int, int | None]:
    """(rows with a missing id or a missing, NaN or negative weight; rows with a bad amount; the first
    of those) of staged_edges."""
    bad = con.execute(sql("ingest", "bad_edges")).fetchone()[0]
    bad_amounts, first = con.execute(sql("ingest", "bad_edge_amounts")).fetchone()
    return int(bad), int(bad_amounts or 0), first


def staged_edge_count(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute(sql("ingest", "staged_edge_count")).fetchone()[0])


def replace_edges(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, path: Path, n: int) -> None:
    """The (campaign, day) partition of payment_edges replaced by staged_edges, logged, in one transaction."""
    with transaction(con):
        delete_partition(con, "payment_edges", campaign, day)
        con.execute(sql("ingest", "insert_edges"), [campaign, day, str(path)])
        log_load(con, campaign, day, LoadLog("payment_edges", str(path), n, 0, "loaded"))


# --------------------------------------------------------------------------------------------
# what is loaded, and forgetting a partition


def loaded_days(con: duckdb.DuckDBPyConnection, campaign: str) -> list[dt.date]:
    """Days with rows of the campaign in any per-day table (rct_events, rejected_events, ...)."""
    return [r[0] for r in con.execute(sql("ingest", "loaded_days"), [campaign]).fetchall()]


def table_days(con: duckdb.DuckDBPyConnection, table: str, campaign: str) -> set[dt.date]:
    """Days with rows of the campaign in one per-day table."""
    return {r[0] for r in con.execute(sql("ingest", "table_days", table=quote_ident(table)), [campaign]).fetchall()}


def forget_partition(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, reason: str) -> dict[str, int]:
    """Remove one (campaign, day) partition from every per-day table in one transaction, drop the
    campaign's feature registrations that no loaded day uses any more, and record the removal in
    ingest_log (status 'forgotten', `reason` as its message). Returns {table: rows removed}."""
    removed: dict[str, int] = {}
    with transaction(con):
        for table in PARTITION_TABLES:
            removed[table] = delete_partition(con, table, campaign, day)
        gone = sorted(set(campaign_feature_kinds(con, campaign)) - set(loaded_features(con, campaign)))
        if gone:
            con.execute(sql("ingest", "delete_campaign_features"), [campaign, gone])
        log_load(con, campaign, day, LoadLog("rct_events", "", 0, 0, "forgotten",
                                             f"{reason}; removed " + ", ".join(f"{n} {t}" for t, n in removed.items())
                                             + (f"; features no longer loaded: {', '.join(gone)}" if gone else "")))
    return removed


# --------------------------------------------------------------------------------------------
# the day ledger (the files loaded, by fingerprint)


def ledger(con: duckdb.DuckDBPyConnection, campaign: str, kind: str) -> dict[dt.date, tuple]:
    """{day: (file, content hash, config hash, status, rows, rejected, message)} of the ledger."""
    return {r[0]: r[1:] for r in con.execute(sql("ingest", "ledger"), [campaign, kind]).fetchall()}


def failed_files(con: duckdb.DuckDBPyConnection, campaign: str) -> list[tuple[str, dt.date, str, str]]:
    """[(kind, day, file, message)] of the campaign's day files whose last load attempt failed."""
    return [tuple(r) for r in con.execute(sql("ingest", "ledger_failed"), [campaign]).fetchall()]


def forget_ledger_day(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date) -> None:
    """Drop every kind's ledger row of one day (after `forget_partition`)."""
    con.execute(sql("ingest", "ledger_delete_day"), [campaign, day])


def forget_day_of_kind(con: duckdb.DuckDBPyConnection, table: str, kind: str, campaign: str, day: dt.date) -> int:
    """Delete one day of a side table and its ledger row, in one transaction; returns the rows deleted."""
    with transaction(con):
        n = delete_partition(con, table, campaign, day)
        con.execute(sql("ingest", "ledger_delete"), [campaign, kind, day])
    return n


def ledger_upsert(con: duckdb.DuckDBPyConnection, row: list) -> None:
    """One ledger row (campaign, kind, day, fingerprint, status, message, ...), inserted or replaced."""
    con.execute(sql("ingest", "ledger_upsert"), row)


# --------------------------------------------------------------------------------------------
# a merchants day file (statements of the `graph` family)


def stage_merchants(con: duckdb.DuckDBPyConnection, path: Path, features: list[str], *, cost: str, commissions,
                    propensity: bool) -> None:
    """Temp table typed_merchants: a merchants file's rows typed against the commission grid (`cost`:
    campaign.yaml's merchants.cost rule; `features`: the file's feature columns, kept as one JSON object)."""
    fields = ", ".join(sql("graph", "merchant_feature_field", col=quote_ident(c)) for c in features)
    feats = sql("graph", "merchant_features", fields=fields) if features else sql("graph", "merchant_no_features")
    con.execute(sql("graph", "create_commission_grid"))
    con.executemany(sql("graph", "insert_commission_grid"), [[i, float(x)] for i, x in enumerate(commissions)])
    con.execute(sql("graph", f"stage_merchants_{file_format(path)}"), [str(path)])
    con.execute(sql("graph", "type_merchants", cost=sql("graph", f"merchant_cost_{cost}"),
                    propensity=sql("graph", "merchant_propensity" if propensity else "merchant_no_propensity"),
                    features=feats))


def staged_merchant_problems(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """(column, problem, rows, first row, example) of typed_merchants' bad rows."""
    return con.execute(sql("graph", "merchant_problems")).fetchall()


def staged_merchant_count(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute(sql("graph", "count_typed_merchants")).fetchone()[0])


def replace_merchants(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date, path: Path, n: int) -> None:
    """The (campaign, day) partition of merchant_events replaced by typed_merchants, logged, in one transaction."""
    with transaction(con):
        clear_merchants(con, campaign, day)
        con.execute(sql("graph", "insert_merchant_events"), [campaign, day, str(path)])
        log_load(con, campaign, day, LoadLog("merchant_events", str(path), n, 0, "loaded"))


def clear_merchants(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date) -> None:
    """Empty the (campaign, day) partition of merchant_events."""
    con.execute(sql("graph", "delete_merchant_partition"), [campaign, day])


def merchant_level_counts(con: duckdb.DuckDBPyConnection, campaign: str, day: dt.date) -> dict:
    return dict(con.execute(sql("graph", "merchant_level_counts"), [campaign, day]).fetchall())


# --------------------------------------------------------------------------------------------
# the population files


def population_count(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[int, int]:
    """(users, rows without an id) of a population file."""
    return con.execute(sql("frames", f"population_count_{file_format(path)}"), [str(path)]).fetchone()


def population_batches(con: duckdb.DuckDBPyConnection, path: Path, rows: int):
    """A population file's rows as Arrow record batches of `rows` rows (on the cursor `con`)."""
    return con.execute(sql("frames", f"population_{file_format(path)}"), [str(path)]).to_arrow_reader(max(1, int(rows)))


def event_rule_counts(con: duckdb.DuckDBPyConnection, campaign: str, n_levels: int) -> tuple:
    """(rows, off the level grid, bad binary response, bad count response, bad response, bad cost, bad
    propensity) over every loaded day of `campaign`'s rct_events."""
    return con.execute(sql("checks", "rct_events_campaign"), [n_levels, campaign]).fetchone()


def incentive_mismatches(con: duckdb.DuckDBPyConnection, campaign: str, incentives) -> int:
    """The rct_events rows of `campaign` whose incentive is not its level's on the campaign's grid."""
    levels = list(range(len(incentives)))
    return con.execute(sql("checks", "incentive_mismatch_campaign"), [levels, list(incentives), campaign]).fetchone()[0]
