"""Plots of the policy evaluation, as PNG bytes (matplotlib, Agg backend; no display needed).

- `plot_frontier`: cost-response frontier of each model, the oracle and the cost-matched random
  reference (the mix of levels of `policy_evaluation`'s `random` row, `random_reference_curve`):
  EOM estimates on the holdout RCT users (left) and, when known, the truth (right); the budgets
  are marked (dashed lines, labelled), and the evaluated rows' points at each budget (EOM with
  their 95% intervals on the left, true on the right) are drawn.
- `plot_response_by_level`: each model's average predicted response per level against the truth
  (or, without truth, against the IPW mean observed response per level of the RCT).
"""

from __future__ import annotations

import io
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.evaluation.eom import EvaluationError, _checked
from promo_assets.evaluation.records import LoggedEvents

__all__ = ["plot_frontier", "plot_response_by_level", "PNG_SIGNATURE"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_REFERENCE_STYLE = {"oracle": dict(color="black", lw=2.0), "random": dict(color="0.55", lw=1.5, ls=":")}
_LABEL = {"random": "random (cost-matched mix)"}


def _figure(ncols: int, width: float = 6.0, height: float = 4.5):
    # A bare Figure (no pyplot) renders PNG through the Agg canvas and touches no global backend.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), dpi=100)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    # fixed margins that fit the titles, tick and axis labels and the rotated budget labels: one draw
    # in savefig, where bbox_inches="tight" (or a layout engine) drew the figure twice (0.15-0.2 s a plot)
    fig.subplots_adjust(left=0.7 / (width * ncols), right=1 - 0.25 / (width * ncols), bottom=0.12, top=0.86,
                        wspace=0.25)
    return fig, axes


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def plot_frontier(curves: pd.DataFrame, evaluation: pd.DataFrame | None = None, *, title: str = "",
                  budgets=None) -> bytes:
    """Cost-response frontier plot; returns PNG bytes.

    Takes `curves` (from `policy_curves`: columns model, eom_cost, eom_value, true_cost,
    true_value; its 'random' curve is the cost-matched random reference), optionally `evaluation`
    (rows of `evaluate_policies`: the points at the configured budgets, EOM with their 95%
    intervals, the `random` row's at EOM cost = budget) and the per-capita budgets to mark
    (default: the evaluation's `budget_per_capita` values); each budget is a dashed vertical line
    labelled "budget b".
    """
    need = {"model", "eom_cost", "eom_value", "true_cost", "true_value"}
    if not need <= set(curves.columns):
        raise EvaluationError(f"curves must have columns {sorted(need)}")
    has_truth = bool(curves["true_value"].notna().any())
    fig, axes = _figure(2 if has_truth else 1)
    models = [m for m in dict.fromkeys(curves["model"]) if m not in _REFERENCE_STYLE]
    colors = {m: f"C{i % 10}" for i, m in enumerate(models)}
    panels = [(axes[0], "eom", "EOM on holdout RCT users")]
    if has_truth:
        panels.append((axes[1], "true", "true (simulation ground truth)"))
    for ax, kind, label in panels:
        for m in [*models, *[r for r in _REFERENCE_STYLE if r in set(curves["model"])]]:
            d = curves[curves["model"] == m].dropna(subset=[f"{kind}_cost", f"{kind}_value"])
            if d.empty:
                continue
            d = d.sort_values(f"{kind}_cost")
            style = _REFERENCE_STYLE.get(m, dict(color=colors.get(m), lw=1.5))
            ax.plot(d[f"{kind}_cost"], d[f"{kind}_value"], marker="." if m not in _REFERENCE_STYLE else None,
                    ms=4, label=_LABEL.get(m, m), **style)
        ax.set_title(label)
        ax.set_xlabel("per-capita cost")
        ax.set_ylabel("per-capita response")
        ax.grid(True, alpha=0.3)
    if evaluation is not None and len(evaluation):
        ev = evaluation.dropna(subset=["eom_cost", "eom_value"])
        for m, d in ev.groupby("model", sort=False):
            color = _REFERENCE_STYLE.get(m, {}).get("color", colors.get(m, "C9"))
            lo = (d["eom_value"] - d["eom_ci_low"]).clip(lower=0).fillna(0)
            hi = (d["eom_ci_high"] - d["eom_value"]).clip(lower=0).fillna(0)
            axes[0].errorbar(d["eom_cost"], d["eom_value"], yerr=[lo, hi], fmt="o", color=color,
                             ms=5, capsize=3, mfc="white")
            if has_truth and d["true_value"].notna().any():
                axes[1].plot(d["true_cost"], d["true_value"], "o", color=color, ms=5, mfc="white")
    if budgets is None and evaluation is not None and "budget_per_capita" in evaluation.columns:
        budgets = evaluation["budget_per_capita"].dropna().unique()
    for b in sorted(float(x) for x in (budgets if budgets is not None else [])):
        for ax in axes:
            ax.axvline(b, color="0.7", lw=0.8, ls="--", zorder=0)
            ax.annotate(f"budget {b:g}", (b, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                        fontsize=7, color="0.4", ha="right", va="top")
    axes[0].legend(fontsize=8, loc="lower right")
    if title:
        fig.suptitle(title)
    return _png(fig)


def plot_response_by_level(models: Mapping[str, np.ndarray], *, true_values=None, logged=None, response=None,
                           propensity=None, incentives: Sequence[float] | None = None,
                           labels: Sequence[str] | None = None, title: str = "") -> bytes:
    """Average predicted response per level of each model against the truth; returns PNG bytes.

    Takes models: name -> predicted values N x K (the same holdout users); true_values (N x K,
    simulated campaigns) and/or the logged arrays (N levels, responses, propensities), whose IPW
    mean observed response per level is drawn as the RCT reference; incentives (x positions) or
    labels (category names for unordered arms).
    """
    if not models and true_values is None and logged is None:
        raise EvaluationError("plot_response_by_level needs at least one model, the truth or logged data")
    means = {name: np.asarray(v, dtype=np.float64).mean(axis=0) for name, v in models.items()}
    k = next(iter(means.values())).shape[0] if means else (
        np.shape(true_values)[1] if true_values is not None else int(np.max(logged)) + 1)
    for name, m in means.items():
        if m.shape != (k,):
            raise EvaluationError(f"model {name} has {m.shape[0]} levels, expected {k}")
    x = np.arange(k, dtype=float) if incentives is None else np.asarray(incentives, dtype=float)
    if x.shape != (k,):
        raise EvaluationError(f"incentives must have {k} entries")
    fig, axes = _figure(1)
    ax = axes[0]
    for i, (name, m) in enumerate(means.items()):
        ax.plot(x, m, marker="o", color=f"C{i % 10}", label=name)
    if true_values is not None:
        tv = np.asarray(true_values, dtype=np.float64)
        ax.plot(x, tv.mean(axis=0), marker="s", color="black", lw=2, label="truth")
    if logged is not None and response is not None:
        ev, ipw = _checked(LoggedEvents(logged, response, np.zeros(np.shape(logged)), propensity))
        t, y = ev.logged, ev.response
        den = np.bincount(t, weights=ipw, minlength=k)[:k]
        with np.errstate(invalid="ignore", divide="ignore"):
            obs = np.bincount(t, weights=ipw * y, minlength=k)[:k] / den
        ax.plot(x, obs, marker="x", ls="--", color="0.4", label="observed (RCT, IPW)")
    if labels is not None:
        ax.set_xticks(x)
        ax.set_xticklabels([str(lb) for lb in labels], rotation=30 if k > 6 else 0)
        fig.subplots_adjust(bottom=0.22 if k > 6 else 0.15)  # room for the (rotated) arm names
    ax.set_xlabel("incentive" if incentives is not None else "level")
    ax.set_ylabel("average response")
    ax.set_title(title or "average response per level")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)
