"""Campaign-level assets: propensity → training frame → outcome model (the DR direct method), shared
by every model's chain (promo_assets/defs/models/assets.py: one chain per registered model,
and the leaderboard). Each asset reads the warehouse (through the named functions of
promo_assets.store), calls domain code (promo_assets.causal, promo_assets.evaluation.inputs) and
writes the result back; the logic lives in the domain packages."""


import dagster as dg
import pandas as pd

from promo_assets.causal.checks import CHECKS as FRAME_CHECKS
from promo_assets.causal.display import frame_check_results, frame_metadata, propensity_metadata
from promo_assets.causal.frame import event_propensity, split_and_weights
from promo_assets.defs.automation.conditions import COMMON, REACTION_CONDITION
from promo_assets.defs.common import LandingResource, WarehouseResource, check_results, metadata
from promo_assets.evaluation.inputs import fit_outcome
from promo_assets.monitoring.drift import training_events
from promo_assets.store import frames as frames_store
from promo_assets.store.artifacts import content_version
from promo_assets.store.frames import feature_spec

# --------------------------------------------------------------------------------------------
# causal


@dg.asset(
    **COMMON,
    deps=["rct_events"],  # the same campaign partition
    code_version="1",
    group_name="causal",
    kinds={"duckdb", "sklearn"},
    description="Propensity of each event's logged level: the logged one, or the empirical assignment "
    "frequency per day for randomized campaigns; a calibrated multinomial model P(level | features) for "
    "observational ones (randomized: false), with overlap diagnostics. Table propensity.",
)
def propensity(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    campaign = context.partition_key
    config = landing.config(campaign)
    with warehouse.connect() as con:
        numeric, categorical = feature_spec(con, campaign)
        events = frames_store.events(con, campaign, numeric + categorical)
        if events.empty:
            raise dg.Failure(f"no rct_events for campaign '{campaign}'")
        prop = event_propensity(events, config, numeric, categorical, log=context.log.info)
        frame_df = pd.DataFrame({"event_date": events["event_date"], "source_row": events["source_row"],
                                 "propensity": prop.propensity, "source": prop.source})
        version = content_version(frame_df[["propensity"]].to_numpy().tobytes())
        frames_store.replace_propensity(con, campaign, version, frame_df)
    return dg.MaterializeResult(metadata=metadata(propensity_metadata(events, prop, config, version)),
                                data_version=dg.DataVersion(version))


@dg.asset(
    **{**COMMON, "automation_condition": REACTION_CONDITION},
    deps=["propensity"],
    code_version="1",
    group_name="causal",
    kinds={"duckdb"},
    check_specs=[dg.AssetCheckSpec(name, asset="training_frame", description=text) for name, text in FRAME_CHECKS.items()],
    description="Train / validation / holdout split by date window (last `holdout_days` days are the "
    "holdout; earlier days split by a hash of the user id) and clipped, self-normalized IPS weights "
    "per event. Table training_frame. Its asset checks (promo_assets.causal.checks) say whether there is "
    "anything to learn: events per level, a response that varies, a plausible response rate.",
)
def training_frame(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    campaign = context.partition_key
    config = landing.config(campaign)
    with warehouse.connect() as con:
        got = training_events(con, campaign, config)
        events, change_day = got.events, got.change_day
        split, weights = split_and_weights(events, events["propensity"].to_numpy(), config)
        frame_df = pd.DataFrame(
            {"event_date": events["event_date"], "source_row": events["source_row"], "split": split,
             "ips_weight": weights * got.stale})
        version = content_version(frame_df[["ips_weight"]].to_numpy().tobytes() + "".join(split).encode())
        frames_store.replace_training_frame(con, campaign, version, frame_df)
    checks = frame_check_results(events, split, config, warn=context.log.warning)
    days = sorted(set(events["event_date"].astype(str)))
    return dg.MaterializeResult(
        check_results=check_results(checks),
        metadata=metadata(frame_metadata(version, split, frame_df["ips_weight"].to_numpy(), days, config.holdout_days,
                                         change_day)),
        data_version=dg.DataVersion(version),
    )


@dg.asset(
    **COMMON,
    deps=["training_frame"],
    code_version="1",
    group_name="evaluation",
    kinds={"duckdb", "sklearn"},
    description="The doubly robust EOM's direct-method outcome model, fitted on the training days only "
    "(splits train and validation, never the holdout): E[response | x, level] and E[cost | x, level], and "
    "its predictions for every holdout event × level (table outcome_predictions, current state), read by "
    "every model's policy_evaluation and the leaderboard. When it cannot be fitted the DR columns stay empty.",
)
def outcome_model(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    campaign = context.partition_key
    config = landing.config(campaign)
    with warehouse.connect() as con:
        numeric, categorical = feature_spec(con, campaign)
        holdout = frames_store.holdout_events(con, campaign, numeric + categorical)
        train = frames_store.outcome_training_events(con, campaign, numeric + categorical)
        frame_version = frames_store.frame_version(con, campaign)
    pred = fit_outcome(config, train, holdout, (numeric, categorical))
    (context.log.info if pred.dm_values is not None else context.log.warning)(pred.message)
    outcome_df = pred.frame(holdout, config.n_levels)
    version = content_version(outcome_df[["value", "cost"]].to_numpy().tobytes() + str(frame_version).encode())
    with warehouse.connect() as con:
        frames_store.replace_outcome_predictions(con, campaign, frame_version,
                                                 outcome_df if pred.dm_values is not None else None)
    return dg.MaterializeResult(metadata={**pred.metadata, "frame_version": frame_version, "holdout_events": len(holdout)},
                                data_version=dg.DataVersion(version))
