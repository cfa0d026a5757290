-- Reading campaign data back for the models. {columns} is the quoted feature column list.

-- name: events
SELECT event_date, source_row, user_id, level, incentive, response, cost, propensity {columns}
FROM rct_events WHERE campaign = ? ORDER BY event_date, source_row;

-- name: delete_campaign
DELETE FROM {table} WHERE campaign = ?;

-- name: insert_propensity
-- frame_df: the DataFrame handed over with warehouse.registered (as chunk_df, alloc_df, eval_df below).
INSERT INTO propensity SELECT ?, ?, event_date, source_row, propensity, source, now() FROM frame_df;

-- name: insert_training_frame
INSERT INTO training_frame SELECT ?, ?, event_date, source_row, split, ips_weight, now() FROM frame_df;

-- name: training_frame
-- Events joined with their propensity, split and IPS weight.
SELECT e.event_date, e.source_row, e.user_id, e.level, e.incentive, e.response, e.cost,
       p.propensity, t.split, t.ips_weight {columns}
FROM rct_events e
JOIN propensity p USING (campaign, event_date, source_row)
JOIN training_frame t USING (campaign, event_date, source_row)
WHERE e.campaign = ?
ORDER BY e.event_date, e.source_row;

-- name: frame_version
SELECT any_value(frame_version) FROM training_frame WHERE campaign = ?;

-- name: insert_model
INSERT INTO model_registry (campaign, model, model_version, data_version, metrics, trained_at, run_id)
VALUES (?, ?, ?, ?, ?, now(), ?);

-- name: model_metrics
SELECT metrics FROM model_registry WHERE campaign = ? AND model = ? AND model_version = ?
ORDER BY trained_at DESC LIMIT 1;

-- name: delete_coefficients
DELETE FROM response_coefficients WHERE campaign = ? AND model = ? AND model_version = ? AND target = ?;

-- name: insert_coefficients
INSERT INTO response_coefficients SELECT ?, ?, ?, ?, user_id, level, response, cost, now() FROM chunk_df;

-- name: coefficients
-- Coefficients of one model version and target, one row per user x level, in a stable user order.
SELECT user_id, level, response, cost FROM response_coefficients
WHERE campaign = ? AND model = ? AND model_version = ? AND target = ?
ORDER BY user_id, level;

-- name: coefficient_count
-- Rows and distinct users of one model version and target (promo_assets.allocation.stored).
SELECT count(*), count(DISTINCT user_id) FROM response_coefficients
WHERE campaign = ? AND model = ? AND model_version = ? AND target = ?;

-- name: insert_dual
INSERT INTO budget_dual (campaign, model, model_version, budget_per_capita, lambda_, response, cost, dual_bound,
                         n_users, run_id, solved_at, tie_share)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?);

-- name: duals_of_run
-- The λ* (and tie share) per budget that one budget_dual materialization (its run) stored for a model version.
SELECT budget_per_capita, lambda_, coalesce(tie_share, 0.0) AS tie_share FROM budget_dual
WHERE campaign = ? AND model = ? AND model_version = ? AND run_id = ? ORDER BY budget_per_capita;

-- name: insert_multipliers
-- Several budgets: the rows of one model, budget and target (budget_multipliers; multipliers_df from
-- promo_assets.allocation.budgets rows).
INSERT INTO budget_multipliers (campaign, model, model_version, budget_per_capita, target, constraint_name, multiplier,
                                budget, predicted_use, true_use, matched_true_use, matched_scale, run_id, solved_at)
SELECT ?, ?, ?, budget_per_capita, ?, constraint_name, multiplier, budget, predicted_use, true_use, matched_true_use,
       matched_scale, ?, now()
FROM multipliers_df;

-- name: multipliers_of_run
-- The multipliers per budget that one budget_dual materialization (its run) stored for a model version,
-- in the order they were solved (the incentive budget first).
SELECT budget_per_capita, constraint_name, multiplier FROM budget_multipliers
WHERE campaign = ? AND model = ? AND model_version = ? AND run_id = ? AND target = 'population'
ORDER BY budget_per_capita, rowid;

-- name: evaluation_budget_use
-- Several budgets: each budget's use on the holdout that one model's policy_evaluation (its run) stored.
SELECT budget_per_capita, constraint_name, multiplier, budget, predicted_use, true_use, matched_true_use
FROM budget_multipliers
WHERE campaign = ? AND model = ? AND run_id = ? AND target = 'holdout'
ORDER BY budget_per_capita, rowid;

-- name: infeasible_of_run
SELECT budget_per_capita, message FROM infeasible_budget
WHERE campaign = ? AND model = ? AND model_version = ? AND run_id = ? ORDER BY budget_per_capita;

-- name: insert_skip
INSERT INTO model_skips VALUES (?, ?, ?, ?, now());

-- name: run_skips
SELECT model, reason FROM model_skips WHERE campaign = ? AND run_id = ? ORDER BY model;

-- name: insert_allocation
INSERT INTO allocation SELECT ?, ?, ?, ?, user_id, level, incentive, ?, now() FROM alloc_df;

-- name: insert_evaluation
INSERT INTO policy_evaluation BY NAME SELECT * FROM eval_df;

-- name: insert_segment_evaluation
-- segment_df: promo_assets.evaluation.segments.segment_evaluation rows; ? = campaign, run_id.
INSERT INTO segment_evaluation BY NAME
SELECT *, ? AS campaign, ? AS run_id, now() AS evaluated_at FROM segment_df;

-- name: holdout_segments
-- The holdout events' segment columns ({columns}: quoted names), in holdout_events' order.
SELECT e.user_id {columns}
FROM rct_events e
JOIN propensity p USING (campaign, event_date, source_row)
JOIN training_frame t USING (campaign, event_date, source_row)
WHERE e.campaign = ? AND t.split = 'holdout'
ORDER BY e.event_date, e.source_row;

-- name: model_evaluation
-- The policy_evaluation rows of one model written by one run (the leaderboard reads the run that
-- Dagster recorded as the model's latest policy_evaluation materialization).
SELECT * FROM policy_evaluation WHERE campaign = ? AND model = ? AND run_id = ? ORDER BY budget_per_capita;

-- name: insert_leaderboard_entry
INSERT INTO leaderboard_entries VALUES (?, ?, ?, ?, ?, ?, ?, now());

-- name: insert_data_check
INSERT INTO data_checks VALUES (?, ?, ?, ?, ?, ?, now());

-- name: insert_outcome_predictions
-- outcome_df: one row per holdout event x level (event_date, source_row, level, value, cost).
INSERT INTO outcome_predictions SELECT ?, ?, event_date, source_row, level, value, cost FROM outcome_df;

-- name: outcome_predictions
-- The outcome model's predictions in the order of holdout_events (event_date, source_row), then level.
SELECT frame_version, value, cost FROM outcome_predictions WHERE campaign = ?
ORDER BY event_date, source_row, level;

-- name: holdout_events
SELECT e.event_date, e.source_row, e.user_id, e.level, e.response, e.cost, p.propensity {columns}
FROM rct_events e
JOIN propensity p USING (campaign, event_date, source_row)
JOIN training_frame t USING (campaign, event_date, source_row)
WHERE e.campaign = ? AND t.split = 'holdout'
ORDER BY e.event_date, e.source_row;

-- name: outcome_training_events
-- Training-day events (the train and validation splits, never the holdout) for the direct-method
-- outcome model of the doubly robust EOM (promo_assets.evaluation.outcome).
SELECT e.level, e.response, e.cost {columns}
FROM rct_events e
JOIN training_frame t USING (campaign, event_date, source_row)
WHERE e.campaign = ? AND t.split <> 'holdout'
ORDER BY e.event_date, e.source_row;

-- name: propensity_events
-- the events of a campaign with their stored propensity (training_frame: split and IPS weights,
-- the data checks of the level counts and the response), with the feature columns asked for
SELECT e.event_date, e.source_row, e.user_id, e.level, e.response, p.propensity {columns}
FROM rct_events e
JOIN propensity p USING (campaign, event_date, source_row)
WHERE e.campaign = ?
ORDER BY e.event_date, e.source_row

-- name: population_parquet
-- The latest population/ file (its path bound), one row per user: the user's last row in file order
-- (a user listed again is updated), user_id as text with surrounding spaces, tabs and newlines trimmed. Streamed in record batches
-- (promo_assets.ingestion.frames.PopulationFile), never whole in memory: DuckDB keeps only the row
-- number of each user's last row (a hash aggregate) and scans the file again keeping those rows.
WITH src AS NOT MATERIALIZED (
    SELECT * EXCLUDE (file_row_number) REPLACE (trim(CAST(user_id AS VARCHAR), E' \t\n\r') AS user_id),
           file_row_number AS __population_row
    FROM read_parquet(?, file_row_number = true))
SELECT * EXCLUDE (__population_row) FROM src
WHERE __population_row IN (SELECT max(__population_row) FROM src GROUP BY user_id);

-- name: population_csv
WITH src AS NOT MATERIALIZED (
    SELECT * REPLACE (trim(CAST(user_id AS VARCHAR), E' \t\n\r') AS user_id), row_number() OVER () AS __population_row
    FROM read_csv(?, header = true))
SELECT * EXCLUDE (__population_row) FROM src
WHERE __population_row IN (SELECT max(__population_row) FROM src GROUP BY user_id);

-- name: population_count_parquet
-- (distinct users, rows without a user_id) of a population file.
SELECT count(DISTINCT trim(CAST(user_id AS VARCHAR), E' \t\n\r')), count(*) FILTER (WHERE user_id IS NULL) FROM read_parquet(?);

-- name: population_count_csv
SELECT count(DISTINCT trim(CAST(user_id AS VARCHAR), E' \t\n\r')), count(*) FILTER (WHERE user_id IS NULL) FROM read_csv(?, header = true);
