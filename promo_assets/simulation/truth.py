"""Read a simulated campaign's ground truth (truth/response.parquet, truth/propensity.parquet).

The simulator writes both files user-major: every user's K rows are consecutive, levels 0..K-1 in
order; the readers check that layout and turn the long tables into N x K arrays aligned to any list
of user ids (the order in which evaluation scores users).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from promo_assets.core import files
from promo_assets.core.errors import DomainError


class TruthError(DomainError, ValueError):
    """The campaign has no (or a malformed) ground-truth file, or a user id is not in it."""


def _truth_path(campaign_dir: str | Path, name: str) -> Path:
    """`<campaign_dir>/truth/<name>`, a regular file reached without a link (promo_assets.core.files)."""
    path = Path(campaign_dir) / "truth" / name
    why = files.problem(path, Path(campaign_dir))
    if why:
        raise TruthError(f"{path}: {why}; only regular files in the landing folder are read")
    if not path.exists():
        raise TruthError(f"{path}: no ground truth (only simulated campaigns have truth files)")
    return path


def load_truth(campaign_dir: str | Path) -> pd.DataFrame:
    """truth/response.parquet as a DataFrame: user_id, level, incentive, expected_response, expected_cost."""
    return pq.read_table(_truth_path(campaign_dir, "response.parquet")).to_pandas()


def _wide(path: Path, columns: list[str], user_ids: Sequence[str] | None) -> tuple[pd.Index, list[np.ndarray]]:
    table = pq.read_table(path, columns=["user_id", "level", *columns])
    level = table.column("level").to_numpy()
    n_levels = int(level.max()) + 1 if level.size else 0
    n_rows = table.num_rows
    if n_levels < 1 or n_rows % n_levels or not np.array_equal(level, np.tile(np.arange(n_levels), n_rows // n_levels)):
        raise TruthError(f"{path}: expected every user's levels 0..K-1 in consecutive rows")
    ids = table.column("user_id").to_numpy(zero_copy_only=False)[::n_levels]
    index = pd.Index(ids)
    mats = [table.column(c).to_numpy().reshape(-1, n_levels).astype(np.float64) for c in columns]
    if user_ids is None:
        return index, mats
    pos = index.get_indexer(pd.Index(np.asarray(user_ids, dtype=object)))
    missing = np.flatnonzero(pos < 0)
    if missing.size:
        examples = [str(user_ids[i]) for i in missing[:5]]
        raise TruthError(f"{path}: {missing.size} user ids have no ground truth, e.g. {examples}")
    return index[pos], [m[pos] for m in mats]


def truth_arrays(campaign_dir: str | Path, user_ids: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """True (expected_response, expected_cost), each N x K, rows in the order of `user_ids`
    (None: every pool user in file order). Raises TruthError for unknown user ids."""
    _, (values, costs) = _wide(_truth_path(campaign_dir, "response.parquet"), ["expected_response", "expected_cost"], user_ids)
    return values, costs


def truth_user_ids(campaign_dir: str | Path) -> np.ndarray:
    """The pool's user ids in the truth file's order (the row order of truth_arrays(dir))."""
    index, _ = _wide(_truth_path(campaign_dir, "response.parquet"), [], None)
    return np.asarray(index, dtype=object)


def true_propensity_arrays(campaign_dir: str | Path, user_ids: Sequence[str] | None = None) -> np.ndarray:
    """True logging propensities P(level | user), N x K in the order of `user_ids` (confounded
    campaigns only; TruthError when the campaign was a uniform RCT)."""
    _, (prop,) = _wide(_truth_path(campaign_dir, "propensity.parquet"), ["propensity"], user_ids)
    return prop
