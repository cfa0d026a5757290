"""Population drift: the users decided for against the events the models were trained on.

Per feature:
- **numeric**: the population-stability index over the reference's deciles (PSI = Σ (p − q) ln(p / q)
  over the bins, q the reference's share, p the population's; 0.1 is a small shift, 0.25 a large one)
  and the share of the population outside the reference's range (values no model has seen);
- **categorical**: the PSI over the categories (the new ones pooled in one bin) and the categories the
  reference never had, with the population's share of them.
A feature is flagged when its PSI, its share out of range or its share of new categories passes the
campaign's thresholds (campaign.yaml `monitoring:`).

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd

from promo_assets.store import frames as frames_store, monitoring as monitoring_store

EPS = 1e-4


def psi(p: np.ndarray, q: np.ndarray) -> float:
    """Σ (p − q) ln(p / q), both shares floored at 1e-4."""
    p = np.maximum(np.asarray(p, dtype=np.float64), EPS)
    q = np.maximum(np.asarray(q, dtype=np.float64), EPS)
    return float(np.sum((p - q) * np.log(p / q)))


@dataclass(frozen=True)
class FeatureDrift:
    feature: str
    kind: str                 # 'numeric' | 'categorical'
    psi: float
    out_of_range_share: float  # numeric: outside the reference's [min, max]
    new_share: float           # categorical: share of the population in categories the reference never had
    new_categories: tuple[str, ...]
    flagged: bool

    def describe(self) -> str:
        parts = [f"PSI {self.psi:.3f}"]
        if self.kind == "numeric" and self.out_of_range_share > 0:
            parts.append(f"{self.out_of_range_share:.1%} outside the training range")
        if self.new_categories:
            shown = ", ".join(repr(c) for c in self.new_categories[:3]) + (" …" if len(self.new_categories) > 3 else "")
            parts.append(f"{self.new_share:.1%} in new categories {shown}")
        return f"{self.feature}: " + ", ".join(parts)


@dataclass(frozen=True)
class DriftFrames:
    """What the drift check compares: the features of the latest users decided for (`population`,
    None when there are none) against the training events' (`reference`), over the `numeric` and
    `categorical` feature columns."""

    population: pd.DataFrame | None
    reference: pd.DataFrame | None
    numeric: list[str]
    categorical: list[str]


def feature_drift(reference: pd.DataFrame, population: pd.DataFrame, numeric: list[str], categorical: list[str], *,
                  psi_threshold: float, range_threshold: float, new_category_threshold: float) -> list[FeatureDrift]:
    """Every feature both frames have, in the order numeric then categorical."""
    out: list[FeatureDrift] = []
    for f in numeric:
        if f not in reference.columns or f not in population.columns:
            continue
        ref = pd.to_numeric(reference[f], errors="coerce").dropna().to_numpy(dtype=np.float64)
        cur = pd.to_numeric(population[f], errors="coerce").dropna().to_numpy(dtype=np.float64)
        if ref.size == 0 or cur.size == 0:
            continue
        edges = np.unique(np.quantile(ref, np.linspace(0, 1, 11)[1:-1]))
        q = np.bincount(np.searchsorted(edges, ref, side="right"), minlength=edges.size + 1) / ref.size
        p = np.bincount(np.searchsorted(edges, cur, side="right"), minlength=edges.size + 1) / cur.size
        oor = float(((cur < ref.min()) | (cur > ref.max())).mean())
        value = psi(p, q)
        out.append(FeatureDrift(f, "numeric", value, oor, 0.0, (),
                                bool(value > psi_threshold or oor > range_threshold)))
    for f in categorical:
        if f not in reference.columns or f not in population.columns:
            continue
        ref = reference[f].astype("string").fillna("<missing>")
        cur = population[f].astype("string").fillna("<missing>")
        if ref.empty or cur.empty:
            continue
        seen = set(ref.unique())
        new = cur[~cur.isin(seen)]
        cats = sorted(seen)
        q = ref.value_counts(normalize=True).reindex(cats, fill_value=0).to_numpy()
        p = cur.value_counts(normalize=True).reindex(cats, fill_value=0).to_numpy()
        new_share = float(len(new) / len(cur))
        value = psi(np.append(p, new_share), np.append(q, 0.0))
        out.append(FeatureDrift(f, "categorical", value, 0.0, new_share, tuple(sorted(new.unique())),
                                bool(value > psi_threshold or new_share > new_category_threshold)))
    return out


def stale_weights(event_dates, change_day, stale_weight: float, segments=(),
                  features: pd.DataFrame | None = None) -> np.ndarray:
    """The factor of each event's training weight after a `retrain` reaction: `stale_weight` for the events
    before `change_day` (the curves they saw have changed), 1 from it on; all 1 without a change day.
    With `segments` ((feature, value) pairs: where the response changed) and the events' `features`,
    only the events of those segments are stale (campaign.yaml monitoring.stale_scope 'segments'); the
    others keep their weight: what they saw has not changed, and they keep the model's footing while
    the changed segments are learned from the days since the change."""
    dates = pd.to_datetime(pd.Series(event_dates)).dt.date.to_numpy()
    if change_day is None:
        return np.ones(len(dates))
    stale = dates < change_day
    pairs = [(f, v) for f, v in segments if features is not None and f in features.columns]
    if pairs:
        changed = np.zeros(len(dates), dtype=bool)
        for f, v in pairs:
            changed |= (features[f].astype("string").fillna("<missing>") == v).to_numpy(dtype=bool)
        stale &= changed
    return np.where(stale, float(stale_weight), 1.0)


@dataclass(frozen=True)
class TrainingEvents:
    """The events the training frame is built from, the `retrain` reaction's change day (None without)
    and each event's stale factor (`stale_weights`)."""

    events: pd.DataFrame
    change_day: dt.date | None
    stale: np.ndarray


def training_events(con, campaign: str, config) -> TrainingEvents:
    """The campaign's events with their propensities and, after a `retrain` reaction, their stale factors:
    with campaign.yaml monitoring.stale_scope 'segments' the events are read with the changed segments'
    feature columns (those still loaded), so only those segments' events before the change are stale."""
    change_day = monitoring_store.training_change_day(con, campaign)  # a `retrain` reaction's window
    segments = (monitoring_store.training_change_segments(con, campaign, change_day)
                if config.monitoring.stale_scope == "segments" else ())
    loaded = set(frames_store.feature_spec(con, campaign)[1]) if segments else set()
    events = frames_store.propensity_events(con, campaign, sorted({f for f, _ in segments} & loaded))
    stale = stale_weights(events["event_date"], change_day, config.monitoring.stale_weight, segments, events)
    return TrainingEvents(events, change_day, stale)


def exploration_after_change(share: float, change_day, day, settings) -> float:
    """The exploration share of the decision for `day`: campaign.yaml monitoring.change_explore_share
    (when set and larger) on the `change_explore_days` days after a `retrain` reaction's change day, so
    that the changed response is learned from randomized levels; `share` (exploration.share) otherwise."""
    boost = settings.change_explore_share
    if boost is None or change_day is None or not change_day < day <= change_day + dt.timedelta(
            days=settings.change_explore_days):
        return float(share)
    return max(float(share), float(boost))
