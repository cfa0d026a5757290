-- Warehouse schema. Every statement is idempotent (run on each connection that writes).

-- name: create_rct_events
-- One row per logged RCT event. Feature columns are added per campaign by ingestion
-- (DOUBLE for numeric features, VARCHAR for categorical ones); campaign_features says which.
CREATE TABLE IF NOT EXISTS rct_events (
    campaign     VARCHAR NOT NULL,
    event_date   DATE    NOT NULL,
    user_id      VARCHAR NOT NULL,
    level        INTEGER NOT NULL,
    incentive    DOUBLE  NOT NULL,
    response     DOUBLE  NOT NULL,
    cost         DOUBLE  NOT NULL,
    propensity   DOUBLE,
    merchant_id  VARCHAR,
    event_time   TIMESTAMP,
    source_row   BIGINT  NOT NULL    -- row number in the day file (ingest_log names the file)
);

-- name: create_rejected_events
-- Rows refused by validation, kept with their reason and their original values (as JSON text).
CREATE TABLE IF NOT EXISTS rejected_events (
    campaign     VARCHAR NOT NULL,
    event_date   DATE    NOT NULL,
    source_file  VARCHAR NOT NULL,
    source_row   BIGINT  NOT NULL,
    reason       VARCHAR NOT NULL,
    raw          VARCHAR,
    rejected_at  TIMESTAMP NOT NULL
);

-- name: create_campaign_features
CREATE TABLE IF NOT EXISTS campaign_features (
    campaign     VARCHAR NOT NULL,
    feature      VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,   -- 'numeric' | 'categorical'
    PRIMARY KEY (campaign, feature)
);

-- name: create_ingest_log
CREATE TABLE IF NOT EXISTS ingest_log (
    campaign      VARCHAR NOT NULL,
    event_date    DATE    NOT NULL,
    table_name    VARCHAR NOT NULL,
    source_file   VARCHAR NOT NULL,
    rows_loaded   BIGINT  NOT NULL,
    rows_rejected BIGINT  NOT NULL,
    status        VARCHAR NOT NULL,  -- 'loaded' | 'failed'
    message       VARCHAR,
    ingested_at   TIMESTAMP NOT NULL
);

-- name: create_landing_files
-- The ledger of the landing day files loaded per campaign and kind (events, edges, merchants): the
-- content hash of the file and of campaign.yaml at its last load attempt, so that a run loads only
-- new or changed files (and the days whose files are gone are forgotten). One row per day.
CREATE TABLE IF NOT EXISTS landing_files (
    campaign       VARCHAR NOT NULL,
    kind           VARCHAR NOT NULL,   -- 'events' | 'edges' | 'merchants'
    event_date     DATE    NOT NULL,
    source_file    VARCHAR NOT NULL,
    content_sha256 VARCHAR NOT NULL,   -- of the file's bytes at the last attempt
    config_sha256  VARCHAR NOT NULL,   -- of campaign.yaml at the last attempt (it decides validation)
    rows_loaded    BIGINT  NOT NULL,
    rows_rejected  BIGINT  NOT NULL,
    status         VARCHAR NOT NULL,   -- 'loaded' | 'failed' (the previous rows of the day stay)
    message        VARCHAR,
    checked_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (campaign, kind, event_date)
);

-- name: create_payment_edges
CREATE TABLE IF NOT EXISTS payment_edges (
    campaign     VARCHAR NOT NULL,
    event_date   DATE    NOT NULL,
    user_id      VARCHAR NOT NULL,
    merchant_id  VARCHAR NOT NULL,
    weight       DOUBLE  NOT NULL,
    source_file  VARCHAR NOT NULL
);

-- name: add_payment_edges_amount
-- The payment amount of each edge row (the edge file's `amount` column; NULL when the file has none
-- or the cell is empty): the graph's interaction-history features sum it. Added by ALTER so that
-- warehouses created before the column get it too.
ALTER TABLE payment_edges ADD COLUMN IF NOT EXISTS amount DOUBLE;

-- name: create_propensity
-- Propensity of the logged level of every event (logged, empirical per day, or estimated).
CREATE TABLE IF NOT EXISTS propensity (
    campaign           VARCHAR NOT NULL,
    propensity_version VARCHAR NOT NULL,
    event_date         DATE    NOT NULL,
    source_row         BIGINT  NOT NULL,
    propensity         DOUBLE  NOT NULL,
    source             VARCHAR NOT NULL,  -- 'logged' | 'empirical' | 'estimated'
    created_at         TIMESTAMP NOT NULL
);

-- name: create_training_frame
-- The split of every event (train / validation / holdout) and its clipped self-normalized IPS weight.
CREATE TABLE IF NOT EXISTS training_frame (
    campaign       VARCHAR NOT NULL,
    frame_version  VARCHAR NOT NULL,
    event_date     DATE    NOT NULL,
    source_row     BIGINT  NOT NULL,
    split          VARCHAR NOT NULL,
    ips_weight     DOUBLE  NOT NULL,
    created_at     TIMESTAMP NOT NULL
);

-- name: create_model_registry
-- Every trained artefact (content-addressed); results tables refer to model_version.
CREATE TABLE IF NOT EXISTS model_registry (
    campaign       VARCHAR NOT NULL,
    model          VARCHAR NOT NULL,
    model_version  VARCHAR NOT NULL,
    data_version   VARCHAR,
    metrics        VARCHAR,           -- JSON
    trained_at     TIMESTAMP NOT NULL
);

-- name: create_response_coefficients
CREATE TABLE IF NOT EXISTS response_coefficients (
    campaign       VARCHAR NOT NULL,
    model          VARCHAR NOT NULL,
    model_version  VARCHAR NOT NULL,
    target         VARCHAR NOT NULL,   -- 'population' | 'holdout'
    user_id        VARCHAR NOT NULL,
    level          INTEGER NOT NULL,
    response       DOUBLE  NOT NULL,   -- predicted response (warehouses before this column was renamed
    cost           DOUBLE  NOT NULL,   -- called it `value`: warehouse.ensure_schema renames it)
    scored_at      TIMESTAMP NOT NULL
);

-- name: create_budget_dual
CREATE TABLE IF NOT EXISTS budget_dual (
    campaign          VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    model_version     VARCHAR NOT NULL,
    budget_per_capita DOUBLE  NOT NULL,
    lambda_           DOUBLE  NOT NULL,
    response          DOUBLE  NOT NULL,   -- the allocation's total predicted response (`value` in
    cost              DOUBLE  NOT NULL,   -- earlier warehouses: warehouse.ensure_schema renames it)
    dual_bound        DOUBLE  NOT NULL,
    n_users           BIGINT  NOT NULL,
    run_id            VARCHAR NOT NULL,
    solved_at         TIMESTAMP NOT NULL
);

-- name: create_allocation
CREATE TABLE IF NOT EXISTS allocation (
    campaign          VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    model_version     VARCHAR NOT NULL,
    budget_per_capita DOUBLE  NOT NULL,
    user_id           VARCHAR NOT NULL,
    level             INTEGER NOT NULL,
    incentive         DOUBLE  NOT NULL,
    run_id            VARCHAR NOT NULL,
    allocated_at      TIMESTAMP NOT NULL
);

-- name: create_policy_evaluation
CREATE TABLE IF NOT EXISTS policy_evaluation (
    campaign          VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    model_version     VARCHAR,
    budget_per_capita DOUBLE  NOT NULL,
    eom_value         DOUBLE,
    eom_cost          DOUBLE,
    eom_ci_low        DOUBLE,
    eom_ci_high       DOUBLE,
    q_value           DOUBLE,           -- Q(v, c) at the budget (end-to-end paper, Algorithm 1)
    true_value        DOUBLE,
    true_cost         DOUBLE,
    oracle_value      DOUBLE,
    oracle_cost       DOUBLE,
    aucc              DOUBLE,
    logloss           DOUBLE,           -- response-curve metrics on the holdout (DIPN §5)
    auc               DOUBLE,
    rmse              DOUBLE,
    rpr               DOUBLE,
    epr               DOUBLE,
    mlss              DOUBLE,
    n_users           BIGINT,
    n_matched         BIGINT,
    run_id            VARCHAR NOT NULL,
    evaluated_at      TIMESTAMP NOT NULL
);

-- name: add_policy_evaluation_too_small
-- true when the holdout had fewer users than campaign.yaml's min_holdout_users ("too small to
-- evaluate"); added by ALTER so that warehouses created before the column get it too.
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS too_small BOOLEAN;

-- name: add_policy_evaluation_equal_spend
-- Issue #13, comparisons at equal spend (promo_assets.evaluation.honest); added by ALTER so that
-- warehouses created before get them too. q_cost: EOM cost at Q(v, c); spend_ratio: true cost /
-- budget of the allocation as made; matched_*: the allocation whose true cost equals the budget
-- (matched_budget: the budget given to the allocator); pct_oracle: matched value / oracle's;
-- dr_*: doubly robust EOM (value, cost, bootstrap 95 % interval) and dr_q_*: at DR cost = budget;
-- area_ratio_*: frontier area over the random reference's (AUCC generalized to K > 2);
-- overspend: true (else EOM) cost > budget x 1.01; note: why a row is (partly) empty.
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS q_cost DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS spend_ratio DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS matched_true_value DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS matched_true_cost DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS matched_budget DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS pct_oracle DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS dr_value DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS dr_cost DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS dr_ci_low DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS dr_ci_high DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS dr_q_value DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS dr_q_cost DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS area_ratio_eom DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS area_ratio_true DOUBLE;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS overspend BOOLEAN;
ALTER TABLE policy_evaluation ADD COLUMN IF NOT EXISTS note VARCHAR;

-- name: create_merchant_events
-- Merchant-side RCT rows of bipartite campaigns (<landing>/<campaign>/merchants/<day>): the
-- commission level, its amount (incentive), the sharing count (response) and its cost; the
-- merchant's feature columns as one JSON object (merchant features differ between campaigns).
CREATE TABLE IF NOT EXISTS merchant_events (
    campaign     VARCHAR NOT NULL,
    event_date   DATE    NOT NULL,
    merchant_id  VARCHAR NOT NULL,
    level        INTEGER NOT NULL,
    incentive    DOUBLE  NOT NULL,
    response     DOUBLE  NOT NULL,
    cost         DOUBLE  NOT NULL,
    propensity   DOUBLE,
    features     VARCHAR NOT NULL,  -- JSON object {feature: value}
    source_file  VARCHAR NOT NULL,
    source_row   BIGINT  NOT NULL
);

-- name: create_graph_edges
-- The customer–merchant graph of a campaign (replaced per build): payment edges summed over days.
CREATE TABLE IF NOT EXISTS graph_edges (
    campaign       VARCHAR NOT NULL,
    graph_version  VARCHAR NOT NULL,
    user_id        VARCHAR NOT NULL,
    merchant_id    VARCHAR NOT NULL,
    n_payments     DOUBLE  NOT NULL,
    amount         DOUBLE  NOT NULL,
    weight         DOUBLE  NOT NULL,   -- log1p(n_payments)
    built_at       TIMESTAMP NOT NULL
);

-- name: create_graph_customers
CREATE TABLE IF NOT EXISTS graph_customers (
    campaign       VARCHAR NOT NULL,
    graph_version  VARCHAR NOT NULL,
    user_id        VARCHAR NOT NULL,
    degree         BIGINT  NOT NULL,
    n_payments     DOUBLE  NOT NULL,
    n_events       BIGINT  NOT NULL,   -- customer RCT rows
    features       VARCHAR NOT NULL,   -- JSON object {feature: value}
    built_at       TIMESTAMP NOT NULL
);

-- name: create_graph_merchants
CREATE TABLE IF NOT EXISTS graph_merchants (
    campaign       VARCHAR NOT NULL,
    graph_version  VARCHAR NOT NULL,
    merchant_id    VARCHAR NOT NULL,
    degree         BIGINT  NOT NULL,
    n_payments     DOUBLE  NOT NULL,
    n_events       BIGINT  NOT NULL,   -- merchant RCT rows
    features       VARCHAR NOT NULL,   -- JSON object {feature: value}
    built_at       TIMESTAMP NOT NULL
);

-- name: create_merchant_coefficients
-- Predicted sharing count (response) and commission cost per merchant x commission level (history kept by version).
-- Warehouses made before the column was renamed called `response` `value`: warehouse.ensure_schema renames it.
CREATE TABLE IF NOT EXISTS merchant_coefficients (
    campaign       VARCHAR NOT NULL,
    model          VARCHAR NOT NULL,
    model_version  VARCHAR NOT NULL,
    merchant_id    VARCHAR NOT NULL,
    level          INTEGER NOT NULL,
    incentive      DOUBLE  NOT NULL,   -- the commission amount of the level
    response       DOUBLE  NOT NULL,
    cost           DOUBLE  NOT NULL,
    scored_at      TIMESTAMP NOT NULL
);

-- name: create_joint_allocation
-- Joint (one ratio budget over both sides) and independent (each side alone) allocations of customer
-- coupons and merchant commissions per ratio budget (history kept by run).
CREATE TABLE IF NOT EXISTS joint_allocation (
    campaign       VARCHAR NOT NULL,
    model_version  VARCHAR NOT NULL,
    ratio_budget   DOUBLE  NOT NULL,
    kind           VARCHAR NOT NULL,   -- 'joint' | 'independent'
    side           VARCHAR NOT NULL,   -- 'customer' | 'merchant'
    node_id        VARCHAR NOT NULL,   -- user_id or merchant_id
    level          INTEGER NOT NULL,
    incentive      DOUBLE  NOT NULL,
    run_id         VARCHAR NOT NULL,
    allocated_at   TIMESTAMP NOT NULL
);

-- name: create_joint_allocation_evaluation
-- Predicted (and, for simulated campaigns, true) value and cost of the joint vs the independent
-- allocation under each ratio budget (history kept).
CREATE TABLE IF NOT EXISTS joint_allocation_evaluation (
    campaign                VARCHAR NOT NULL,
    model_version           VARCHAR NOT NULL,
    ratio_budget            DOUBLE  NOT NULL,
    joint_true_value        DOUBLE,
    independent_true_value  DOUBLE,
    joint_cost              DOUBLE,    -- predicted cost of the joint allocation
    independent_cost        DOUBLE,
    joint_value             DOUBLE,    -- predicted value (expected redemptions + sharing counts)
    independent_value       DOUBLE,
    joint_true_cost         DOUBLE,
    independent_true_cost   DOUBLE,
    joint_lambda            DOUBLE,
    n_customers             BIGINT,
    n_merchants             BIGINT,
    note                    VARCHAR,
    run_id                  VARCHAR NOT NULL,
    evaluated_at            TIMESTAMP NOT NULL
);

-- name: create_result_runs
-- Every Dagster run that wrote results of a campaign: 'started' at its first results write,
-- 'succeeded' or 'failed' when it ends (promo run marks its own runs; the next results write marks
-- the others from Dagster's run status). Results of a run are read only once it has succeeded; a
-- failed run's rows are deleted. See promo_assets/results.py.
CREATE TABLE IF NOT EXISTS result_runs (
    campaign     VARCHAR   NOT NULL,
    run_id       VARCHAR   NOT NULL,
    status       VARCHAR   NOT NULL,   -- 'started' | 'succeeded' | 'failed'
    started_at   TIMESTAMP NOT NULL,
    finished_at  TIMESTAMP,
    PRIMARY KEY (campaign, run_id)
);

-- name: add_model_registry_run_id
-- The run that trained (registered) the model; NULL for rows written before run bookkeeping.
ALTER TABLE model_registry ADD COLUMN IF NOT EXISTS run_id VARCHAR;

-- name: create_infeasible_budget
-- A configured budget below a model's cheapest allocation: not solved or allocated for that model
-- (the other budgets are); the solver's message names the minimum feasible budget.
CREATE TABLE IF NOT EXISTS infeasible_budget (
    campaign          VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    model_version     VARCHAR NOT NULL,
    budget_per_capita DOUBLE  NOT NULL,
    minimum_budget    DOUBLE  NOT NULL,   -- per capita
    message           VARCHAR NOT NULL,
    run_id            VARCHAR NOT NULL,
    checked_at        TIMESTAMP NOT NULL
);

-- name: add_budget_dual_tie_share
-- Issue #14, real lineage: the share of the users tied at lambda_ (indifferent between a cheaper and a
-- dearer level) whose dearer level the LP optimum takes; allocation and policy_evaluation apply
-- (lambda_, tie_share) with promo_assets.allocation.decide_at instead of solving again.
ALTER TABLE budget_dual ADD COLUMN IF NOT EXISTS tie_share DOUBLE;

-- name: create_model_skips
-- A model that does not apply to a campaign (ResponseModel.applies_to, or ModelSkipped from fit):
-- its chain of assets is skipped with this reason (history kept per model, PROMO_KEEP_RUNS).
CREATE TABLE IF NOT EXISTS model_skips (
    campaign    VARCHAR   NOT NULL,
    model       VARCHAR   NOT NULL,
    reason      VARCHAR   NOT NULL,
    run_id      VARCHAR   NOT NULL,
    skipped_at  TIMESTAMP NOT NULL
);

-- name: create_outcome_predictions
-- The doubly robust EOM's outcome model (fitted on the training days), its predicted response and
-- cost for every holdout event x level (campaign-level asset outcome_model; current state only).
CREATE TABLE IF NOT EXISTS outcome_predictions (
    campaign       VARCHAR NOT NULL,
    frame_version  VARCHAR NOT NULL,
    event_date     DATE    NOT NULL,
    source_row     BIGINT  NOT NULL,
    level          INTEGER NOT NULL,
    value          DOUBLE  NOT NULL,
    cost           DOUBLE  NOT NULL
);

-- name: create_leaderboard_entries
-- What each materialization of the leaderboard asset assembled: per model the evaluation run it took
-- (status 'evaluated'), or 'skipped' / 'missing' with the reason; the random reference is the row
-- model = 'random' (its policy_evaluation rows are written by the leaderboard run itself).
CREATE TABLE IF NOT EXISTS leaderboard_entries (
    campaign           VARCHAR   NOT NULL,
    run_id             VARCHAR   NOT NULL,
    model              VARCHAR   NOT NULL,
    model_version      VARCHAR,
    evaluation_run_id  VARCHAR,
    status             VARCHAR   NOT NULL,   -- 'evaluated' | 'skipped' | 'missing'
    reason             VARCHAR,
    assembled_at       TIMESTAMP NOT NULL
);

-- name: create_segment_evaluation
-- Per model x segment column x segment value x budget: the curve metrics against the truth and the
-- true value of the model's decision vs the oracle's (promo_assets.evaluation.segments; simulated
-- campaigns with campaign.yaml segments:). segment_by = 'all' holds the overall rows; not named
-- 'segment', which would reserve a common feature name (every warehouse column is reserved at ingestion).
CREATE TABLE IF NOT EXISTS segment_evaluation (
    campaign          VARCHAR NOT NULL,
    model             VARCHAR NOT NULL,
    model_version     VARCHAR,
    segment_by        VARCHAR NOT NULL,
    segment_value     VARCHAR NOT NULL,
    budget_per_capita DOUBLE,
    n_users           BIGINT,
    curve_mae         DOUBLE,
    curve_mse         DOUBLE,
    kl                DOUBLE,
    corr              DOUBLE,
    true_value        DOUBLE,
    true_cost         DOUBLE,
    oracle_value      DOUBLE,
    oracle_cost       DOUBLE,
    pct_oracle        DOUBLE,
    run_id            VARCHAR NOT NULL,
    evaluated_at      TIMESTAMP NOT NULL
);

-- name: create_champion
-- The champion chosen by each materialization of the `champion` asset (promo_assets.evaluation.champion):
-- the policy deployed (a model or a blend: members and weights as JSON), its version, why, the
-- leaderboard run whose evaluations it compared, and where the campaign is simulated the truth for
-- auditing: the champion's % of the oracle at matched true spend and the best candidate's. Column
-- names carry a champion_ prefix: every warehouse column name is reserved for landing files.
CREATE TABLE IF NOT EXISTS champion (
    campaign                  VARCHAR   NOT NULL,
    run_id                    VARCHAR   NOT NULL,
    champion                  VARCHAR   NOT NULL,
    champion_version          VARCHAR   NOT NULL,
    champion_members          VARCHAR   NOT NULL,   -- JSON: {"members", "weights", "versions", ...}
    champion_leader           VARCHAR   NOT NULL,
    champion_proposal         VARCHAR   NOT NULL,
    champion_incumbent        VARCHAR,
    champion_changed          BOOLEAN   NOT NULL,
    champion_pinned           BOOLEAN   NOT NULL,
    champion_confidence       DOUBLE    NOT NULL,
    champion_reason           VARCHAR   NOT NULL,
    champion_reference        VARCHAR,              -- the best other single model: the headline's comparison
    champion_difference       DOUBLE,               -- champion - reference, DR value at equal spend (pooled)
    champion_difference_low   DOUBLE,
    champion_difference_high  DOUBLE,
    evidence_events           BIGINT    NOT NULL,
    leaderboard_run_id        VARCHAR   NOT NULL,
    pct_oracle                DOUBLE,               -- truth (simulated campaigns): mean over the budgets
    best_candidate            VARCHAR,
    best_pct_oracle           DOUBLE,
    decided_at                TIMESTAMP NOT NULL
);

-- name: add_champion_decided_by
-- The comparison that made the choice, in words (the decision loss, against the incumbent where there
-- is one; the headline's DR value comparison is only reported). Added by ALTER so that warehouses
-- created before the column get it too (it follows decided_at).
ALTER TABLE champion ADD COLUMN IF NOT EXISTS champion_decided_by VARCHAR;

-- name: create_champion_evidence
-- Every candidate the champion asset evaluated (evidence_kind 'candidate': its DR value at DR cost =
-- budget with the interval; budget NULL = pooled over the budgets) and every paired comparison
-- ('comparison': candidate - reference, interval at the configured confidence, verdict).
CREATE TABLE IF NOT EXISTS champion_evidence (
    campaign            VARCHAR   NOT NULL,
    run_id              VARCHAR   NOT NULL,
    evidence_kind       VARCHAR   NOT NULL,   -- 'candidate' | 'comparison'
    champion_candidate  VARCHAR   NOT NULL,
    champion_reference  VARCHAR,
    budget_per_capita   DOUBLE,
    value               DOUBLE,               -- DR value, or the difference
    value_low           DOUBLE,
    value_high          DOUBLE,
    dr_cost             DOUBLE,
    dr_cost_low         DOUBLE,
    dr_cost_high        DOUBLE,
    champion_verdict    VARCHAR,
    pct_oracle          DOUBLE                -- truth (simulated campaigns), candidates only
);

-- name: create_decisions
-- The champion's decision for every user decided for x budget, with the exploration share
-- (decision_policy 'champion' | 'explore') and the propensity of the level given (promo_assets.decisions).
CREATE TABLE IF NOT EXISTS decisions (
    campaign            VARCHAR   NOT NULL,
    run_id              VARCHAR   NOT NULL,
    decision_date       DATE      NOT NULL,
    budget_per_capita   DOUBLE    NOT NULL,
    user_id             VARCHAR   NOT NULL,
    level               INTEGER   NOT NULL,
    level_label         VARCHAR   NOT NULL,
    incentive           DOUBLE    NOT NULL,
    predicted_response  DOUBLE    NOT NULL,
    predicted_cost      DOUBLE    NOT NULL,
    decision_policy     VARCHAR   NOT NULL,
    propensity          DOUBLE    NOT NULL,
    model               VARCHAR   NOT NULL,
    model_version       VARCHAR   NOT NULL
);

-- name: add_decisions_champion_level
-- The champion's own level of each user (an explored user's differs from the level given).
ALTER TABLE decisions ADD COLUMN IF NOT EXISTS champion_level INTEGER;

-- name: create_decision_coefficients
-- The champion's predicted response and cost at every level for each user of a decisions run (one row
-- per user; the outcomes' control variates, promo_assets.monitoring.effect).
CREATE TABLE IF NOT EXISTS decision_coefficients (
    campaign            VARCHAR   NOT NULL,
    run_id              VARCHAR   NOT NULL,
    decision_date       DATE      NOT NULL,
    user_id             VARCHAR   NOT NULL,
    response            DOUBLE[]  NOT NULL,
    cost                DOUBLE[]  NOT NULL
);

-- name: create_decision_budgets
-- One row per decisions run x budget: what the manifest of an export says (without the checksums,
-- which belong to the written files).
CREATE TABLE IF NOT EXISTS decision_budgets (
    campaign            VARCHAR   NOT NULL,
    run_id              VARCHAR   NOT NULL,
    decision_date       DATE      NOT NULL,
    budget_per_capita   DOUBLE    NOT NULL,
    champion            VARCHAR   NOT NULL,
    champion_version    VARCHAR   NOT NULL,
    champion_run_id     VARCHAR   NOT NULL,
    decision_users      VARCHAR   NOT NULL,   -- which users are decided for, and why
    decision_manifest   VARCHAR   NOT NULL,   -- JSON: the budget's manifest entry
    decided_at          TIMESTAMP NOT NULL
);

-- name: create_pacing
-- Pacing a period budget (campaign.yaml `budget:`): one row per paced day as a decisions run saw it
-- (its own day and every earlier paced day of the period, with the spend their events reported by
-- then), written with the run's decisions (promo_assets.decisions.pacing.pacing_table).
CREATE TABLE IF NOT EXISTS pacing (
    campaign            VARCHAR   NOT NULL,
    run_id              VARCHAR   NOT NULL,   -- the decisions run
    decision_date       DATE      NOT NULL,   -- the run's (paced) decision day
    pacing_day          DATE      NOT NULL,
    plan                DOUBLE    NOT NULL,   -- the budget left over the days left, on that day
    predicted_spend     DOUBLE    NOT NULL,   -- the champion's predicted spend at λ for every user decided for
    realized_spend      DOUBLE,               -- what the day's events reported (NULL: not loaded yet)
    spend_ratio         DOUBLE    NOT NULL,   -- ρ̂ used that day: realized over predicted of the days back
    cumulative_spend    DOUBLE    NOT NULL,   -- realized, else planned, up to and including the day
    even_plan           DOUBLE    NOT NULL,   -- total / days × days elapsed
    budget_left         DOUBLE    NOT NULL,   -- total − cumulative_spend
    lambda_             DOUBLE    NOT NULL,
    controller          VARCHAR   NOT NULL,   -- 'ratio' | 'dual'
    period_total        DOUBLE    NOT NULL,
    period_start        DATE      NOT NULL,
    period_end          DATE      NOT NULL,
    paced_at            TIMESTAMP NOT NULL
);

-- name: create_data_checks
-- The data checks of the training frame (promo_assets.causal.checks) as each leaderboard run saw
-- them: whether there was anything to learn from (shown by `promo report`).
CREATE TABLE IF NOT EXISTS data_checks (
    campaign        VARCHAR   NOT NULL,
    run_id          VARCHAR   NOT NULL,
    check_name      VARCHAR   NOT NULL,   -- events_per_level | response_varies | response_rate
    check_passed    BOOLEAN   NOT NULL,
    check_severity  VARCHAR   NOT NULL,   -- 'ERROR' (no model can learn) | 'WARN'
    check_message   VARCHAR   NOT NULL,
    checked_at      TIMESTAMP NOT NULL
);

-- name: create_budget_multipliers
-- campaign.yaml `constraints:` (several budgets): for every model, incentive budget and budget (the
-- incentive budget 'budget', each cost type, each 'group:<name>'), the multiplier of the LP optimum
-- solve_multi found and the budget's use. target 'population': budget_dual's solve, predicted use of
-- the allocation; target 'holdout': policy_evaluation's decision at those multipliers on the holdout
-- users, predicted use, true use (simulated campaigns) and true use at matched true incentive spend
-- (the incentive budget and the group caps scaled until the true incentive spend is the budget).
-- History kept per model (PROMO_KEEP_RUNS).
CREATE TABLE IF NOT EXISTS budget_multipliers (
    campaign          VARCHAR   NOT NULL,
    model             VARCHAR   NOT NULL,
    model_version     VARCHAR   NOT NULL,
    budget_per_capita DOUBLE    NOT NULL,
    target            VARCHAR   NOT NULL,   -- 'population' | 'holdout'
    constraint_name   VARCHAR   NOT NULL,
    multiplier        DOUBLE    NOT NULL,
    budget            DOUBLE    NOT NULL,
    predicted_use     DOUBLE    NOT NULL,
    true_use          DOUBLE,
    matched_true_use  DOUBLE,
    matched_scale     DOUBLE,
    run_id            VARCHAR   NOT NULL,
    solved_at         TIMESTAMP NOT NULL
);

-- name: create_outcomes
-- The outcome of each deployed day as an outcomes run saw it (promo_assets.monitoring.outcomes): the
-- join, compliance, realized against predicted, the day's effect and its influence sums (the confidence
-- sequence pools them over days). Days whose decisions retention removed are carried (carried = true).
CREATE TABLE IF NOT EXISTS outcomes (
    campaign              VARCHAR   NOT NULL,
    run_id                VARCHAR   NOT NULL,
    decision_date         DATE      NOT NULL,
    status                VARCHAR   NOT NULL,   -- 'ok' | 'refused'
    reason                VARCHAR   NOT NULL,
    decisions_run_id      VARCHAR   NOT NULL,
    budget_per_capita     DOUBLE,
    n_events                BIGINT,
    joined_events                BIGINT,
    decided_users         BIGINT,
    champion_events       BIGINT,
    explore_events        BIGINT,
    undecided_events      BIGINT,
    undecided_incentive   BIGINT,
    noncompliant_events   BIGINT,
    compliance_share            DOUBLE,
    realized_response     DOUBLE,
    predicted_response    DOUBLE,
    realized_response_se  DOUBLE,
    realized_cost         DOUBLE,
    predicted_cost        DOUBLE,
    realized_cost_se      DOUBLE,
    response_champion     DOUBLE,
    response_explore      DOUBLE,
    cost_champion         DOUBLE,
    cost_explore          DOUBLE,
    manifest_low          DOUBLE,
    manifest_high         DOUBLE,
    within_manifest       BOOLEAN,
    effect_estimate                DOUBLE,
    effect_se             DOUBLE,
    vs_cheapest           DOUBLE,
    vs_cheapest_se        DOUBLE,
    dm_effect             DOUBLE,
    dm_se                 DOUBLE,
    champion_value        DOUBLE,
    champion_cost         DOUBLE,
    random_value          DOUBLE,
    spend_matched         BOOLEAN,
    psi_n                 BIGINT,
    psi_sum               DOUBLE,
    psi_ss                DOUBLE,
    cheap_sum             DOUBLE,
    cheap_ss              DOUBLE,
    dm_var                DOUBLE,
    carried_over               BOOLEAN   NOT NULL,
    computed_at           TIMESTAMP NOT NULL
);

-- name: add_outcomes_segments_off
-- The segments whose response was off the prediction when the day was read, kept with a carried day
-- (whose segment rows are gone): realized_vs_predicted reads each past day's verdict as it was then.
ALTER TABLE outcomes ADD COLUMN IF NOT EXISTS segments_off BIGINT;

-- name: create_outcome_levels
-- Realized against predicted per decided level of each deployed day (an outcomes run).
CREATE TABLE IF NOT EXISTS outcome_levels (
    campaign            VARCHAR NOT NULL,
    run_id              VARCHAR NOT NULL,
    decision_date       DATE    NOT NULL,
    kind                VARCHAR NOT NULL,   -- 'level' | 'uplift_decile' | 'segment'
    outcome_bin                 INTEGER NOT NULL,   -- the level, the decile 1..10 of predicted uplift, the segment's index
    outcome_segment     VARCHAR,            -- kind 'segment': feature=value
    n_events              BIGINT  NOT NULL,
    realized_value            DOUBLE,             -- level: response; decile: the DR uplift over the cheapest level
    predicted_value           DOUBLE,
    realized_cost       DOUBLE,
    predicted_cost      DOUBLE
);

-- name: create_outcome_effect
-- The effect so far as of each deployed day (the deployed days up to it), with its confidence sequence.
CREATE TABLE IF NOT EXISTS outcome_effect (
    campaign            VARCHAR NOT NULL,
    run_id              VARCHAR NOT NULL,
    decision_date       DATE    NOT NULL,
    deployed_days                INTEGER NOT NULL,
    n_events              BIGINT  NOT NULL,
    effect_estimate              DOUBLE,
    effect_low                 DOUBLE,
    effect_high                DOUBLE,
    fixed_low           DOUBLE,
    fixed_high          DOUBLE,
    vs_cheapest         DOUBLE,
    vs_cheapest_low     DOUBLE,
    vs_cheapest_high    DOUBLE,
    dm_effect           DOUBLE,
    dm_low              DOUBLE,
    dm_high             DOUBLE
);

-- name: create_population_drift
-- Each feature of the latest users decided for against the training events (an outcomes run).
CREATE TABLE IF NOT EXISTS population_drift (
    campaign            VARCHAR NOT NULL,
    run_id              VARCHAR NOT NULL,
    decision_date       DATE,
    feature             VARCHAR NOT NULL,
    kind                VARCHAR NOT NULL,
    drift_psi                 DOUBLE  NOT NULL,
    out_of_range_share  DOUBLE  NOT NULL,
    new_share           DOUBLE  NOT NULL,
    new_categories      VARCHAR NOT NULL,   -- JSON list
    drift_flagged             BOOLEAN NOT NULL
);

-- name: create_monitoring_checks
-- The monitoring checks of an outcomes run, with the reaction each one triggered (if any).
CREATE TABLE IF NOT EXISTS monitoring_checks (
    campaign            VARCHAR   NOT NULL,
    run_id              VARCHAR   NOT NULL,
    check_name          VARCHAR   NOT NULL,
    check_passed              BOOLEAN   NOT NULL,
    check_severity            VARCHAR   NOT NULL,
    message             VARCHAR   NOT NULL,
    check_reaction            VARCHAR   NOT NULL,   -- warn | retrain | fallback | stop_export
    change_day          DATE,
    checked_at          TIMESTAMP NOT NULL
);

-- name: add_monitoring_checks_change_segments
-- The training window's segments (a JSON list of [feature, value]) whose response changed: with
-- campaign.yaml monitoring.stale_scope 'segments' only their events before the change day are
-- down-weighted; added by ALTER so that warehouses created before the column get it too.
ALTER TABLE monitoring_checks ADD COLUMN IF NOT EXISTS change_segments VARCHAR;

-- name: create_decision_exports
-- What became of each decisions run's decision at the outbox, one row per attempt (the latest row of a
-- run is its state): 'exported' (its files went to the outbox, with the budget whose file the coupon
-- system applies when known) or 'stopped' (a monitoring reaction stop_export kept it out; the reason
-- names the checks). Written by the outbox asset and `promo export`; not a results table of one run
-- (no retention): a run's export state is kept as long as its decisions are.
CREATE TABLE IF NOT EXISTS decision_exports (
    campaign            VARCHAR   NOT NULL,
    decisions_run_id    VARCHAR   NOT NULL,   -- the decisions run whose decision this is
    decision_date       DATE      NOT NULL,
    export_state        VARCHAR   NOT NULL,   -- exported | stopped
    deployed_budget     DOUBLE,               -- the budget whose file is applied (NULL: not known)
    export_budgets      VARCHAR   NOT NULL,   -- JSON list of the budgets written to the outbox ([] when stopped)
    export_reason       VARCHAR   NOT NULL,   -- stopped: the checks that stopped it; exported: the outbox folder
    exported_by         VARCHAR   NOT NULL,   -- the Dagster run of the outbox asset, or 'promo export'
    exported_at         TIMESTAMP NOT NULL
);
