"""Dagster wiring of promo_assets.models: one chain of assets per registered model."""
