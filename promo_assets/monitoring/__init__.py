"""Monitoring of the deployed decisions: what each decided day's events say about the decision.

- `outcomes`: a decided day's events joined to the decision they answer; compliance, realized
  against predicted (overall, per group, per level, per decile of predicted uplift);
- `effect`: the champion's effect against random levels at equal spend (and against the cheapest
  level), doubly robust with the logged propensities and the champion's predictions as control variates;
- `sequential`: the confidence sequence that keeps the effect's interval valid under daily looks;
- `drift`: the users decided for against the training events (PSI, training range, new categories);
- `checks`: the checks of campaign.yaml `monitoring:` and the cumulative effect;
- `exported`: each decisions run's export state (exported, or stopped by a `stop_export` reaction), the
  decision in force (what the outbox holds and `promo serve` serves: the decision `freshness` judges) and
  the deployed budget recorded with every export.

No dagster here (domain package); the `outcomes` asset (promo_assets/defs/monitoring) wires it.
"""

from promo_assets.monitoring.checks import CHECKS, CheckOutcome, cumulative, late_days, run_checks
from promo_assets.monitoring.drift import FeatureDrift, feature_drift
from promo_assets.monitoring.effect import Deployment, EffectTerms, effect_terms, true_effect
from promo_assets.monitoring.outcomes import Candidate, DayOutcome, OutcomeError, choose_decision, day_outcome

__all__ = [
    "CHECKS", "Candidate", "CheckOutcome", "DayOutcome", "Deployment", "EffectTerms", "FeatureDrift", "OutcomeError",
    "choose_decision", "cumulative", "day_outcome", "effect_terms", "feature_drift", "late_days", "run_checks",
    "true_effect",
]
