"""Inverse-propensity weights (IPS, DIPN paper §2.2) and their diagnostics.

w_i = min(1 / p_i, clip), then (self-normalized) w_i / mean(w), so the weights average 1 and the
weighted loss keeps the scale of the unweighted one. Diagnostics: overlap of P(level | x) per level,
the largest weight and Kish's effective sample size ESS = (sum w)^2 / sum w^2.
"""

from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

from promo_assets.causal.propensity import PropensityError

LOW_PROPENSITY = 0.01


def ips_weights(propensity_of_logged_level: np.ndarray, clip: float | None = 20.0, self_normalize: bool = True) -> np.ndarray:
    """Clipped, self-normalized inverse propensity weights.

    propensity_of_logged_level: P(logged level | x_i) per event, in (0, 1]; clip: cap on 1/p
    (None: no cap; must be >= 1); self_normalize: divide by the mean so the weights average 1.
    Returns float64 weights (length N). Raises PropensityError for non-finite or out-of-range input.
    """
    p = np.asarray(propensity_of_logged_level, dtype=np.float64)
    if p.ndim != 1:
        raise PropensityError(f"ips_weights: expected a 1-D array of propensities, got shape {p.shape}")
    bad = ~np.isfinite(p) | (p <= 0) | (p > 1)
    if bad.any():
        raise PropensityError(
            f"ips_weights: {int(bad.sum())} propensities are not in (0, 1] (e.g. {p[bad][:3].tolist()})"
        )
    if clip is not None and not clip >= 1.0:
        raise PropensityError(f"ips_weights: clip caps 1/p and must be >= 1, got {clip}")
    w = 1.0 / p
    if clip is not None:
        w = np.minimum(w, float(clip))
    if self_normalize and w.size:
        w = w / w.mean()
    return w


def effective_sample_size(weights: np.ndarray) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2."""
    w = np.asarray(weights, dtype=np.float64)
    s2 = float(np.square(w).sum())
    return float(w.sum() ** 2 / s2) if s2 > 0 else 0.0


def propensity_diagnostics(
    proba: np.ndarray,
    logged_levels: np.ndarray,
    weights: np.ndarray | None = None,
    labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Overlap and weight diagnostics (JSON-serializable dict).

    proba: N x K propensities P(level | x_i); logged_levels: the level logged for each row;
    weights: the IPS weights used (None: all 1). Returns n, n_levels, per-level overlap
    (`overlap`: list of {level, label, logged, mean, min, p01, p05, median, max, share_below_0.01}),
    min_propensity, share_below_0.01 (rows whose smallest P is below 0.01), propensity of the
    logged level (min / median), max_weight, weight quantiles, ess, ess_fraction (ESS / N).
    """
    proba = np.asarray(proba, dtype=np.float64)
    levels = np.asarray(logged_levels, dtype=np.int64)
    if proba.ndim != 2 or proba.shape[0] != levels.shape[0]:
        raise PropensityError(f"propensity_diagnostics: proba {proba.shape} and logged_levels {levels.shape} do not match")
    n, k = proba.shape
    if n and (levels.min() < 0 or levels.max() >= k):
        raise PropensityError(f"propensity_diagnostics: logged levels must be in 0..{k - 1}")
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (n,):
        raise PropensityError(f"propensity_diagnostics: weights shape {w.shape} != ({n},)")
    counts = np.bincount(levels, minlength=k) if n else np.zeros(k, dtype=np.int64)
    overlap = []
    for j in range(k):
        col = proba[:, j]
        q = np.quantile(col, [0.01, 0.05, 0.5]) if n else [np.nan] * 3
        overlap.append({
            "level": j,
            "label": None if labels is None else str(labels[j]),
            "logged": int(counts[j]),
            "mean": float(col.mean()) if n else float("nan"),
            "min": float(col.min()) if n else float("nan"),
            "p01": float(q[0]),
            "p05": float(q[1]),
            "median": float(q[2]),
            "max": float(col.max()) if n else float("nan"),
            "share_below_0.01": float((col < LOW_PROPENSITY).mean()) if n else 0.0,
        })
    logged_p = proba[np.arange(n), levels] if n else np.zeros(0)
    ess = effective_sample_size(w)
    wq = np.quantile(w, [0.5, 0.9, 0.99]) if n else [np.nan] * 3
    return {
        "n": int(n),
        "n_levels": int(k),
        "overlap": overlap,
        "min_propensity": float(proba.min()) if n else float("nan"),
        "share_below_0.01": float((proba.min(axis=1) < LOW_PROPENSITY).mean()) if n else 0.0,
        "logged_propensity_min": float(logged_p.min()) if n else float("nan"),
        "logged_propensity_median": float(np.median(logged_p)) if n else float("nan"),
        "max_weight": float(w.max()) if n else float("nan"),
        "weight_p50": float(wq[0]),
        "weight_p90": float(wq[1]),
        "weight_p99": float(wq[2]),
        "ess": ess,
        "ess_fraction": ess / n if n else float("nan"),
    }


def propensity_plot(
    proba: np.ndarray,
    logged_levels: np.ndarray | None = None,
    labels: Sequence[str] | None = None,
    title: str = "Propensity overlap",
    bins: int = 40,
) -> bytes:
    """PNG bytes: one histogram per level of P(level | x) over all rows (and, when logged_levels is
    given, over the rows that logged that level), with 1/K and 0.01 marked."""
    # A bare Figure (no pyplot, no global backend switch) renders PNG with the Agg canvas.
    from matplotlib.figure import Figure

    proba = np.asarray(proba, dtype=np.float64)
    n, k = proba.shape
    cols = min(k, 4)
    rows = int(np.ceil(k / cols))
    fig = Figure(figsize=(3.2 * cols, 2.4 * rows), dpi=90)
    edges = np.linspace(0.0, 1.0, bins + 1)
    for j in range(k):
        ax = fig.add_subplot(rows, cols, j + 1)
        ax.hist(proba[:, j], bins=edges, color="#4C72B0", alpha=0.75, label="all rows")
        if logged_levels is not None:
            sel = np.asarray(logged_levels) == j
            ax.hist(proba[sel, j], bins=edges, histtype="step", color="#DD8452", label="logged this level")
        ax.axvline(1.0 / k, color="grey", linestyle="--", linewidth=0.8)
        ax.axvline(LOW_PROPENSITY, color="red", linestyle=":", linewidth=0.8)
        ax.set_title(f"level {j}" + ("" if labels is None else f" ({labels[j]})"), fontsize=9)
        ax.tick_params(labelsize=7)
        if j == 0:
            ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
