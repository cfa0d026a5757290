"""The training frame from loaded events: propensity, split and IPS weight per event, in one place.

What the `propensity` and `training_frame` assets compute, as one domain function that the
benchmarks (through `promo_assets.ingestion.frames.load_landing`) and the assets share:

1. propensity of each event's logged level: for a randomized campaign the logged propensity, else
   the empirical assignment frequency of the day (`randomized_propensity`); for an observational
   one (`randomized: false`) the calibrated multinomial model P(level | features)
   (`fit_propensity`, seed 0), with its N x K probabilities returned for the diagnostics;
2. the train / validation / holdout split by date window and user hash (`assign_split`, the
   campaign's `holdout_days` and `validation_fraction`);
3. clipped, self-normalized IPS weights (`ips_weights`, the campaign's `ips_clip`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from promo_assets.causal.propensity import fit_propensity, randomized_propensity
from promo_assets.causal.split import assign_split
from promo_assets.causal.weights import ips_weights


@dataclass
class EventPropensity:
    """`propensity` (N) of each logged level, `source` (N: logged | empirical | estimated) and, for
    an estimated one, `proba` (N x K) — None for a randomized campaign."""

    propensity: np.ndarray
    source: np.ndarray
    proba: np.ndarray | None


def event_propensity(events: pd.DataFrame, config, numeric: Sequence[str], categorical: Sequence[str],
                     log: Callable[[str], None] | None = None) -> EventPropensity:
    """Step 1 above for the rows of `events` (event_date, level, [propensity], features)."""
    if config.randomized:
        p = randomized_propensity(events, config.n_levels)
        logged = events["propensity"].notna() if "propensity" in events.columns else pd.Series(False, index=events.index)
        return EventPropensity(p, np.where(logged, "logged", "empirical"), None)
    model = fit_propensity(events, list(numeric), list(categorical), config.n_levels, seed=0, log=log)
    proba = model.predict_proba(events)
    p = proba[np.arange(len(events)), events["level"].to_numpy()]
    return EventPropensity(p, np.full(len(events), "estimated"), proba)


def split_and_weights(events: pd.DataFrame, propensity: np.ndarray, config) -> tuple[pd.Series, np.ndarray]:
    """Steps 2 and 3: (split label per row, IPS weight per row) for `events` (event_date, user_id)."""
    split = assign_split(events, holdout_days=config.holdout_days, validation_fraction=config.validation_fraction)
    return split, ips_weights(np.asarray(propensity, dtype=np.float64), clip=config.ips_clip)


def build_training_frame(events: pd.DataFrame, config, numeric: Sequence[str], categorical: Sequence[str],
                         log: Callable[[str], None] | None = None) -> pd.DataFrame:
    """`events` with the columns propensity (replaced by the one used), split and ips_weight added
    (a copy): the training frame the models train on."""
    prop = event_propensity(events, config, numeric, categorical, log)
    split, weights = split_and_weights(events, prop.propensity, config)
    return events.assign(propensity=prop.propensity, split=split.astype(str).to_numpy(), ips_weight=weights)
