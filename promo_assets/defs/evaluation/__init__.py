"""Dagster wiring of promo_assets.evaluation: the leaderboard asset."""
