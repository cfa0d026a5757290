-- The bipartite customer–merchant side: merchant events, the graph tables, merchant coefficients
-- and the joint allocation. {placeholders} are expressions built from quoted column names only;
-- every value is a `?` parameter.

-- name: stage_merchants_parquet
CREATE OR REPLACE TEMP TABLE staged_merchants AS
SELECT *, file_row_number + 1 AS __source_row FROM read_parquet(?, file_row_number = true);

-- name: stage_merchants_csv
CREATE OR REPLACE TEMP TABLE staged_merchants AS
SELECT *, row_number() OVER () AS __source_row FROM read_csv(?, header = true);

-- name: merchant_cost_redeemed
-- Fragments of type_merchants: the cost rule (campaign.yaml merchants.cost), the propensity, the features.
g.incentive * TRY_CAST(s."response" AS DOUBLE)

-- name: merchant_cost_assigned
g.incentive

-- name: merchant_cost_column
TRY_CAST(s."cost" AS DOUBLE)

-- name: merchant_propensity
TRY_CAST(s."propensity" AS DOUBLE)

-- name: merchant_no_propensity
CAST(NULL AS DOUBLE)

-- name: merchant_features
CAST(to_json(struct_pack({fields})) AS VARCHAR)

-- name: merchant_no_features
'{}'

-- name: merchant_feature_field
{col} := s.{col}

-- name: create_commission_grid
CREATE OR REPLACE TEMP TABLE commission_grid (level INTEGER, incentive DOUBLE);

-- name: insert_commission_grid
INSERT INTO commission_grid VALUES (?, ?);

-- name: type_merchants
-- The staged rows typed against the commission grid; {cost}, {propensity} and {features} are
-- expressions over the file's own (quoted) columns.
CREATE OR REPLACE TEMP TABLE typed_merchants AS
SELECT s.__source_row AS source_row,
       nullif(trim(CAST(s."merchant_id" AS VARCHAR), E' \t\n\r'), '') AS merchant_id,
       CAST(s."treatment" AS VARCHAR) AS raw_treatment,
       g.level AS level,
       g.incentive AS incentive,
       TRY_CAST(s."response" AS DOUBLE) AS response,
       CAST(s."response" AS VARCHAR) AS raw_response,
       {cost} AS cost,
       {propensity} AS propensity,
       {features} AS features
FROM staged_merchants AS s
LEFT JOIN commission_grid AS g ON TRY_CAST(s."treatment" AS DOUBLE) = g.incentive;

-- name: merchant_problems
-- One row per (column, problem) with the number of rows, the first row and an example value.
SELECT * FROM (
    SELECT 'merchant_id' AS column_name, 'missing' AS problem, count(*) AS n_rows,
           min(source_row) AS first_row, NULL AS example
    FROM typed_merchants WHERE merchant_id IS NULL
    UNION ALL
    SELECT 'treatment', 'not a commission level of campaign.yaml merchants.treatments.levels', count(*),
           min(source_row), arg_min(coalesce(raw_treatment, 'NULL'), source_row)
    FROM typed_merchants WHERE level IS NULL
    UNION ALL
    SELECT 'response', 'missing, not a number, NaN/infinite or negative', count(*),
           min(source_row), arg_min(coalesce(raw_response, 'NULL'), source_row)
    FROM typed_merchants WHERE response IS NULL OR isnan(response) OR isinf(response) OR response < 0
    UNION ALL
    SELECT 'cost', 'missing, NaN/infinite or negative', count(*), min(source_row),
           arg_min(CAST(cost AS VARCHAR), source_row)
    FROM typed_merchants
    WHERE level IS NOT NULL AND response IS NOT NULL AND (cost IS NULL OR isnan(cost) OR isinf(cost) OR cost < 0)
    UNION ALL
    SELECT 'propensity', 'outside 0 < p <= 1', count(*), min(source_row),
           arg_min(CAST(propensity AS VARCHAR), source_row)
    FROM typed_merchants WHERE propensity IS NOT NULL AND (isnan(propensity) OR propensity <= 0 OR propensity > 1)
) WHERE n_rows > 0
ORDER BY first_row;

-- name: count_typed_merchants
SELECT count(*) FROM typed_merchants;

-- name: delete_merchant_partition
DELETE FROM merchant_events WHERE campaign = ? AND event_date = CAST(? AS DATE);

-- name: insert_merchant_events
INSERT INTO merchant_events
SELECT ?, CAST(? AS DATE), merchant_id, level, incentive, response, cost, propensity, features, ?, source_row
FROM typed_merchants;

-- name: merchant_level_counts
SELECT level, count(*) FROM merchant_events WHERE campaign = ? AND event_date = CAST(? AS DATE)
GROUP BY level ORDER BY level;

-- name: campaign_edges
-- The daily payment edges of a campaign (the stored weight is the file's payment count; amount is
-- NULL where the edge file had none).
SELECT user_id, merchant_id, weight AS n_payments, amount FROM payment_edges WHERE campaign = ?;

-- name: campaign_merchant_events
SELECT event_date, source_row, merchant_id, level, incentive, response, cost, propensity, features
FROM merchant_events WHERE campaign = ? ORDER BY event_date, source_row;

-- name: latest_customer_features
-- The latest RCT row of every customer with its features ({columns}: quoted feature columns).
SELECT user_id {columns} FROM (
    SELECT *, row_number() OVER (PARTITION BY user_id ORDER BY event_date DESC, source_row DESC) AS rn
    FROM rct_events WHERE campaign = ?
) WHERE rn = 1;

-- name: customer_event_counts
SELECT user_id, count(*) AS n_events FROM rct_events WHERE campaign = ? GROUP BY user_id;

-- name: delete_graph
DELETE FROM {table} WHERE campaign = ?;

-- name: insert_graph_edges
INSERT INTO graph_edges SELECT ?, ?, user_id, merchant_id, n_payments, amount, weight, now() FROM edges_df;

-- name: insert_graph_customers
INSERT INTO graph_customers SELECT ?, ?, user_id, degree, n_payments, n_events, features, now() FROM nodes_df;

-- name: insert_graph_merchants
INSERT INTO graph_merchants SELECT ?, ?, merchant_id, degree, n_payments, n_events, features, now() FROM nodes_df;

-- name: graph_edges
SELECT user_id, merchant_id, n_payments, amount FROM graph_edges WHERE campaign = ? ORDER BY user_id, merchant_id;

-- name: graph_customers
SELECT user_id, features, graph_version FROM graph_customers WHERE campaign = ? ORDER BY user_id;

-- name: graph_merchants
SELECT merchant_id, features, graph_version FROM graph_merchants WHERE campaign = ? ORDER BY merchant_id;

-- name: delete_merchant_coefficients
DELETE FROM merchant_coefficients WHERE campaign = ? AND model = ? AND model_version = ?;

-- name: insert_merchant_coefficients
INSERT INTO merchant_coefficients SELECT ?, ?, ?, merchant_id, level, incentive, response, cost, now() FROM coef_df;

-- name: merchant_coefficients
SELECT merchant_id, level, response, cost FROM merchant_coefficients
WHERE campaign = ? AND model = ? AND model_version = ?
ORDER BY merchant_id, level;

-- name: insert_joint_allocation
INSERT INTO joint_allocation SELECT ?, ?, ratio_budget, kind, side, node_id, level, incentive, ?, now() FROM alloc_df;

-- name: insert_joint_evaluation
INSERT INTO joint_allocation_evaluation BY NAME SELECT *, now() AS evaluated_at FROM eval_df;

-- name: latest_joint_evaluation
-- The latest evaluation of each ratio budget of a campaign.
SELECT * EXCLUDE (rn) FROM (
    SELECT *, row_number() OVER (PARTITION BY ratio_budget ORDER BY evaluated_at DESC) AS rn
    FROM joint_allocation_evaluation WHERE campaign = ?
) WHERE rn = 1
ORDER BY ratio_budget;
