"""Errors raised by the response-model package (all are ValueError subclasses)."""

from __future__ import annotations

from promo_assets.core.errors import DomainError


class ModelInputError(DomainError, ValueError):
    """A training or scoring frame, feature spec or hyper-parameter is unusable (the message says why)."""
