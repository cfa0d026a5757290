"""Campaign-level assets: propensity → training frame → outcome model (the DR direct method), shared
by every model's chain (promo_assets/defs/models/assets.py: one chain per registered model,
and the leaderboard), and the helpers those chains use to read the warehouse and their upstream
materializations. Each function reads the warehouse (through the named functions of
promo_assets.store), calls domain code and writes the result back; the logic lives in the domain
packages."""


import base64
import json
from contextlib import contextmanager
from dataclasses import dataclass

import dagster as dg
import numpy as np
import pandas as pd

from promo_assets.config import settings
from promo_assets.defs.automation.conditions import CAMPAIGN_CONDITION, REACTION_CONDITION
from promo_assets.defs.common import (
    WAREHOUSE_POOL,
    LandingResource,
    WarehouseResource,
    campaign_partitions,
    connect,
    for_people,
    kv_table,
    log_to,
    md_table,
    model_of_key,
)
from promo_assets.evaluation import EvaluationError, fit_outcome_model
from promo_assets.monitoring.drift import stale_weights
from promo_assets.simulation import truth_arrays
from promo_assets.store import frames as frames_store, monitoring as monitoring_store, results
from promo_assets.store.artifacts import content_version
from promo_assets.store.frames import feature_spec  # noqa: F401  (imported from here by the asset modules)
from promo_assets.store.models import coefficient_arrays  # noqa: F401  (imported from here by the asset modules)
from promo_assets.store.warehouse import transaction

# the asset kwargs every campaign-level and per-model asset shares (defs/models/assets.py uses it too)
COMMON = dict(partitions_def=campaign_partitions, pool=WAREHOUSE_POOL, automation_condition=CAMPAIGN_CONDITION)


# --------------------------------------------------------------------------------------------
# helpers


def read_holdout_events(con, campaign: str) -> pd.DataFrame:
    """The holdout events with every feature column (one row per holdout event)."""
    numeric, categorical = feature_spec(con, campaign)
    return frames_store.holdout_events(con, campaign, numeric + categorical)


def read_training_frame(con, campaign: str) -> tuple[pd.DataFrame, list[str], list[str]]:
    numeric, categorical = feature_spec(con, campaign)
    frame = frames_store.training_frame(con, campaign, numeric + categorical)
    if frame.empty:
        raise dg.Failure(f"campaign '{campaign}' has no training frame: materialize rct_events and training_frame first")
    return frame, numeric, categorical


def png_md(png: bytes, title: str) -> str:
    return f"**{title}**\n\n![{title}](data:image/png;base64,{base64.b64encode(png).decode()})"


_RUN_ENDED = {dg.DagsterRunStatus.SUCCESS: True, dg.DagsterRunStatus.FAILURE: False, dg.DagsterRunStatus.CANCELED: False}


def failed_models(step_keys) -> list[str] | None:
    """The models whose chain a run's failed steps belong to (step key: the asset key's parts joined by
    '__', '<model>__<asset>' or 'optional__<model>__<asset>'), or None when a step outside every
    model's chain failed (then the whole run counts as failed)."""
    out = set()
    for step in step_keys:
        model = model_of_key(dg.AssetKey(step.split("__")))
        if model is None:
            return None
        out.add(model)
    return sorted(out)


def ended_runs(instance: dg.DagsterInstance, run_ids) -> dict[str, bool | tuple[bool, list[str] | None]]:
    """Dagster's own verdict on runs: run id -> succeeded, for the runs that have ended (a run this
    instance does not know counts as failed); runs still queued or in progress are left out. A run
    whose failed steps all belong to model chains gives (False, those models): promo_assets.store.results."""
    out = {}
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        if run is None or run.status in _RUN_ENDED:
            out[run_id] = run is not None and _RUN_ENDED[run.status]
            if run is not None and not out[run_id]:
                steps = [e.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)]
                out[run_id] = (False, failed_models(steps) if steps else None)
    return out


@contextmanager
def results_write(context, con, campaign: str, *tables: str):
    """One transaction for all of an asset's results rows (all or none): the campaign's earlier runs
    that have ended are marked from their Dagster status (a failed run's rows deleted), this run is
    recorded in result_runs, and the retention rule (PROMO_KEEP_RUNS) is applied to `tables`."""
    try:
        keep = settings.keep_runs()
    except settings.SettingsError as exc:
        raise dg.Failure(str(exc)) from None
    with transaction(con):
        results.reconcile(con, campaign, ended_runs(context.instance, results.unfinished(con, campaign, context.run_id)))
        results.start(con, campaign, context.run_id)
        yield con
        results.retain(con, campaign, context.run_id, tables, keep)


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
    from promo_assets.causal.frame import event_propensity

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
    from promo_assets.causal import ips_weights, propensity_diagnostics, propensity_plot

    p, levels = prop.propensity, events["level"].to_numpy()
    metadata = {"events": len(events)}
    if prop.proba is not None:
        diag = propensity_diagnostics(prop.proba, levels, ips_weights(p, clip=config.ips_clip))
        metadata["diagnostics"] = kv_table(_jsonable(diag))
        metadata["plot"] = dg.MetadataValue.md(png_md(propensity_plot(prop.proba, levels), "Estimated propensities per level"))
    metadata.update(
        {
            "propensity_version": version,
            "source": kv_table({str(k): int(v) for k, v in pd.Series(prop.source).value_counts().items()}, "events"),
            "min_propensity": for_people(float(np.min(p))),
            "mean_propensity": for_people(float(np.mean(p))),
        }
    )
    return metadata


def _frame_check_specs() -> list[dg.AssetCheckSpec]:
    from promo_assets.causal.checks import CHECKS

    return [dg.AssetCheckSpec(name, asset="training_frame", description=text)
            for name, text in CHECKS.items()]


def frame_check_results(context, events: pd.DataFrame, split, config) -> list[dg.AssetCheckResult]:
    """The data checks of promo_assets.causal.checks on the events (level, response) and their split,
    as Dagster asset check results (ERROR when no model can learn, else WARN); failures logged."""
    from promo_assets.causal.checks import frame_checks

    checks = frame_checks(pd.DataFrame({"level": events["level"], "response": events["response"], "split": split}), config)
    for c in checks:
        if not c.passed:
            context.log.warning(f"data check {c.name} failed ({c.severity}): {c.message}")
    return [dg.AssetCheckResult(check_name=c.name, passed=c.passed, description=c.message,
                                severity=dg.AssetCheckSeverity.ERROR if c.blocking else dg.AssetCheckSeverity.WARN,
                                metadata={"message": c.message, **{k: for_people(_jsonable(v))
                                                                   for k, v in c.metadata.items()}})
            for c in checks]


@dg.asset(
    **{**COMMON, "automation_condition": REACTION_CONDITION},
    deps=["propensity"],
    code_version="1",
    group_name="causal",
    kinds={"duckdb"},
    check_specs=_frame_check_specs(),
    description="Train / validation / holdout split by date window (last `holdout_days` days are the "
    "holdout; earlier days split by a hash of the user id) and clipped, self-normalized IPS weights "
    "per event. Table training_frame. Its asset checks (promo_assets.causal.checks) say whether there is "
    "anything to learn: events per level, a response that varies, a plausible response rate.",
)
def training_frame(context: dg.AssetExecutionContext, warehouse: WarehouseResource, landing: LandingResource):
    from promo_assets.causal.frame import split_and_weights

    campaign = context.partition_key
    config = landing.config(campaign)
    with connect(warehouse) as con:
        change_day = monitoring_store.training_change_day(con, campaign)  # a `retrain` reaction's window
        segments = (monitoring_store.training_change_segments(con, campaign, change_day)
                    if config.monitoring.stale_scope == "segments" else ())
        loaded = set(feature_spec(con, campaign)[1]) if segments else set()  # a segment's feature still loaded
        events = frames_store.propensity_events(con, campaign, sorted({f for f, _ in segments} & loaded))
        split, weights = split_and_weights(events, events["propensity"].to_numpy(), config)
        stale = stale_weights(events["event_date"], change_day, config.monitoring.stale_weight, segments, events)
        frame_df = pd.DataFrame(
            {"event_date": events["event_date"], "source_row": events["source_row"], "split": split,
             "ips_weight": weights * stale})
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


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


# --------------------------------------------------------------------------------------------
# helpers of the model chains


def _model_metadata(trained, seconds: float) -> dict:
    history = getattr(trained, "history", None) or []
    meta = {
        "model_version": trained.version,
        "metrics": kv_table(_jsonable(trained.metrics)),
        "training_seconds": round(seconds, 2),  # seconds, two decimals
    }
    if history:
        meta["epochs"] = md_table([_jsonable(h) if isinstance(h, dict) else {"epoch": i, "loss": h} for i, h in enumerate(history)])
    return meta




def upstream(context, asset_key) -> tuple[str, dict, str | None]:
    """(run id, metadata values, data version) of the latest materialization of `asset_key` for this
    campaign: the upstream this materialization reads (real lineage, never "the latest" row of a
    table). Fails naming the asset when there is none."""
    asset_key = dg.AssetKey.from_coercible(asset_key)
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[context.partition_key]), limit=1).records
    if not records:
        raise dg.Failure(f"{asset_key.to_user_string()} has no materialization for campaign "
                         f"'{context.partition_key}': materialize it first")
    mat = records[0].asset_materialization
    meta = {k: v.value for k, v in mat.metadata.items()}
    return records[0].run_id, meta, (mat.tags or {}).get("dagster/data_version")


# --------------------------------------------------------------------------------------------
# evaluation inputs shared by every model's policy_evaluation and the leaderboard


def _outcome_predictions(context, config, train: pd.DataFrame, holdout: pd.DataFrame, numeric, categorical):
    """The DR outcome model fitted on the training days, its predictions for the holdout events
    (N x K each, or None when it cannot be fitted: the DR columns then stay empty) and metadata."""
    try:
        model = fit_outcome_model(train, numeric, categorical, config.n_levels, ordered=config.ordered,
                                  incentives=list(config.incentives), cost_rule=config.cost, seed=0)
        dm_values, dm_costs = model.predict(holdout)
    except EvaluationError as exc:
        context.log.warning(f"doubly robust EOM skipped: {exc}")
        return None, None, {"fitted": False, "reason": str(exc)}
    context.log.info(f"outcome model ({model.kind}) fitted on {model.n_train} training-day events")
    return dm_values, dm_costs, {"fitted": True, "kind": model.kind, "training_events": int(model.n_train)}



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
    dm_values, dm_costs, meta = _outcome_predictions(context, config, train, holdout, numeric, categorical)
    k, n = config.n_levels, len(holdout)
    outcome_df = pd.DataFrame({"event_date": np.repeat(holdout["event_date"].to_numpy(), k),
                               "source_row": np.repeat(holdout["source_row"].to_numpy(), k),
                               "level": np.tile(np.arange(k, dtype=np.int32), n),
                               "value": np.ravel(dm_values) if dm_values is not None else np.nan,
                               "cost": np.ravel(dm_costs) if dm_costs is not None else np.nan})
    version = content_version(outcome_df[["value", "cost"]].to_numpy().tobytes() + str(frame_version).encode())
    with connect(warehouse) as con:
        frames_store.replace_outcome_predictions(con, campaign, frame_version,
                                                 outcome_df if dm_values is not None else None)
    return dg.MaterializeResult(metadata={**meta, "frame_version": frame_version, "holdout_events": n},
                                data_version=dg.DataVersion(version))


@dataclass
class EvaluationInputs:
    """The holdout events, the outcome model's predictions for them, the truth (simulated campaigns)
    and the versions read, aligned row by row with the holdout events."""

    holdout: pd.DataFrame
    dm_values: np.ndarray | None
    dm_costs: np.ndarray | None
    true_values: np.ndarray | None
    true_costs: np.ndarray | None
    versions: dict
    segments: pd.DataFrame | None = None  # campaign.yaml segments: columns of the holdout events (with truth)

    @property
    def n(self) -> int:
        return len(self.holdout)

    @property
    def logged(self) -> tuple:
        """(logged level, response, cost, propensity) of the holdout events."""
        h = self.holdout
        return (h["level"].to_numpy(), *(h[c].to_numpy(dtype=float) for c in ("response", "cost", "propensity")))

    def _rows(self, users, what: str) -> np.ndarray:
        idx = pd.Series(np.arange(len(users)), index=users).reindex(self.holdout["user_id"]).to_numpy()
        if np.isnan(idx).any():
            raise dg.Failure(f"{what}: holdout coefficients are missing users; re-materialize its response_coefficients")
        return idx.astype(int)

    def align(self, users, response, cost, what: str) -> tuple[np.ndarray, np.ndarray]:
        idx = self._rows(users, what)
        return response[idx], cost[idx]

    def align_levels(self, users, levels) -> np.ndarray:
        return np.asarray(levels)[self._rows(users, "decision")]

    def kwargs(self, config, campaign: str) -> dict:
        """The holdout's keyword arguments of `evaluate_models` / `evaluate_random`."""
        return dict(budgets=list(config.budget_per_capita), campaign=campaign,
                    true_values=self.true_values, true_costs=self.true_costs, dm_values=self.dm_values,
                    dm_costs=self.dm_costs, min_holdout_users=config.min_holdout_users)

    @staticmethod
    def curve_kwargs(config) -> dict:
        """The response-curve metrics' keyword arguments of `evaluate_models`."""
        return dict(incentives=list(config.incentives), ordered=config.ordered, binary=config.response == "binary")


def evaluation_inputs(context, con, landing: LandingResource, campaign: str, config) -> EvaluationInputs:
    """Read the evaluation inputs; the outcome predictions must be of the current training frame."""
    holdout = frames_store.holdout_events(con, campaign)
    frame_version = frames_store.frame_version(con, campaign)
    _, _, outcome_version = upstream(context, "outcome_model")
    pred = frames_store.outcome_predictions(con, campaign)
    dm_values = dm_costs = None
    if not pred.empty:
        if set(pred["frame_version"]) != {frame_version} or len(pred) != len(holdout) * config.n_levels:
            raise dg.Failure(f"outcome_model's predictions are not of the current training frame {frame_version} "
                             f"of campaign '{campaign}': re-materialize outcome_model")
        dm_values, dm_costs = (pred[c].to_numpy().reshape(len(holdout), config.n_levels) for c in ("value", "cost"))
    true_values = true_costs = segments = None
    if (landing.path / campaign / "truth" / "response.parquet").exists():
        true_values, true_costs = truth_arrays(landing.path / campaign, holdout["user_id"].tolist())
        segments = holdout_segments(con, campaign, config)
    return EvaluationInputs(holdout, dm_values, dm_costs, true_values, true_costs,
                            {"frame_version": frame_version, "outcome_model_version": outcome_version}, segments)


def holdout_segments(con, campaign: str, config) -> pd.DataFrame | None:
    """The holdout events' campaign.yaml `segments` columns (None without segments); a column that is
    no feature of the campaign fails, naming the key and the feature columns."""
    if not config.segments:
        return None
    numeric, categorical = feature_spec(con, campaign)
    unknown = [c for c in config.segments if c not in numeric + categorical]
    if unknown:
        raise dg.Failure(f"campaign.yaml segments: {', '.join(repr(c) for c in unknown)} is not a feature column of "
                         f"campaign '{campaign}' (feature columns: {', '.join(numeric + categorical)})")
    return frames_store.holdout_segments(con, campaign, list(config.segments)).drop(columns="user_id")
