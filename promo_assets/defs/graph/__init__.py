"""Dagster wiring of promo_assets.graph: the customer–merchant graph assets."""
