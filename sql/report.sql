-- The campaign report (promo_assets/report/): what it reads of one leaderboard run and of the latest
-- decisions. Values are `?`.

-- name: board_entries
-- Every model a leaderboard run listed: model, version, evaluation run, status and reason.
SELECT model, model_version, evaluation_run_id, status, reason FROM leaderboard_entries
WHERE campaign = ? AND run_id = ? ORDER BY model;

-- name: run_segments
-- The segment_evaluation rows of the evaluations a leaderboard run assembled.
SELECT s.* FROM segment_evaluation AS s JOIN leaderboard_entries AS e
    ON e.campaign = s.campaign AND e.model = s.model AND e.evaluation_run_id = s.run_id
WHERE e.campaign = ? AND e.run_id = ? AND e.status = 'evaluated'
ORDER BY s.model, s.segment_by, s.segment_value, s.budget_per_capita;

-- name: decision_levels
-- Users per budget x level x policy (champion or exploration) of a decisions run.
SELECT budget_per_capita, level, level_label AS label, decision_policy AS policy, count(*) AS users
FROM decisions WHERE campaign = ? AND run_id = ? GROUP BY ALL ORDER BY budget_per_capita, level, policy;

-- name: pacing_of_run
-- The paced days as one decisions run saw them (table pacing), in day order.
SELECT pacing_day, plan, predicted_spend, realized_spend, spend_ratio, cumulative_spend, even_plan, budget_left,
       lambda_, controller, period_total, period_start, period_end
FROM pacing WHERE campaign = ? AND run_id = ? ORDER BY pacing_day;
