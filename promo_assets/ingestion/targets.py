"""The users a campaign decides for, read once for every stage that needs them: the latest
`population/` file (read in chunks), else the holdout users of the loaded events.

`scoring_targets` is what a model's coefficients are scored for; `population_rows` what the
decisions' group caps and the monitoring's drift read. No dagster here (domain code).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from promo_assets.ingestion import day_files
from promo_assets.ingestion.frames import FrameUsers, PopulationFile
from promo_assets.store import frames as frames_store

POPULATION_CHUNK = 65536  # rows per chunk when a population file is read whole


def population_file(con, landing: Path, campaign: str, features) -> PopulationFile | None:
    """The latest population/ file, read in chunks when scored (None when there is none)."""
    files = day_files(landing, campaign, "population")
    return PopulationFile(con, files[max(files)], features) if files else None


def holdout_rows(con, campaign: str) -> pd.DataFrame:
    """The holdout events with every feature column (one row per holdout event)."""
    numeric, categorical = frames_store.feature_spec(con, campaign)
    return frames_store.holdout_events(con, campaign, numeric + categorical)


def population_rows(con, landing: Path, campaign: str, features) -> pd.DataFrame:
    """The rows of the users decided for with `features`: the latest population/ file whole, else
    the holdout events (every feature column)."""
    pop = population_file(con, landing, campaign, features)
    if pop is not None:
        return pd.concat(list(pop.frames(POPULATION_CHUNK)))
    return holdout_rows(con, campaign)


@dataclass(frozen=True)
class ScoringTargets:
    """The users a model's coefficients are scored for: the population (its file, else the holdout
    users), the holdout users, where the population came from, the training frame's version, and the
    features the population file lacks (NULL for every user)."""

    population: PopulationFile | FrameUsers
    holdout: FrameUsers
    source: str
    frame_version: str | None
    absent: tuple[str, ...] = ()


def scoring_targets(con, landing: Path, campaign: str) -> ScoringTargets:
    """The population and holdout users of `campaign`; the population's features absent from its file
    are NULL columns."""
    numeric, categorical = frames_store.feature_spec(con, campaign)
    holdout = FrameUsers(holdout_rows(con, campaign).drop_duplicates("user_id", keep="first"))
    pop = population_file(con, landing, campaign, numeric + categorical)
    source = "holdout users (no population file)" if pop is None else str(pop.path)
    return ScoringTargets(holdout if pop is None else pop, holdout, source, frames_store.frame_version(con, campaign),
                          tuple(pop.absent) if pop is not None else ())
