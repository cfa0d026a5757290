"""What leaves the system is checked first: the checks of one budget's decisions (the `decisions`
asset runs them as blocking Dagster asset checks; `promo export` runs them again on the stored
decisions before writing a file). Each returns a `CheckOutcome`; none raises on bad data.

No dagster here (domain code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

CHECK_NAMES = ("every_user_once", "spend_within_budget", "valid_levels", "no_missing_values", "exploration_share")


@dataclass
class CheckOutcome:
    name: str
    passed: bool
    message: str
    details: dict = field(default_factory=dict)


def check_decisions(frame: pd.DataFrame, *, users, budget_per_capita: float, labels, incentives,
                    max_user_cost: float, share: float, tolerance: float) -> list[CheckOutcome]:
    """The checks of one budget's decision rows (columns user_id, level, label, incentive,
    predicted_response, predicted_cost, policy, propensity):

    - every_user_once: every user decided for appears exactly once (no one missing, no one twice,
      no one else);
    - spend_within_budget: the predicted spend is at most budget x N plus one user's dearest level
      (the allocator's one fractional user);
    - valid_levels: every level is one of the campaign's, with its own label and incentive;
    - no_missing_values: no NaN or missing value; propensities in (0, 1];
    - exploration_share: the share of users marked 'explore' is within `tolerance` of `share` (and
      half a user: exactly round(share x N) users explore).
    """
    out = []
    b = float(budget_per_capita)
    n_expected = len(users)
    ids = frame["user_id"].astype(str)
    dup = int(ids.duplicated().sum())
    expected = pd.Index(pd.Series(users, dtype=str))
    missing = int((~expected.isin(ids)).sum())
    extra = int((~ids.isin(expected)).sum())
    ok = dup == 0 and missing == 0 and extra == 0
    out.append(CheckOutcome("every_user_once", ok,
                            f"{len(frame)} rows for {n_expected} users" if ok else
                            f"{missing} user(s) missing, {dup} listed twice, {extra} not among the users decided for",
                            {"rows": int(len(frame)), "users": n_expected, "missing": missing, "duplicates": dup,
                             "unknown": extra}))
    spend = float(pd.to_numeric(frame["predicted_cost"], errors="coerce").sum())
    limit = b * n_expected + max(float(max_user_cost), 0.0)
    ok = math.isfinite(spend) and spend <= limit * (1 + 1e-9)
    out.append(CheckOutcome("spend_within_budget", ok,
                            f"predicted spend {spend:.6g} ({spend / max(n_expected, 1):.4g} per capita) "
                            f"{'<=' if ok else '>'} budget {b * n_expected:.6g} (+ one user's dearest level "
                            f"{max_user_cost:.4g})", {"spend": spend, "budget": b * n_expected, "limit": limit}))
    k = len(labels)
    level = pd.to_numeric(frame["level"], errors="coerce")
    in_range = level.notna() & (level % 1 == 0) & (level >= 0) & (level < k)
    lv = level.where(in_range, 0).astype(int).to_numpy()
    labels_ok = frame["label"].astype(str).to_numpy() == np.asarray([str(x) for x in labels], dtype=object)[lv]
    inc_ok = np.isclose(pd.to_numeric(frame["incentive"], errors="coerce").to_numpy(dtype=float),
                        np.asarray(incentives, dtype=float)[lv])
    bad = int((~(in_range.to_numpy() & labels_ok & inc_ok)).sum())
    out.append(CheckOutcome("valid_levels", bad == 0,
                            "every level is one of the campaign's" if bad == 0 else
                            f"{bad} row(s) with a level outside 0..{k - 1} or a label / incentive not the level's",
                            {"bad_rows": bad, "levels": k}))
    numeric = frame[["level", "incentive", "predicted_response", "predicted_cost", "propensity"]].apply(
        pd.to_numeric, errors="coerce")
    nan = int(numeric.isna().to_numpy().sum() + frame[["user_id", "label", "policy"]].isna().to_numpy().sum())
    nan += int((~np.isfinite(numeric.to_numpy(dtype=float, na_value=np.nan))).sum() - numeric.isna().to_numpy().sum())
    p = numeric["propensity"]
    bad_p = int(((p <= 0) | (p > 1)).sum())
    out.append(CheckOutcome("no_missing_values", nan == 0 and bad_p == 0,
                            "no missing or non-finite value; propensities in (0, 1]" if nan == 0 and bad_p == 0 else
                            f"{nan} missing or non-finite value(s), {bad_p} propensity(ies) outside (0, 1]",
                            {"missing": nan, "bad_propensities": bad_p}))
    realized = float((frame["policy"] == "explore").mean()) if len(frame) else 0.0
    rounding = 0.5 / max(len(frame), 1)  # round(share x N) users explore: half a user off at most
    ok = abs(realized - float(share)) <= float(tolerance) + rounding + 1e-12
    out.append(CheckOutcome("exploration_share", ok,
                            f"exploration share {realized:.4f} (configured {share:g} +/- {tolerance:g}, + half a user "
                            f"of {len(frame)} for the rounding)",
                            {"realized": realized, "configured": float(share), "tolerance": float(tolerance)}))
    return out


def champion_freshness(decided_at, newest) -> CheckOutcome:
    """champion_fresh: the champion was chosen after the newest evaluation of every model
    (`newest`: (model, evaluated_at) pairs)."""
    when = pd.Timestamp(decided_at)
    stale = [(m, pd.Timestamp(t)) for m, t in newest if t is not None and pd.Timestamp(t) > when]
    if not stale:
        return CheckOutcome("champion_fresh", True, f"champion chosen at {when:%Y-%m-%d %H:%M:%S}, after every evaluation")
    names = ", ".join(f"{m} ({t:%Y-%m-%d %H:%M:%S})" for m, t in stale)
    return CheckOutcome("champion_fresh", False, f"evaluations newer than the champion: {names}; re-materialize champion",
                        {"stale": [m for m, _ in stale]})
