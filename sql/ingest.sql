-- Loading one landing day file. {placeholders} are lists of quoted identifiers / expressions built
-- from the file's own column names; every value is a `?` parameter.

-- name: create_grid
CREATE OR REPLACE TEMP TABLE treatment_grid (level INTEGER, label VARCHAR, incentive DOUBLE);

-- name: insert_grid
INSERT INTO treatment_grid VALUES (?, ?, ?);

-- name: file_parquet
-- The rows of one file with their 1-based row number (? = the file).
SELECT *, file_row_number + 1 AS __source_row FROM read_parquet(?, file_row_number = true)

-- name: file_csv
SELECT *, row_number() OVER () AS __source_row FROM read_csv(?, header = true)

-- name: csv_skipped_lines
-- Lines before the header that DuckDB's CSV sniffer would skip (a ragged or garbled file start).
SELECT SkipRows FROM sniff_csv(?);

-- name: csv_header
-- The header line of a CSV file as written (DuckDB renames a repeated name to name_1 when it reads
-- with header = true, so the names are read as the values of the first line).
SELECT * FROM read_csv(?, header = false, all_varchar = true) LIMIT 1;

-- name: typed_rows
-- The typed rows of one file with each row's rejection reason ('' when valid), computed in one pass;
-- the reasons of a row are separated by chr(30) (no column name holds it), shown as '; '.
-- Filled with lists of the fragments below (typed_*, check_*, raw_field: over the file's quoted
-- columns) and file_parquet or file_csv. Parameters, in order: those of the valid_* conditions, those of the checks, then the file.
-- {valid}: the checks' conditions for a valid row, AND-ed; a row passing them skips the reasons.
SELECT {typed}, CASE WHEN {valid} THEN '' ELSE concat_ws(chr(30), {reasons}) END AS __reason,
       CASE WHEN __reason <> '' THEN CAST(to_json(struct_pack({raw_fields})) AS VARCHAR) END AS __raw
FROM ({source}) AS src
LEFT JOIN treatment_grid AS g ON {grid_join}
{repeated_join}

-- name: grid_join_levels
-- Fragments of typed_rows (col: one column name, quoted by quote_ident).
TRY_CAST(src."treatment" AS DOUBLE) = g.incentive

-- name: grid_join_arms
trim(CAST(src."treatment" AS VARCHAR)) = g.label

-- name: typed_required
src.__source_row AS source_row, trim(CAST(src."user_id" AS VARCHAR), E' \t\n\r') AS user_id, g.level AS level,
g.incentive AS incentive, TRY_CAST(src."response" AS DOUBLE) AS response

-- name: typed_cost_redeemed
g.incentive * TRY_CAST(src."response" AS DOUBLE) AS cost

-- name: typed_cost_assigned
g.incentive AS cost

-- name: typed_cost_column
TRY_CAST(src."cost" AS DOUBLE) AS cost

-- name: typed_propensity
TRY_CAST(src."propensity" AS DOUBLE) AS propensity

-- name: typed_merchant_id
trim(CAST(src."merchant_id" AS VARCHAR), E' \t\n\r') AS merchant_id

-- name: typed_event_time
TRY_CAST(src."event_time" AS TIMESTAMP) AS event_time

-- name: typed_numeric
TRY_CAST(src.{col} AS DOUBLE) AS {col}

-- name: typed_categorical
CAST(src.{col} AS VARCHAR) AS {col}

-- name: raw_field
{col} := src.{col}

-- name: check_required
-- The checks: each gives 'column: problem (value)' or NULL. One rule for every number (response,
-- cost, numeric features): finite and |x| <= 1e15 (NaN, inf and absurd values such as 1e308 are refused).
-- A valid row is recognized by the valid_* conditions alone (typed_rows' {valid}; DuckDB compares NaN
-- above every number, so abs(x) <= 1e15 is false for NaN and inf) and skips the tests naming a problem.
CASE WHEN src."user_id" IS NULL OR trim(CAST(src."user_id" AS VARCHAR), E' \t\n\r') = '' THEN 'user_id: missing'
     WHEN regexp_matches(trim(CAST(src."user_id" AS VARCHAR), E' \t\n\r'), '[\x00-\x1F\x7F]')
     THEN 'user_id: a control character inside the id, such as NUL, tab or newline (' || replace(CAST(src."user_id" AS VARCHAR), chr(0), '\0') || ')' END,
CASE WHEN g.level IS NULL THEN 'treatment: unknown treatment (' || coalesce(CAST(src."treatment" AS VARCHAR), 'NULL') || ')' END

-- name: check_response
-- {response_ok}: the common valid case decided first, so that a valid row evaluates one test.
CASE WHEN src."response" IS NULL THEN 'response: missing'
     WHEN {response_ok} THEN NULL
     WHEN TRY_CAST(src."response" AS DOUBLE) IS NULL THEN 'response: not a number (' || CAST(src."response" AS VARCHAR) || ')'
     WHEN NOT isfinite(TRY_CAST(src."response" AS DOUBLE)) THEN 'response: NaN or infinite (' || CAST(src."response" AS VARCHAR) || ')'
     WHEN abs(TRY_CAST(src."response" AS DOUBLE)) > 1e15 THEN 'response: absurd value, |x| > 1e15 (' || CAST(src."response" AS VARCHAR) || ')'
     {response_rule} END

-- name: response_ok_binary
-- The valid_* conditions: true for a valid value (NULL or false otherwise, then the check names the problem).
TRY_CAST(src."response" AS DOUBLE) IN (0, 1)

-- name: response_ok_count
abs(TRY_CAST(src."response" AS DOUBLE)) <= 1e15 AND TRY_CAST(src."response" AS DOUBLE) >= 0
     AND TRY_CAST(src."response" AS DOUBLE) = floor(TRY_CAST(src."response" AS DOUBLE))

-- name: response_ok_continuous
abs(TRY_CAST(src."response" AS DOUBLE)) <= 1e15

-- name: valid_required
src."user_id" IS NOT NULL AND trim(CAST(src."user_id" AS VARCHAR), E' \t\n\r') <> '' AND g.level IS NOT NULL
AND NOT regexp_matches(trim(CAST(src."user_id" AS VARCHAR), E' \t\n\r'), '[\x00-\x1F\x7F]')

-- name: valid_cost
abs(TRY_CAST(src."cost" AS DOUBLE)) <= 1e15 AND TRY_CAST(src."cost" AS DOUBLE) >= 0

-- name: valid_propensity
-- A file with a propensity column gives every row its probability (a NULL, an empty CSV cell or NaN is refused,
-- as `promo simulate --respond-to` refuses it), so no row gets the empirical share in place of what was logged.
(TRY_CAST(src."propensity" AS DOUBLE) > 0 AND TRY_CAST(src."propensity" AS DOUBLE) <= 1)

-- name: valid_event_time
-- ? = the file's day.
(src."event_time" IS NULL OR CAST(TRY_CAST(src."event_time" AS TIMESTAMP) AS DATE) = CAST(? AS DATE))

-- name: valid_numeric_feature
(src.{col} IS NULL OR abs(TRY_CAST(src.{col} AS DOUBLE)) <= 1e15)

-- name: check_categorical_feature
-- ? = the feature's name (bound). A control character inside a text value refuses the row.
CASE WHEN regexp_matches(CAST(src.{col} AS VARCHAR), '[\x00-\x1F\x7F]')
     THEN ? || ': a control character inside the value, such as NUL, tab or newline (' || replace(CAST(src.{col} AS VARCHAR), chr(0), '\0') || ')' END

-- name: valid_categorical_feature
(src.{col} IS NULL OR NOT regexp_matches(CAST(src.{col} AS VARCHAR), '[\x00-\x1F\x7F]'))

-- name: valid_repeated
rep.reason IS NULL

-- name: response_rule_binary
WHEN TRY_CAST(src."response" AS DOUBLE) NOT IN (0, 1) THEN 'response: not 0 or 1 for a binary response (' || CAST(src."response" AS VARCHAR) || ')'

-- name: response_rule_count
WHEN TRY_CAST(src."response" AS DOUBLE) < 0 OR TRY_CAST(src."response" AS DOUBLE) <> floor(TRY_CAST(src."response" AS DOUBLE))
THEN 'response: not a non-negative whole number for a count response (' || CAST(src."response" AS VARCHAR) || ')'

-- name: check_cost
CASE WHEN src."cost" IS NULL THEN 'cost: missing'
     WHEN {valid_cost} THEN NULL
     WHEN TRY_CAST(src."cost" AS DOUBLE) IS NULL THEN 'cost: not a number (' || CAST(src."cost" AS VARCHAR) || ')'
     WHEN NOT isfinite(TRY_CAST(src."cost" AS DOUBLE)) THEN 'cost: NaN or infinite (' || CAST(src."cost" AS VARCHAR) || ')'
     WHEN abs(TRY_CAST(src."cost" AS DOUBLE)) > 1e15 THEN 'cost: absurd value, |x| > 1e15 (' || CAST(src."cost" AS VARCHAR) || ')'
     WHEN TRY_CAST(src."cost" AS DOUBLE) < 0 THEN 'cost: negative (' || CAST(src."cost" AS VARCHAR) || ')' END

-- name: check_propensity
CASE WHEN src."propensity" IS NULL THEN 'propensity: missing or NaN in a file with a propensity column (NULL)'
     WHEN TRY_CAST(src."propensity" AS DOUBLE) IS NULL OR isnan(TRY_CAST(src."propensity" AS DOUBLE))
          OR TRY_CAST(src."propensity" AS DOUBLE) <= 0 OR TRY_CAST(src."propensity" AS DOUBLE) > 1
     THEN 'propensity: outside 0 < p <= 1 (' || CAST(src."propensity" AS VARCHAR) || ')' END

-- name: check_event_time
-- ? = the file's day: an event_time must fall on it.
CASE WHEN src."event_time" IS NULL THEN NULL
     WHEN TRY_CAST(src."event_time" AS TIMESTAMP) IS NULL THEN 'event_time: not a timestamp (' || CAST(src."event_time" AS VARCHAR) || ')'
     WHEN CAST(TRY_CAST(src."event_time" AS TIMESTAMP) AS DATE) <> CAST(? AS DATE)
     THEN 'event_time: outside the file''s day (' || CAST(src."event_time" AS VARCHAR) || ')' END

-- name: check_numeric_feature
-- ? = the feature's name: a bound value, so that no name from a file becomes SQL text.
CAST(? AS VARCHAR) || ': ' || CASE WHEN src.{col} IS NULL THEN NULL
     WHEN TRY_CAST(src.{col} AS DOUBLE) IS NULL THEN 'not a number (' || CAST(src.{col} AS VARCHAR) || ')'
     WHEN NOT isfinite(TRY_CAST(src.{col} AS DOUBLE)) THEN 'NaN or infinite (' || CAST(src.{col} AS VARCHAR) || ')'
     WHEN abs(TRY_CAST(src.{col} AS DOUBLE)) > 1e15 THEN 'absurd value, |x| > 1e15 (' || CAST(src.{col} AS VARCHAR) || ')' END

-- name: count_repeats_loaded
-- Rows beyond the first of each user among the rows just loaded into a partition (by a 64-bit hash
-- of user_id: 0 proves that every user appears once, the usual case; otherwise the load is redone
-- with repeated_users / repeated_rows).
SELECT count(*) - count(DISTINCT hash(user_id)) FROM rct_events WHERE campaign = ? AND event_date = ?;

-- name: repeated_users
-- Users with more than one row in the file.
CREATE OR REPLACE TEMP TABLE repeated_users AS
SELECT trim(CAST(src."user_id" AS VARCHAR), E' \t\n\r') AS user_id FROM ({source}) AS src GROUP BY ALL HAVING count(*) > 1;

-- name: repeated_rows
-- The rows of repeated users that are refused: an exact copy of an earlier row (every column
-- equal, the id compared trimmed), and every row of a user whose rows disagree on treatment or response.
-- raw_fields: every column of the file but user_id; ? = the file.
CREATE OR REPLACE TEMP TABLE repeated_rows AS
WITH r AS (
    SELECT src.__source_row AS source_row, trim(CAST(src."user_id" AS VARCHAR), E' \t\n\r') AS user_id,
           CAST(src."treatment" AS VARCHAR) AS treatment, CAST(src."response" AS VARCHAR) AS response,
           struct_pack({raw_fields}) AS row_values
    FROM ({source}) AS src
    WHERE trim(CAST(src."user_id" AS VARCHAR), E' \t\n\r') IN (SELECT user_id FROM repeated_users)
), per_user AS (
    SELECT user_id, count(DISTINCT (treatment, response)) AS n_versions,
           string_agg(CAST(source_row AS VARCHAR), ', ' ORDER BY source_row) AS row_list
    FROM r GROUP BY user_id
), flagged AS (
    SELECT r.source_row, concat_ws(chr(30),
        CASE WHEN r.source_row > min(r.source_row) OVER (PARTITION BY r.user_id, r.row_values)
             THEN 'user_id: exact duplicate of an earlier row (' || r.user_id || ' as in row '
                  || min(r.source_row) OVER (PARTITION BY r.user_id, r.row_values) || ')' END,
        CASE WHEN u.n_versions > 1
             THEN 'user_id: same user and day with a different treatment or response (' || r.user_id
                  || ' in rows ' || u.row_list || ')' END) AS reason
    FROM r JOIN per_user AS u USING (user_id)
)
SELECT source_row, reason FROM flagged WHERE reason <> '';

-- name: check_repeated
-- With repeated_join, added only when repeated_rows has rows.
rep.reason

-- name: repeated_join
LEFT JOIN repeated_rows AS rep ON rep.source_row = src.__source_row

-- name: parquet_rows
SELECT sum(num_rows) FROM parquet_file_metadata(?);

-- name: scan_counts
-- Count the rows of a CSV file (it has no row count in a footer).
SELECT count(*) AS n_rows FROM ({source});

-- name: stage_rejected
CREATE OR REPLACE TEMP TABLE staged AS SELECT * FROM ({rows}) WHERE __reason <> '';

-- name: rejection_summary
-- One row per (column, problem): how many rows, the first row, and an example value.
-- ? = the names a reason can start with, longest first (a column's name may itself hold ': ').
WITH parts AS (
    SELECT source_row, unnest(string_split(__reason, chr(30))) AS part FROM staged
), labelled AS (
    SELECT source_row, label, substr(part, length(label) + 3) AS rest
    FROM (SELECT source_row, part,
                 coalesce(list_filter(CAST(? AS VARCHAR[]), l -> starts_with(part, l || ': '))[1],
                          split_part(part, ':', 1)) AS label
          FROM parts)
)
SELECT label AS column_name,
       trim(regexp_replace(rest, '\s*\(.*\)$', '')) AS problem,
       count(*) AS n_rows,
       min(source_row) AS first_row,
       arg_min(regexp_extract(rest, '\((.*)\)$', 1), source_row) AS example
FROM labelled
GROUP BY ALL
ORDER BY n_rows DESC, first_row
LIMIT 20;

-- name: delete_partition
DELETE FROM {table} WHERE campaign = ? AND event_date = ?;

-- name: insert_valid
-- The valid rows straight from the file into the warehouse (returns the number inserted).
INSERT INTO rct_events BY NAME
SELECT ? AS campaign, CAST(? AS DATE) AS event_date, {columns}
FROM ({rows}) WHERE __reason = '';

-- name: insert_rejected
INSERT INTO rejected_events
SELECT ?, CAST(? AS DATE), ?, source_row, replace(__reason, chr(30), '; '), __raw, now()
FROM staged;

-- name: add_feature_column
ALTER TABLE rct_events ADD COLUMN IF NOT EXISTS {column} {dtype};

-- name: campaign_feature_kinds
SELECT feature, kind FROM campaign_features WHERE campaign = ? ORDER BY feature;

-- name: all_feature_kinds
SELECT feature, kind, campaign FROM campaign_features;

-- name: insert_campaign_feature
INSERT OR IGNORE INTO campaign_features VALUES (?, ?, ?);

-- name: column_value_counts
-- Non-NULL values per column of rct_events (in table order) in one campaign's loaded partitions:
-- which registered feature columns the campaign's loaded days actually use.
SELECT count(COLUMNS(*)) FROM rct_events WHERE campaign = ?;

-- name: delete_campaign_features
DELETE FROM campaign_features WHERE campaign = ? AND list_contains(?::VARCHAR[], feature);

-- name: feature_days
-- The loaded days of a campaign on which feature column {col} (quoted by quote_ident) has a value.
SELECT DISTINCT event_date FROM rct_events WHERE campaign = ? AND {col} IS NOT NULL ORDER BY event_date;

-- name: loaded_days
-- Days with rows of one campaign in any per-day table.
SELECT DISTINCT event_date FROM (
    SELECT event_date FROM rct_events WHERE campaign = $1
    UNION ALL SELECT event_date FROM rejected_events WHERE campaign = $1
    UNION ALL SELECT event_date FROM payment_edges WHERE campaign = $1
    UNION ALL SELECT event_date FROM merchant_events WHERE campaign = $1
) ORDER BY event_date;

-- name: insert_ingest_log
INSERT INTO ingest_log VALUES (?, CAST(? AS DATE), ?, ?, ?, ?, ?, ?, now());

-- name: level_counts
SELECT level, count(*) FROM rct_events WHERE campaign = ? AND event_date = ? GROUP BY level ORDER BY level;

-- name: stage_edges_parquet
CREATE OR REPLACE TEMP TABLE staged_edges AS
SELECT trim(CAST(user_id AS VARCHAR), E' \t\n\r') AS user_id, trim(CAST(merchant_id AS VARCHAR), E' \t\n\r') AS merchant_id,
       TRY_CAST({weight} AS DOUBLE) AS weight,
       TRY_CAST({amount} AS DOUBLE) AS amount,
       ({amount} IS NOT NULL AND TRY_CAST({amount} AS DOUBLE) IS NULL) AS amount_unreadable
FROM read_parquet(?);

-- name: stage_edges_csv
CREATE OR REPLACE TEMP TABLE staged_edges AS
SELECT trim(CAST(user_id AS VARCHAR), E' \t\n\r') AS user_id, trim(CAST(merchant_id AS VARCHAR), E' \t\n\r') AS merchant_id,
       TRY_CAST({weight} AS DOUBLE) AS weight,
       TRY_CAST({amount} AS DOUBLE) AS amount,
       ({amount} IS NOT NULL AND TRY_CAST({amount} AS DOUBLE) IS NULL) AS amount_unreadable
FROM read_csv(?, header = true);

-- name: bad_edges
SELECT count(*) FROM staged_edges
WHERE user_id IS NULL OR merchant_id IS NULL OR weight IS NULL OR isnan(weight) OR weight < 0;

-- name: bad_edge_amounts
-- Rows whose amount (the file's `amount` column) is not a number, NaN or negative, and the first of
-- them (1-based); an empty cell is not bad (stored as NULL).
SELECT count(*), min(source_row) FROM (SELECT *, row_number() OVER () AS source_row FROM staged_edges)
WHERE amount_unreadable OR isnan(amount) OR amount < 0;

-- name: insert_edges
INSERT INTO payment_edges (campaign, event_date, user_id, merchant_id, weight, source_file, amount)
SELECT ?, CAST(? AS DATE), user_id, merchant_id, weight, ?, amount FROM staged_edges;

-- name: ledger
-- The landing_files rows of one campaign and kind: day, file, content hash, config hash, status.
SELECT event_date, source_file, content_sha256, config_sha256, status, rows_loaded, rows_rejected, message
FROM landing_files WHERE campaign = ? AND kind = ? ORDER BY event_date;

-- name: ledger_upsert
INSERT OR REPLACE INTO landing_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now());

-- name: ledger_delete
DELETE FROM landing_files WHERE campaign = ? AND kind = ? AND event_date = ?;

-- name: ledger_delete_day
DELETE FROM landing_files WHERE campaign = ? AND event_date = ?;

-- name: ledger_failed
-- Day files of one campaign whose last load attempt failed: kind, day, file, message.
SELECT kind, event_date, source_file, message FROM landing_files
WHERE campaign = ? AND status = 'failed' ORDER BY kind, event_date;

-- name: table_days
-- Days with rows of one campaign in one per-day table ({table}: a quoted identifier).
SELECT DISTINCT event_date FROM {table} WHERE campaign = ? ORDER BY event_date;

-- name: staged_edge_count
SELECT count(*) FROM staged_edges
