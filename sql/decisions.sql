-- The champion and decisions assets (promo_assets/defs/decisions/assets.py) and `promo export`.

-- name: board_models
-- The models a leaderboard run assembled with an evaluation: model, version, evaluation run.
SELECT model, model_version, evaluation_run_id FROM leaderboard_entries
WHERE campaign = ? AND run_id = ? AND status = 'evaluated' AND model <> 'random' ORDER BY model;

-- name: latest_champion
-- The campaign's latest champion of a visible run (succeeded or partial), or of run ? itself.
SELECT c.* FROM champion AS c JOIN result_runs AS r ON r.campaign = c.campaign AND r.run_id = c.run_id
WHERE c.campaign = ? AND (r.status IN ('succeeded', 'partial') OR c.run_id = ?)
ORDER BY c.decided_at DESC LIMIT 1;

-- name: champion_of_run
SELECT * FROM champion WHERE campaign = ? AND run_id = ?;

-- name: insert_champion
INSERT INTO champion VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?);

-- name: insert_champion_evidence
INSERT INTO champion_evidence SELECT ?, ?, evidence_kind, champion_candidate, champion_reference, budget_per_capita,
    value, value_low, value_high, dr_cost, dr_cost_low, dr_cost_high, champion_verdict, pct_oracle FROM evidence_df;

-- name: champion_evidence_of_run
SELECT * FROM champion_evidence WHERE campaign = ? AND run_id = ? ORDER BY evidence_kind, champion_candidate, champion_reference, budget_per_capita;

-- name: insert_decisions
INSERT INTO decisions SELECT ?, ?, CAST(? AS DATE), budget_per_capita, user_id, level, label, incentive,
    predicted_response, predicted_cost, policy, propensity, model, model_version, champion_level FROM decisions_df;

-- name: insert_decision_budget
INSERT INTO decision_budgets VALUES (?, ?, CAST(? AS DATE), ?, ?, ?, ?, ?, ?, now());

-- name: latest_decisions_run
-- The campaign's latest decisions run that is visible (succeeded or partial).
SELECT d.run_id, any_value(d.decision_date), max(d.decided_at) AS decided_at
FROM decision_budgets AS d JOIN result_runs AS r ON r.campaign = d.campaign AND r.run_id = d.run_id
WHERE d.campaign = ? AND r.status IN ('succeeded', 'partial')
GROUP BY d.run_id ORDER BY decided_at DESC LIMIT 1;

-- name: decision_budgets_of_run
SELECT * FROM decision_budgets WHERE campaign = ? AND run_id = ? ORDER BY budget_per_capita;

-- name: decisions_of_run
-- One budget's decisions of a run, in user order.
SELECT user_id, level, level_label AS label, incentive, predicted_response, predicted_cost, decision_policy AS policy,
       propensity, model, model_version
FROM decisions WHERE campaign = ? AND run_id = ? AND budget_per_capita = ? ORDER BY user_id;

-- name: insert_decision_coefficients
INSERT INTO decision_coefficients SELECT ?, ?, CAST(? AS DATE), user_id, response, cost FROM coefficients_df;

-- name: latest_evaluations
-- The latest policy_evaluation time of each model of the campaign (visible runs): the champion must
-- not be older than the newest evaluation.
SELECT p.model, max(p.evaluated_at) FROM policy_evaluation AS p
JOIN result_runs AS r ON r.campaign = p.campaign AND r.run_id = p.run_id
WHERE p.campaign = ? AND p.model <> 'random' AND (r.status IN ('succeeded', 'partial') OR p.run_id = ?)
GROUP BY p.model ORDER BY p.model;

-- name: last_event_day
SELECT max(event_date) FROM rct_events WHERE campaign = ?;

-- name: paced_days
-- The paced decisions of the campaign's visible decisions runs (campaign.yaml `budget:`): the run, the
-- day, the per-capita budget the paced decision was made at and its manifest entry (with `pacing`).
SELECT d.run_id, d.decision_date, d.budget_per_capita, d.decision_manifest, d.decided_at
FROM decision_budgets AS d JOIN result_runs AS r ON r.campaign = d.campaign AND r.run_id = d.run_id
WHERE d.campaign = ? AND r.status IN ('succeeded', 'partial')
  AND json_extract(d.decision_manifest, '$.entry.pacing') IS NOT NULL
ORDER BY d.decision_date, d.decided_at;

-- name: carried_pacing_days
-- The paced days as the campaign's latest visible decisions run with pacing rows saw them (table
-- pacing): the history of days whose own decisions runs retention has deleted.
SELECT p.pacing_day, p.plan, p.lambda_, p.predicted_spend, p.realized_spend, p.spend_ratio
FROM pacing AS p
WHERE p.campaign = $1 AND p.run_id = (
    SELECT q.run_id FROM pacing AS q JOIN result_runs AS r ON r.campaign = q.campaign AND r.run_id = q.run_id
    WHERE q.campaign = $1 AND r.status IN ('succeeded', 'partial')
    ORDER BY q.decision_date DESC, q.paced_at DESC LIMIT 1)
ORDER BY p.pacing_day;

-- name: realized_spend
-- The spend the events of day ? report for the users of one decisions run and budget (NULL: no event
-- of that day is loaded yet), and how many of its users came back.
SELECT CASE WHEN (SELECT count(*) FROM rct_events WHERE campaign = $1 AND event_date = CAST($2 AS DATE)) = 0 THEN NULL
            ELSE coalesce(sum(e.cost), 0) END, count(e.user_id)
FROM rct_events AS e JOIN decisions AS x
  ON x.campaign = e.campaign AND x.user_id = e.user_id AND x.decision_date = e.event_date
WHERE e.campaign = $1 AND e.event_date = CAST($2 AS DATE) AND x.run_id = $3 AND x.budget_per_capita = $4;

-- name: users_per_day
-- The mean number of distinct users per loaded day (the pacer's prior share of users who come back).
SELECT avg(n) FROM (SELECT count(DISTINCT user_id) AS n FROM rct_events WHERE campaign = ? GROUP BY event_date);

-- name: insert_pacing
-- One paced day of a decisions run (table pacing).
INSERT INTO pacing VALUES (?, ?, CAST(? AS DATE), CAST(? AS DATE), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS DATE),
    CAST(? AS DATE), now());

-- name: champion_run_of_decisions
-- The champion run whose champion a decisions run decided with (NULL: the run is not stored).
SELECT any_value(champion_run_id) FROM decision_budgets WHERE campaign = ? AND run_id = ?;

-- name: insert_decision_export
INSERT INTO decision_exports VALUES (?, ?, CAST(? AS DATE), ?, ?, ?, ?, ?, now());

-- name: decision_exports
-- The state of every decisions run of the campaign at the outbox: its latest row of decision_exports.
SELECT decisions_run_id, decision_date, export_state, deployed_budget, export_budgets, export_reason, exported_by,
       exported_at
FROM decision_exports WHERE campaign = ?
QUALIFY row_number() OVER (PARTITION BY decisions_run_id ORDER BY exported_at DESC) = 1
ORDER BY exported_at;

-- name: decision_runs
-- Every decisions run of the campaign that is visible (succeeded or partial) or is run ? itself (a run
-- still in progress: its own decision counts once stored): its day and when it was decided, oldest first.
SELECT d.run_id, any_value(d.decision_date) AS decision_date, max(d.decided_at) AS decided_at
FROM decision_budgets AS d JOIN result_runs AS r ON r.campaign = d.campaign AND r.run_id = d.run_id
WHERE d.campaign = ? AND (r.status IN ('succeeded', 'partial') OR d.run_id = ?)
GROUP BY d.run_id ORDER BY decided_at, d.run_id;
