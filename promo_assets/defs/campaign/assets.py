"""Campaign-level assets: propensity → training frame → outcome model (the DR direct method), shared
by every model's chain (promo_assets/defs/models/assets.py: one chain per registered model,
and the leaderboard). Each asset reads the warehouse (through the named functions of
promo_assets.store), calls domain code (promo_assets.causal, promo_assets.evaluation.inputs) and
writes the result back; the logic lives in the domain packages."""


import dagster as dg
import numpy as np
import pandas as pd

from promo_assets.causal import ips_weights, propensity_diagnostics, propensity_plot
from promo_assets.causal.checks import CHECKS as FRAME_CHECKS, frame_checks
from promo_assets.causal.frame import event_propensity, split_and_weights
from promo_assets.core.display import jsonable, png_markdown
from promo_assets.defs.automation.conditions import COMMON, REACTION_CONDITION
from promo_assets.defs.common import (
    LandingResource,
    WarehouseResource,
    connect,
    for_people,
    kv_table,
    log_to,
)
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
    with connect(warehouse) as con:
        numeric, categorical = feature_spec(con, campaign)
        events = frames_store.events(con, campaign, numeric + categorical)
        if events.empty:
            raise dg.Failure(f"no rct_events for campaign '{campaign}'")
        prop = event_propensity(events, config, numeric, categorical, log=log_to(context))
        frame_df = pd.DataFrame({"event_date": events["event_date"], "source_row": events["source_row"],
                                 "propensity": prop.propensity, "source": prop.source})
        version = content_version(frame_df[["propensity"]].to_numpy().tobytes())
        frames_store.replace_propensity(con, campaign, version, frame_df)
    return dg.MaterializeResult(metadata=_propensity_metadata(events, prop, config, version),
                                data_version=dg.DataVersion(version))


def _propensity_metadata(events: pd.DataFrame, prop, config, version: str) -> dict:
    """The propensity asset's metadata; an estimated propensity adds its diagnostics and plot."""
    p, levels = prop.propensity, events["level"].to_numpy()
    metadata = {"events": len(events)}
    if prop.proba is not None:
        diag = propensity_diagnostics(prop.proba, levels, ips_weights(p, clip=config.ips_clip))
        metadata["diagnostics"] = kv_table(jsonable(diag))
        metadata["plot"] = dg.MetadataValue.md(png_markdown(propensity_plot(prop.proba, levels), "Estimated propensities per level"))
    metadata.update(
        {
            "propensity_version": version,
            "source": kv_table({str(k): int(v) for k, v in pd.Series(prop.source).value_counts().items()}, "events"),
            "min_propensity": for_people(float(np.min(p))),
            "mean_propensity": for_people(float(np.mean(p))),
        }
    )
    return metadata


def frame_check_results(context, events: pd.DataFrame, split, config) -> list[dg.AssetCheckResult]:
    """The data checks of promo_assets.causal.checks on the events (level, response) and their split,
    as Dagster asset check results (ERROR when no model can learn, else WARN); failures logged."""
    checks = frame_checks(pd.DataFrame({"level": events["level"], "response": events["response"], "split": split}), config)
    for c in checks:
        if not c.passed:
            context.log.warning(f"data check {c.name} failed ({c.severity}): {c.message}")
    return [dg.AssetCheckResult(check_name=c.name, passed=c.passed, description=c.message,
                                severity=dg.AssetCheckSeverity.ERROR if c.blocking else dg.AssetCheckSeverity.WARN,
                                metadata={"message": c.message, **{k: for_people(jsonable(v))
                                                                   for k, v in c.metadata.items()}})
            for c in checks]


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
    with connect(warehouse) as con:
        got = training_events(con, campaign, config)
        events, change_day = got.events, got.change_day
        split, weights = split_and_weights(events, events["propensity"].to_numpy(), config)
        frame_df = pd.DataFrame(
            {"event_date": events["event_date"], "source_row": events["source_row"], "split": split,
             "ips_weight": weights * got.stale})
        weights = frame_df["ips_weight"].to_numpy()
        version = content_version(frame_df[["ips_weight"]].to_numpy().tobytes() + "".join(split).encode())
        frames_store.replace_training_frame(con, campaign, version, frame_df)
    counts = pd.Series(split).value_counts().to_dict()
    ess = float(weights.sum() ** 2 / np.square(weights).sum())
    days = sorted(set(events["event_date"].astype(str)))
    return dg.MaterializeResult(
        check_results=frame_check_results(context, events, split, config),
        metadata={
            "frame_version": version,
            "rows_per_split": kv_table({k: int(v) for k, v in counts.items()}, "rows"),
            "holdout_days": ", ".join(days[-config.holdout_days:]),
            "effective_sample_size": for_people(ess),
            "ess_fraction": for_people(ess / len(weights)),
            "max_ips_weight": for_people(float(weights.max())), "change_day": str(change_day or "none"),
        },
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
    with connect(warehouse) as con:
        numeric, categorical = feature_spec(con, campaign)
        holdout = frames_store.holdout_events(con, campaign, numeric + categorical)
        train = frames_store.outcome_training_events(con, campaign, numeric + categorical)
        frame_version = frames_store.frame_version(con, campaign)
    pred = fit_outcome(config, train, holdout, (numeric, categorical))
    (context.log.info if pred.dm_values is not None else context.log.warning)(pred.message)
    outcome_df = pred.frame(holdout, config.n_levels)
    version = content_version(outcome_df[["value", "cost"]].to_numpy().tobytes() + str(frame_version).encode())
    with connect(warehouse) as con:
        frames_store.replace_outcome_predictions(con, campaign, frame_version,
                                                 outcome_df if pred.dm_values is not None else None)
    return dg.MaterializeResult(metadata={**pred.metadata, "frame_version": frame_version, "holdout_events": len(holdout)},
                                data_version=dg.DataVersion(version))
