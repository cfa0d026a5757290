"""Dagster wiring of promo_assets.simulation: the demo job."""
