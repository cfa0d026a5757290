"""Offline policy evaluation: EOM, Q(v, c), AUCC, ground truth, response-curve metrics, plots.

Domain code: never imports dagster. What travels together is one object (`promo_assets.evaluation.records`):
the logged events (`LoggedEvents`: logged, response, cost, propensity), the simulator's `Truth`, the outcome
model's `OutcomePredictions`, the `Holdout` holding the three; an interval is a strategy passed in
(`InfluenceInterval`, `BootstrapInterval`), and `EvaluationSettings` carries the budgets and the rest.
Main entry points:
  eom, eom_batch, bootstrap_eom, q_at_budget, aucc        (promo_assets.evaluation.eom)
  true_policy_value, oracle_policy, random_policy           (promo_assets.evaluation.truth)
  eom_curve, policy_curves, random_reference_curve          (promo_assets.evaluation.curves)
  curve_metrics                                             (promo_assets.evaluation.curve_metrics)
  matched_true_value, spend_ratio, pct_oracle, random_mix, match_mix, dr_batch, dr_mix,
  oracle_values, pct_oracle_at_matched_spend,
  bootstrap_dr, dr_interval, dr_q_at_budget, area_ratio     (promo_assets.evaluation.honest)
  fit_outcome_model                                         (promo_assets.evaluation.outcome)
  evaluate_models, evaluate_random, evaluate_policies, leaderboard_markdown, leaderboard_table, format_leaderboard
                                                            (promo_assets.evaluation.report)
  plot_frontier, plot_response_by_level                     (promo_assets.evaluation.plots)
"""

from promo_assets.evaluation.curve_metrics import (
    CURVE_METRIC_NAMES,
    CurveMetricsError,
    LevelScale,
    curve_metrics,
    equal_pair_rate,
    max_local_slope_std,
    reverse_pair_rate,
)
from promo_assets.evaluation.curves import (
    CURVE_COLUMNS,
    eom_curve,
    frontier_lambdas,
    logged_level_costs,
    policy_curves,
    random_reference_curve,
)
from promo_assets.evaluation.eom import (
    EvaluationError,
    QResult,
    aucc,
    bootstrap_eom,
    bootstrap_eom_samples,
    cost_curve,
    eom,
    eom_batch,
    inverse_propensity,
    lambda_upper_bound,
    levels_at_lambdas,
    q_at_budget,
    q_at_budget_bisection,
    q_search,
    roi_score,
)
from promo_assets.evaluation.honest import (  # noqa: I001 (comparisons at equal spend, issue #13)
    MATCH_REL_TOL, BootstrapInterval, InfluenceInterval, IntervalStrategy, MatchedSpend, MixMatch, area_ratio, bootstrap_dr, dr_batch, dr_interval, dr_mix, dr_q_at_budget,
    frontier_area,
    ipw_mix, match_mix, matched_true_value, mix_true_value, oracle_values, pct_oracle, pct_oracle_at_matched_spend,
    random_mix, spend_ratio,
)
from promo_assets.evaluation.outcome import OUTCOME_MODEL_KINDS, OutcomeFit, OutcomeModel, fit_outcome_model
from promo_assets.evaluation.plots import PNG_SIGNATURE, plot_frontier, plot_response_by_level
from promo_assets.evaluation.report import (
    POLICY_EVALUATION_COLUMNS,
    RANDOM_MODEL,
    EvaluationSettings,
    evaluate_models,
    evaluate_policies,
    evaluate_random,
    format_leaderboard,
    leaderboard_compact,
    leaderboard_footer,
    leaderboard_records,
    leaderboard,
    leaderboard_markdown,
    leaderboard_table,
)
from promo_assets.evaluation.records import Holdout, LoggedEvents, OutcomePredictions, Truth
from promo_assets.evaluation.truth import allocate, oracle_policy, random_policy, true_policy_value

__all__ = [
    "BootstrapInterval", "EvaluationSettings", "Holdout", "InfluenceInterval", "IntervalStrategy", "LevelScale",
    "LoggedEvents", "MixMatch", "OutcomeFit", "OutcomePredictions", "Truth",
    "MATCH_REL_TOL", "MatchedSpend", "OUTCOME_MODEL_KINDS", "OutcomeModel", "area_ratio", "bootstrap_dr",
    "dr_batch", "dr_interval", "dr_mix", "dr_q_at_budget", "fit_outcome_model", "frontier_area", "ipw_mix",
    "leaderboard_table", "match_mix", "matched_true_value", "mix_true_value", "oracle_values", "pct_oracle",
    "pct_oracle_at_matched_spend", "q_search", "random_mix", "spend_ratio",
    "CURVE_COLUMNS", "CURVE_METRIC_NAMES", "CurveMetricsError", "EvaluationError", "PNG_SIGNATURE",
    "POLICY_EVALUATION_COLUMNS", "QResult", "RANDOM_MODEL", "allocate", "aucc", "bootstrap_eom",
    "bootstrap_eom_samples", "cost_curve", "curve_metrics", "eom", "eom_batch", "eom_curve",
    "equal_pair_rate", "evaluate_models", "evaluate_policies", "evaluate_random", "format_leaderboard",
    "frontier_lambdas",
    "leaderboard_compact", "leaderboard_footer", "leaderboard_records",
    "inverse_propensity", "lambda_upper_bound", "leaderboard", "leaderboard_markdown",
    "levels_at_lambdas", "logged_level_costs", "max_local_slope_std", "oracle_policy",
    "plot_frontier", "plot_response_by_level", "policy_curves", "q_at_budget", "random_reference_curve",
    "q_at_budget_bisection", "random_policy", "reverse_pair_rate", "roi_score", "true_policy_value",
]
