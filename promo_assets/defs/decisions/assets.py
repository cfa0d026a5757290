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

import dagster as dg

from promo_assets.config import settings
from promo_assets.core.display import md_table
from promo_assets.decisions import Exploration, champion_freshness, export_stored
from promo_assets.decisions.champion_run import (
    choose,
    cross_fitting_frame,
    read_champion_inputs,
    record_champion,
    with_cross_fitted,
    with_deployed_days,
)
from promo_assets.decisions.daily import (
    decide_day,
    read_day_plan,
    read_decision_inputs,
    store_day,
    users_decided_for,
)
from promo_assets.decisions.display import champion_metadata, decision_check_results, decision_metadata
from promo_assets.defs.automation.conditions import COMMON, REACTION_CONDITION
from promo_assets.defs.common import (
    LandingResource,
    OutboxResource,
    WarehouseResource,
    check_results,
    domain_errors,
    evaluation_inputs,
    metadata,
    upstream,
    writing,
)
from promo_assets.monitoring.drift import exploration_after_change
from promo_assets.monitoring.exported import ExportBy, record_stopped
from promo_assets.report import gather, render, write_report
from promo_assets.store import monitoring as monitoring_store

CHECKS = {
    "every_user_once": "Every user decided for appears exactly once per budget.",
    "spend_within_budget": "The predicted spend is within the budget (plus one user's dearest level).",
    "valid_levels": "Every level is one of the campaign's, with its label and incentive.",
    "no_missing_values": "No missing or non-finite value; propensities in (0, 1].",
    "exploration_share": "The share of explored users is within campaign.yaml exploration.tolerance of its share.",
    "champion_fresh": "The champion was chosen after the newest evaluation of every model.",
}


# --------------------------------------------------------------------------------------------
# champion


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
    board_run, _, board_version = upstream(context, "leaderboard")
    with warehouse.connect() as con:
        ev = evaluation_inputs(context, con, landing, campaign, config)
        with domain_errors():
            inputs = read_champion_inputs(con, campaign, ev, board_run, context.run.run_id, config.n_levels)
            inputs = with_deployed_days(con, campaign, config, inputs)
            learning = cross_fitting_frame(con, campaign, config, inputs.versions)
    if inputs.warning:
        context.log.warning(inputs.warning)
    with domain_errors():
        inputs = with_cross_fitted(inputs, learning, config, context.log.info)
        choice = choose(inputs, config, board_run)
    context.log.info(choice.decision.reason)
    with writing(context, warehouse, "champion", "champion_evidence") as con:
        record_champion(con, campaign, context.run.run_id, choice)
    return dg.MaterializeResult(metadata=metadata(champion_metadata(choice, list(config.budget_per_capita))),
                                data_version=dg.DataVersion(f"{choice.decision.champion.version}-{board_version or board_run}"[:48]))


# --------------------------------------------------------------------------------------------
# decisions


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
    with warehouse.connect() as con, domain_errors():
        inputs = read_decision_inputs(con, campaign, champ_run, config.n_levels)
        change_day = monitoring_store.training_change_day(con, campaign)  # a `retrain` reaction may explore more
    share = exploration_after_change(exploration.share, change_day, inputs.day, config.monitoring)
    if share != exploration.share:
        context.log.warning(f"monitoring reaction retrain: exploration share {share:g} on {inputs.day} (after the change)")
        exploration = dataclasses.replace(exploration, share=share, share_key="monitoring.change_explore_share")
    with warehouse.connect() as con, domain_errors():
        plan = read_day_plan(con, landing.path, campaign, config, inputs)
    with domain_errors():
        decided = decide_day(inputs, plan, config, exploration, users_decided_for(landing.path, campaign, len(inputs.users)))
    decided.made.outcomes["champion_fresh"] = [(None, champion_freshness(inputs.champion_row["decided_at"], inputs.newest))]
    with writing(context, warehouse, "decisions", "decision_budgets", "pacing", "decision_coefficients") as con:
        rows = store_day(con, campaign, context.run.run_id, decided)
    return dg.MaterializeResult(metadata=metadata(decision_metadata(decided, rows)),
                                check_results=check_results(decision_check_results(decided.made.outcomes)),
                                data_version=dg.DataVersion(f"{inputs.info['version']}-{inputs.day}-{champ_version}"[:48]))


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
    with warehouse.connect() as con:
        stop = monitoring_store.active_reactions(con, campaign, context.run.run_id)
    stop = stop[stop["reaction"] == "stop_export"]
    if len(stop):
        why = "; ".join(f"{r.check_name}: {r.message}" for r in stop.itertuples())
        with warehouse.connect() as con, domain_errors():
            state = record_stopped(con, campaign, run_id, why, context.run.run_id)
        now = dt.datetime.now()
        line = state.stopped_line(now)
        context.log.warning(f"{line} (campaign.yaml monitoring.reactions stop_export)")
        return dg.MaterializeResult(metadata=metadata({**state.describe(now), "export": line,
                                                       "date": "(not written)"}),
                                    data_version=dg.DataVersion(f"stopped-{version or run_id}"[:48]))
    with warehouse.connect() as con, domain_errors():
        folder, body, _ = export_stored(con, campaign, outbox.path, config=config, run_id=run_id,
                                        by=ExportBy(context.run.run_id))
    files = [{"file": e["file"], "rows": e["rows"], "sha256": e["sha256"][:16] + "…"} for e in body["budgets"]]
    deployed = body.get("deployed_budget")
    return dg.MaterializeResult(metadata=metadata({"folder": dg.MetadataValue.path(str(folder)), "date": body["date"],
                                                   "export": "exported", "champion": body["champion"],
                                                   "deployed_budget": "not known (campaign.yaml monitoring.budget)"
                                                   if deployed is None else f"{deployed:g}",
                                                   "files": md_table(files)}),
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
    with warehouse.connect() as con, domain_errors():
        data = gather(con, landing.path, campaign, config, board_run=board_run, champion_run=champion_run,
                      decisions_run=decisions_run)
    html = render(data)
    path = write_report(html, settings.report_dir() / f"{campaign}.html")
    context.log.info(f"report written to {path} ({len(html) / 1e6:.1f} MB)")
    return dg.MaterializeResult(
        metadata={"report": dg.MetadataValue.path(str(path)), "open": dg.MetadataValue.url(path.as_uri()),
                  "size_mb": round(len(html.encode()) / 1e6, 2), "plots": html.count('class="plotly-graph-div"'),
                  "leaderboard_run": board_run, "champion_run": champion_run, "decisions_run": decisions_run},
        data_version=dg.DataVersion(f"{board_run[:12]}-{champion_run[:12]}-{decisions_run[:12]}"))
