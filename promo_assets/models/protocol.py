"""The response-model protocol: what every model of the zoo implements (issue #14).

A model is one class deriving from `ResponseModel`, registered once in `promo_assets.models.registry`.
The asset graph, the CLI, the benchmarks and the docs' model reference are generated from the registry;
nothing else lists models.

- `applies_to(config)` -> None, or the reason the model does not apply to the campaign (e.g. "needs
  ordered incentive levels"): the model's chain is then *skipped* with that reason, never failed.
  `fit` may also raise `ModelSkipped(reason)` when it finds out from the data (e.g. no graph loaded).
- `fit(data, config, phase=, previous=, seed=, max_epochs=, log=)` -> a `Fitted` model. A model with
  several phases (DIPN: "bias_net" then "uplift_net") is fitted once per phase, in order; `previous`
  is the fitted model of the phase before (None for the first). Each phase is its own asset.
- `load(version)` -> the `Fitted` model stored under `version` in the content-addressed artefact
  store (the architecture version is part of the artefact; a stale one is refused with a message).

A `Fitted` model predicts the expected response and expected cost per user x level (float64 N x K
each, following the campaign's cost rule) for a frame of users with the raw feature columns.
No dagster here: the orchestration layer wraps these calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from promo_assets.campaign import CampaignConfig
from promo_assets.models.errors import ModelInputError

Log = Callable[[str], None]


class ModelSkipped(Exception):
    """The model does not apply to this campaign's data; the message is the reason shown to users."""


@dataclass
class TrainingData:
    """Everything a model may learn from, read once per campaign by the orchestration layer.

    `frame`: the campaign's training frame (one row per RCT event: user_id, level, response, cost,
    split in train/validation/holdout, ips_weight, propensity and the feature columns). `numeric` /
    `categorical`: the feature columns. `frame_version`: the data version of the training frame.
    `graph` / `graph_version` / `merchant_events`: the customer-merchant graph (PyG HeteroData) and
    merchant RCT events when the campaign is bipartite, else None. `extra`: anything else a model
    needs (documented by that model)."""

    campaign: str
    frame: pd.DataFrame
    numeric: list[str]
    categorical: list[str]
    frame_version: str | None = None
    graph: Any = None
    graph_version: str | None = None
    merchant_events: pd.DataFrame | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def input_versions(self) -> dict[str, str]:
        """The upstream data versions this data was read at (for lineage metadata)."""
        out = {"frame_version": self.frame_version, "graph_version": self.graph_version}
        return {k: v for k, v in out.items() if v}


@runtime_checkable
class Fitted(Protocol):
    """A fitted model: `name` (registry name, or '<name>_<phase>' for an intermediate phase),
    `version` (content hash of its artefact), `metrics`, `history` (per-epoch dicts)."""

    name: str
    metrics: dict[str, Any]
    history: list[dict[str, Any]]

    @property
    def version(self) -> str: ...

    def predict(self, users: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]: ...

    def save(self) -> str: ...


class ResponseModel(ABC):
    """One model of the zoo. Class attributes describe it (they generate assets, CLI help and the
    the docs' model reference); the methods train and load it."""

    name: ClassVar[str]                        # registry key = asset key prefix = `model` column in tables
    title: ClassVar[str]                       # one line: what it is
    source: ClassVar[str] = ""                 # the paper / section it implements, or "baseline"
    kinds: ClassVar[frozenset[str]] = frozenset({"pytorch"})  # Dagster kinds shown in the UI
    phases: ClassVar[tuple[str, ...]] = ("model",)  # one asset per phase, in training order
    needs_graph: ClassVar[bool] = False        # True: reads the customer_merchant_graph asset
    applies: ClassVar[str] = "every campaign"  # in words, for the model table (applies_to decides)
    default: ClassVar[bool] = True             # trained unless campaign.yaml's `models.include` leaves it out
    params: ClassVar[dict[str, Any]] = {}      # hyper-parameters settable per campaign, with their defaults

    def check_params(self, params: dict[str, Any]) -> list[str]:
        """Problems with hyper-parameter values (already merged over `params`), each naming the
        parameter, the value and the rule; [] when fine. Checked when campaign.yaml is loaded."""
        return []

    def hparams(self, config: CampaignConfig) -> dict[str, Any]:
        """This model's hyper-parameters for the campaign: `params` updated with campaign.yaml's
        `models.params.<name>` (validated when the file was loaded)."""
        given = config.models.params.get(self.name) or {}
        return {**self.params, **given}

    def fit_hparams(self, data: "TrainingData", config: CampaignConfig) -> dict[str, Any]:
        """`hparams(config)` updated with the caller's overrides (`data.extra["hparams"]`, e.g. a
        benchmark's); an override this model does not know is refused."""
        hp = {**self.hparams(config), **data.extra.get("hparams", {})}
        unknown = sorted(set(hp) - set(self.params))
        if unknown:
            raise ModelInputError(f"unknown {self.name} hyper-parameters: {unknown}; known: {sorted(self.params)}")
        return hp

    def applies_to(self, config: CampaignConfig) -> str | None:
        """None when the model can be trained for this campaign, else the reason it cannot."""
        return None

    @abstractmethod
    def fit(self, data: TrainingData, config: CampaignConfig, *, phase: str = "model",
            previous: Fitted | None = None, seed: int = 0, max_epochs: int | None = None,
            log: Log | None = None) -> Fitted:
        """Train phase `phase` (one of `phases`) and return the fitted model (not yet saved)."""

    def load(self, version: str) -> Fitted:
        """The fitted model saved under `version` (default: a models.base.TrainedModel artefact)."""
        from promo_assets.models.base import load_model

        return load_model(version)
