"""A fitted model's coefficients for a campaign's users, scored chunk by chunk as the users are read
(as Dask tasks when a client is given) and stored in response_coefficients: what a model's
`response_coefficients` asset runs. No dagster here (domain code).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from promo_assets.allocation.chunked import map_frame_stream, predict_chunk
from promo_assets.models.base import negative_cost_problem
from promo_assets.models.errors import ModelInputError
from promo_assets.store import models as models_store

SCORING_CHUNK = 50_000  # users per chunk without a Dask cluster


@dataclass(frozen=True)
class Scoring:
    """Where a fitted model's coefficients go: the campaign, the model's name, the campaign's config
    (its levels and cost rule), the run's Dask client (or None) and its users per chunk for a count of
    users (used with a client), and a progress callback."""

    campaign: str
    model: str
    config: object
    client: object = None
    chunk_rows: Callable[[int], int] | None = None
    log: Callable[[str], None] | None = None


def score_users(con, scoring: Scoring, fitted, target: str, users) -> int:
    """Score `users` (a PopulationFile or FrameUsers) and store their coefficients as `target`
    (replacing this version's rows); the number of users scored. A negative predicted cost raises
    ModelInputError in the campaign's terms."""
    k = scoring.config.n_levels
    models_store.clear_coefficients(con, scoring.campaign, scoring.model, fitted.version_, target)
    n, done = users.n_users, 0
    rows = SCORING_CHUNK if scoring.client is None or scoring.chunk_rows is None else scoring.chunk_rows(n)
    say = scoring.log or (lambda msg: None)
    for part, (response, cost) in map_frame_stream(predict_chunk, fitted, users.frames(rows), client=scoring.client):
        problem = negative_cost_problem(scoring.model, scoring.config, cost, part["user_id"].to_numpy())
        if problem:
            raise ModelInputError(problem)
        chunk_df = pd.DataFrame({
            "user_id": np.repeat(part["user_id"].to_numpy(), k),
            "level": np.tile(np.arange(k, dtype=np.int32), len(part)),
            "response": np.asarray(response, dtype=np.float64).ravel(),
            "cost": np.asarray(cost, dtype=np.float64).ravel(),
        })
        models_store.add_coefficients(con, scoring.campaign, scoring.model, fitted.version_, target, chunk_df)
        done += len(part)
        say(f"{scoring.model} [{target}]: scored {done}/{n} users")
    return done
