"""The checks over a campaign's loaded events (what `rct_events`' asset checks report): the rows,
those off the level grid or with another incentive than their level's, responses that do not fit
the response type, bad costs and propensities. No dagster here (domain code).
"""

from __future__ import annotations

from dataclasses import dataclass

from promo_assets.store import ingest as ingest_store


@dataclass(frozen=True)
class EventChecks:
    """The counts of `campaign`'s loaded events and of the rows breaking each rule."""

    rows: int
    off_grid: int
    incentive_mismatch: int
    bad_response: int
    bad_cost: int
    bad_propensity: int

    @classmethod
    def read(cls, con, campaign: str, config) -> EventChecks:
        """Counted over every loaded day; a response is bad by the campaign's response type."""
        n, off_grid, bad_binary, bad_count, bad_resp, bad_cost, bad_prop = ingest_store.event_rule_counts(
            con, campaign, len(config.incentives))
        wrong = ingest_store.incentive_mismatches(con, campaign, config.incentives)
        bad_response = bad_resp + (bad_binary if config.response == "binary" else 0) + (
            bad_count if config.response == "count" else 0)
        return cls(n, off_grid, wrong, bad_response, bad_cost, bad_prop)
