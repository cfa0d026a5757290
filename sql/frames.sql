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

-- name: latest_models
-- The latest trained version of each model of a campaign, among the models registered by a
-- succeeded run or by the run ? itself (a failed or unfinished run's models are never used).
SELECT model, arg_max(model_version, trained_at) AS model_version
FROM model_registry WHERE campaign = ? AND model IN (SELECT unnest(?::VARCHAR[]))
AND (run_id = ? OR run_id IN (SELECT run_id FROM result_runs WHERE campaign = ? AND status = 'succeeded'))
GROUP BY model ORDER BY model;

-- name: delete_coefficients
DELETE FROM response_coefficients WHERE campaign = ? AND model = ? AND model_version = ? AND target = ?;

-- name: insert_coefficients
INSERT INTO response_coefficients SELECT ?, ?, ?, ?, user_id, level, value, cost, now() FROM chunk_df;

-- name: coefficients
-- Coefficients of one model version and target, one row per user x level, in a stable user order.
SELECT user_id, level, value, cost FROM response_coefficients
WHERE campaign = ? AND model = ? AND model_version = ? AND target = ?
ORDER BY user_id, level;

-- name: insert_dual
INSERT INTO budget_dual VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now());

-- name: insert_allocation
INSERT INTO allocation SELECT ?, ?, ?, ?, user_id, level, incentive, ?, now() FROM alloc_df;

-- name: insert_evaluation
INSERT INTO policy_evaluation BY NAME SELECT * FROM eval_df;

-- name: leaderboard
-- The policy evaluation of the campaign's latest succeeded run (result_runs).
SELECT p.* FROM policy_evaluation AS p
WHERE p.campaign = ? AND p.run_id = (
    SELECT q.run_id FROM policy_evaluation AS q
    JOIN result_runs AS r ON r.campaign = q.campaign AND r.run_id = q.run_id
    WHERE q.campaign = p.campaign AND r.status = 'succeeded'
    ORDER BY r.started_at DESC LIMIT 1
)
ORDER BY budget_per_capita, true_value DESC NULLS LAST, eom_value DESC;

-- name: holdout_events
SELECT e.user_id, e.level, e.response, e.cost, p.propensity {columns}
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
