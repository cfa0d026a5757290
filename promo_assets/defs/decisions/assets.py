"""The campaign-level `champion`, `decisions` and `outbox` assets (Dagster wiring; the logic is in
`promo_assets.evaluation.champion` and `promo_assets.decisions`).

    leaderboard ─► champion ─► decisions ──(blocking checks)──► outbox files

- `champion` compares every model the leaderboard run assembled (and blends of them) paired, on the
  same events and at equal spend, and keeps or replaces the campaign's champion (tables champion,
  champion_evidence).
- `decisions` gives every user decided for a level at every budget: the champion's allocation with
  the exploration share and the propensities (tables decisions, decision_budgets). Its checks are
  blocking: a decision that fails one is never exported.
- `outbox` writes the stored decisions to `<outbox>/<campaign>/<date>/` atomically with a manifest
  (the same code as `promo export`).
They run in `decision_job`, after the leaderboard: a failed check fails that run only.
"""


import dataclasses
import datetime as dt
import json
import math

import dagster as dg
import numpy as np
import pandas as pd

from promo_assets.config import settings
from promo_assets.decisions import (
    Constraints,
    DecisionError,
    Exploration,
    ExportError,
    OutboxError,
    champion_freshness,
    decide_budgets,
    export_stored,
)
from promo_assets.decisions.pacing import (
    PacingError,
    PeriodBudget,
    pace_day,
    pacing_table,
    plot_pacing,
    prior_ratio,
    store_pacing,
    stored_history,
)
from promo_assets.defs.automation.conditions import REACTION_CONDITION
from promo_assets.defs.campaign.assets import (
    COMMON,
    coefficient_arrays,
    evaluation_inputs,
    png_md,
    read_holdout_events,
    results_write,
    upstream,
)
from promo_assets.defs.common import (
    LandingResource,
    OutboxResource,
    WarehouseResource,
    connect,
    group_features,
    md_table,
    population,
    rows_table,
)
from promo_assets.evaluation import EvaluationError
from promo_assets.evaluation.champion import (
    Candidate,
    ChampionSettings,
    Evidence,
    choose_champion,
    evidence_frame,
    headline_text,
    summary_tables,
    truth_audit,
)
from promo_assets.ingestion import day_files
from promo_assets.monitoring.drift import exploration_after_change
from promo_assets.report import ReportError, gather, render, write_report
from promo_assets.store import decisions as decisions_store, monitoring as monitoring_store

CHECKS = {
    "every_user_once": "Every user decided for appears exactly once per budget.",
    "spend_within_budget": "The predicted spend is within the budget (plus one user's dearest level).",
    "valid_levels": "Every level is one of the campaign's, with its label and incentive.",
    "no_missing_values": "No missing or non-finite value; propensities in (0, 1].",
    "exploration_share": "The share of explored users is within campaign.yaml exploration.tolerance of its share.",
    "champion_fresh": "The champion was chosen after the newest evaluation of every model.",
}


def _fail(exc: Exception) -> dg.Failure:
    return dg.Failure(str(exc))


def _num(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


# --------------------------------------------------------------------------------------------
# champion


def champion_inputs(context, warehouse: WarehouseResource, landing: LandingResource, campaign: str, config):
    """(evaluation inputs, Evidence, model versions, incumbent Candidate or None, leaderboard run, its
    version) for the champion of `campaign`: the models the upstream leaderboard run assembled."""
    board_run, _, board_version = upstream(context, "leaderboard")
    with connect(warehouse) as con:
        ev = evaluation_inputs(context, con, landing, campaign, config)
        models = decisions_store.board_models(con, campaign, board_run)
        coefs = {m: ev.align(*coefficient_arrays(con, campaign, m, v, "holdout", config.n_levels), m) for m, v, _ in models}
        last = decisions_store.latest_champion(con, campaign, or_run=context.run_id)
        reactions = set(monitoring_store.active_reactions(con, campaign)["reaction"])
        fallback = (monitoring_store.previous_champion(con, campaign, last["champion"].iloc[0])
                    if "fallback" in reactions and len(last) else None)
    if not models:
        raise dg.Failure(f"the leaderboard of campaign '{campaign}' (run {board_run}) has no evaluated model: "
                         "nothing to choose a champion from")
    t, y, z, p = ev.logged
    k = config.n_levels
    dm_v = ev.dm_values if ev.dm_values is not None else np.zeros((len(t), k))
    dm_c = ev.dm_costs if ev.dm_costs is not None else np.zeros((len(t), k))
    evidence = Evidence(t, y, z, p, dm_v, dm_c, coefs, np.full(len(t), "holdout"))
    incumbent = Candidate.from_dict(json.loads(last["champion_members"].iloc[0])) if len(last) else None
    if "retrain" in reactions:  # monitoring saw a change: the champion is chosen afresh, no incumbent kept
        context.log.warning("monitoring reaction retrain: the champion is chosen afresh (no incumbent)")
        incumbent = None
    elif fallback is not None:  # monitoring reaction fallback: the previous champion decides again
        context.log.warning(f"monitoring reaction fallback: the previous champion {fallback.get('name', '')} is kept")
        incumbent = Candidate.from_dict(fallback)
    return ev, evidence, {m: v for m, v, _ in models}, incumbent, board_run, board_version


def store_champion(context, warehouse: WarehouseResource, campaign: str, decision, settings, evidence, pct,
                   board_run: str) -> None:
    """Tables champion and champion_evidence (one transaction, with the run's bookkeeping)."""
    champ, inc, head = decision.champion, decision.incumbent, decision.headline()
    best = max(pct, key=lambda n: np.mean(pct[n])) if pct else None
    with connect(warehouse) as con, results_write(context, con, campaign, "champion", "champion_evidence"):
        decisions_store.record_champion(con, campaign, context.run_id, [
            champ.name, champ.version, json.dumps(champ.to_dict()), decision.leader.name,
            decision.proposal.name, inc.name if inc else None, decision.changed, settings.pin is not None,
            settings.confidence, decision.reason, head["reference"], _num(head["difference"]), _num(head["low"]),
            _num(head["high"]), evidence.n, board_run, float(np.mean(pct[champ.name])) if champ.name in pct else None,
            best, float(np.mean(pct[best])) if best else None, decision.decided_by], evidence_frame(decision, pct))


def members_table(members: dict) -> dg.MetadataValue:
    """The champion's members with their weights and versions, one row each."""
    names, weights = members.get("members", []), members.get("weights", [])
    versions = members.get("versions") or [""] * len(names)
    versions = [versions.get(n, "") for n in names] if isinstance(versions, dict) else versions
    return md_table([{"member": n, "weight": round(float(w), 3), "version": v} for n, w, v in zip(names, weights, versions)])


def champion_metadata(decision, settings, evidence, pct, budgets, board_run) -> dict:
    champ, inc = decision.champion, decision.incumbent
    cands, comps = summary_tables(decision, pct)
    meta = {"champion": champ.name, "champion_version": champ.version, "members": members_table(champ.to_dict()),
            "headline": headline_text(champ.name, budgets, decision.headline(), settings.confidence),
            "chosen on": decision.decided_by, "reason": decision.reason,
            "changed": decision.changed, "incumbent": inc.name if inc else "(none: first champion)",
            "confidence": settings.confidence, "evidence_events": evidence.n, "leaderboard_run": board_run,
            "candidates": rows_table(cands), "comparisons": rows_table(comps)}
    if pct:
        best = max(pct, key=lambda n: np.mean(pct[n]))
        meta.update({"pct_oracle": round(float(np.mean(pct[champ.name])), 4), "best_candidate": best,
                     "best_pct_oracle": round(float(np.mean(pct[best])), 4)})
    return meta


@dg.asset(key="champion", deps=["leaderboard"], group_name="decisions", code_version="1", kinds={"duckdb"},
          **{**COMMON, "automation_condition": REACTION_CONDITION},
          description="The campaign's champion: the policy to deploy, chosen without ground truth among the models the "
          "leaderboard assembled and blends of them, by paired comparisons of their doubly robust value at equal spend "
          "on the same events (campaign.yaml `champion:` confidence, pin, candidates, blends; docs/decisions.md). A "
          "challenger replaces the champion only when better at the configured confidence. Tables champion and "
          "champion_evidence; on simulated campaigns the champion's and the best candidate's % of the oracle.")
def champion(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    campaign = context.partition_key
    config = landing.config(campaign)
    budgets = list(config.budget_per_capita)
    settings = ChampionSettings.from_config(config.champion)
    ev, evidence, versions, incumbent, board_run, board_version = champion_inputs(context, warehouse, landing, campaign,
                                                                                config)
    with connect(warehouse) as con:
        if "fallback" in set(monitoring_store.active_reactions(con, campaign)["reaction"]) and incumbent is not None:
            settings = dataclasses.replace(settings, confidence=1 - 1e-12)  # the fallback is not replaced
    try:
        decision = choose_champion(evidence, budgets, settings, incumbent=incumbent, versions=versions)
    except EvaluationError as exc:
        raise _fail(exc) from None
    pct = {} if ev.true_values is None else truth_audit(ev.true_values, ev.true_costs, decision.results,
                                                         {m: evidence.coefficients[m] for m in versions}, budgets)
    context.log.info(decision.reason)
    store_champion(context, warehouse, campaign, decision, settings, evidence, pct, board_run)
    return dg.MaterializeResult(metadata=champion_metadata(decision, settings, evidence, pct, budgets, board_run),
                                data_version=dg.DataVersion(f"{decision.champion.version}-{board_version or board_run}"[:48]))


# --------------------------------------------------------------------------------------------
# decisions


def users_decided_for(landing: LandingResource, campaign: str, n: int) -> str:
    """Which users the decisions are for, in words (the manifest's `users`)."""
    files = day_files(landing.path, campaign, "population")
    if files:
        return f"the {n} users of the population file {files[max(files)].name}"
    return (f"the {n} users of the holdout days: campaign '{campaign}' has no population/ file (add "
            "population/<date>.parquet listing every user to decide for)")


def champion_coefficients(con, campaign: str, members: dict, k: int):
    """(users, values, costs) of the champion for the population: the weighted mean of its members'
    population coefficients (the versions the champion was chosen with)."""
    users = values = costs = None
    for m, w, version in zip(members["members"], members["weights"], members["versions"]):
        u, v, c = coefficient_arrays(con, campaign, m, version, "population", k)
        if len(u) == 0:
            raise dg.Failure(f"no population coefficients of {m} {version}: re-materialize {m}/response_coefficients")
        if users is not None and not np.array_equal(u, users):
            raise dg.Failure(f"the population coefficients of the champion's members differ in their users ({m}): "
                             "re-materialize their response_coefficients")
        users, values, costs = u, w * v + (0 if values is None else values), w * c + (0 if costs is None else costs)
    return users, values, costs


def decision_inputs(warehouse: WarehouseResource, campaign: str, champ_run: str, k: int):
    """(champion row, champion info, users, values, costs, decision date, newest evaluations, the
    champion's evidence rows) for the decisions of champion run `champ_run`."""
    with connect(warehouse) as con:
        rows = decisions_store.champion_of_run(con, campaign, champ_run)
        if rows.empty:
            raise dg.Failure(f"the champion of run {champ_run} was removed (its run failed): re-materialize champion")
        row = rows.iloc[0]
        members = json.loads(row["champion_members"])
        users, values, costs = champion_coefficients(con, campaign, members, k)
        last_day = decisions_store.last_event_day(con, campaign)
        newest = decisions_store.latest_evaluations(con, campaign, champ_run)
        evidence = decisions_store.champion_evidence_of_run(con, campaign, champ_run)
    day = (pd.Timestamp(last_day).date() if last_day is not None else dt.date.today()) + dt.timedelta(days=1)
    info = {**members, "name": row["champion"], "version": row["champion_version"], "run_id": champ_run}
    return row, info, users, values, costs, day, newest, evidence


def store_decisions(context, warehouse: WarehouseResource, campaign: str, day: dt.date, made, info: dict, who: str,
                    paced=None, exploration=None, coefficients=None) -> list[dict]:
    """The decisions, their budgets' manifest entries and, for a period budget (`paced`: budget, today,
    history), the per-day pacing rows (table pacing), in one transaction; returns the pacing rows. The
    stored manifest also keeps the exploration's seed (`exploration_seed`): `promo serve` draws its
    online users with the exploration these decisions used, whatever campaign.yaml says later."""
    rows = pacing_table(paced[0], [*paced[2], paced[1]]) if paced is not None else []
    with connect(warehouse) as con, results_write(context, con, campaign, "decisions", "decision_budgets", "pacing",
                                                  "decision_coefficients"):
        if coefficients is not None:
            decisions_store.record_decision_coefficients(con, campaign, context.run_id, day, *coefficients)
        for entry in made.entries:
            b = float(entry["budget_per_capita"])
            decisions_store.record_decisions(con, campaign, context.run_id, day, b, made.frames[b], info, who, json.dumps(
                {"entry": entry, "champion": info, "max_user_cost": made.max_user_cost,
                 **({"exploration_seed": int(exploration.seed)} if exploration is not None else {})}))
        if rows:
            store_pacing(con, campaign, context.run_id, day, paced[0], rows)
    return rows


def check_results(outcomes: dict) -> list[dg.AssetCheckResult]:
    return [dg.AssetCheckResult(check_name=name, passed=all(o.passed for _, o in got), metadata={
        "result": "; ".join((f"budget {b:g}: " if b is not None else "") + o.message for b, o in got)})
        for name, got in outcomes.items()]


def decision_constraints(warehouse: WarehouseResource, landing: LandingResource, campaign: str, config, users):
    """campaign.yaml `constraints:` for the users decided for (the group features from the population
    file, else the holdout events), or None when none is configured."""
    block = config.constraints
    if block is None:
        return None
    frame = pd.DataFrame(index=pd.Index(users, name="user_id"))
    if block.groups:
        with connect(warehouse) as con:
            features = group_features(con, campaign, config)
            pop = population(con, landing, campaign, features)
            rows = pd.concat(list(pop.frames(65536))) if pop is not None else read_holdout_events(con, campaign)
        missing = [f for f in features if f not in rows.columns]
        if missing:
            raise dg.Failure(f"campaign.yaml constraints.groups: the users decided for have no feature "
                             f"{', '.join(map(repr, missing))}")
        rows = rows.assign(user_id=rows["user_id"].astype(str)).drop_duplicates("user_id", keep="last")
        frame = rows.set_index("user_id")[features].reindex(pd.Index(users, dtype=str))
    try:
        return Constraints.build(block, frame, config.n_levels)
    except DecisionError as exc:
        raise _fail(exc) from None


def paced_decision(warehouse: WarehouseResource, campaign: str, config, day: dt.date, response, cost):
    """(PeriodBudget, today's PacingDay, the earlier days) for campaign.yaml `budget:` when `day` is in
    its period, else None (promo_assets.decisions.pacing)."""
    if config.budget is None:
        return None
    budget = PeriodBudget.from_config(config.budget)
    if not budget.start <= day <= budget.end:
        return None
    with connect(warehouse) as con:
        history = [h for h in stored_history(con, campaign) if budget.start <= h.day < day]
        prior = prior_ratio(con, campaign, len(response))
    try:
        return budget, pace_day(budget, day, response, cost, history, prior), history
    except PacingError as exc:
        raise _fail(exc) from None


PACING_COLUMNS = (  # the `pacing` metadata table: pacing_table's keys, typed and described
    ("day", "date", "the paced decision day"),
    ("plan", "float", "the budget left over the days left, on that day"),
    ("lambda", "float", "λ of the day's paced decision"),
    ("predicted spend", "float", "the champion's predicted spend at λ for every user decided for"),
    ("realized spend", "float", "what the day's events reported (empty: not loaded yet)"),
    ("spend ratio", "float", "realized over predicted spend of the days back before it (the correction)"),
    ("cumulative spend", "float", "realized, else planned, up to and including the day"),
    ("even plan", "float", "total / days × days elapsed"),
    ("budget left", "float", "the total minus the cumulative spend"),
)


def pacing_metadata(budget, today, rows: list[dict]) -> dict:
    """The per-day pacing table (also in table pacing) and its plot, for the decisions asset's page."""
    records = [dg.TableRecord({k: (float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in r.items()})
               for r in rows]  # realized spend None (not back yet): an empty cell
    schema = dg.TableSchema(columns=[dg.TableColumn(n, t, description=d) for n, t, d in PACING_COLUMNS])
    return {"pacing": dg.MetadataValue.table(records, schema=schema),
            "pacing_plot": dg.MetadataValue.md(png_md(plot_pacing(rows, budget.total), "Spend per day and cumulative")),
            "paced_lambda": today.lambda_, "paced_plan": today.plan, "period_total": budget.total,
            "period_budget_left_before_today": rows[-1]["budget left"] + today.plan}


def decide_all(warehouse: WarehouseResource, landing: LandingResource, campaign: str, config, exploration, day,
               users, response, cost, info: dict, evidence):
    """(DecisionSet, pacing or None): every configured budget's decision, the day's paced decision of a
    period budget (its entry tagged `pacing`) and the constraints of campaign.yaml kept in each."""
    paced = paced_decision(warehouse, campaign, config, day, response, cost)
    budgets = list(config.budget_per_capita)
    if paced is not None:  # the period budget's decision: the per-capita budget its λ spends, predicted
        paced_b = round(paced[1].predicted / len(users), 10)
        if paced_b not in budgets:
            budgets.append(paced_b)
    constraints = decision_constraints(warehouse, landing, campaign, config, users)
    try:
        made = decide_budgets(users, response, cost, budgets, exploration, day, labels=config.labels,
                              incentives=config.incentives, champion=info, evidence=evidence, constraints=constraints)
    except DecisionError as exc:
        raise _fail(exc) from None
    if paced is not None:
        for entry in made.entries:
            if entry["budget_per_capita"] == paced_b:
                entry["pacing"] = {**paced[1].to_dict(), "total": paced[0].total, "start": paced[0].start.isoformat(),
                                   "end": paced[0].end.isoformat(), "controller": paced[0].controller}
    return made, paced


def decision_metadata(info: dict, day: dt.date, who: str, exploration, entries: list) -> dict:
    rows = [{"budget": e["budget_per_capita"], "users": e["users"], "lambda": e["lambda_"],
             "predicted response / user": e["expected_response"]["per_capita"],
             "predicted cost / user": e["expected_cost"]["per_capita"], "explored": e["exploration"]["users"],
             "value given up / user": e["exploration"]["value_given_up_per_capita"],
             **({"multipliers": ", ".join(f"{k} {v:.4g}" for k, v in e["multipliers"].items()),
                 "use / budget": ", ".join(f"{k} {v:.3f}" for k, v in e["budget_use"].items())}
                if "multipliers" in e else {})} for e in entries]
    return {"champion": info["name"], "champion_version": info["version"], "decision_date": str(day), "users": who,
            "exploration_share": exploration.share, "budgets": md_table(rows)}


@dg.asset(key="decisions", deps=["champion"], group_name="decisions", code_version="1", kinds={"duckdb"}, **COMMON,
          check_specs=[dg.AssetCheckSpec(n, asset="decisions", blocking=True, description=t) for n, t in CHECKS.items()],
          description="The champion's allocation for every user decided for (the population file, else the holdout "
          "users, said in the metadata) at every configured budget, with the exploration share of campaign.yaml "
          "`exploration:` (levels drawn at random, the propensity of every user's level written) for the day after the "
          "last loaded day; with campaign.yaml `budget:` also the day's paced decision. Tables decisions, decision_budgets and pacing (one row per paced day). Blocking checks: every user once, spend within "
          "budget, valid levels, no missing value, exploration share, champion not older than the newest evaluation.")
def decisions(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    campaign = context.partition_key
    config = landing.config(campaign)
    champ_run, _, champ_version = upstream(context, "champion")
    exploration = Exploration.from_config(config.exploration)
    row, info, users, values, costs, day, newest, evidence = decision_inputs(warehouse, campaign, champ_run,
                                                                             config.n_levels)
    with connect(warehouse) as con:  # a `retrain` reaction may explore more on the days after the change
        share = exploration_after_change(exploration.share, monitoring_store.training_change_day(con, campaign), day,
                                         config.monitoring)
    if share != exploration.share:
        context.log.warning(f"monitoring reaction retrain: exploration share {share:g} on {day} (after the change)")
        exploration = dataclasses.replace(exploration, share=share)
    made, paced = decide_all(warehouse, landing, campaign, config, exploration, day, users, values, costs, info,
                             evidence)
    made.outcomes["champion_fresh"] = [(None, champion_freshness(row["decided_at"], newest))]
    who = users_decided_for(landing, campaign, len(users))
    rows = store_decisions(context, warehouse, campaign, day, made, info, who, paced, exploration,
                           (users, values, costs))
    metadata = decision_metadata(info, day, who, exploration, made.entries)
    if paced is not None:
        metadata.update(pacing_metadata(paced[0], paced[1], rows))
    return dg.MaterializeResult(metadata=metadata, check_results=check_results(made.outcomes),
                                data_version=dg.DataVersion(f"{info['version']}-{day}-{champ_version}"[:48]))


# --------------------------------------------------------------------------------------------
# outbox


@dg.asset(key="outbox", deps=["decisions", "outcomes"], group_name="decisions", code_version="1", kinds={"parquet"}, **COMMON,
          # Dagster's own freshness: the UI flags an outbox not rewritten for a day (warn) or two (fail); the
          # campaign's own limit is the outcomes' freshness check (campaign.yaml monitoring.max_decision_age_days)
          freshness_policy=dg.FreshnessPolicy.time_window(fail_window=dt.timedelta(days=2),
                                                          warn_window=dt.timedelta(days=1)),
          description="The stored decisions written to the outbox for the systems that send incentives: "
          "`<outbox>/<campaign>/<date>/<budget>.parquet` and `manifest.json` (champion, version, budget, λ, expected response "
          "and cost with intervals, exploration share and its cost, checksums), atomically (a complete folder or none). "
          "Not materialized when a blocking check of `decisions` failed. `promo export` writes the same.")
def outbox(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource,
           outbox: OutboxResource):
    campaign = context.partition_key
    config = landing.config(campaign)
    run_id, _, version = upstream(context, "decisions")
    with connect(warehouse) as con:
        stop = monitoring_store.active_reactions(con, campaign, context.run_id)
    stop = stop[stop["reaction"] == "stop_export"]
    if len(stop):
        why = "; ".join(f"{r.check_name}: {r.message}" for r in stop.itertuples())
        context.log.warning(f"export stopped by monitoring (campaign.yaml monitoring.reactions): {why}; the last "
                            "exported decision stays in the outbox")
        return dg.MaterializeResult(metadata={"export": "STOPPED by monitoring: " + why, "date": "(not written)"},
                                    data_version=dg.DataVersion(f"stopped-{version or run_id}"[:48]))
    try:
        with connect(warehouse) as con:
            folder, body, _ = export_stored(con, campaign, outbox.path, config=config, run_id=run_id)
    except (ExportError, OutboxError) as exc:
        raise _fail(exc) from None
    files = [{"file": e["file"], "rows": e["rows"], "sha256": e["sha256"][:16] + "…"} for e in body["budgets"]]
    return dg.MaterializeResult(metadata={"folder": dg.MetadataValue.path(str(folder)), "date": body["date"],
                                          "champion": body["champion"], "files": md_table(files)},
                                data_version=dg.DataVersion(version or run_id))


# --------------------------------------------------------------------------------------------
# the campaign report


@dg.asset(key="campaign_report", deps=["leaderboard", "champion", "decisions", "outcomes"], group_name="decisions",
          code_version="1", kinds={"html", "plotly"}, **COMMON,
          description="The campaign's report as one self-contained HTML file (plotly.js inlined: it opens without "
          "network access): the champion and its evidence, the leaderboard with what each column means, the "
          "cost–response frontier of every policy, response per level, per-segment results, the decisions exported "
          "and their exploration share, spend per day (table pacing) where campaign.yaml `budget:` paces a period. Written to "
          "`<PROMO_REPORT_DIR>/<campaign>.html`; `promo report --html PATH` writes the same.")
def campaign_report(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    campaign = context.partition_key
    config = landing.config(campaign)
    board_run, _, _ = upstream(context, "leaderboard")
    champion_run, _, _ = upstream(context, "champion")
    decisions_run, _, version = upstream(context, "decisions")
    try:
        with connect(warehouse) as con:
            data = gather(con, landing.path, campaign, config, board_run=board_run, champion_run=champion_run,
                          decisions_run=decisions_run)
    except ReportError as exc:
        raise _fail(exc) from None
    html = render(data)
    path = write_report(html, settings.report_dir() / f"{campaign}.html")
    context.log.info(f"report written to {path} ({len(html) / 1e6:.1f} MB)")
    return dg.MaterializeResult(
        metadata={"report": dg.MetadataValue.path(str(path)), "open": dg.MetadataValue.url(path.as_uri()),
                  "size_mb": round(len(html.encode()) / 1e6, 2), "plots": html.count('class="plotly-graph-div"'),
                  "leaderboard_run": board_run, "champion_run": champion_run, "decisions_run": decisions_run},
        data_version=dg.DataVersion(f"{board_run[:12]}-{champion_run[:12]}-{decisions_run[:12]}"))
