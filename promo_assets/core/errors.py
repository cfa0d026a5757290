"""The base class of promo_assets' own errors.

Every error the project raises for a problem of the user's input, configuration or stored state (a
bad campaign.yaml, an infeasible budget, a tampered artefact, a busy warehouse, ...) derives from
`DomainError`: its message names the thing and is the whole point, so the CLI and the Dagster assets
show that message alone. Anything else (a bug in this code or in numpy / pandas / torch, even one
that raises ValueError) is not a DomainError and keeps its stack trace.

Each error class also keeps its historical built-in base (ValueError, OSError, RuntimeError) so that
callers catching those still work.
"""


class DomainError(Exception):
    """A problem of the user's data, configuration or stored state, reported by its message alone."""
