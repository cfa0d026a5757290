"""Causal training data: propensities, inverse-propensity weights, diagnostics, splits.

No dagster import here (domain package). See propensity.py, weights.py, split.py.
"""

from promo_assets.causal.frame import EventPropensity, build_training_frame, event_propensity, split_and_weights
from promo_assets.causal.propensity import (
    PropensityError,
    PropensityModel,
    assignment_frequencies,
    classwise_ece,
    fit_propensity,
    randomized_propensity,
)
from promo_assets.causal.split import SPLITS, assign_split, user_hash_unit
from promo_assets.causal.weights import effective_sample_size, ips_weights, propensity_diagnostics, propensity_plot

__all__ = [
    "EventPropensity", "build_training_frame", "event_propensity", "split_and_weights",
    "PropensityError", "PropensityModel", "SPLITS", "assign_split", "assignment_frequencies",
    "classwise_ece", "effective_sample_size", "fit_propensity", "ips_weights", "propensity_diagnostics",
    "propensity_plot", "randomized_propensity", "user_hash_unit",
]
