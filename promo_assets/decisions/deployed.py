"""The deployed days as evidence of the champion: the events of decided days whose outcomes came back,
joined to the decision they answer, with the decision's own propensities.

**Which days.** Every decided day (a visible decisions run for that day) whose events are loaded and
that is no holdout day (the holdout's events are evidence already, scored by the current versions).
Those days are training days of the current models: scored by the current versions they would be
judged on events they were fitted to. Each candidate is therefore scored by **the version that
existed when the day was decided** — the versions of the leaderboard the deciding champion was chosen
from (decisions run → its champion run → its leaderboard run) — whose coefficients for the users
decided for (table response_coefficients, target `population`, else `holdout` when the campaign was
decided for its holdout users) were computed before the day's outcomes existed. The evidence then
compares the models as each did on days it had not seen (a rolling origin that needs no refit); the
current versions are the same models trained on a few more days.

**Propensities.** A decision gives user i level k with the known probability
P_i(k) = (1 − s)·1{k = π_i} + s·w_k (s: the realized exploration share, w: the exploration mix,
π_i: the champion's level; docs/decisions.md), written with the decision and logged back with the
events. The evidence uses that propensity of the level given, never clipped: the doubly robust
pseudo-outcomes are then unbiased for every level whatever the outcome model, and clipping would pull
them toward the outcome model. The champion's own level has P ≈ 1 − s + s·w_k; every other level is
given only to explored users, with P = s·w_k (0.05 / 6 ≈ 0.008 at the default share and 6 levels):
those few events carry weights of about 1/(s·w_k), which widens the intervals but does not bias
them. A day whose decision could not give some level (share 0, or a mix weight 0) cannot compare
candidates at that level without bias and is left out, with the reason.

**Outcome model.** The pseudo-outcomes' m(x, k) for a deployed user is the equal-weight mean of the
candidates' coefficients at the day's versions (fitted before the day, the same for every candidate).

**Left out, with the reason** (`DeployedDay.reason`): a day refused by the monitoring's join
(`promo_assets.monitoring.outcomes.join_decision`: a user twice, logged propensities that are not
the decision's, no event of a decided user), a day whose deciding champion or leaderboard is no longer
stored (PROMO_KEEP_RUNS), a day a candidate has no version or coefficients for, a day without
exploration; and, within a day, events of users the decision does not list, events without a logged
propensity and events whose level is not the decided one (the coupon system did not apply the decision:
the level's propensity is unknown).

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.evaluation.champion import (
    BLEND_PREFIX,
    ChampionDecision,
    Evidence,
    _compare,
    _loss_row,
    decision_lambdas,
    evaluate_candidate,
    loss_terms,
)
from promo_assets.evaluation.eom import EvaluationError
from promo_assets.monitoring.exported import export_records
from promo_assets.monitoring.outcomes import Candidate as Decision, OutcomeError, join_decision
from promo_assets.monitoring.run import deployed_decision
from promo_assets.store import (
    decisions as decisions_store,
    models as models_store,
    monitoring as monitoring_store,
)

DEPLOYED = "deployed"


@dataclass(frozen=True)
class DeployedDay:
    """One decided day as evidence: its events, how many joined the evidence (`used`), why the day or
    some of its events were left out ('' when none was), and its `Evidence` (None when left out)."""

    day: dt.date
    events: int
    used: int
    reason: str = ""
    evidence: Evidence | None = None

    @property
    def source(self) -> str:
        return f"{DEPLOYED} {self.day.isoformat()}"


def exploration_design(decision: Decision, n_levels: int) -> tuple[float, np.ndarray]:
    """(realized exploration share s, mix w summing to 1) of a decision: the share of its users whose
    policy is 'explore', the manifest entry's `exploration.mix` (uniform without one)."""
    share = float((decision.frame["policy"] == "explore").mean()) if len(decision.frame) else 0.0
    mix = np.asarray((decision.entry.get("exploration") or {}).get("mix") or [1.0] * n_levels, dtype=np.float64)
    if mix.shape != (n_levels,) or not np.all(np.isfinite(mix)) or mix.min() < 0 or not mix.sum() > 0:
        raise OutcomeError(f"the decision's exploration mix {mix.tolist()} is not one weight >= 0 per level "
                           f"({n_levels} levels)")
    return share, mix / mix.sum()


def day_evidence(day: dt.date, events: pd.DataFrame, decision: Decision,
                 coefficients: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]], n_levels: int) -> DeployedDay:
    """Day `day` as evidence (module docstring). events: the day's events (user_id, level, response, cost,
    propensity); decision: the decision they answer (`choose_decision`); coefficients: model ->
    (users, response U x K, cost U x K) at the version that existed when the day was decided."""
    n_events = len(events)

    def refused(reason: str) -> DeployedDay:
        return DeployedDay(day, n_events, 0, f"left out: {reason}")

    try:
        joined, undecided = join_decision(day, events, decision)
        share, mix = exploration_design(decision, n_levels)
    except OutcomeError as exc:
        return refused(str(exc))
    if not share > 0 or mix.min() <= 0:
        never = [str(k) for k in range(n_levels) if not share > 0 or mix[k] <= 0]
        return refused(f"its decision could give level(s) {', '.join(never)} only to users whose champion level "
                       f"it was (exploration share {share:g}, mix {np.round(mix, 4).tolist()}): those levels were "
                       "never randomized, so the day cannot compare candidates there without bias")
    ok = joined[~undecided]
    logged_p = ok["propensity"].to_numpy(dtype=np.float64)
    no_p = ~np.isfinite(logged_p)
    off = ok["level"].to_numpy(dtype=np.int64) != ok["level_decided"].to_numpy(dtype=np.int64)
    keep = ~no_p & ~off
    notes = [f"{n} {what}" for n, what in ((int(undecided.sum()), "event(s) of users the decision does not list"),
                                           (int(no_p.sum()), "event(s) without a logged propensity"),
                                           (int((off & ~no_p).sum()), "event(s) not at the decided level (the coupon "
                                                                      "system did not apply the decision)")) if n]
    ok = ok[keep]
    if len(ok) < 2:
        return refused(f"{len(ok)} event(s) left to compare on" + (f" ({'; '.join(notes)})" if notes else ""))
    users = ok["user_id"].astype(str)
    coefs = {}
    for model, (ids, v, c) in sorted(coefficients.items()):
        pos = pd.Index(pd.Series(ids).astype(str)).get_indexer(users)
        if (pos < 0).any():
            return refused(f"{model} has no coefficients for {int((pos < 0).sum())} of the day's decided users at "
                           "the version that decided it")
        coefs[model] = (np.asarray(v, dtype=np.float64)[pos], np.asarray(c, dtype=np.float64)[pos])
    if not coefs:
        return refused("no candidate model")
    dm_v = np.mean([v for v, _ in coefs.values()], axis=0)
    dm_c = np.mean([c for _, c in coefs.values()], axis=0)
    p = ok["propensity_decided"].to_numpy(dtype=np.float64)  # the decision's own; equal to the logged one
    out = DeployedDay(day, n_events, len(ok), f"left out: {'; '.join(notes)}" if notes else "")
    evidence = Evidence(ok["level"].to_numpy(dtype=np.int64), ok["response"].to_numpy(dtype=np.float64),
                        ok["cost"].to_numpy(dtype=np.float64), p, dm_v, dm_c, coefs, np.full(len(ok), out.source))
    return DeployedDay(out.day, out.events, out.used, out.reason, evidence)


def _versions_at(con, campaign: str, decisions_run: str) -> tuple[dict[str, str] | None, str]:
    """({model: version} of the leaderboard the champion that decided `decisions_run` was chosen from,
    '') or (None, why not)."""
    champion_run = decisions_store.champion_run_of_decisions(con, campaign, decisions_run)
    row = decisions_store.champion_of_run(con, campaign, champion_run) if champion_run else None
    if row is None or row.empty:
        return None, (f"the champion that decided it (decisions run {decisions_run[:8]}) is no longer stored "
                      "(PROMO_KEEP_RUNS)")
    board = row["leaderboard_run_id"].iloc[0]
    models = decisions_store.board_models(con, campaign, board) if board else []
    if not models:
        return None, f"the leaderboard its champion was chosen from (run {str(board)[:8]}) is no longer stored"
    return {m: v for m, v, _ in models}, ""


def _coefficients(con, campaign: str, model: str, version: str, users: pd.Series, n_levels: int):
    """(users, response, cost) of a model version for the users decided for: target population, else
    holdout (a campaign decided for its holdout users); the population's when neither covers them."""
    got = None
    for target in ("population", "holdout"):
        ids, v, c = models_store.coefficient_arrays(con, campaign, model, version, target, n_levels)
        got = got or (ids, v, c)
        if len(ids) and pd.Index(pd.Series(ids).astype(str)).get_indexer(users.astype(str)).min() >= 0:
            return ids, v, c
    return got


def read_deployed_days(con, campaign: str, config, models: Sequence[str], holdout_days: set) -> list[DeployedDay]:
    """Every decided day whose events are loaded and that is no holdout day, before the first holdout
    day, as evidence for `models` (module docstring); each left-out day with its reason."""
    first_holdout = min(holdout_days) if holdout_days else None
    loaded = monitoring_store.event_days(con, campaign)
    records = export_records(con, campaign)
    out = []
    for day, rows in monitoring_store.decided_days(con, campaign).groupby("decision_date", sort=True):
        day = pd.Timestamp(day).date()
        if day not in loaded or day in holdout_days or (first_holdout is not None and day > first_holdout):
            continue
        events = monitoring_store.day_events(con, campaign, day)
        try:
            decision = deployed_decision(con, campaign, rows, events, config.monitoring.budget, records)
        except OutcomeError as exc:
            out.append(DeployedDay(day, len(events), 0, f"left out: {exc}"))
            continue
        versions, why = _versions_at(con, campaign, decision.run_id)
        missing = [m for m in models if versions is not None and m not in versions]
        if versions is None or missing:
            out.append(DeployedDay(day, len(events), 0, "left out: " + (
                why or f"{', '.join(missing)} had no evaluated version when the day was decided")))
            continue
        users = decision.frame["user_id"]
        coefs = {m: _coefficients(con, campaign, m, versions[m], users, config.n_levels) for m in models}
        out.append(day_evidence(day, events, decision, coefs, config.n_levels))
    return out


def source_counts(evidence: Evidence) -> dict[str, int]:
    """Events of the evidence per kind of source: 'holdout', 'deployed' (every deployed day), ..."""
    src = evidence.source if evidence.source is not None else np.full(evidence.n, "events")
    kinds = pd.Series(src).str.split(" ").str[0]
    return {str(k): int(n) for k, n in kinds.value_counts(sort=False).items()}


def evidence_words(evidence: Evidence, days: Sequence[DeployedDay]) -> str:
    """'N events: H holdout, D from k deployed day(s)' ('' without deployed events)."""
    counts = source_counts(evidence)
    used = [d for d in days if d.evidence is not None]
    if not counts.get(DEPLOYED):
        return ""
    others = ", ".join(f"{n:,} {k}" for k, n in counts.items() if k != DEPLOYED)
    return (f"{evidence.n:,} events: {others}{', ' if others else ''}{counts[DEPLOYED]:,} from {len(used)} deployed "
            f"day(s) at the decisions' propensities")


def source_rows(evidence: Evidence, days: Sequence[DeployedDay]) -> pd.DataFrame:
    """Rows of table champion_evidence (evidence_kind 'evidence_events'): the events of each source
    (`champion_candidate`: 'holdout', 'deployed <day>') in `value`, with `champion_verdict` 'used' or,
    for a deployed day left out in whole or in part, the reason."""
    src = pd.Series(evidence.source if evidence.source is not None else np.full(evidence.n, "events"))
    rows = {str(s): {"value": float(n), "champion_verdict": "used"} for s, n in src.value_counts(sort=False).items()}
    for d in days:
        if d.reason:
            rows[d.source] = {"value": float(d.used if d.evidence is not None else 0), "champion_verdict": d.reason}
    return pd.DataFrame([{"evidence_kind": "evidence_events", "champion_candidate": s, **r} for s, r in rows.items()])


def deployed_rows(evidence: Evidence) -> np.ndarray:
    """The indices of the evidence's events that come from deployed days."""
    if evidence.source is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(pd.Series(evidence.source).astype(str).str.startswith(f"{DEPLOYED} ").to_numpy())


def deployed_comparisons(evidence: Evidence, decision: ChampionDecision, budgets: Sequence[float]) -> list[dict]:
    """The proposal against the incumbent on the deployed days' events alone, reported beside the
    comparison that decides (docs/decisions.md): their decision losses (statistic 'loss (deployed
    days)', at the multipliers of the whole evidence) and their DR values at equal spend pooled over
    the budgets ('dr_value (deployed days)'). On those events the incumbent's value is essentially what
    its own decisions realized (its levels were given with propensity 1 - s + s·w); the proposal's, where
    its levels differ, rests on the explored users. [] without an incumbent or deployed events."""
    inc, prop = decision.incumbent, decision.proposal
    rows = deployed_rows(evidence)
    singles = [n for n in decision.losses if not n.startswith(BLEND_PREFIX) and n in evidence.coefficients]
    if inc is None or inc.name == prop.name or rows.size < 2 or not set(inc.members) | set(prop.members) <= set(singles):
        return []
    part = Evidence(evidence.logged[rows], evidence.response[rows], evidence.cost[rows], evidence.propensity[rows],
                    evidence.dm_values[rows], evidence.dm_costs[rows],
                    {m: (v[rows], c[rows]) for m, (v, c) in evidence.coefficients.items()}, evidence.source[rows])
    lams = decision_lambdas(evidence, singles, budgets)
    terms = loss_terms(part, singles, lams[np.isfinite(lams)] if np.isfinite(lams).any() else np.asarray([0.0]))
    conf = decision.confidence
    loss = _loss_row(prop.name, inc.name, terms.loss(terms.weights_of(prop)), terms.loss(terms.weights_of(inc)), conf)
    out = [{**loss, "statistic": "loss (deployed days)"}]
    try:  # reported only: a DR value the deployed events alone cannot give is left out, never failing the choice
        value = _compare(evaluate_candidate(part, prop, budgets, confidence=conf),
                         evaluate_candidate(part, inc, budgets, confidence=conf), conf)[-1]
    except EvaluationError:
        return out
    return out + [{**value, "statistic": "dr_value (deployed days)"}]
