-- The outcomes of the deployed decisions (promo_assets/defs/monitoring/assets.py, promo_assets.store.monitoring).

-- name: decided_days
-- Every budget decided by the campaign's visible decisions runs and by run ? itself (in progress: its own
-- decision counts once stored): the day, the run, the budget, the manifest entry (JSON) and when it was decided.
SELECT d.decision_date, d.run_id, d.budget_per_capita, d.decision_manifest, d.decided_at
FROM decision_budgets AS d JOIN result_runs AS r ON r.campaign = d.campaign AND r.run_id = d.run_id
WHERE d.campaign = ? AND (r.status IN ('succeeded', 'partial') OR d.run_id = ?)
ORDER BY d.decision_date, d.decided_at, d.budget_per_capita;

-- name: decisions_with_champion_level
-- One budget's decisions of a run with the champion's own level of each user, in user order.
SELECT user_id, level, decision_policy AS policy, propensity, coalesce(champion_level, level) AS champion_level,
       predicted_response, predicted_cost
FROM decisions WHERE campaign = ? AND run_id = ? AND budget_per_capita = ? ORDER BY user_id;

-- name: decision_coefficients_of_run
SELECT user_id, response, cost FROM decision_coefficients WHERE campaign = ? AND run_id = ? ORDER BY user_id;

-- name: day_events
-- A day's events as loaded: the user, the logged level, response, cost and propensity.
SELECT user_id, level, response, cost, propensity {columns} FROM rct_events
WHERE campaign = ? AND event_date = CAST(? AS DATE)
ORDER BY source_row;

-- name: event_days
SELECT DISTINCT event_date FROM rct_events WHERE campaign = ? ORDER BY event_date;

-- name: latest_outcomes_run
-- The campaign's latest visible outcomes run (NULL: none); every outcomes run writes its checks, even
-- before any decided day has come back.
SELECT c.run_id FROM monitoring_checks AS c JOIN result_runs AS r ON r.campaign = c.campaign AND r.run_id = c.run_id
WHERE c.campaign = ? AND r.status IN ('succeeded', 'partial')
ORDER BY c.checked_at DESC LIMIT 1;

-- name: outcomes_of_run
SELECT * FROM outcomes WHERE campaign = ? AND run_id = ? ORDER BY decision_date;

-- name: outcome_effect_of_run
SELECT * FROM outcome_effect WHERE campaign = ? AND run_id = ? ORDER BY decision_date;

-- name: outcome_levels_of_run
SELECT * FROM outcome_levels WHERE campaign = ? AND run_id = ? ORDER BY decision_date, kind, bin;

-- name: drift_of_run
SELECT * FROM population_drift WHERE campaign = ? AND run_id = ? ORDER BY drift_flagged DESC, drift_psi DESC;

-- name: checks_of_run
SELECT * FROM monitoring_checks WHERE campaign = ? AND run_id = ? ORDER BY check_name;

-- name: insert_outcomes
INSERT INTO outcomes BY NAME SELECT ? AS campaign, ? AS run_id, now() AS computed_at, * FROM outcomes_df;

-- name: insert_outcome_levels
INSERT INTO outcome_levels BY NAME SELECT ? AS campaign, ? AS run_id, * FROM levels_df;

-- name: insert_outcome_effect
INSERT INTO outcome_effect BY NAME SELECT ? AS campaign, ? AS run_id, * FROM effect_df;

-- name: insert_population_drift
INSERT INTO population_drift BY NAME SELECT ? AS campaign, ? AS run_id, * FROM drift_df;

-- name: insert_monitoring_checks
INSERT INTO monitoring_checks BY NAME SELECT ? AS campaign, ? AS run_id, now() AS checked_at, * FROM checks_df;

-- name: reactions
-- The reactions of the campaign's visible outcomes runs that acted (a failed check whose reaction is
-- not 'warn'), newest first: the training window (retrain), the champion (fallback), the export (stop).
SELECT c.run_id, c.check_name, c.check_reaction AS reaction, c.change_day, c.checked_at, c.message
FROM monitoring_checks AS c JOIN result_runs AS r ON r.campaign = c.campaign AND r.run_id = c.run_id
WHERE c.campaign = ? AND r.status IN ('succeeded', 'partial') AND NOT c.check_passed AND c.check_reaction <> 'warn'
ORDER BY c.checked_at DESC;

-- name: training_change_day
-- The day the campaign's latest `retrain` reaction starts the training window at (NULL: none): the events
-- before it are down-weighted (campaign.yaml monitoring.stale_weight). Each outcomes run carries it on.
SELECT max(c.change_day)
FROM monitoring_checks AS c JOIN result_runs AS r ON r.campaign = c.campaign AND r.run_id = c.run_id
WHERE c.campaign = ? AND r.status IN ('succeeded', 'partial') AND c.check_reaction = 'retrain' AND c.change_day IS NOT NULL
  AND (NOT c.check_passed OR c.check_name = 'training_window');

-- name: training_change_segments
-- The segments (JSON list of [feature, value]) of the campaign's latest training window on day ? (NULL: none
-- or all events): the training_window row of the newest visible outcomes run that carries that day.
SELECT c.change_segments
FROM monitoring_checks AS c JOIN result_runs AS r ON r.campaign = c.campaign AND r.run_id = c.run_id
WHERE c.campaign = ? AND r.status IN ('succeeded', 'partial') AND c.check_name = 'training_window' AND c.change_day = ?
ORDER BY c.checked_at DESC LIMIT 1;

-- name: active_reactions
-- The acting reactions (failed checks whose reaction is not 'warn') of the campaign's latest outcomes
-- run that is visible or is run ? itself: check, reaction, change day, message.
SELECT c.check_name, c.check_reaction AS reaction, c.change_day, c.message
FROM monitoring_checks AS c
WHERE c.campaign = ? AND NOT c.check_passed AND c.check_reaction <> 'warn' AND c.run_id = (
    SELECT o.run_id FROM monitoring_checks AS o JOIN result_runs AS r ON r.campaign = o.campaign AND r.run_id = o.run_id
    WHERE o.campaign = c.campaign AND (r.status IN ('succeeded', 'partial') OR o.run_id = ?)
    ORDER BY o.checked_at DESC LIMIT 1)
ORDER BY c.check_name;

-- name: previous_champion
-- The members (JSON) of the campaign's latest visible champion other than champion ? (the fallback).
SELECT c.champion_members FROM champion AS c JOIN result_runs AS r ON r.campaign = c.campaign AND r.run_id = c.run_id
WHERE c.campaign = ? AND r.status IN ('succeeded', 'partial') AND c.champion <> ?
ORDER BY c.decided_at DESC LIMIT 1;
