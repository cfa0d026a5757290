"""Offline metrics of the GNN/hazard paper (Tables 2–3, Figs. 4–5) and truth-based checks.

* AUC_c, MAE_c, MSE_c: the customer score at the assigned coupon vs the observed 0/1 redemption.
* MAE_m, MSE_m: the merchant's normalized predicted sharing count vs the normalized observed count
  (both divided by the shares received in the previous days, the paper's normalization).
* With simulated truth: the same errors against the *expected* response of every user x level.
* Fig. 4: customers sorted by predicted incentive sensitivity into quintiles; per quintile the RCT
  uplift (mean redemption at the high levels minus at the low levels) and the true uplift.
"""

from __future__ import annotations

import io
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from promo_assets.core.errors import DomainError


class GraphMetricsError(DomainError, ValueError):
    """Inputs of a metric that do not line up."""


def customer_metrics(scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """AUC_c, MAE_c, MSE_c of response scores against 0/1 labels (AUC is NaN with one class)."""
    scores, labels = np.asarray(scores, float), np.asarray(labels, float)
    if scores.shape != labels.shape:
        raise GraphMetricsError(f"scores {scores.shape} and labels {labels.shape} differ in shape")
    auc = float(roc_auc_score(labels, scores)) if np.unique(labels).size == 2 else float("nan")
    err = scores - labels
    return {"auc_c": auc, "mae_c": float(np.abs(err).mean()), "mse_c": float((err**2).mean())}


def merchant_metrics(predicted: np.ndarray, observed: np.ndarray) -> dict[str, float]:
    """MAE_m and MSE_m of (normalized) predicted vs observed sharing counts."""
    predicted, observed = np.asarray(predicted, float), np.asarray(observed, float)
    if predicted.shape != observed.shape:
        raise GraphMetricsError(f"predicted {predicted.shape} and observed {observed.shape} differ in shape")
    err = predicted - observed
    return {"mae_m": float(np.abs(err).mean()), "mse_m": float((err**2).mean())}


def truth_matrix(truth: pd.DataFrame, id_col: str, ids: Sequence[str], n_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """(expected_response, expected_cost) as N x K arrays in the order of `ids` from a truth file."""
    missing = {id_col, "level", "expected_response", "expected_cost"} - set(truth.columns)
    if missing:
        raise GraphMetricsError(f"truth frame lacks columns {sorted(missing)}")
    row = pd.Index(np.asarray(ids, dtype=object)).get_indexer(truth[id_col].astype(str))
    level = truth["level"].to_numpy(dtype=np.int64)
    keep = row >= 0
    resp = np.full((len(ids), n_levels), np.nan)
    cost = np.full((len(ids), n_levels), np.nan)
    resp[row[keep], level[keep]] = truth["expected_response"].to_numpy(dtype=float)[keep]
    cost[row[keep], level[keep]] = truth["expected_cost"].to_numpy(dtype=float)[keep]
    if np.isnan(resp).any():
        raise GraphMetricsError(f"truth frame does not cover every id x level ({int(np.isnan(resp).sum())} missing)")
    return resp, cost


def truth_metrics(
    customer_values: np.ndarray,
    merchant_values: np.ndarray,
    customer_truth: np.ndarray,
    merchant_truth: np.ndarray,
    merchant_normalizer: np.ndarray | None = None,
    customers: np.ndarray | None = None,
    merchants: np.ndarray | None = None,
) -> dict[str, float]:
    """Errors of the predicted curves against the simulated expected response, all levels.

    `customers` / `merchants` select rows (e.g. the holdout nodes); merchant errors are on the
    normalized scale when `merchant_normalizer` is given.
    """
    cs = slice(None) if customers is None else customers
    ms = slice(None) if merchants is None else merchants
    ec = customer_values[cs] - customer_truth[cs]
    norm = 1.0 if merchant_normalizer is None else merchant_normalizer[ms][:, None]
    em = (merchant_values[ms] - merchant_truth[ms]) / norm
    return {
        "mae_c_truth": float(np.abs(ec).mean()),
        "mse_c_truth": float((ec**2).mean()),
        "mae_m_truth": float(np.abs(em).mean()),
        "mse_m_truth": float((em**2).mean()),
    }


def sensitivity_quintile_uplift(
    sensitivity: np.ndarray,
    level: np.ndarray,
    response: np.ndarray,
    high_levels: Sequence[int],
    low_levels: Sequence[int],
    true_uplift: np.ndarray | None = None,
    n_groups: int = 5,
) -> pd.DataFrame:
    """Fig. 4: uplift gain per predicted-sensitivity group (group 1 = most sensitive).

    Takes, per RCT customer, the model's predicted sensitivity, the assigned level and the observed
    response, and (optionally) the customer's true uplift. Customers are sorted by sensitivity
    (descending) and cut into `n_groups` equal groups. Returns one row per group with `n`,
    `observed_uplift` = mean response of the group's customers treated at a `high_levels` level
    minus that at a `low_levels` level (an unbiased RCT estimate), and `true_uplift` (mean).
    """
    sensitivity, level, response = (np.asarray(a) for a in (sensitivity, level, response))
    if not (sensitivity.shape == level.shape == response.shape):
        raise GraphMetricsError("sensitivity, level and response must have the same length")
    if len(sensitivity) < n_groups:
        raise GraphMetricsError(f"need at least {n_groups} customers, got {len(sensitivity)}")
    order = np.argsort(-sensitivity, kind="stable")
    groups = np.empty(len(order), dtype=int)
    groups[order] = np.arange(len(order)) * n_groups // len(order)
    hi, lo = np.isin(level, list(high_levels)), np.isin(level, list(low_levels))
    rows = []
    for g in range(n_groups):
        sel = groups == g
        row = {
            "group": g + 1,
            "n": int(sel.sum()),
            "mean_sensitivity": float(sensitivity[sel].mean()),
            "observed_uplift": float(response[sel & hi].mean() - response[sel & lo].mean())
            if (sel & hi).any() and (sel & lo).any()
            else float("nan"),
        }
        if true_uplift is not None:
            row["true_uplift"] = float(np.asarray(true_uplift)[sel].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def plot_uplift_quintiles(tables: Mapping[str, pd.DataFrame], column: str = "true_uplift") -> bytes:
    """Grouped bar chart (PNG bytes) of `column` per sensitivity group, one bar series per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not tables:
        raise GraphMetricsError("no uplift tables to plot")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / len(tables)
    for i, (name, table) in enumerate(tables.items()):
        if column not in table.columns:
            raise GraphMetricsError(f"uplift table of {name!r} has no column {column!r}")
        ax.bar(table["group"] + (i - (len(tables) - 1) / 2) * width, table[column], width, label=name)
    ax.set_xlabel("incentive-sensitivity group (1 = most sensitive)")
    ax.set_ylabel(column.replace("_", " "))
    ax.set_title("Uplift gain by predicted sensitivity (Fig. 4)")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def level_curve(
    customer_values: np.ndarray, customer_truth: np.ndarray | None, incentives: Sequence[float]
) -> pd.DataFrame:
    """Fig. 5: average predicted (and true) response per incentive level, with per-level increments."""
    out = pd.DataFrame({"level": np.arange(len(incentives)), "incentive": np.asarray(incentives, float),
                        "predicted": customer_values.mean(axis=0)})
    out["predicted_step"] = out["predicted"].diff()
    if customer_truth is not None:
        out["true"] = customer_truth.mean(axis=0)
        out["true_step"] = out["true"].diff()
    return out


def holdout_uplift_quintiles(
    customer_ids: Sequence[str],
    sensitivity: np.ndarray,
    frame: pd.DataFrame,
    customer_truth: np.ndarray | None,
    n_levels: int,
) -> tuple[bytes | None, list[dict] | str]:
    """Fig. 4 on the holdout RCT customers of a training frame (the validation rows when there is no
    holdout): uplift of the two highest over the two lowest levels (one each when K < 4) per quintile
    of the model's predicted sensitivity (`sensitivity`, per customer in `customer_ids` order),
    observed and, with `customer_truth` (N x K over the same customers), true.

    Returns (PNG bytes, table rows) or (None, a note saying why there is no figure)."""
    holdout = frame["split"] == "holdout"
    ev = frame[holdout] if holdout.any() else frame[frame["split"] == "validation"]
    node = pd.Index(customer_ids).get_indexer(ev["user_id"].astype(str))
    k = int(n_levels)
    high, low = ([k - 2, k - 1], [0, 1]) if k >= 4 else ([k - 1], [0])
    true_uplift = None if customer_truth is None else customer_truth[:, high].mean(1) - customer_truth[:, low].mean(1)
    try:
        table = sensitivity_quintile_uplift(
            sensitivity[node], ev["level"].to_numpy(), ev["response"].to_numpy(), high, low,
            true_uplift=None if true_uplift is None else true_uplift[node],
        )
    except ValueError as exc:
        return None, f"no Fig. 4: {exc}"
    series = {"observed (RCT holdout)": table.assign(uplift=table["observed_uplift"])}
    if true_uplift is not None:
        series["true"] = table.assign(uplift=table["true_uplift"])
    return plot_uplift_quintiles(series, column="uplift"), table.to_dict("records")
