-- Loading one landing day file. {placeholders} are lists of quoted identifiers / expressions built
-- from the file's own column names; every value is a `?` parameter.

-- name: create_grid
CREATE OR REPLACE TEMP TABLE treatment_grid (level INTEGER, label VARCHAR, incentive DOUBLE);

-- name: insert_grid
INSERT INTO treatment_grid VALUES (?, ?, ?);

-- name: read_parquet
-- The typed rows of one file with each row's rejection reason ('' when valid), computed in one pass.
SELECT {typed}, concat_ws('; ', {reasons}) AS __reason, {raw} AS __raw
FROM (SELECT *, file_row_number + 1 AS __source_row FROM read_parquet(?, file_row_number = true)) AS src
LEFT JOIN treatment_grid AS g ON {grid_join}

-- name: read_csv
SELECT {typed}, concat_ws('; ', {reasons}) AS __reason, {raw} AS __raw
FROM (SELECT *, row_number() OVER () AS __source_row FROM read_csv(?, header = true)) AS src
LEFT JOIN treatment_grid AS g ON {grid_join}

-- name: parquet_rows
SELECT sum(num_rows) FROM parquet_file_metadata(?);

-- name: scan_counts
-- Count rows and rejections without storing anything (CSV files have no row count in a footer).
SELECT count(*) AS n_rows, count(*) FILTER (WHERE __reason <> '') AS n_rejected FROM ({rows});

-- name: stage_rejected
CREATE OR REPLACE TEMP TABLE staged AS SELECT * FROM ({rows}) WHERE __reason <> '';

-- name: rejection_summary
-- One row per (column, problem): how many rows, the first row, and an example value.
SELECT split_part(part, ':', 1) AS column_name,
       trim(regexp_replace(split_part(part, ':', 2), '\s*\(.*\)$', '')) AS problem,
       count(*) AS n_rows,
       min(source_row) AS first_row,
       arg_min(regexp_extract(part, '\((.*)\)$', 1), source_row) AS example
FROM (SELECT source_row, unnest(string_split(__reason, '; ')) AS part FROM staged)
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
SELECT ?, CAST(? AS DATE), ?, source_row, __reason, __raw, now()
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
SELECT CAST(user_id AS VARCHAR) AS user_id, CAST(merchant_id AS VARCHAR) AS merchant_id,
       TRY_CAST({weight} AS DOUBLE) AS weight
FROM read_parquet(?);

-- name: stage_edges_csv
CREATE OR REPLACE TEMP TABLE staged_edges AS
SELECT CAST(user_id AS VARCHAR) AS user_id, CAST(merchant_id AS VARCHAR) AS merchant_id,
       TRY_CAST({weight} AS DOUBLE) AS weight
FROM read_csv(?, header = true);

-- name: bad_edges
SELECT count(*) FROM staged_edges
WHERE user_id IS NULL OR merchant_id IS NULL OR weight IS NULL OR isnan(weight) OR weight < 0;

-- name: insert_edges
INSERT INTO payment_edges SELECT ?, CAST(? AS DATE), user_id, merchant_id, weight, ? FROM staged_edges;
