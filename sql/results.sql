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

-- name: retain_runs
-- Keep the rows of the latest ? succeeded runs that wrote {table} (besides run ?), of run ? itself
-- and of runs still in progress; delete the rest (older runs, failed runs, rows without a run).
DELETE FROM {table} WHERE campaign = ? AND (run_id IS NULL OR run_id NOT IN (
    SELECT run_id FROM (
        SELECT t.run_id, max(r.started_at) AS started_at
        FROM {table} AS t JOIN result_runs AS r ON r.campaign = t.campaign AND r.run_id = t.run_id
        WHERE t.campaign = ? AND r.status = 'succeeded' AND t.run_id <> ?
        GROUP BY t.run_id ORDER BY started_at DESC LIMIT ?
    )
    UNION ALL SELECT ?
    UNION ALL SELECT run_id FROM result_runs WHERE campaign = ? AND status = 'started'
));

-- name: retain_model_runs
-- model_registry: like retain_runs, but per model: each model keeps the rows of the latest ? succeeded
-- runs that registered it (besides run ?), so that runs materializing only some models (the UI) never
-- push the last good registration of another model out.
DELETE FROM model_registry AS m WHERE m.campaign = ? AND (m.run_id IS NULL OR (
    m.run_id <> ?
    AND m.run_id NOT IN (SELECT run_id FROM result_runs WHERE campaign = ? AND status = 'started')
    AND NOT EXISTS (
        SELECT 1 FROM (
            SELECT t.model, t.run_id,
                   row_number() OVER (PARTITION BY t.model ORDER BY max(r.started_at) DESC) AS rn
            FROM model_registry AS t JOIN result_runs AS r ON r.campaign = t.campaign AND r.run_id = t.run_id
            WHERE t.campaign = ? AND r.status = 'succeeded' AND t.run_id <> ?
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
-- The succeeded runs of a campaign that wrote policy_evaluation, latest first (run ids in ?
-- count as succeeded too: finished in Dagster, not yet marked in the warehouse).
SELECT DISTINCT p.run_id, r.started_at
FROM policy_evaluation AS p JOIN result_runs AS r ON r.campaign = p.campaign AND r.run_id = p.run_id
WHERE p.campaign = ? AND (r.status = 'succeeded' OR list_contains(?::VARCHAR[], r.run_id))
ORDER BY r.started_at DESC;

-- name: run_evaluation
-- The policy_evaluation rows of one run, best first per budget.
SELECT * FROM policy_evaluation WHERE campaign = ? AND run_id = ?
ORDER BY budget_per_capita, true_value DESC NULLS LAST, eom_value DESC;

-- name: run_infeasible
SELECT model, budget_per_capita, minimum_budget, message FROM infeasible_budget
WHERE campaign = ? AND run_id = ? ORDER BY budget_per_capita, model;

-- name: report_campaigns
SELECT DISTINCT campaign FROM result_runs ORDER BY campaign;
