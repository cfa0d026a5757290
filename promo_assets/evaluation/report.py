"""`policy_evaluation` rows and the leaderboard.

`evaluate_policies` scores every model's allocation at every budget on the holdout RCT users:
EOM value and cost with a bootstrap interval, Q(v, c) at the same budget (end-to-end paper
Algorithm 1), the true value and cost and the oracle's value when the truth is known, AUCC for
two-arm campaigns and the response-curve metrics; it always adds the `random` reference policy.
`leaderboard_markdown` / `format_leaderboard` render the result for the Dagster UI / a terminal.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.evaluation.curve_metrics import CURVE_METRIC_NAMES, curve_metrics
from promo_assets.evaluation.curves import logged_level_costs
from promo_assets.evaluation.eom import (
    EvaluationError,
    _as_matrix,
    _logged_arrays,
    aucc,
    bootstrap_eom,
    eom_batch,
    q_at_budget,
    roi_score,
)
from promo_assets.evaluation.truth import allocate, random_policy, true_policy_value

__all__ = [
    "POLICY_EVALUATION_COLUMNS",
    "RANDOM_MODEL",
    "evaluate_policies",
    "leaderboard",
    "leaderboard_markdown",
    "format_leaderboard",
]

RANDOM_MODEL = "random"

POLICY_EVALUATION_COLUMNS = [
    "campaign", "model", "model_version", "budget_per_capita",
    "eom_value", "eom_cost", "eom_ci_low", "eom_ci_high", "q_value",
    "true_value", "true_cost", "oracle_value", "oracle_cost", "aucc",
    *CURVE_METRIC_NAMES,  # logloss, auc, rmse, rpr, epr, mlss
    "n_users", "n_matched", "too_small", "evaluated_at",
]
TOO_SMALL = "too small to evaluate"


def evaluate_policies(
    models: Mapping[str, tuple[str, np.ndarray, np.ndarray]],
    logged,
    response,
    cost,
    propensity=None,
    *,
    budgets: Sequence[float],
    campaign: str,
    true_values=None,
    true_costs=None,
    incentives: Sequence[float] | None = None,
    ordered: bool = True,
    binary: bool | None = None,
    n_boot: int = 200,
    seed: int = 0,
    with_q: bool = True,
    evaluated_at: dt.datetime | None = None,
    log: Callable[[str], None] | None = None,
    min_holdout_users: int | None = None,
) -> pd.DataFrame:
    """Rows of the warehouse table `policy_evaluation` for one campaign.

    Takes:
      models: model name -> (model_version, values N x K, costs N x K), predictions for the N holdout
        users (rows aligned with the logged arrays). The name 'random' is reserved.
      logged, response, cost, propensity: the holdout RCT records (see `eom`).
      budgets: per-capita budgets; campaign: the campaign id.
      true_values, true_costs: N x K truth for simulated campaigns (optional, both or neither).
      incentives, ordered, binary: passed to `curve_metrics` (RPR/EPR/MLSS need ordered levels).
      n_boot, seed: bootstrap replicates and seed (also seeds the random policy);
      with_q: also compute Q(v, c) at each budget (Algorithm 1); evaluated_at: timestamp (default
      now, UTC, naive); log: progress callback, one line per model;
      min_holdout_users: a holdout with fewer users is "too small to evaluate": every row is still
      computed but carries too_small = True, and the leaderboard says so instead of a % of the oracle.
    For every model and budget the allocator (`solve`) allocates the holdout users on the model's
    coefficients; EOM gives eom_value / eom_cost (self-normalized IPW), `bootstrap_eom` the 95%
    interval of eom_value; true_value / true_cost come from the truth, oracle_value / oracle_cost
    from the allocator run on the truth at the same budget; aucc (two-level campaigns only) ranks
    by `roi_score`; the curve metrics are computed on the observed level's prediction.
    The `random` row per budget uses `random_policy` scaled with the logged per-level mean costs.
    A budget below a model's (or the truth's) cheapest allocation leaves that row's policy figures
    NaN (logged), instead of failing the whole evaluation.
    Returns a DataFrame with POLICY_EVALUATION_COLUMNS (NaN where a figure does not apply).
    """
    t, y, z, _ = _logged_arrays(logged, response, cost, propensity)
    n = t.shape[0]
    if RANDOM_MODEL in models:
        raise EvaluationError(f"model name {RANDOM_MODEL!r} is reserved for the random reference policy")
    budgets = [float(b) for b in budgets]
    if not budgets:
        raise EvaluationError("evaluate_policies needs at least one budget_per_capita")
    if any(not math.isfinite(b) or b < 0 for b in budgets):
        raise EvaluationError(f"budgets must be finite and >= 0, got {budgets}")
    if (true_values is None) != (true_costs is None):
        raise EvaluationError("give both true_values and true_costs, or neither")
    k = None
    checked: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
    for name, spec in models.items():
        if len(spec) != 3:
            raise EvaluationError(f"models[{name!r}] must be (model_version, values, costs)")
        version, vals, csts = spec
        v = _as_matrix(vals, f"values of {name}", n)
        c = _as_matrix(csts, f"costs of {name}", n, v.shape[1])
        if k is not None and v.shape[1] != k:
            raise EvaluationError(f"model {name} has {v.shape[1]} levels, the others {k}")
        k = v.shape[1]
        checked[name] = (str(version), v, c)
    if true_values is not None:
        tv = _as_matrix(true_values, "true_values", n)
        tc = _as_matrix(true_costs, "true_costs", n, tv.shape[1])
        if k is not None and tv.shape[1] != k:
            raise EvaluationError(f"the truth has {tv.shape[1]} levels, the models {k}")
        k = tv.shape[1]
    if k is None:
        k = int(t.max()) + 1
    if t.max() >= k:
        raise EvaluationError(f"logged has level {t.max()} but there are only {k} levels")
    if evaluated_at is None:
        evaluated_at = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    too_small = min_holdout_users is not None and n < min_holdout_users
    if too_small and log:
        log(f"the holdout has {n} users, fewer than min_holdout_users = {min_holdout_users}: {TOO_SMALL}")

    from promo_assets.allocation.errors import InfeasibleBudgetError

    def allocation_or_none(who: str, v: np.ndarray, c: np.ndarray, b: float) -> np.ndarray | None:
        try:
            return np.asarray(allocate(v, c, b, seed=seed).levels, dtype=np.int64)
        except InfeasibleBudgetError as exc:
            if log:
                log(f"{who}: budget {b:g} per capita cannot be met ({exc}); its row stays empty")
            return None

    oracle: dict[float, tuple[float, float]] = {}
    if true_values is not None:
        for b in budgets:
            lv = allocation_or_none("oracle", tv, tc, b)
            if lv is not None:
                oracle[b] = true_policy_value(lv, tv, tc)

    def base_row(model: str, version: str, b: float) -> dict:
        row = {col: np.nan for col in POLICY_EVALUATION_COLUMNS}
        row.update(campaign=campaign, model=model, model_version=version, budget_per_capita=b,
                   n_users=n, too_small=too_small, evaluated_at=evaluated_at)
        if b in oracle:
            row["oracle_value"], row["oracle_cost"] = oracle[b]
        return row

    def add_policy(row: dict, assigned: np.ndarray) -> None:
        ev, ec, nm = eom_batch(assigned, t, y, z, propensity)
        row["eom_value"], row["eom_cost"], row["n_matched"] = float(ev[0]), float(ec[0]), int(nm[0])
        row["eom_ci_low"], row["eom_ci_high"] = bootstrap_eom(assigned, t, y, z, propensity,
                                                              n_boot=n_boot, seed=seed)
        if true_values is not None:
            row["true_value"], row["true_cost"] = true_policy_value(assigned, tv, tc)

    rows = []
    for name, (version, v, c) in checked.items():
        metrics = curve_metrics(v, t, y, incentives=incentives, ordered=ordered, binary=binary)
        model_aucc = np.nan
        if k == 2:
            try:
                model_aucc = aucc(roi_score(v, c), t, y, z, propensity)
            except EvaluationError as exc:  # e.g. no positive overall uplift on this holdout
                if log:
                    log(f"{name}: AUCC not computed: {exc}")
        for b in budgets:
            row = base_row(name, version, b)
            row.update(metrics)
            row["aucc"] = model_aucc
            assigned = allocation_or_none(name, v, c, b)
            if assigned is None:
                rows.append(row)
                continue
            add_policy(row, assigned)
            if with_q:
                row["q_value"] = q_at_budget(v, c, t, y, z, propensity, b).value
            rows.append(row)
        if log:
            log(f"evaluated {name} ({version}) at {len(budgets)} budget(s)")
    level_costs = logged_level_costs(t, z, propensity, k)
    for b in budgets:
        row = base_row(RANDOM_MODEL, f"uniform-seed{seed}", b)
        if b < level_costs.min() - 1e-12:
            if log:
                log(f"random: budget {b:g} per capita is below the cheapest level's logged mean cost "
                    f"{level_costs.min():.4g}; its row stays empty")
        else:
            add_policy(row, random_policy(n, k, level_costs, b, seed=seed))
        rows.append(row)
    if log:
        log(f"evaluated the random policy at {len(budgets)} budget(s)")
    frame = pd.DataFrame(rows, columns=POLICY_EVALUATION_COLUMNS)
    frame["n_matched"] = frame["n_matched"].astype("Int64")
    frame["n_users"] = frame["n_users"].astype("int64")
    frame["too_small"] = frame["too_small"].astype(bool)
    return frame


# ------------------------------------------------------------------------------------ leaderboard
_BOARD = [
    # (column in the board, source column or callable, format)
    ("campaign", "campaign", "{}"),
    ("budget", "budget_per_capita", "{:.4g}"),
    ("model", "model", "{}"),
    ("version", "model_version", "{}"),
    ("EOM value", "eom_value", "{:.4f}"),
    ("95% CI", None, None),
    ("EOM cost", "eom_cost", "{:.4g}"),
    ("Q(v,c)", "q_value", "{:.4f}"),
    ("true value", "true_value", "{:.4f}"),
    ("true cost", "true_cost", "{:.4g}"),
    ("oracle", "oracle_value", "{:.4f}"),
    ("% oracle", None, None),
    ("note", None, None),
    ("AUCC", "aucc", "{:.4f}"),
    ("LogLoss", "logloss", "{:.4f}"),
    ("AUC", "auc", "{:.4f}"),
    ("RPR", "rpr", "{:.3f}"),
    ("EPR", "epr", "{:.3f}"),
    ("MLSS", "mlss", "{:.4f}"),
]


def _metrics_dict(m) -> dict:
    if isinstance(m, dict):
        return m
    if isinstance(m, str) and m.strip():
        try:
            out = json.loads(m)
        except ValueError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def leaderboard(df: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard as a DataFrame of formatted strings.

    Takes `policy_evaluation` rows (possibly with history); keeps the latest `evaluated_at` per
    (campaign, model, budget); reads the curve metrics from a JSON `metrics` column when the
    frame has one instead of separate columns; sorts by campaign, budget and true value (EOM value when the truth
    is unknown), best first; a row evaluated on a holdout that was too small (`too_small`) gets no
    "% oracle" but the note "too small to evaluate (N holdout users)"; drops columns that are empty
    for every row. Returns one row per (campaign, model, budget).
    """
    missing = {"campaign", "model", "model_version", "budget_per_capita", "eom_value"} - set(df.columns)
    if missing:
        raise EvaluationError(f"not policy_evaluation rows: missing columns {sorted(missing)}")
    d = df.copy()
    if "metrics" in d.columns:  # a warehouse layout with the curve metrics as one JSON column
        parsed = [_metrics_dict(m) for m in d["metrics"]]
        for name in CURVE_METRIC_NAMES:
            if name not in d.columns:
                d[name] = [p.get(name, np.nan) for p in parsed]
    if "evaluated_at" in d.columns and len(d):
        d = d.sort_values("evaluated_at").groupby(["campaign", "model", "budget_per_capita"],
                                                  as_index=False, sort=False).tail(1)
    for col in POLICY_EVALUATION_COLUMNS:
        if col not in d.columns:
            d[col] = np.nan
    key = d["true_value"].where(d["true_value"].notna(), d["eom_value"])
    d = d.assign(_key=key).sort_values(["campaign", "budget_per_capita", "_key"],
                                       ascending=[True, True, False], na_position="last")
    small = [False if pd.isna(x) else bool(x) for x in d["too_small"]]

    def fmt(x, pattern):
        if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
            return ""
        return pattern.format(x)

    out = {}
    for title, src, pattern in _BOARD:
        if title == "95% CI":
            out[title] = [
                "" if pd.isna(lo) or pd.isna(hi) else f"[{lo:.4f}, {hi:.4f}]"
                for lo, hi in zip(d["eom_ci_low"], d["eom_ci_high"])
            ]
        elif title == "% oracle":
            out[title] = [
                "" if sm or pd.isna(tv) or pd.isna(ov) or ov == 0 else f"{100 * tv / ov:.1f}%"
                for tv, ov, sm in zip(d["true_value"], d["oracle_value"], small)
            ]
        elif title == "note":
            out[title] = [f"{TOO_SMALL} ({int(n)} holdout users)" if sm else "" for n, sm in zip(d["n_users"], small)]
        elif title == "version":
            out[title] = [str(x)[:16] for x in d[src]]
        else:
            out[title] = [fmt(x, pattern) for x in d[src]]
    board = pd.DataFrame(out)
    keep = [c for c in board.columns if c in ("campaign", "budget", "model", "version", "EOM value")
            or (board[c] != "").any()]
    return board[keep].reset_index(drop=True)


def _too_small_warning(board: pd.DataFrame) -> str:
    """One line under the board when some of its rows were evaluated on a too small holdout."""
    if "note" not in board.columns or not (board["note"] != "").any():
        return ""
    campaigns = sorted(set(board.loc[board["note"] != "", "campaign"]))
    return (f"holdout {TOO_SMALL} for campaign(s) {', '.join(map(repr, campaigns))}: fewer users than "
            "campaign.yaml's min_holdout_users; the figures of those rows are not reliable\n")


def leaderboard_markdown(df: pd.DataFrame) -> str:
    """The leaderboard as a GitHub-flavoured markdown table (for Dagster's MetadataValue.md)."""
    board = leaderboard(df)
    head = "| " + " | ".join(board.columns) + " |"
    sep = "| " + " | ".join("---" if c in ("campaign", "model", "version", "note") else "---:" for c in board.columns) + " |"
    body = ["| " + " | ".join(str(v).replace("|", "\\|") for v in r) + " |" for r in board.itertuples(index=False)]
    warning = _too_small_warning(board)
    return "\n".join([head, sep, *body]) + "\n" + (f"\n**{warning.strip()}**\n" if warning else "")


def format_leaderboard(df: pd.DataFrame) -> str:
    """The leaderboard as aligned plain text for a terminal (`promo report`)."""
    board = leaderboard(df)
    if board.empty:
        return "(no policy evaluations)\n"
    cols = list(board.columns)
    widths = [max(len(c), *(len(str(v)) for v in board[c])) for c in cols]
    left = {"campaign", "model", "version", "note"}

    def line(values):
        return "  ".join(str(v).ljust(w) if c in left else str(v).rjust(w)
                         for c, v, w in zip(cols, values, widths)).rstrip()

    out = [line(cols), line(["-" * w for w in widths])]
    out += [line(r) for r in board.itertuples(index=False)]
    return "\n".join(out) + "\n" + _too_small_warning(board)
