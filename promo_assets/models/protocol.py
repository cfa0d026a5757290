"""The response-model contract: every model of the zoo is an estimator, in the manner of scikit-learn.

A model is one class deriving from `ResponseModel`, registered once in `promo_assets.models.registry`
(one line: name -> "module:Class"). The asset graph, the CLI, the benchmarks and the docs' model
reference are generated from the registry, and one contract test (tests/unit/models/test_model_contract.py)
checks every registered model.

- Construction: `Model(**params)` or `Model(params)`. The hyper-parameters are the fields of the
  model's `Params`, a frozen dataclass with each one's default (e.g. `DipnParams`); the constructor
  only stores them in `model.params` (no logic, no validation), keyword arguments replacing fields.
  `get_params()` / `set_params(**params)` come from those fields. A parameter name the model does
  not have is refused at construction (Python's TypeError names it; `registry.create` and
  `set_params` raise ModelInputError naming it and the close match). Values are checked when `fit` starts
  (`check_params()`: a value of the wrong kind for its default, or outside the model's rules,
  raises ModelInputError naming the parameter), and by the registry when a campaign.yaml's
  `models.params.<name>` is loaded. `seed`, the epoch caps (`max_epochs`, ...) and IPS weighting
  (`ips_weighting`) are parameters like the others; PROMO_MAX_EPOCHS caps every epoch count.
- `applies_to(config)` (a class method) -> None, or the reason the model does not apply to the
  campaign (e.g. "needs ordered incentive levels"): its chain of assets is then *skipped* with that
  reason, never failed; `fit` raises `ModelSkipped(reason)`. `fit` may also raise ModelSkipped when
  it finds out from the data (e.g. no graph loaded).
- `fit(data) -> self` trains every phase on a `TrainingData` (which carries the campaign config, so
  nothing else is needed). A model with several phases (DIPN: "bias_net" then "uplift_net") also
  trains one phase at a time, one asset each: `fit_phase(data, phase, previous)` with `previous` the
  model fitted at the phase before (None for the first).
- Learned state lives in attributes ending in `_`: `model_` (the fitted object), `phase_` (the last
  phase fitted), `fitted_name_` (the name its artefact is registered under: the model's name, or
  e.g. 'dipn_bias' for DIPN's first phase), `metrics_`, `history_` (per-epoch dicts), `version_`
  (the artefact's content hash, set by `save` and `load`), `report_` (a model's own report for its
  asset's metadata, or None).
- `predict(users) -> (response, cost)`: the expected response and the expected cost per user x level
  (float64 N x K each; the cost by the campaign's cost rule) for a frame of users with the raw
  feature columns.
- `save(root=None) -> version` stores the fitted state in the content-addressed artefact store (data
  only, verified by its hash on load; `promo_assets.store.artifacts`); `Model.load(version, root=None)`
  returns the fitted model stored there, with the parameters it was trained with (a stale
  architecture is refused with a message).

Class-level metadata (`name`, `title`, `source`, `kinds`, `phases`, `needs_graph`, `applies`,
`default`, `monotone`) describes the model for the asset graph, the CLI and the docs. `monotone` is
True where the model guarantees a response that never decreases with a more generous incentive (in
each attribute's declared direction); the contract test checks it.

No dagster here: the Dagster definitions (promo_assets.defs) wrap these calls.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import pandas as pd

from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.coefficients import Coefficients
from promo_assets.models.errors import ModelInputError

Log = Callable[[str], None]


class ModelSkipped(Exception):
    """The model does not apply to this campaign's data; the message is the reason shown to users."""


@dataclass
class TrainingData:
    """Everything a model may learn from, read once per campaign by the Dagster definitions.

    `config`: the campaign's parsed campaign.yaml. `frame`: the campaign's training frame (one row
    per RCT event: user_id, level, response, cost, split in train/validation/holdout, ips_weight,
    propensity and the feature columns). `numeric` / `categorical`: the feature columns.
    `frame_version`: the data version of the training frame. `graph` / `graph_version` /
    `merchant_events`: the customer-merchant graph (PyG HeteroData) and merchant RCT events when the
    campaign is bipartite, else None. `campaign_dir`: the campaign's landing folder (a simulated
    campaign's truth files are read from it for reports), or None."""

    config: CampaignConfig
    frame: pd.DataFrame
    numeric: list[str]
    categorical: list[str]
    frame_version: str | None = None
    graph: Any = None
    graph_version: str | None = None
    merchant_events: pd.DataFrame | None = None
    campaign_dir: Path | None = None

    @property
    def campaign(self) -> str:
        return self.config.campaign

    @property
    def input_versions(self) -> dict[str, str]:
        """The upstream data versions this data was read at (for lineage metadata)."""
        out = {"frame_version": self.frame_version, "graph_version": self.graph_version}
        return {k: v for k, v in out.items() if v}


# ------------------------------------------------------------------------------------ parameter rules
def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def positive_number(x: Any) -> bool:
    return is_number(x) and x > 0


def non_negative_number(x: Any) -> bool:
    return is_number(x) and x >= 0


def positive_int(x: Any) -> bool:
    return is_int(x) and x >= 1


def fraction(x: Any) -> bool:
    """A number in [0, 1)."""
    return is_number(x) and 0 <= x < 1


def int_list(x: Any) -> bool:
    """A non-empty list of integers >= 1 (layer widths)."""
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(positive_int(v) for v in x)


Rule = tuple[Callable[[Any], bool], str]
POSITIVE: Rule = (positive_number, "a number > 0")
NON_NEGATIVE: Rule = (non_negative_number, "a number >= 0")
COUNT: Rule = (positive_int, "an integer >= 1")
FRACTION: Rule = (fraction, "a number in [0, 1)")
WIDTHS: Rule = (int_list, "a non-empty list of integers >= 1")
SEED: Rule = (is_int, "an integer")
FLAG: Rule = (lambda x: isinstance(x, bool), "true or false")


def same_kind(default: Any, value: Any) -> bool:
    """A value may replace a default of the same kind; an int stands for a float; bool is not a
    number; a list and a tuple are the same kind; a default None takes anything (the model's rules
    decide)."""
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return is_number(value)
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))


@dataclass(frozen=True)
class NoParams:
    """The hyper-parameters of a model that has none."""


# ------------------------------------------------------------------------------------ the base class
class ResponseModel(ABC):
    """One model of the zoo, an estimator (see the module docstring). Subclasses declare `Params`, a
    frozen dataclass of their hyper-parameters with defaults (read as `self.params.<name>`); `rules`
    ({parameter: (check, "what it must be")}) and `_check_values` say which values are allowed;
    `_fit_phase` trains one phase and returns the fitted object; `_load` reads one back."""

    name: ClassVar[str]                        # registry key = asset key prefix = `model` column in tables
    title: ClassVar[str]                       # one line: what it is
    source: ClassVar[str] = ""                 # the paper / section it implements, or "baseline"
    kinds: ClassVar[frozenset[str]] = frozenset({"pytorch"})  # Dagster kinds shown in the UI
    phases: ClassVar[tuple[str, ...]] = ("model",)  # one asset per phase, in training order
    needs_graph: ClassVar[bool] = False        # True: reads the customer_merchant_graph asset
    applies: ClassVar[str] = "every campaign"  # in words, for the model table (applies_to decides)
    default: ClassVar[bool] = True             # trained unless campaign.yaml's `models.include` leaves it out
    monotone: ClassVar[bool] = False           # guarantees a response non-decreasing in a more generous incentive
    rules: ClassVar[dict[str, Rule]] = {}      # allowed values per hyper-parameter
    Params: ClassVar[type] = NoParams          # the hyper-parameters: a frozen dataclass with defaults

    def __init__(self, params: Any = None, /, **overrides: Any):
        """`params`: an instance of the model's `Params` (None: the defaults); `overrides`: fields
        replaced (a name that is not a field raises TypeError naming it). Stored, not checked."""
        base = self.Params() if params is None else params
        if not isinstance(base, self.Params):
            raise TypeError(f"{type(self).__name__} takes its {self.Params.__name__}, not {type(base).__name__}")
        self.params = dataclasses.replace(base, **overrides) if overrides else base

    # -------------------------------------------------------------- parameters
    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The hyper-parameters: the fields of `Params`, in order."""
        return tuple(f.name for f in dataclasses.fields(cls.Params))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Each hyper-parameter's default (from `Params`)."""
        return {f.name: f.default for f in dataclasses.fields(cls.Params)}

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The hyper-parameters and their values (the constructor's keyword arguments)."""
        return {n: getattr(self.params, n) for n in self.param_names()}

    def set_params(self, **params: Any) -> "ResponseModel":
        """Set hyper-parameters (as the constructor would); an unknown name raises ModelInputError
        naming it. Values are checked when `fit` starts. Returns self."""
        unknown = [p for p in params if p not in self.param_names()]
        if unknown:
            raise ModelInputError(unknown_params(self.name, unknown, self.param_names()))
        self.params = dataclasses.replace(self.params, **params)
        return self

    def check_params(self) -> list[str]:
        """Problems of the hyper-parameter values, each naming the parameter, the value and what is
        expected: a value of the wrong kind for its default, else what `rules` / `_check_values`
        refuse. [] when fine."""
        defaults = self.defaults()
        out = [f"{p} = {v!r} ({type(v).__name__}): expected {type(defaults[p]).__name__} like the default "
               f"{defaults[p]!r}" for p, v in self.get_params().items() if not same_kind(defaults[p], v)]
        if out:
            return out
        for p, (ok, what) in self.rules.items():
            value = getattr(self.params, p)
            if not ok(value):
                out.append(f"{p} = {value!r}: expected {what}")
        return out + self._check_values()

    def _check_values(self) -> list[str]:
        """A model's own rules beyond `rules` (e.g. between two parameters)."""
        return []

    def _validated(self) -> None:
        problems = self.check_params()
        if problems:
            raise ModelInputError(f"{self.name}: " + "; ".join(problems))

    def __repr__(self) -> str:
        defaults = self.defaults()
        changed = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if v != defaults[k])
        return f"{type(self).__name__}({changed})"

    # -------------------------------------------------------------- what it applies to
    @classmethod
    def applies_to(cls, config: CampaignConfig) -> str | None:
        """None when the model can be trained for this campaign, else the reason it cannot."""
        return None

    # -------------------------------------------------------------- fitting
    def fit(self, data: TrainingData, *, log: Log | None = None) -> "ResponseModel":
        """Train every phase, in order, on `data`; returns self. `log` gets progress lines (one per epoch)."""
        previous = None
        for phase in self.phases:
            self.fit_phase(data, phase, previous, log=log)
            previous = self
        return self

    def fit_phase(self, data: TrainingData, phase: str | None = None, previous: "ResponseModel | None" = None, *,
                  log: Log | None = None) -> "ResponseModel":
        """Train phase `phase` (default: the first) on `data`; `previous` is this model fitted at the
        phase before (None for the first phase). Checks the parameters (ModelInputError naming each bad
        one) and that the model applies to the campaign (ModelSkipped with the reason) first. Returns self."""
        phase = self.phases[0] if phase is None else phase
        if phase not in self.phases:
            raise ModelInputError(f"{self.name} has phases {self.phases}, not {phase!r}")
        self._validated()
        reason = self.applies_to(data.config)
        if reason is not None:
            raise ModelSkipped(reason)
        i = self.phases.index(phase)
        before = None
        if i > 0:
            wanted = self.phases[i - 1]
            if previous is None or getattr(previous, "phase_", None) != wanted or not isinstance(previous, type(self)):
                raise ModelInputError(f"{self.name}'s phase {phase!r} needs this model fitted at phase {wanted!r} "
                                      f"(materialize {self.name}/{wanted} first)")
            before = previous.model_
        fitted = self._fit_phase(data, phase, before, log)
        self._set_fitted(fitted, phase)
        return self

    @abstractmethod
    def _fit_phase(self, data: TrainingData, phase: str, previous: Any, log: Log | None) -> Any:
        """Train `phase` and return the fitted object (it has `name`, `metrics`, `history`,
        `predict(users)`, `save(root)`; `previous`: the fitted object of the phase before, or None)."""

    def _set_fitted(self, fitted: Any, phase: str) -> None:
        fitted.estimator = {"params": self.get_params(), "phase": phase}  # stored with the artefact
        self.model_ = fitted
        self.phase_ = phase
        self.fitted_name_ = fitted.name
        self.metrics_ = fitted.metrics
        self.history_ = fitted.history
        self.report_ = getattr(fitted, "report", None)
        self.version_ = None

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise ModelInputError(f"{self.name} is not fitted: call fit(data) (or load a stored version) first")

    # -------------------------------------------------------------- predicting
    def predict(self, users: pd.DataFrame) -> Coefficients:
        """Expected response and expected cost per user x level (float64 N x K each) for the users of
        `users` (the raw feature columns; unseen categories use the unknown bucket), as
        `Coefficients(response, cost)` (unpacks as a pair)."""
        self._check_fitted()
        return Coefficients(*self.model_.predict(users))

    # -------------------------------------------------------------- the artefact
    def save(self, root: Path | None = None) -> str:
        """Store the fitted state in the content-addressed artefact store (kind 'model'); returns its
        version (the same state always gets the same version)."""
        self._check_fitted()
        self.version_ = self.model_.save(root)
        return self.version_

    @classmethod
    def load(cls, version: str, root: Path | None = None) -> "ResponseModel":
        """The fitted model stored under `version`, with the hyper-parameters it was trained with;
        its predictions are those of the model that was saved. ModelInputError when the artefact is
        not this model's (or was written by an older architecture), artifacts.ArtifactMissingError
        when it is missing or its bytes do not match the version."""
        fitted = cls._load(version, root)
        stored = getattr(fitted, "estimator", None) or {}
        defaults = cls.defaults()
        params = {k: (tuple(v) if isinstance(defaults[k], tuple) and isinstance(v, list) else v)
                  for k, v in cls._params_of(fitted).items() if k in defaults}
        model = cls(**params)
        model._set_fitted(fitted, stored.get("phase") or cls._phase_of(fitted))
        model.version_ = version
        return model

    @classmethod
    @abstractmethod
    def _load(cls, version: str, root: Path | None) -> Any:
        """The fitted object stored under `version` (the torch models: `models.base.TorchResponseModel`)."""

    @classmethod
    def _params_of(cls, fitted: Any) -> dict[str, Any]:
        """The hyper-parameters a stored fitted object was trained with (stored with it by `save`)."""
        return dict((getattr(fitted, "estimator", None) or {}).get("params") or {})

    @classmethod
    def _phase_of(cls, fitted: Any) -> str:
        """The phase a stored fitted object belongs to (artefacts written before the phase was stored)."""
        return cls.phases[-1]


def unknown_params(model: str, unknown: list[str], known: tuple[str, ...]) -> str:
    """'unknown <model> hyper-parameter 'x' (did you mean 'y'?)', naming each unknown name."""
    parts = []
    for p in unknown:
        close = difflib.get_close_matches(p, list(known), n=1, cutoff=0.6)
        parts.append(f"{p!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return (f"unknown {model} hyper-parameter{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
            f"its hyper-parameters: {', '.join(known) or 'none'}")
