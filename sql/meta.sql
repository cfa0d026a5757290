-- name: table_columns
SELECT column_name, data_type
FROM information_schema.columns
WHERE table_name = ?
ORDER BY ordinal_position;

-- name: describe_parquet
SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?));

-- name: describe_csv
SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_csv(?, header = true));

-- name: rows_of_run
-- Rows a run wrote into a results table that records its run id (benchmarks/kill_recovery.py).
SELECT count(*) FROM {table} WHERE run_id = ?;

-- name: all_columns
SELECT DISTINCT column_name FROM information_schema.columns ORDER BY column_name;

-- name: relation_exists
-- Whether a table or view (a data frame registered on this connection included) has this name.
SELECT count(*) FROM (
    SELECT table_name AS name FROM duckdb_tables()
    UNION ALL
    SELECT view_name FROM duckdb_views() WHERE NOT internal
) WHERE lower(name) = lower(?);

-- name: campaign_rows
-- Every row of one campaign in a table that has a campaign column (tests, inspection).
SELECT * FROM {table} WHERE campaign = ? ORDER BY ALL;

-- name: schema_hash
-- The hash of sql/schema.sql that this warehouse was last brought up to (warehouse.ensure_schema):
-- a write connection runs the ~30 schema statements only when it differs.
SELECT schema_hash FROM warehouse_schema;

-- name: create_schema_marker
CREATE TABLE IF NOT EXISTS warehouse_schema (schema_hash VARCHAR NOT NULL);

-- name: clear_schema_marker
DELETE FROM warehouse_schema;

-- name: record_schema_hash
INSERT INTO warehouse_schema VALUES (?);

-- name: columns_of_tables
-- (table, column) of every column of these tables (a list) in this database (warehouse's column renames).
SELECT table_name, column_name FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = current_schema() AND list_contains(?, table_name);

-- name: rename_response_coefficients_value
-- Warehouses made before the predicted response was called `response` everywhere stored it as `value`.
ALTER TABLE response_coefficients RENAME COLUMN value TO response;

-- name: rename_merchant_coefficients_value
ALTER TABLE merchant_coefficients RENAME COLUMN value TO response;

-- name: rename_budget_dual_value
ALTER TABLE budget_dual RENAME COLUMN value TO response;

-- name: base_tables
-- The warehouse's tables, by name (warehouse.row_counts: an upgrade's rows before and after).
SELECT table_name FROM information_schema.tables
WHERE table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY table_name;

-- name: table_row_count
SELECT count(*) FROM {table};
