"""Dagster wiring of promo_assets.decisions: champion, decisions, outbox and the campaign report."""
