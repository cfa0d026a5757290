"""The campaign's champion as a run of the `champion` asset chooses it: the evidence of the models a
leaderboard run assembled (`read_champion_inputs`), the incumbent kept or set aside by the
monitoring's reactions, the choice itself (`choose`, promo_assets.evaluation.champion) and its rows
(`record_champion`). No dagster here (domain code).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Mapping, NamedTuple

import numpy as np
import pandas as pd

from promo_assets.decisions.deployed import (
    DeployedDay,
    deployed_comparisons,
    evidence_words,
    read_deployed_days,
    source_rows,
)
from promo_assets.evaluation.champion import (
    Candidate,
    ChampionDecision,
    ChampionSettings,
    Evidence,
    choose_champion,
    evidence_frame,
    truth_audit,
)
from promo_assets.evaluation.eom import EvaluationError
from promo_assets.store import decisions as decisions_store, models as models_store, monitoring as monitoring_store


@dataclass(frozen=True)
class ChampionInputs:
    """What a champion is chosen from: the evaluation inputs (`ev`), the evidence of every model the
    leaderboard run assembled, their versions, the incumbent (None for a first champion or when a
    `retrain` reaction sets it aside), the active monitoring reactions, and a warning to log when a
    reaction changed the incumbent."""

    ev: object
    evidence: Evidence
    versions: dict[str, str]
    incumbent: Candidate | None
    reactions: frozenset[str]
    warning: str | None = None
    deployed: tuple[DeployedDay, ...] = ()
    cross_fitted: Evidence | None = None


def read_champion_inputs(con, campaign: str, ev, board_run: str, run_id: str, n_levels: int) -> ChampionInputs:
    """The champion's inputs for `campaign`: the models leaderboard run `board_run` assembled, their
    holdout coefficients aligned with the events of `ev`, and the incumbent (run `run_id`'s own
    champion counts when it has one)."""
    models = decisions_store.board_models(con, campaign, board_run)
    if not models:
        raise EvaluationError(f"the leaderboard of campaign '{campaign}' (run {board_run}) has no evaluated model: "
                              "nothing to choose a champion from")
    coefs = {m: ev.align(*models_store.coefficient_arrays(con, campaign, m, v, "holdout", n_levels), m)
             for m, v, _ in models}
    last = decisions_store.latest_champion(con, campaign, or_run=run_id)
    reactions = frozenset(monitoring_store.active_reactions(con, campaign)["reaction"])
    fallback = (monitoring_store.previous_champion(con, campaign, last["champion"].iloc[0])
                if "fallback" in reactions and len(last) else None)
    incumbent = Candidate.from_dict(json.loads(last["champion_members"].iloc[0])) if len(last) else None
    warning = None
    if "retrain" in reactions:  # monitoring saw a change: the champion is chosen afresh, no incumbent kept
        warning, incumbent = "monitoring reaction retrain: the champion is chosen afresh (no incumbent)", None
    elif fallback is not None:  # monitoring reaction fallback: the previous champion decides again
        warning = f"monitoring reaction fallback: the previous champion {fallback.get('name', '')} is kept"
        incumbent = Candidate.from_dict(fallback)
    return ChampionInputs(ev, evidence_of(ev, coefs, n_levels), {m: v for m, v, _ in models}, incumbent, reactions,
                          warning)


def with_deployed_days(con, campaign: str, config, inputs: ChampionInputs) -> ChampionInputs:
    """The inputs with the events of the deployed days joined to the evidence (campaign.yaml
    `champion.deployed_days`; promo_assets.decisions.deployed): the same inputs without any deployed
    day whose outcomes came back, or with the setting off."""
    if not config.champion.deployed_days:
        return inputs
    holdout = {pd.Timestamp(d).date() for d in inputs.ev.holdout["event_date"].unique()}
    days = tuple(read_deployed_days(con, campaign, config, list(inputs.evidence.coefficients), holdout))
    parts = [d.evidence for d in days if d.evidence is not None]
    evidence = Evidence.concat([inputs.evidence, *parts]) if parts else inputs.evidence
    return dataclasses.replace(inputs, evidence=evidence, deployed=days)


class Learning(NamedTuple):
    """What cross-fitting reads from the warehouse (`cross_fitting_frame`): the training frame, its numeric
    and categorical features, and the metrics of the candidate versions' full fits (their best epochs;
    None: fold fits early-stop on their own, campaign.yaml `champion.fold_epochs: early_stopping`)."""

    frame: pd.DataFrame
    numeric: list
    categorical: list
    full_fits: dict | None = None


def cross_fitting_frame(con, campaign: str, config, versions: Mapping[str, str]) -> Learning | None:
    """The campaign's training frame with its features and the full fits' metrics of `versions` ({model:
    version}) when campaign.yaml `champion.evidence` is cross_fitted (read here, fitted on by
    `with_cross_fitted` after the warehouse is closed), else None."""
    from promo_assets.models.inputs import training_frame

    if config.champion.evidence != "cross_fitted":
        return None
    full_fit = config.champion.fold_epochs == "full_fit"
    full_fits = models_store.model_metrics(con, campaign, versions) if full_fit else None
    return Learning(*training_frame(con, campaign), full_fits)


def with_cross_fitted(inputs: ChampionInputs, learning: Learning | None, config, log=None) -> ChampionInputs:
    """`inputs` with the cross-fitted evidence (promo_assets.decisions.crossfit) of the candidate models over
    the training days of `learning` (`cross_fitting_frame`) other than the deployed days already in the
    evidence (`with_deployed_days`), each refitted model trained for its full fit's epochs when
    `learning.full_fits` holds them; the inputs unchanged when `learning` is None."""
    from promo_assets.decisions.crossfit import Folds, cross_fitted_evidence, epoch_caps, refit_model, refitted_models

    if learning is None:
        return inputs
    block = config.champion
    models = [m for m in inputs.versions if block.candidates is None or m in block.candidates]
    learn = learning.frame
    deployed = {d.day for d in inputs.deployed if d.evidence is not None}
    if deployed:  # a deployed day's events are evidence already (scored by the versions that decided it): not twice
        learn = learn[~pd.to_datetime(learn["event_date"]).dt.date.isin(deployed)].reset_index(drop=True)
    folds = Folds.of(block)
    caps = {m: c for m, c in epoch_caps(learning.full_fits).items() if m in models}
    caps = {m: caps[m] for m in refitted_models(list(caps), folds.refit)}  # a model not refitted is not capped
    if log and caps:
        log("champion evidence: fold fits train for their full fits' epochs: "
            + "; ".join(f"{m} {', '.join(f'{k} {v}' for k, v in c.items())}" for m, c in caps.items()))
    xf = cross_fitted_evidence(learn, learning.numeric, learning.categorical, config, models, folds=folds, log=log,
                               fit_model=refit_model(config, caps))
    for why in xf.skipped:
        if log:
            log(f"champion evidence: {why}")
    return dataclasses.replace(inputs, cross_fitted=xf.evidence)


def evidence_of(ev, coefficients: dict, n_levels: int) -> Evidence:
    """The evidence of the holdout events: the logged arrays, the outcome model's predictions (zeros
    when it could not be fitted) and every model's coefficients for the events."""
    e = ev.evaluated_on().events
    t, y, z, p = e.logged, e.response, e.cost, e.propensity
    dm_v = ev.dm_values if ev.dm_values is not None else np.zeros((len(t), n_levels))
    dm_c = ev.dm_costs if ev.dm_costs is not None else np.zeros((len(t), n_levels))
    return Evidence(t, y, z, p, dm_v, dm_c, coefficients, np.full(len(t), "holdout"))


@dataclass(frozen=True)
class ChampionChoice:
    """A champion chosen: the decision, the settings it was chosen with, its evidence, the % of the
    oracle of every candidate at each budget (simulated campaigns; {} otherwise) and the leaderboard run."""

    decision: ChampionDecision
    settings: ChampionSettings
    evidence: Evidence
    pct: dict
    board_run: str
    deployed: tuple[DeployedDay, ...] = ()
    cross_fitted: Evidence | None = None

    @property
    def evidence_events(self) -> int:
        """The events the candidates were compared on: the evidence's and the cross-fitted ones."""
        return self.evidence.n + (self.cross_fitted.n if self.cross_fitted is not None else 0)

    def best(self) -> str | None:
        """The candidate with the highest mean % of the oracle (None without truth)."""
        return max(self.pct, key=lambda n: np.mean(self.pct[n])) if self.pct else None


def choose(inputs: ChampionInputs, config, board_run: str) -> ChampionChoice:
    """The champion of campaign.yaml `champion:` among the inputs' models and blends; a `fallback`
    reaction keeps the incumbent (it is not replaced)."""
    settings = ChampionSettings.from_config(config.champion)
    if "fallback" in inputs.reactions and inputs.incumbent is not None:
        settings = dataclasses.replace(settings, confidence=1 - 1e-12)  # the fallback is not replaced
    budgets = list(config.budget_per_capita)
    evidence = inputs.evidence
    decision = choose_champion(evidence, budgets, settings, incumbent=inputs.incumbent, versions=inputs.versions,
                               cross_fitted=inputs.cross_fitted)
    if words := evidence_words(evidence, inputs.deployed):
        decision = dataclasses.replace(decision, decided_by=f"{decision.decided_by} ({words})",
                                       comparisons=decision.comparisons + deployed_comparisons(evidence, decision,
                                                                                               budgets))
    ev = inputs.ev
    hold = (np.flatnonzero(evidence.source == "holdout") if evidence.source is not None else np.arange(evidence.n))
    pct = {} if ev.true_values is None else truth_audit(
        ev.true_values, ev.true_costs, decision.results,
        {m: (evidence.coefficients[m][0][hold], evidence.coefficients[m][1][hold]) for m in inputs.versions}, budgets)
    return ChampionChoice(decision, settings, evidence, pct, board_run, inputs.deployed, inputs.cross_fitted)


def _num(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def record_champion(con, campaign: str, run_id: str, choice: ChampionChoice) -> None:
    """Tables champion and champion_evidence (inside the caller's transaction)."""
    decision, settings, pct = choice.decision, choice.settings, choice.pct
    champ, inc, head, best = decision.champion, decision.incumbent, decision.headline(), choice.best()
    decisions_store.record_champion(con, campaign, run_id, [
        champ.name, champ.version, json.dumps(champ.to_dict()), decision.leader.name,
        decision.proposal.name, inc.name if inc else None, decision.changed, settings.pin is not None,
        settings.confidence, decision.reason, head["reference"], _num(head["difference"]), _num(head["low"]),
        _num(head["high"]), choice.evidence_events, choice.board_run,
        float(np.mean(pct[champ.name])) if champ.name in pct else None,
        best, float(np.mean(pct[best])) if best else None, decision.decided_by],
        pd.concat([evidence_frame(decision, pct), source_rows(choice.evidence, choice.deployed)], ignore_index=True))
