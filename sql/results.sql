-- Run bookkeeping and retention of the results tables (promo_assets/results.py). {table} is one of
-- the results tables named in promo_assets/results.py, quoted with quote_ident; values are `?`.

-- name: start_run
INSERT INTO result_runs VALUES (?, ?, 'started', now(), NULL) ON CONFLICT DO NOTHING;

-- name: started_runs
-- The runs of a campaign that wrote results and have not been marked finished, other than run ?.
SELECT run_id FROM result_runs WHERE campaign = ? AND status = 'started' AND run_id <> ? ORDER BY started_at;

-- name: all_started_runs
SELECT campaign, run_id FROM result_runs WHERE status = 'started' ORDER BY started_at;

-- name: finish_run
UPDATE result_runs SET status = ?, finished_at = now() WHERE campaign = ? AND run_id = ? AND status = 'started'
RETURNING run_id;

-- name: delete_run_rows
DELETE FROM {table} WHERE campaign = ? AND run_id = ?;

-- name: delete_model_run_rows
-- A partial run: the rows of the models (list ?) whose chain failed in run ?.
DELETE FROM {table} WHERE campaign = ? AND run_id = ? AND list_contains(?::VARCHAR[], model);

-- name: retain_runs
-- Keep the rows of the latest ? succeeded runs that wrote {table} (besides run ?), of run ? itself
-- and of runs still in progress; delete the rest (older runs, failed runs, rows without a run).
DELETE FROM {table} WHERE campaign = ? AND (run_id IS NULL OR run_id NOT IN (
    SELECT run_id FROM (
        SELECT t.run_id, max(r.started_at) AS started_at
        FROM {table} AS t JOIN result_runs AS r ON r.campaign = t.campaign AND r.run_id = t.run_id
        WHERE t.campaign = ? AND r.status IN ('succeeded', 'partial') AND t.run_id <> ?
        GROUP BY t.run_id ORDER BY started_at DESC LIMIT ?
    )
    UNION ALL SELECT ?
    UNION ALL SELECT run_id FROM result_runs WHERE campaign = ? AND status = 'started'
));

-- name: retain_model_runs
-- A per-model table ({table}: model_registry, budget_dual, allocation, policy_evaluation, ...): like
-- retain_runs, but per model: each model keeps the rows of the latest ? succeeded runs that wrote it
-- (besides run ?), so that runs materializing only some models' chains (the UI) never push the last
-- good results of another model out; only the models run ? writes are retained by its write.
DELETE FROM {table} AS m WHERE m.campaign = ?
AND m.model IN (SELECT w.model FROM {table} AS w WHERE w.campaign = ? AND w.run_id = ?)
AND (m.run_id IS NULL OR (
    m.run_id <> ?
    AND m.run_id NOT IN (SELECT run_id FROM result_runs WHERE campaign = ? AND status = 'started')
    AND NOT EXISTS (
        SELECT 1 FROM (
            SELECT t.model, t.run_id,
                   row_number() OVER (PARTITION BY t.model ORDER BY max(r.started_at) DESC) AS rn
            FROM {table} AS t JOIN result_runs AS r ON r.campaign = t.campaign AND r.run_id = t.run_id
            WHERE t.campaign = ? AND r.status IN ('succeeded', 'partial') AND t.run_id <> ?
            GROUP BY t.model, t.run_id
        ) AS k WHERE k.rn <= ? AND k.model = m.model AND k.run_id = m.run_id)
));

-- name: retain_model_versions
-- Coefficients ({table}) only for the model versions still registered for the campaign.
DELETE FROM {table} WHERE campaign = ?
AND model_version NOT IN (SELECT model_version FROM model_registry WHERE campaign = ? AND model_version IS NOT NULL);

-- name: insert_infeasible
INSERT INTO infeasible_budget VALUES (?, ?, ?, ?, ?, ?, ?, now());

-- name: succeeded_runs
-- The succeeded leaderboard runs of a campaign (they assembled leaderboard_entries), latest first
-- (run ids in ? count as succeeded too: finished in Dagster, not yet marked in the warehouse).
SELECT DISTINCT e.run_id, r.started_at
FROM leaderboard_entries AS e JOIN result_runs AS r ON r.campaign = e.campaign AND r.run_id = e.run_id
WHERE e.campaign = ? AND (r.status IN ('succeeded', 'partial') OR list_contains(?::VARCHAR[], r.run_id))
ORDER BY r.started_at DESC;

-- name: run_evaluation
-- The policy_evaluation rows one leaderboard run assembled (each model's evaluation run, and its own
-- random reference rows), best first per budget.
SELECT p.* FROM policy_evaluation AS p JOIN leaderboard_entries AS e
    ON e.campaign = p.campaign AND e.model = p.model AND e.evaluation_run_id = p.run_id
WHERE e.campaign = ? AND e.run_id = ? AND e.status = 'evaluated'
ORDER BY p.budget_per_capita, p.true_value DESC NULLS LAST, p.eom_value DESC;

-- name: run_not_evaluated
-- The models a leaderboard run lists without an evaluation: skipped (does not apply) or missing.
SELECT model, status, reason FROM leaderboard_entries
WHERE campaign = ? AND run_id = ? AND status <> 'evaluated' ORDER BY status DESC, model;

-- name: run_data_checks
-- The failed data checks of the training frame one leaderboard run saw, errors first.
SELECT check_name, check_severity, check_message FROM data_checks
WHERE campaign = ? AND run_id = ? AND NOT check_passed ORDER BY check_severity, check_name;

-- name: run_infeasible
-- The infeasible budgets of the model versions a leaderboard run assembled.
SELECT DISTINCT i.model, i.budget_per_capita, i.minimum_budget, i.message
FROM infeasible_budget AS i JOIN leaderboard_entries AS e
    ON e.campaign = i.campaign AND e.model = i.model AND e.model_version = i.model_version
WHERE e.campaign = ? AND e.run_id = ? ORDER BY i.budget_per_capita, i.model;

-- name: report_campaigns
SELECT DISTINCT campaign FROM result_runs ORDER BY campaign;

-- name: latest_evaluation_per_model
-- benchmarks/leaderboard.py: every model's policy_evaluation rows (the random reference's too) of
-- the latest visible run (succeeded, or partial: some other model's chain failed) that evaluated
-- that model, whichever run it was (the model chains and the leaderboard run separately).
SELECT p.* FROM policy_evaluation AS p
JOIN result_runs AS r ON r.campaign = p.campaign AND r.run_id = p.run_id
WHERE p.campaign = ? AND r.status IN ('succeeded', 'partial')
QUALIFY dense_rank() OVER (PARTITION BY p.model ORDER BY r.started_at DESC, p.run_id DESC) = 1
ORDER BY p.model, p.budget_per_capita;
