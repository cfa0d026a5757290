"""The campaign's configuration (campaign.yaml, its one model and loader) and the settings read from the
environment.

No dagster here (domain code)."""
