"""What every offline evaluation of a campaign reads: the holdout events, the outcome model's
predictions for them, the truth of a simulated campaign and the versions read (`EvaluationInputs`),
and the outcome model fitted with its predictions for the holdout events (`fit_outcome`).

Read through the named functions of `promo_assets.store`; no dagster here (domain code). A problem
raises `EvaluationError` naming what to re-materialize; the Dagster layer shows its message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from promo_assets.evaluation.curve_metrics import LevelScale
from promo_assets.evaluation.eom import EvaluationError
from promo_assets.evaluation.outcome import fit_outcome_model
from promo_assets.evaluation.records import Holdout, LoggedEvents, OutcomePredictions, Truth
from promo_assets.evaluation.report import EvaluationSettings
from promo_assets.evaluation.segments import SEGMENT_COLUMNS, plot_segment_curves, segment_curves, segment_evaluation
from promo_assets.store import frames as frames_store

#: reads the truth of a simulated campaign for these user ids: (true response, true cost), N x K each
TruthReader = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


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

    def _rows(self, users, what: str) -> np.ndarray:
        idx = pd.Series(np.arange(len(users)), index=users).reindex(self.holdout["user_id"]).to_numpy()
        if np.isnan(idx).any():
            raise EvaluationError(f"{what}: holdout coefficients are missing users; re-materialize its "
                                  "response_coefficients")
        return idx.astype(int)

    def align(self, users, response, cost, what: str) -> tuple[np.ndarray, np.ndarray]:
        idx = self._rows(users, what)
        return response[idx], cost[idx]

    def align_levels(self, users, levels) -> np.ndarray:
        return np.asarray(levels)[self._rows(users, "decision")]

    def evaluated_on(self) -> Holdout:
        """The `Holdout` of `evaluate_models` / `evaluate_random`: the logged events, the truth and the
        outcome model's predictions when known."""
        return Holdout(LoggedEvents.of_frame(self.holdout),
                       None if self.true_values is None else Truth(self.true_values, self.true_costs),
                       None if self.dm_values is None else OutcomePredictions(self.dm_values, self.dm_costs))

    @staticmethod
    def settings(config, campaign: str, log) -> EvaluationSettings:
        """The `EvaluationSettings` of `evaluate_models` / `evaluate_random` from campaign.yaml."""
        return EvaluationSettings.from_config(config, campaign, log=log)


def read_evaluation_inputs(con, campaign: str, config, outcome_version: str | None,
                           truth: TruthReader | None = None) -> EvaluationInputs:
    """The evaluation inputs of `campaign` (`truth`: the simulated campaign's truth, else None); the
    outcome predictions must be of the current training frame."""
    holdout = frames_store.holdout_events(con, campaign)
    frame_version = frames_store.frame_version(con, campaign)
    pred = frames_store.outcome_predictions(con, campaign)
    dm_values = dm_costs = None
    if not pred.empty:
        if set(pred["frame_version"]) != {frame_version} or len(pred) != len(holdout) * config.n_levels:
            raise EvaluationError(f"outcome_model's predictions are not of the current training frame {frame_version} "
                                  f"of campaign '{campaign}': re-materialize outcome_model")
        dm_values, dm_costs = (pred[c].to_numpy().reshape(len(holdout), config.n_levels) for c in ("value", "cost"))
    true_values = true_costs = segments = None
    if truth is not None:
        true_values, true_costs = truth(holdout["user_id"].tolist())
        segments = holdout_segments(con, campaign, config)
    return EvaluationInputs(holdout, dm_values, dm_costs, true_values, true_costs,
                            {"frame_version": frame_version, "outcome_model_version": outcome_version}, segments)


def holdout_segments(con, campaign: str, config) -> pd.DataFrame | None:
    """The holdout events' campaign.yaml `segments` columns (None without segments); a column that is
    no feature of the campaign fails, naming the key and the feature columns."""
    if not config.segments:
        return None
    numeric, categorical = frames_store.feature_spec(con, campaign)
    unknown = [c for c in config.segments if c not in numeric + categorical]
    if unknown:
        raise EvaluationError(f"campaign.yaml segments: {', '.join(repr(c) for c in unknown)} is not a feature column "
                              f"of campaign '{campaign}' (feature columns: {', '.join(numeric + categorical)})")
    return frames_store.holdout_segments(con, campaign, list(config.segments)).drop(columns="user_id")


@dataclass(frozen=True)
class FittedOutcome:
    """The DR outcome model's predictions for the holdout events (N x K each; None when it could not be
    fitted: the DR columns then stay empty), what to show of it, and the reason it was not fitted."""

    dm_values: np.ndarray | None
    dm_costs: np.ndarray | None
    metadata: dict

    @property
    def message(self) -> str:
        """What to log: the outcome model fitted, or why the doubly robust EOM is skipped."""
        m = self.metadata
        if not m["fitted"]:
            return f"doubly robust EOM skipped: {m['reason']}"
        return f"outcome model ({m['kind']}) fitted on {m['training_events']} training-day events"

    def frame(self, holdout: pd.DataFrame, n_levels: int) -> pd.DataFrame:
        """The rows of the table outcome_predictions: one per holdout event x level."""
        k, n = n_levels, len(holdout)
        return pd.DataFrame({"event_date": np.repeat(holdout["event_date"].to_numpy(), k),
                             "source_row": np.repeat(holdout["source_row"].to_numpy(), k),
                             "level": np.tile(np.arange(k, dtype=np.int32), n),
                             "value": np.ravel(self.dm_values) if self.dm_values is not None else np.nan,
                             "cost": np.ravel(self.dm_costs) if self.dm_costs is not None else np.nan})


def fit_outcome(config, train: pd.DataFrame, holdout: pd.DataFrame, features: tuple[list, list]) -> FittedOutcome:
    """The DR outcome model fitted on the training days (`features`: numeric, categorical) and its
    predictions for the holdout events; one that cannot be fitted leaves the DR columns empty and says
    why (`metadata["reason"]`)."""
    numeric, categorical = features
    try:
        model = fit_outcome_model(train, numeric, categorical, config.n_levels,
                                  scale=LevelScale(list(config.incentives), config.ordered), cost_rule=config.cost)
        dm_values, dm_costs = model.predict(holdout)
    except EvaluationError as exc:
        return FittedOutcome(None, None, {"fitted": False, "reason": str(exc)})
    return FittedOutcome(dm_values, dm_costs, {"fitted": True, "kind": model.kind,
                                                    "training_events": int(model.n_train)})


def budget_use_rows(rows: list[dict]) -> list[dict]:
    """The budget_multipliers rows of an evaluation as a small table: use over budget per budget."""
    def ratio(x, t):
        return None if x is None else round(x / t, 4) if t > 0 else 0.0

    return [{"budget_per_capita": r["budget_per_capita"], "budget": r["constraint_name"],
             "multiplier": float(f"{r['multiplier']:.6g}"), "predicted use / budget": ratio(r["predicted_use"], r["budget"]),
             "true use / budget": ratio(r["true_use"], r["budget"]),
             "at matched true spend": ratio(r["matched_true_use"], r["budget"])} for r in rows]


@dataclass(frozen=True)
class SegmentOutputs:
    """A model's segment_evaluation rows (empty without campaign.yaml segments or truth), the rows to
    show (every budget-free row and those at the smallest budget) and the per-segment plot of
    predicted vs true mean response per level (PNG, None when there is no table)."""

    table: pd.DataFrame
    shown: list[dict]
    plot: bytes | None


def segment_outputs(ev: EvaluationInputs, config, model: str, version: str, response, decisions) -> SegmentOutputs:
    """The segment evaluation of `model` `version` (its predicted `response` per holdout event and its
    `decisions` per budget) on the holdout events of `ev`."""
    if ev.segments is None or ev.true_values is None:
        return SegmentOutputs(pd.DataFrame(columns=list(SEGMENT_COLUMNS)), [], None)
    table = segment_evaluation(model, version, ev.segments, response, Truth(ev.true_values, ev.true_costs), decisions,
                               binary=config.response == "binary")
    curves = {c: segment_curves(ev.segments, response, ev.true_values, c) for c in ev.segments.columns}
    png = plot_segment_curves(curves, config.labels, title=f"{model}: predicted (solid) vs true (dashed) per segment")
    shown = table[table["budget_per_capita"].isna() | (table["budget_per_capita"] == table["budget_per_capita"].min())]
    return SegmentOutputs(table, shown.to_dict("records"), png)
