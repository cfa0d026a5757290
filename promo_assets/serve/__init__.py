"""`promo serve`: the HTTP decision service for users who arrive during the day (docs/serve.md).

- `state`: `CampaignState` (one campaign's champion, its compiled scoring plan
  (`promo_assets.models.plan`), λ per budget, features, exploration: immutable) with request validation (`RequestError`, naming the field) and the decision; `Unavailable` (a
  campaign without a champion or decisions, with the reason).
- `registry`: `Registry` (the served campaigns, read from the warehouse read-only and the artefact
  store, reloaded on change by swapping one immutable snapshot).
- `app`: `create_app` (the Starlette application).

No dagster here (domain code).
"""

from promo_assets.serve.registry import Registry, read_campaign
from promo_assets.serve.state import MAX_BATCH, CampaignState, RequestError, Unavailable

__all__ = ["MAX_BATCH", "CampaignState", "Registry", "RequestError", "Unavailable", "create_app", "read_campaign"]


def create_app(registry: Registry, reload_interval: float = 2.0, read_timeout: float = 10.0):
    """The Starlette application (imported lazily: the rest of the package needs no web framework)."""
    from promo_assets.serve.app import create_app as _create

    return _create(registry, reload_interval, read_timeout)
