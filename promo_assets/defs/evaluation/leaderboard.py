"""The campaign-level `leaderboard` asset: the latest evaluation of every registered model (the run
Dagster recorded for its `<model>/policy_evaluation` materialization), the cost-matched random
reference (evaluated here, once), the models skipped with their reasons and those without an
evaluation. It is not in `campaign_job`: in one run Dagster does not execute a step whose upstream
failed or was skipped, and the leaderboard must appear when one model fails or does not apply.
`promo run` materializes it in the run of the model chains, which holds only the chains of the models
trained for the campaign (`registry.skip_reason`), and by `leaderboard_job` after a chain failed; in
the UI it follows any model's evaluation (its automation condition)."""


import dagster as dg
import pandas as pd

from promo_assets.core.display import md_table
from promo_assets.defs.automation.conditions import COMMON, GATHER_CONDITION
from promo_assets.defs.common import (
    LandingResource,
    WarehouseResource,
    domain_errors,
    evaluation_inputs,
    metadata,
    model_key,
    writing,
)
from promo_assets.evaluation import evaluate_random
from promo_assets.evaluation.board import ChainRecord, assemble, board_entry, budgets_kept, current_champion
from promo_assets.evaluation.board_view import board_metadata
from promo_assets.evaluation.report import RANDOM_MODEL, RANDOM_VERSION
from promo_assets.models import registry
from promo_assets.store import frames as frames_store, models as models_store


def _latest(instance, asset_key: dg.AssetKey, campaign: str, observations: bool = False):
    f = dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[campaign])
    fetch = instance.fetch_observations if observations else instance.fetch_materializations
    records = fetch(f, limit=1).records
    return records[0] if records else None


def chain_record(instance, name: str, campaign: str, config) -> ChainRecord:
    """Where model `name`'s chain stands for `campaign`: left out by campaign.yaml, else what Dagster
    recorded: a skip of its first phase newer than its materialization, else its latest
    policy_evaluation materialization."""
    left_out = registry.skip_reason(name, config)
    if left_out is not None:
        return ChainRecord(left_out)
    model = registry.get(name)
    first = model_key(name, "model" if len(model.phases) == 1 else model.phases[0])
    skip, mat = _latest(instance, first, campaign, observations=True), _latest(instance, first, campaign)
    if skip is not None and "skipped_reason" in skip.asset_observation.metadata and (
            mat is None or skip.storage_id > mat.storage_id):
        return ChainRecord(None, skip.asset_observation.metadata["skipped_reason"].value)
    ev = _latest(instance, model_key(name, "policy_evaluation"), campaign)
    if ev is None:
        return ChainRecord()
    meta = ev.asset_materialization.metadata
    return ChainRecord(None, None, meta["model_version"].value, ev.run_id,
                       meta["frame_version"].value if "frame_version" in meta else None)


def leaderboard_asset(names: list[str]) -> dg.AssetsDefinition:
    @dg.asset(key="leaderboard", deps=[model_key(n, "policy_evaluation") for n in names] + ["outcome_model"],
              group_name="evaluation", code_version="1", kinds={"duckdb", "matplotlib"},
              **{**COMMON, "automation_condition": GATHER_CONDITION},
              description="Every model at equal spend: the latest evaluation of each registered model (its "
              "`<model>/policy_evaluation` materialization) and the cost-matched random reference (rows 'random'), "
              "ranked; the leaderboard (a table), the frontier and response-per-level plots, and the models "
              "skipped (with the reason) or without an evaluation. Tables policy_evaluation (random rows) and "
              "leaderboard_entries (which evaluation of each model it assembled).")
    def leaderboard(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
        from promo_assets.causal.checks import frame_checks

        campaign = context.partition_key
        config = landing.config(campaign)
        with warehouse.connect() as con:
            frame_version = frames_store.frame_version(con, campaign)
            checks = frame_checks(frames_store.training_frame(con, campaign), config)
            # every registered model, also one whose chain is not in these Definitions (`promo run` builds
            # only the chains it runs: the others are left out for this campaign, listed with the reason)
            entries = [board_entry(n, chain_record(context.instance, n, campaign, config), frame_version)
                       for n in registry.names()]
            ev = evaluation_inputs(context, con, landing, campaign, config)
            with domain_errors():
                got = assemble(con, campaign, entries, ev, config.n_levels)
            champion = current_champion(con, campaign)
            kept = budgets_kept(con, campaign, entries) if config.constraints else []
        random = evaluate_random(ev.evaluated_on(), ev.settings(config, campaign, context.log.info))
        random["run_id"] = context.run.run_id
        entries.append({"model": RANDOM_MODEL, "model_version": RANDOM_VERSION, "evaluation_run_id": context.run.run_id,
                        "status": "evaluated", "reason": None})
        with writing(context, warehouse, "policy_evaluation", "leaderboard_entries", "data_checks") as con:
            models_store.write_board(con, campaign, context.run.run_id, random, entries, checks)
        board = pd.concat([f for f in got.frames + [random] if not f.empty], ignore_index=True)
        shown = board_metadata(board, got.specs, ev, config, campaign, entries[:-1], checks, champion)
        return dg.MaterializeResult(metadata=metadata({**shown, **({"budgets_kept": md_table(kept)} if kept else {})}))

    return leaderboard
