"""The outcome of a deployed decision: a decided day's events joined to the decision they answer.

**The join.** A day's events answer the decisions made *for that day* (the `decisions` of a run whose
decision date is the events' day). The key is (campaign, day, `user_id`): one decision per user and
budget. Every budget of the day has a decision file and the coupon system applied one of them: the
deployed budget is the one recorded with the day's export (campaign.yaml `monitoring.budget`, a period
budget's paced file or the only budget written; promo_assets.monitoring.exported), else
`monitoring.budget`, else the day's only budget. With several budgets and none known the day is
refused, naming `monitoring.budget`: the budget is known, never guessed. A decision whose export was
stopped never answers; of several decisions runs of the day at that budget (the day decided again),
the exported one, else the one whose propensities equal the logged ones (the outbox file's
`propensity`, logged back by the coupon system) on the most events; a tie is refused.

Refused, with the reason kept (the day's outcome row says `refused` and why; nothing is mixed):
- a day whose events name a user more than once (the day came back twice, or a file was appended
  to itself);
- events whose logged propensity differs from the decision's for that user and level (they do not
  answer this decision);
- a day none of whose events answers a decision.
Events of users the day's decision does not list are kept out of every estimate and counted
(`undecided_events`; those that got an incentive above the cheapest level: `undecided_incentive`).

**Compliance.** Of the joined events whose decided level gives an incentive (not the cheapest level),
the share whose logged level is the decided one: below 1 the coupon system did not apply every
decision (`noncompliant_events` counts every event off its decided level).

**Realized against predicted.** Per event: the realized response and cost against the champion's
prediction for that user at the decided level (overall, per group champion / explore, per level), and
per decile of the predicted uplift (the champion's level over the cheapest) the predicted uplift
against the doubly robust realized one, and per value of each categorical feature (`segment_rows`).
`within_manifest`: the day's realized response per event falls
inside the manifest's interval for the champion's policy.

No dagster here (domain code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from promo_assets.core.coefficients import Coefficients
from promo_assets.core.errors import DomainError
from promo_assets.evaluation.records import LoggedEvents
from promo_assets.monitoring.effect import Deployment, EffectTerms, effect_terms


class OutcomeError(DomainError, ValueError):
    """A decided day's events cannot be joined to its decision (the message says why)."""


PROPENSITY_TOLERANCE = 1e-6


@dataclass
class Candidate:
    """One decision the day's events may answer: a decisions run's budget for that day."""

    run_id: str
    budget: float
    frame: pd.DataFrame      # user_id, level, policy, propensity, champion_level, predicted_response, predicted_cost
    entry: dict              # the manifest entry


def choose_decision(events: pd.DataFrame, candidates: list[Candidate], budget: float | None = None,
                    source: str = "campaign.yaml monitoring.budget") -> Candidate:
    """The decision the day's events answer (module docstring): at the deployed `budget` (named by `source`)
    when known, else the day's only budget; of several decisions runs at that budget (the day decided
    again), the one whose propensities match the logged ones on the most events. OutcomeError when none
    matches, when several budgets were decided and none is known to be deployed, or when runs tie."""
    if not candidates:
        raise OutcomeError("no decision was made for this day")
    if budget is not None:
        chosen = [c for c in candidates if math.isclose(c.budget, float(budget), rel_tol=1e-9)]
        if not chosen:
            raise OutcomeError(f"{source} {budget:g} was not decided for this day (budgets decided: "
                               f"{', '.join(f'{c.budget:g}' for c in candidates)})")
        candidates = chosen
    budgets = sorted({c.budget for c in candidates})
    if len(budgets) > 1:
        raise OutcomeError(f"{len(budgets)} budgets were decided for this day ({', '.join(f'{b:g}' for b in budgets)}) "
                           "and none is recorded as deployed: set campaign.yaml monitoring.budget to the budget whose "
                           "decision file the coupon system applies")
    if len(candidates) == 1:
        return candidates[0]
    logged = events[["user_id", "propensity"]].dropna()
    if logged.empty:
        raise OutcomeError(f"{len(candidates)} decisions runs decided this day at budget {budgets[0]:g} and the events "
                           "log no propensity to tell which one was applied")
    scores = []
    for c in candidates:
        joined = logged.merge(c.frame[["user_id", "propensity"]], on="user_id", suffixes=("", "_decided"))
        scores.append(int(np.isclose(joined["propensity"], joined["propensity_decided"], rtol=0,
                                     atol=PROPENSITY_TOLERANCE).sum()))
    best = max(scores)
    tied = [c for c, s in zip(candidates, scores) if s == best]
    if best == 0:
        raise OutcomeError("no logged propensity of the day's events equals a decision's: the events do not answer "
                           "any decision made for this day")
    if len(tied) > 1:
        first = tied[0].frame.set_index("user_id")[["level", "propensity"]].sort_index()
        if all(t.frame.set_index("user_id")[["level", "propensity"]].sort_index().equals(first) for t in tied[1:]):
            return max(tied, key=lambda t: t.run_id)  # the same decisions: either one
        raise OutcomeError(f"ambiguous join: the decisions runs {', '.join(sorted(t.run_id[:8] for t in tied))} "
                           f"decided this day at budget {budgets[0]:g} and match the logged propensities equally "
                           f"({best} events)")
    return tied[0]


@dataclass
class DayOutcome:
    """One decided day's outcome (see the module docstring); `status` 'ok' or 'refused' (`reason`)."""

    day: object
    status: str
    reason: str = ""
    run_id: str = ""
    budget: float = math.nan
    row: dict = field(default_factory=dict)
    levels: pd.DataFrame | None = None
    deciles: pd.DataFrame | None = None
    terms: EffectTerms | None = None


def _se(x: np.ndarray) -> float:
    return float(x.std(ddof=1) / math.sqrt(x.size)) if x.size >= 2 else math.nan


def segment_rows(frame: pd.DataFrame, columns: list[str], min_events: int = 30) -> list[dict]:
    """Realized against predicted response per value of each categorical column of `frame` (events with
    `y`, `py`, `c`, `pc`), for the values with at least `min_events` events: the calibration by segment
    that an overall mean hides (a shift of one city's response to the incentive)."""
    out = []
    for col in columns:
        if col not in frame.columns:
            continue
        for value, part in frame.groupby(frame[col].astype("string").fillna("<missing>"), sort=True):
            if len(part) < min_events:
                continue
            resid = (part["y"] - part["py"]).to_numpy(dtype=np.float64)
            out.append({"segment": f"{col}={value}", "feature": col, "value": str(value), "events": int(len(part)), "realized": float(part["y"].mean()),
                        "predicted": float(part["py"].mean()), "realized_cost": float(part["c"].mean()),
                        "predicted_cost": float(part["pc"].mean()), "se": _se(resid)})
    return out


def join_decision(day, events: pd.DataFrame, decision: Candidate) -> tuple[pd.DataFrame, np.ndarray]:
    """(the day's events joined to `decision` on user_id — its columns with suffix `_decided` where the
    events have the same, and `_row`: the user's row in `decision.frame` —, a mask of the events whose
    user the decision does not list). OutcomeError, naming the day, when the day came back twice (a user
    with two events), no event answers the decision, or an event logs another propensity than the
    decision's (module docstring)."""
    dup = events["user_id"].duplicated(keep=False)
    if dup.any():
        users = events.loc[dup, "user_id"].unique()
        raise OutcomeError(f"the day came back twice: {len(users)} user(s) have more than one event on {day} (e.g. "
                           f"{', '.join(map(repr, users[:3]))}); forget the day and load it once")
    frame = decision.frame.reset_index(drop=True)
    frame = frame.assign(_row=np.arange(len(frame)))
    joined = events.merge(frame, on="user_id", how="left", suffixes=("", "_decided"), indicator=True)
    undecided = (joined["_merge"] == "left_only").to_numpy()
    joined_ok = joined[~undecided]
    if joined_ok.empty:
        raise OutcomeError(f"none of the day's {len(events)} events answers the decision of {day} (run "
                           f"{decision.run_id[:8]}, budget {decision.budget:g}): no event's user was decided for")
    logged_p = joined_ok["propensity"].to_numpy(dtype=np.float64)
    decided_p = joined_ok["propensity_decided"].to_numpy(dtype=np.float64)
    bad = np.isfinite(logged_p) & ~np.isclose(logged_p, decided_p, rtol=0, atol=PROPENSITY_TOLERANCE)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        r = joined_ok.iloc[i]
        raise OutcomeError(f"{int(bad.sum())} event(s) log a propensity that differs from the decision's (e.g. user "
                           f"{r['user_id']!r}: logged {logged_p[i]:.6g}, decided {decided_p[i]:.6g}): they do not "
                           f"answer the decision of run {decision.run_id[:8]}, budget {decision.budget:g}")
    return joined, undecided


def day_outcome(day, events: pd.DataFrame, decision: Candidate, predictions: tuple[np.ndarray, np.ndarray] | None,
                level_costs, cheapest: int, segments: list[str] = ()) -> DayOutcome:
    """The outcome of `decision` from the day's `events` (user_id, level, response, cost, propensity).

    predictions: the champion's response and cost for every level of the decision's users (N × K,
    rows in the order of `decision.frame`), None when they were not stored (the effect then uses the
    predictions of the decided level only, as a constant per level)."""
    base = DayOutcome(day=day, status="refused", run_id=decision.run_id, budget=decision.budget)
    try:
        joined, undecided = join_decision(day, events, decision)
    except OutcomeError as exc:
        base.reason = str(exc)
        return base
    joined_ok = joined[~undecided]
    base.reason = _level_problem(joined_ok, decision, len(level_costs))
    if base.reason:
        return base
    n_undecided = int(undecided.sum())
    undecided_incentive = int((joined.loc[undecided, "level"] != cheapest).sum())
    n = len(joined_ok)
    y = joined_ok["response"].to_numpy(dtype=np.float64)
    c = joined_ok["cost"].to_numpy(dtype=np.float64)
    a = joined_ok["level_decided"].to_numpy(dtype=np.int64)
    logged = joined_ok["level"].to_numpy(dtype=np.int64)
    explore = (joined_ok["policy"] == "explore").to_numpy()
    pi = joined_ok["champion_level"].to_numpy(dtype=np.int64)
    rows = joined_ok["_row"].to_numpy(dtype=np.int64)
    if predictions is not None:
        m, q = predictions[0][rows], predictions[1][rows]
    else:  # the decided level's prediction for every level: the effect without control variates
        k = len(level_costs)
        m = np.repeat(joined_ok["predicted_response"].to_numpy(dtype=np.float64)[:, None], k, axis=1)
        q = np.repeat(joined_ok["predicted_cost"].to_numpy(dtype=np.float64)[:, None], k, axis=1)
    pred_y = m[np.arange(n), a]
    pred_c = q[np.arange(n), a]
    entry = decision.entry or {}
    share = float((decision.frame["policy"] == "explore").mean())
    mix = (entry.get("exploration") or {}).get("mix") or [1.0 / len(level_costs)] * len(level_costs)
    terms = effect_terms(LoggedEvents(a, y, c), Deployment(pi, share, mix, explore), Coefficients(m, q), level_costs)
    expected = entry.get("expected_response") or {}
    low, high = expected.get("dr_low"), expected.get("dr_high")
    realized = float(y.mean())
    groups = {}
    for name, mask in (("champion", ~explore), ("explore", explore)):
        groups[name] = (float(y[mask].mean()) if mask.any() else math.nan, float(c[mask].mean()) if mask.any() else math.nan,
                        int(mask.sum()))
    row = {
        "events": int(len(events)), "joined": n, "decided_users": int(len(decision.frame)),
        "champion_events": groups["champion"][2], "explore_events": groups["explore"][2],
        "undecided_events": n_undecided, "undecided_incentive": undecided_incentive,
        "noncompliant_events": int((logged != a).sum()),
        "compliance": float((logged[a != cheapest] == a[a != cheapest]).mean()) if (a != cheapest).any() else 1.0,
        "realized_response": realized, "predicted_response": float(pred_y.mean()), "realized_response_se": _se(y - pred_y),
        "realized_cost": float(c.mean()), "predicted_cost": float(pred_c.mean()), "realized_cost_se": _se(c - pred_c),
        "response_champion": groups["champion"][0], "response_explore": groups["explore"][0],
        "cost_champion": groups["champion"][1], "cost_explore": groups["explore"][1],
        "manifest_low": low, "manifest_high": high,
        "within_manifest": None if low is None or high is None else bool(low <= realized <= high),
        "effect": terms.effect, "effect_se": _se(terms.psi), "vs_cheapest": terms.vs_cheapest,
        "vs_cheapest_se": _se(terms.psi_cheapest), "dm_effect": terms.dm_effect, "dm_se": terms.dm_se,
        "champion_value": terms.champion_value, "champion_cost": terms.champion_cost,
        "random_value": terms.random_value, "spend_matched": terms.matched,
        "psi_n": n, "psi_sum": float(terms.psi.sum()), "psi_ss": float(((terms.psi - terms.effect) ** 2).sum()),
        "cheap_sum": float(terms.psi_cheapest.sum()),
        "cheap_ss": float(((terms.psi_cheapest - terms.vs_cheapest) ** 2).sum()),
        "dm_var": terms.dm_se ** 2 if math.isfinite(terms.dm_se) else math.nan,
    }
    levels = pd.DataFrame({"level": a, "y": y, "c": c, "py": pred_y, "pc": pred_c}).groupby("level").agg(
        events=("y", "size"), realized_response=("y", "mean"), predicted_response=("py", "mean"),
        realized_cost=("c", "mean"), predicted_cost=("pc", "mean")).reset_index()
    uplift_pred = m[np.arange(n), pi] - m[:, cheapest]
    prob = share * np.broadcast_to(np.asarray(mix, dtype=np.float64) / np.sum(mix), m.shape).copy()
    prob[np.arange(n), pi] += 1.0 - share
    gamma_pi = m[np.arange(n), pi] + (a == pi) / prob[np.arange(n), pi] * (y - m[np.arange(n), pi])
    gamma_0 = m[:, cheapest] + (a == cheapest) / prob[:, cheapest] * (y - m[:, cheapest])
    deciles = pd.DataFrame({"decile": _deciles(uplift_pred), "p": uplift_pred, "r": gamma_pi - gamma_0}).groupby(
        "decile").agg(events=("p", "size"), predicted_uplift=("p", "mean"), realized_uplift=("r", "mean")).reset_index()
    seg = joined_ok[[c for c in segments if c in joined_ok.columns]].assign(y=y, py=pred_y, c=c, pc=pred_c)
    row["segments"] = segment_rows(seg, list(segments))
    return DayOutcome(day=day, status="ok", run_id=decision.run_id, budget=decision.budget, row=row, levels=levels,
                      deciles=deciles, terms=terms)


def _level_problem(joined: pd.DataFrame, decision: Candidate, k: int) -> str | None:
    """Why the stored decision cannot be read against the campaign's `k` levels (a decided or champion
    level outside 0 .. k-1: the decision was tampered with or made for another treatments block), or None."""
    for column, what in (("level_decided", "decided level"), ("champion_level", "champion level")):
        values = pd.to_numeric(joined[column], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (values < 0) | (values >= k) | (values != np.round(values))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raw = joined[column].iloc[i]
            shown = raw.item() if hasattr(raw, "item") else raw  # a numpy scalar as the plain number
            return (f"the stored decision of run {decision.run_id[:8]}, budget {decision.budget:g}, holds {int(bad.sum())} "
                    f"{what}(s) outside the campaign's {k} levels 0-{k - 1} (e.g. user {joined['user_id'].iloc[i]!r}: "
                    f"{shown!r}): the decisions stored for this day do not match campaign.yaml's "
                    "treatments")
    return None


def _deciles(x: np.ndarray) -> np.ndarray:
    """1..10 by rank (ties broken by position), fewer groups when there are fewer than 10 events."""
    n = x.size
    ranks = np.argsort(np.argsort(x, kind="stable"), kind="stable")
    return (ranks * min(10, n) // max(n, 1) + 1).astype(np.int64)
