"""Segment evaluation (issue #17): how well a model's predicted response curves match the truth, and
how its decision compares with the oracle's, per value of each segment column (campaign.yaml
`segments: [period_of_day, city]`) and overall (segment 'all').

Curve metrics of the holdout users' predicted response p_ij against the true expected response t_ij
(simulated campaigns; the CoMAN paper's Tables 1-3 metrics, in our definitions):
- curve_mae / curve_mse: mean |p - t| and (p - t)^2 over users x levels;
- kl: binary responses: the mean Bernoulli KL divergence KL(Bern(t_ij) || Bern(p_ij)) over users x
  levels (predictions clipped to [1e-6, 1 - 1e-6]); other responses: KL of the segment's mean true
  curve over levels against the mean predicted one, each normalised to sum 1 (NaN when a curve has a
  non-positive entry);
- corr: Pearson correlation of p and t over users x levels (NaN when either is constant).
Decision per budget (the stored decision of the model and the allocator on the truth, i.e.
`truth.oracle_policy`, both over all holdout users): true_value / true_cost per user of the segment's
users under the model's decision, oracle_value / oracle_cost under the oracle's, pct_oracle =
100 true_value / oracle_value. These are *not* spend-matched (the leaderboard's pct_oracle is); read
them beside the costs.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.evaluation.eom import EvaluationError
from promo_assets.evaluation.plots import _figure, _png
from promo_assets.evaluation.records import Truth
from promo_assets.evaluation.truth import oracle_policy

SEGMENT_COLUMNS = ("model", "model_version", "segment_by", "segment_value", "budget_per_capita", "n_users", "curve_mae",
                   "curve_mse", "kl", "corr", "true_value", "true_cost", "oracle_value", "oracle_cost", "pct_oracle")


def truth_curve_metrics(pred, truth, binary: bool = True) -> dict[str, float]:
    """curve_mae, curve_mse, kl, corr of predicted curves `pred` against true curves `truth` (N x K each)."""
    p = np.asarray(pred, dtype=np.float64)
    t = np.asarray(truth, dtype=np.float64)
    if p.shape != t.shape or p.ndim != 2:
        raise EvaluationError(f"predicted and true curves must both be N x K, got {p.shape} and {t.shape}")
    if p.size == 0:
        return {"curve_mae": float("nan"), "curve_mse": float("nan"), "kl": float("nan"), "corr": float("nan")}
    d = p - t
    out = {"curve_mae": float(np.abs(d).mean()), "curve_mse": float((d * d).mean())}
    if binary:
        eps = 1e-6
        pc, tc = np.clip(p, eps, 1 - eps), np.clip(t, eps, 1 - eps)
        out["kl"] = float(np.mean(tc * np.log(tc / pc) + (1 - tc) * np.log((1 - tc) / (1 - pc))))
    else:
        mp, mt = p.mean(axis=0), t.mean(axis=0)
        ok = (mp > 0).all() and (mt > 0).all()
        out["kl"] = float(np.sum((mt / mt.sum()) * np.log((mt / mt.sum()) / (mp / mp.sum())))) if ok else float("nan")
    pf, tf = p.ravel(), t.ravel()
    out["corr"] = float(np.corrcoef(pf, tf)[0, 1]) if pf.std() > 0 and tf.std() > 0 else float("nan")
    return out


def segment_evaluation(model: str, version: str, segments: pd.DataFrame, pred, truth: Truth,
                       decisions: Mapping[float, np.ndarray | str], *, binary: bool = True,
                       oracles: Mapping[float, np.ndarray] | None = None) -> pd.DataFrame:
    """One row per (segment column, value, budget) and the overall 'all' rows (columns SEGMENT_COLUMNS).

    `segments`: the holdout users' segment columns (row-aligned with `pred`); `pred`: N x K; `truth`:
    the `Truth` (N x K response and cost); `decisions`: budget -> the model's N levels (a str for an
    infeasible budget: skipped); `oracles`: budget -> the oracle's levels (default:
    `truth.oracle_policy` per budget)."""
    p, t, tc = (np.asarray(a, dtype=np.float64) for a in (pred, truth.response, truth.cost))
    n = p.shape[0]
    if len(segments) != n or t.shape != p.shape or tc.shape != p.shape:
        raise EvaluationError(f"segment evaluation: {len(segments)} segment rows and curves {p.shape}, {t.shape}, "
                              f"{tc.shape} must describe the same users")
    budgets = {float(b): np.asarray(lv, dtype=np.int64) for b, lv in decisions.items() if not isinstance(lv, str)}
    oracle = {b: np.asarray(oracles[b]) if oracles and b in oracles else oracle_policy(t, tc, b) for b in budgets}
    rows = np.arange(n)
    groups: list[tuple[str, str, np.ndarray]] = [("all", "all", np.ones(n, dtype=bool))]
    for col in segments.columns:
        values = segments[col].astype("string").fillna("<missing>").to_numpy()
        groups += [(str(col), str(v), values == v) for v in sorted(set(values.tolist()))]
    out = []
    for seg, value, mask in groups:
        m = int(mask.sum())
        curve = truth_curve_metrics(p[mask], t[mask], binary)
        base = {"model": model, "model_version": version, "segment_by": seg, "segment_value": value, "n_users": m, **curve}
        if not budgets:
            out.append({**base, "budget_per_capita": float("nan")})
        for b, levels in budgets.items():
            r, o = rows[mask], oracle[b][mask]
            tv, tcost = t[r, levels[mask]].sum() / max(m, 1), tc[r, levels[mask]].sum() / max(m, 1)
            ov, ocost = t[r, o].sum() / max(m, 1), tc[r, o].sum() / max(m, 1)
            out.append({**base, "budget_per_capita": b, "true_value": tv, "true_cost": tcost, "oracle_value": ov,
                        "oracle_cost": ocost, "pct_oracle": 100.0 * tv / ov if ov > 0 else float("nan")})
    return pd.DataFrame(out, columns=list(SEGMENT_COLUMNS))


def segment_curves(segments: pd.DataFrame, pred, truth, column: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per value of `column`: (mean predicted response per level, mean true response per level)."""
    p, t = np.asarray(pred, dtype=np.float64), np.asarray(truth, dtype=np.float64)
    values = segments[column].astype("string").fillna("<missing>").to_numpy()
    return {str(v): (p[values == v].mean(axis=0), t[values == v].mean(axis=0)) for v in sorted(set(values.tolist()))}


def plot_segment_curves(curves: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray]]], labels: Sequence[str],
                        title: str = "") -> bytes:
    """PNG: one panel per segment column, predicted (solid) vs true (dashed) mean response per level,
    one colour per segment value. `curves`: column -> segment_curves(...)."""
    fig, axes = _figure(max(1, len(curves)), width=5.5, height=4.0)
    x = np.arange(len(labels))
    for ax, (column, by_value) in zip(axes, curves.items()):
        for i, (value, (pm, tm)) in enumerate(by_value.items()):
            color = f"C{i % 10}"
            ax.plot(x, pm, color=color, lw=1.8, marker="o", ms=3, label=f"{value}")
            ax.plot(x, tm, color=color, lw=1.2, ls="--")
        ax.set_xticks(x, list(labels))
        ax.set_xlabel("level")
        ax.set_ylabel("mean response (solid: predicted, dashed: true)")
        ax.set_title(f"by {column}")
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return _png(fig)
