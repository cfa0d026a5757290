"""Train / validation / holdout split of the training frame by date window and user hash.

The last `holdout_days` calendar days (relative to the latest event_date) are the holdout; earlier
rows go to 'validation' when a stable hash of (salt, user_id) falls below `validation_fraction`,
else to 'train'. The hash is hashlib's BLAKE2b (not Python's salted hash()), so a user lands in the
same split in every process, on every machine and on every re-run.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from promo_assets.causal.propensity import PropensityError

SPLITS = ("train", "validation", "holdout")


def user_hash_unit(user_ids, salt: str = "") -> np.ndarray:
    """A stable number in [0, 1) per user id: first 8 bytes of BLAKE2b(salt \\x1f user_id) / 2^64."""
    values = pd.Series(user_ids, copy=False).astype("string").fillna("")
    codes, uniques = pd.factorize(values)
    prefix = salt.encode() + b"\x1f"
    unit = np.fromiter(
        (int.from_bytes(hashlib.blake2b(prefix + u.encode(), digest_size=8).digest(), "big") for u in uniques),
        dtype=np.float64,
        count=len(uniques),
    ) / 2.0**64
    return unit[codes]


def assign_split(
    frame: pd.DataFrame,
    holdout_days: int = 1,
    validation_fraction: float = 0.2,
    salt: str = "",
) -> pd.Series:
    """Split label per row ('train' | 'validation' | 'holdout'), indexed like `frame`.

    frame: columns event_date (date / datetime / ISO text) and user_id. Raises PropensityError
    for missing columns or out-of-range settings."""
    missing = [c for c in ("event_date", "user_id") if c not in frame.columns]
    if missing:
        raise PropensityError(f"assign_split: frame has no column(s) {missing}")
    if int(holdout_days) < 0:
        raise PropensityError(f"assign_split: holdout_days must be >= 0, got {holdout_days}")
    if not 0.0 <= validation_fraction < 1.0:
        raise PropensityError(f"assign_split: validation_fraction must be in [0, 1), got {validation_fraction}")
    day = pd.to_datetime(frame["event_date"]).dt.normalize()
    if day.isna().any():
        raise PropensityError(f"assign_split: {int(day.isna().sum())} rows have no event_date")
    labels = np.full(len(frame), "train", dtype=object)
    if len(frame):
        labels[user_hash_unit(frame["user_id"].to_numpy(), salt) < validation_fraction] = "validation"
        if holdout_days > 0:
            cutoff = day.max() - pd.Timedelta(days=int(holdout_days))
            labels[(day > cutoff).to_numpy()] = "holdout"
    return pd.Series(pd.Categorical(labels, categories=list(SPLITS)), index=frame.index, name="split")
