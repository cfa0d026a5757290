"""Dagster wiring of promo_assets.monitoring: the outcomes of the deployed decisions, their checks and reactions."""
