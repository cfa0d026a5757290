"""Dagster wiring of promo_assets.ingestion: the ingestion assets."""
