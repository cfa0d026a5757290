"""Pacing a budget for a period: each day's λ from yesterday's, corrected by the spend that came back.

A campaign budget is often a total over a period (B from `start` to `end`, D days), not a budget
per user per day. Solving every day alone at B / D per day ignores what the events report: only
some of the users decided for come back on a day, the model's costs are biased, and an over- or
underspent day is never made up. The pacer plans and corrects day by day:

- **The plan** of day d is what is left spread evenly over the days left:
  plan_d = (B − Σ_{t<d} realized_t) / (D − d + 1) (days whose spend has not come back yet count
  at their plan). An over- or underspent day is made up over the remaining days.
- **The spend ratio** ρ̂ is what the decisions that came back in the events realized over what the
  champion predicted for all the users decided for: ρ̂ = Σ_t realized_t / Σ_t predicted_t over the
  days that came back (a prior before the first: the share of the population seen on a day of
  the loaded events). It absorbs who comes back and the model's cost bias.
- **The controller** (`controller: ratio`, the default) sets λ_d to the smallest λ ≥ 0 whose
  predicted spend on today's users meets the corrected plan, ρ̂ · S(λ) ≤ plan_d, where
  S(λ) = Σ_i c_i(argmax_j v_ij − λ c_ij) is the champion's predicted spend at λ (non-increasing
  in λ). It is found by bisection warm-started from yesterday's λ (a bracket grown around it).
  The ratio is an integral action on the relative spend error; the re-plan a second one on the
  budget left.
- `controller: dual` is DIPN's online dual update instead: λ_d = λ_{d−1} · (realized_{d−1} /
  plan_{d−1})^η (a multiplicative dual-subgradient step on the budget constraint; η = `gain`),
  started from the λ that meets the first plan. It needs no spend curve, but it only reacts to
  yesterday's error. `benchmarks/pacing.py` measures both against solving each day alone.

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from promo_assets.allocation import decide
from promo_assets.config.campaign import BudgetBlock
from promo_assets.core.errors import DomainError
from promo_assets.evaluation.plots import _figure, _png
from promo_assets.store import decisions as decisions_store

CONTROLLERS = ("ratio", "dual")


class PacingError(DomainError, ValueError):
    """A period budget that cannot be paced (no day left, a non-positive plan)."""


@dataclass(frozen=True)
class PeriodBudget:
    """campaign.yaml `budget:`: the total to spend from `start` to `end` (both included), the
    controller and its gain."""

    total: float
    start: dt.date
    end: dt.date
    controller: str = "ratio"
    gain: float = 1.0

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    @classmethod
    def from_config(cls, block: BudgetBlock) -> "PeriodBudget":
        """From campaign.yaml's `budget:` block (total or per_day, start, end, controller, gain)."""
        days = (block.end - block.start).days + 1
        total = block.total if block.total is not None else block.per_day * days
        return cls(total=total, start=block.start, end=block.end, controller=block.controller, gain=block.gain)


def _date(value) -> dt.date:
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


@dataclass
class PacingDay:
    """One paced day: its plan, the λ used, the champion's predicted spend for every user decided
    for, the spend the events reported (None until they come back) and the spend ratio used."""

    day: dt.date
    plan: float
    lambda_: float
    predicted: float
    realized: float | None = None
    ratio: float = 1.0
    users: int = 0

    def to_dict(self) -> dict:
        out = asdict(self)
        out["day"] = self.day.isoformat()
        return out


def predicted_spend(response: np.ndarray, cost: np.ndarray, lambda_: float) -> float:
    """S(λ): the champion's predicted spend of every user's level at λ (`lambda_`)."""
    levels = decide(response, cost, lambda_)
    return float(cost[np.arange(len(levels)), levels].sum())


def lambda_for_spend(response: np.ndarray, cost: np.ndarray, target: float, start: float | None = None,
                     tol: float = 1e-4, iterations: int = 80) -> float:
    """The smallest λ >= 0 with S(λ) <= target (S is non-increasing in λ), by bisection from a
    bracket grown around `start` (yesterday's λ: the warm start). A target below the cheapest
    levels' spend gives the λ at which everyone is at the cheapest level."""
    if predicted_spend(response, cost, 0.0) <= target:
        return 0.0
    lo, hi = 0.0, max(float(start or 0.0), 1e-6)
    if start and predicted_spend(response, cost, start) > target:
        lo, hi = start, 2 * start
    while predicted_spend(response, cost, hi) > target:
        lo, hi = hi, hi * 2
        if hi > 1e12:
            return hi
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if predicted_spend(response, cost, mid) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= tol * max(hi, 1e-9):
            break
    return hi


def plan_for(budget: PeriodBudget, day: dt.date, history: Sequence[PacingDay]) -> float:
    """What day `day` should spend: the budget left over the days left (module docstring)."""
    if not budget.start <= day <= budget.end:
        raise PacingError(f"day {day} is outside the budget's period {budget.start} .. {budget.end}")
    before = [h for h in history if h.day < day]
    spent = sum(h.realized if h.realized is not None else h.plan for h in before)
    left = (budget.end - day).days + 1
    return max(budget.total - spent, 0.0) / left


def spend_ratio(history: Sequence[PacingDay], prior: float) -> float:
    """ρ̂: realized over predicted spend of the days whose events came back (`prior` before any)."""
    back = [h for h in history if h.realized is not None and h.predicted > 0]
    if not back:
        return float(prior)
    return sum(h.realized for h in back) / sum(h.predicted for h in back)


def pace_day(budget: PeriodBudget, day: dt.date, response: np.ndarray, cost: np.ndarray,
             history: Sequence[PacingDay], prior_ratio: float) -> PacingDay:
    """Day `day`'s plan and λ for the champion's predicted response and cost (N x K) of the users
    decided for, given the earlier days (with their realized spend where it came back)."""
    if budget.controller not in CONTROLLERS:
        raise PacingError(f"budget.controller must be one of {', '.join(CONTROLLERS)}, got {budget.controller!r}")
    v, c = np.asarray(response, dtype=np.float64), np.asarray(cost, dtype=np.float64)
    plan = plan_for(budget, day, history)
    earlier = sorted((h for h in history if h.day < day), key=lambda h: h.day)
    previous = earlier[-1] if earlier else None
    ratio = spend_ratio(earlier, prior_ratio)
    if not (math.isfinite(ratio) and ratio > 0):
        ratio = float(prior_ratio)
    if budget.controller == "dual" and previous is not None and previous.realized is not None and previous.plan > 0:
        error = max(previous.realized, 1e-12) / previous.plan
        lam = max(previous.lambda_, 1e-6) * error ** float(budget.gain)
    else:
        lam = lambda_for_spend(v, c, plan / ratio, start=previous.lambda_ if previous else None)
    predicted = predicted_spend(v, c, lam)
    if not predicted > 0 or (c.size and plan < float(c.min(axis=1).sum())):
        _too_small(budget, day, plan, c)
    return PacingDay(day=day, plan=plan, lambda_=float(lam), predicted=predicted, ratio=ratio, users=int(v.shape[0]))


def _too_small(budget: PeriodBudget, day: dt.date, plan: float, cost: np.ndarray) -> None:
    """PacingError: the period total leaves too little for day `day` to decide anything."""
    floor = float(cost.min(axis=1).sum()) if cost.size else 0.0  # every user at its cheapest level
    above = cost - cost.min(axis=1, keepdims=True) if cost.size else cost
    step = float(above[above > 0].min()) if np.any(above > 0) else 0.0  # the least one user's change adds
    left = (budget.end - day).days + 1
    raise PacingError(f"campaign.yaml budget: the period total {budget.total:g} is too small for the decision of "
                      f"{day}: it leaves {plan:.4g} for that day ({left} day(s) left of {budget.start} .. {budget.end}), "
                      f"while the cheapest decision for the {cost.shape[0]} users costs {floor:.4g} and the least "
                      f"that giving one user a dearer level adds is {step:.4g}; raise 'budget.total' (or "
                      "'budget.per_day') or shorten the period")


def stored_history(con, campaign: str) -> list[PacingDay]:
    """The paced days of the campaign's visible decisions runs (the latest run of each day), each with
    the spend its users' events reported once that day is loaded (decision_budgets' manifest entries
    with `pacing`, rct_events joined with the run's decisions)."""
    latest: dict[str, tuple] = {}
    for run_id, day, budget, manifest, _ in decisions_store.paced_days(con, campaign):
        latest[str(day)[:10]] = (run_id, day, budget, json.loads(manifest)["entry"]["pacing"])
    out = []
    for run_id, day, budget, p in latest.values():
        realized = decisions_store.realized_spend(con, campaign, str(day), run_id, budget)
        out.append(PacingDay(day=_date(str(day)[:10]), plan=float(p["plan"]), lambda_=float(p["lambda_"]),
                             predicted=float(p["predicted"]), realized=None if realized is None else float(realized),
                             ratio=float(p["ratio"]), users=int(p["users"])))
    # Days whose decisions runs retention has deleted (PROMO_KEEP_RUNS) are carried by the pacing rows of
    # the latest visible run that paced: every run writes the whole period so far, so the history
    # survives any retention that keeps one run.
    for day, plan, lam, predicted, realized, ratio in decisions_store.carried_pacing_days(con, campaign):
        if str(day)[:10] not in latest:
            out.append(PacingDay(day=_date(str(day)[:10]), plan=float(plan), lambda_=float(lam),
                                 predicted=float(predicted), realized=None if realized is None else float(realized),
                                 ratio=float(ratio)))
    return sorted(out, key=lambda h: h.day)


def prior_ratio(con, campaign: str, n_users: int) -> float:
    """The share of the users decided for expected back on a day before any paced day came back: the
    mean number of distinct users per loaded day over the users decided for (at most 1)."""
    mean = decisions_store.users_per_day(con, campaign)
    return min(1.0, float(mean) / n_users) if mean and n_users else 1.0


def pacing_table(budget: PeriodBudget, history: Sequence[PacingDay]) -> list[dict]:
    """One row per paced day: plan, λ, predicted and realized spend, cumulative realized, the even
    plan's cumulative spend and the budget left after the day (realized, or planned until it is back)."""
    rows, spent = [], 0.0
    for i, h in enumerate(sorted(history, key=lambda h: h.day)):
        spent += h.realized if h.realized is not None else h.plan
        rows.append({"day": h.day.isoformat(), "plan": h.plan, "lambda": h.lambda_, "predicted spend": h.predicted,
                     "realized spend": h.realized, "spend ratio": h.ratio,
                     "cumulative spend": spent, "even plan": budget.total / budget.days * ((h.day - budget.start).days + 1),
                     "budget left": budget.total - spent})
    return rows


def store_pacing(con, campaign: str, run_id: str, decision_date: dt.date, budget: PeriodBudget,
                 rows: Sequence[dict]) -> None:
    """Write `pacing_table` rows as decisions run `run_id` saw them into table pacing (call inside the
    run's results transaction)."""
    for r in rows:
        decisions_store.record_pacing(con, [
            campaign, run_id, decision_date.isoformat(), r["day"], float(r["plan"]), float(r["predicted spend"]),
            None if r["realized spend"] is None else float(r["realized spend"]), float(r["spend ratio"]),
            float(r["cumulative spend"]), float(r["even plan"]), float(r["budget left"]), float(r["lambda"]),
            budget.controller, float(budget.total), budget.start.isoformat(), budget.end.isoformat()])


def plot_pacing(rows: Sequence[dict], total: float) -> bytes:
    """PNG: the spend per day (plan and realized) and the cumulative spend against the even plan."""
    fig, (left, right) = _figure(2, width=5.0, height=3.6)
    x = np.arange(len(rows))
    days = [r["day"][5:] for r in rows]
    left.bar(x - 0.2, [r["plan"] for r in rows], width=0.4, label="plan", color="0.7")
    left.bar(x + 0.2, [r["realized spend"] or 0.0 for r in rows], width=0.4, label="realized", color="tab:blue")
    left.set_title("spend per day")
    right.plot(x, [r["cumulative spend"] for r in rows], marker="o", label="cumulative (realized, else planned)")
    right.plot(x, [r["even plan"] for r in rows], ls="--", color="0.5", label="even plan")
    right.axhline(total, color="black", lw=1, label="total")
    right.set_title("cumulative spend")
    for ax in (left, right):
        ax.set_xticks(x, days, rotation=45, fontsize=7)
        ax.legend(fontsize=7)
    return _png(fig)
