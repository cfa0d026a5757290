"""The trained-model object shared by every response model, the training-frame preparation and the
response/cost links and losses.

Every network implements `curves(x_num, x_cat) -> (response_raw N x K, cost_raw N x K | None)` on the
link scale; `TrainedModel.predict` turns them into expected responses and expected costs per level:

- response link by `config.response`: 'binary' -> sigmoid (loss: cross-entropy), 'count' -> exp
  (log-rate, loss: Poisson negative log-likelihood), 'continuous' -> identity on the standardized
  response (loss: squared error; the mean/std of the training responses are stored with the model).
- cost by `config.cost`: 'redeemed' -> incentive x expected response (no cost head is trained: the
  rule defines the cost exactly), 'assigned' -> the level's incentive, 'column' -> a cost head:
  softplus(cost_raw) x cost_scale, trained with squared error on cost / cost_scale (cost_scale = mean
  training cost, so the loss is O(1)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from promo_assets.config import settings
from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.coefficients import Coefficients
from promo_assets.models import registry
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.models.errors import ModelInputError
from promo_assets.models.protocol import ResponseModel
from promo_assets.store import artifacts

PAYLOAD_FORMAT = 1
SPLITS = ("train", "validation", "holdout")
# metric keys that depend on wall-clock time: kept on the in-memory object, left out of the artefact
TIMING_KEYS = ("seconds_per_epoch", "seconds", "bias_seconds_per_epoch", "uplift_seconds_per_epoch",
               "train_seconds")

ARCHITECTURES: dict[str, type[torch.nn.Module]] = {}


def register_architecture(key: str):
    def deco(cls):
        ARCHITECTURES[key] = cls
        cls.architecture = key
        return cls
    return deco


def build_network(architecture: str, arch_kwargs: dict[str, Any]) -> torch.nn.Module:
    """The registered `architecture`'s module built from its keyword arguments (as stored with an
    artefact); an architecture that declares a `Shape` dataclass takes them as one `Shape`."""
    cls = ARCHITECTURES[architecture]
    shape = getattr(cls, "Shape", None)
    return cls(shape(**arch_kwargs)) if shape is not None else cls(**arch_kwargs)


# ---------------------------------------------------------------------------- links and losses
def response_loss(raw: torch.Tensor, y: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-sample loss of link-scale predictions `raw` against targets `y` (already scaled)."""
    if kind == "binary":
        return F.binary_cross_entropy_with_logits(raw, y, reduction="none")
    if kind == "count":
        return F.poisson_nll_loss(raw.clamp(max=30.0), y, log_input=True, full=False, reduction="none")
    if kind == "continuous":
        return (raw - y) ** 2
    raise ModelInputError(f"unknown response type {kind!r}")


def response_mean(raw: torch.Tensor, kind: str) -> torch.Tensor:
    """Inverse link: expected (scaled) response from link-scale predictions."""
    if kind == "binary":
        return torch.sigmoid(raw)
    if kind == "count":
        return torch.exp(raw.clamp(max=30.0))
    return raw


def cost_loss(raw: torch.Tensor, cost: torch.Tensor) -> torch.Tensor:
    return (F.softplus(raw) - cost) ** 2


# ---------------------------------------------------------------------------- training frame
@dataclass
class PreparedFrame:
    """A training frame split and encoded: tensors for 'train' and 'validation' (dicts with x_num,
    x_cat, level, response, [cost], weight), the fitted encoder and the target scales."""

    encoder: FeatureEncoder
    train: dict[str, torch.Tensor]
    validation: dict[str, torch.Tensor]
    targets: dict[str, float]
    n_train: int
    n_validation: int


def check_frame(frame: pd.DataFrame, config: CampaignConfig, weighted: bool) -> None:
    """Raise ModelInputError when the training frame lacks a column or holds impossible values."""
    if not isinstance(frame, pd.DataFrame):
        raise ModelInputError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    need = ["level", "response", "split"] + (["ips_weight"] if weighted else [])
    if config.cost == "column":
        need.append("cost")
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise ModelInputError(f"training frame lacks columns {missing} (campaign {config.campaign!r})")
    bad_split = sorted(set(frame["split"].dropna().astype(str)) - set(SPLITS))
    if bad_split or frame["split"].isna().any():
        raise ModelInputError(f"'split' must be one of {SPLITS}, found {bad_split or ['<missing>']}")
    level = pd.to_numeric(frame["level"], errors="coerce")
    if level.isna().any() or (level % 1 != 0).any() or (level < 0).any() or (level >= config.n_levels).any():
        raise ModelInputError(f"'level' must be integers in 0..{config.n_levels - 1} for campaign "
                              f"{config.campaign!r}")
    y = pd.to_numeric(frame["response"], errors="coerce")
    if not np.isfinite(y.to_numpy(dtype=float, na_value=np.nan)).all():
        raise ModelInputError("'response' has missing or non-finite values")
    if config.response == "binary" and ((y < 0) | (y > 1)).any():
        raise ModelInputError("binary 'response' must lie in [0, 1]")
    if config.response == "count" and (y < 0).any():
        raise ModelInputError("count 'response' must be >= 0")
    if weighted:
        w = pd.to_numeric(frame["ips_weight"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if not np.isfinite(w).all() or (w < 0).any():
            raise ModelInputError("'ips_weight' must be finite and >= 0")
    if config.cost == "column":
        c = pd.to_numeric(frame["cost"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if not np.isfinite(c).all() or (c < 0).any():
            raise ModelInputError("'cost' must be finite and >= 0 for cost rule 'column'")


def prepare_frame(frame: pd.DataFrame, config: CampaignConfig, numeric: list[str], categorical: list[str],
                  weighted: bool = True, encoder: FeatureEncoder | None = None,
                  targets: dict[str, float] | None = None,
                  row_filter: Callable[[pd.DataFrame], pd.Series] | None = None) -> PreparedFrame:
    """Split `frame` by its 'split' column, fit a FeatureEncoder on the 'train' rows (unless
    `encoder` is given) and build the tensors. `row_filter(frame) -> bool mask` restricts the rows
    used (e.g. DIPN's lowest-level phase); the encoder and target scales always use all 'train' rows."""
    check_frame(frame, config, weighted)
    is_train = (frame["split"].astype(str) == "train").to_numpy()
    is_val = (frame["split"].astype(str) == "validation").to_numpy()
    if not is_train.any():
        raise ModelInputError("training frame has no rows with split == 'train'")
    train_all = frame.loc[is_train]
    if encoder is None:
        encoder = FeatureEncoder(numeric, categorical).fit(train_all)
    if targets is None:
        y = train_all["response"].to_numpy(dtype=np.float64)
        targets = {"response_mean": 0.0, "response_scale": 1.0, "cost_scale": 1.0}
        if config.response == "continuous":
            sd = float(y.std())
            targets["response_mean"] = float(y.mean())
            targets["response_scale"] = sd if sd > 1e-12 else 1.0
        if config.cost == "column":
            cm = float(train_all["cost"].to_numpy(dtype=np.float64).mean())
            targets["cost_scale"] = cm if cm > 1e-12 else 1.0
    keep = row_filter(frame).to_numpy(dtype=bool) if row_filter is not None else np.ones(len(frame), bool)
    tr = _tensors(frame.loc[is_train & keep], config, encoder, targets, weighted)
    va = _tensors(frame.loc[is_val & keep], config, encoder, targets, weighted)
    return PreparedFrame(encoder, tr, va, targets, int((is_train & keep).sum()), int((is_val & keep).sum()))


def _tensors(part: pd.DataFrame, config: CampaignConfig, encoder: FeatureEncoder, targets: dict[str, float],
             weighted: bool) -> dict[str, torch.Tensor]:
    x_num, x_cat = encoder.transform(part)
    y = (part["response"].to_numpy(dtype=np.float64) - targets["response_mean"]) / targets["response_scale"]
    out = {
        "x_num": torch.from_numpy(x_num),
        "x_cat": torch.from_numpy(x_cat),
        "level": torch.from_numpy(part["level"].to_numpy(dtype=np.int64, copy=True)),
        "response": torch.from_numpy(y.astype(np.float32)),
    }
    if weighted:
        out["weight"] = torch.from_numpy(part["ips_weight"].to_numpy(dtype=np.float32, copy=True))
    if config.cost == "column":
        out["cost"] = torch.from_numpy((part["cost"].to_numpy(dtype=np.float64) / targets["cost_scale"])
                                       .astype(np.float32))
    return out


def rule_costs(config: CampaignConfig, response: np.ndarray, cost_model: Callable[[], np.ndarray]) -> np.ndarray:
    """Expected cost per user x level (float64 N x K) by the campaign's cost rule, from the expected
    responses `values`: 'redeemed' incentive x response, 'assigned' the level's incentive, 'column'
    what `cost_model()` predicts (called only for that rule)."""
    incentives = np.asarray(config.incentives, dtype=np.float64)[None, :]
    if config.cost == "redeemed":
        return response * incentives
    if config.cost == "assigned":
        return np.broadcast_to(incentives, response.shape).copy()
    return cost_model()


def negative_cost_problem(model: str, config: CampaignConfig, cost: np.ndarray, users) -> str | None:
    """Why a model's predicted costs cannot be allocated (some are negative), in the campaign's terms
    (its cost rule and response type), or None. The allocation needs costs >= 0."""
    negative = np.asarray(cost) < 0
    if not negative.any():
        return None
    i, j = (int(x) for x in np.argwhere(negative)[0])
    made = {"redeemed": "incentive x predicted response (this model predicts responses below 0)",
            "assigned": "the level's incentive", "column": "the model's prediction of the cost column"}[config.cost]
    hint = (" With response: continuous, look for extreme or negative values in the events' response column (a "
            "single outlier such as 1e12 is enough to pull the predictions below 0), or use cost: assigned"
            if config.response == "continuous" else "")
    return (f"{model}: {int(negative.sum())} predicted costs are negative (first: user {users[i]}, level "
            f"'{config.labels[j]}', cost {float(cost[i, j]):.4g}); with campaign.yaml's cost rule '{config.cost}' a "
            f"cost is {made}; an allocation needs costs >= 0.{hint}")


# ---------------------------------------------------------------------------- trained model
def frozen_for_scoring(traced):
    """A traced module frozen for scoring (`torch.jit.freeze` without its numerics-changing passes:
    parameters inlined as constants, fewer look-ups per call: a copy of them as they are now, so it is
    made for a trained model that no longer changes), or the module as it was when it cannot be
    frozen. The callers keep it only when it gives exactly the eager pass's numbers."""
    try:
        return torch.jit.freeze(traced, optimize_numerics=False)
    except Exception:  # noqa: BLE001 (freezing is an optimization only)
        return traced


ONE_USER_TOLERANCE = 1e-5  # the NumPy one-user pass against the eager pass, link scale: |a - b| <= tol (1 + |b|)


def numpy_of(t: torch.Tensor) -> np.ndarray:
    """A parameter as a float64 NumPy copy (the float32 values widened exactly)."""
    return t.detach().to(torch.float64).numpy().copy()


def numpy_relu_mlp(seq: torch.nn.Module) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """[(W, b)] of a stack of Linear -> ReLU layers (an `mlp`), or None for a stack of another kind."""
    layers = list(seq.children()) if isinstance(seq, torch.nn.Sequential) else None
    if layers is None or len(layers) % 2 or not all(
            isinstance(a, torch.nn.Linear) and a.bias is not None and type(b) is torch.nn.ReLU
            for a, b in zip(layers[::2], layers[1::2])):
        return None
    return [(numpy_of(a.weight), numpy_of(a.bias)) for a in layers[::2]]


def relu_mlp(z: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """`numpy_relu_mlp`'s layers applied to one row (float64)."""
    for w, b in layers:
        z = w @ z
        z += b
        np.maximum(z, 0.0, out=z)
    return z


class _Curves(torch.nn.Module):
    """A network's `curves` as a module's forward (what TorchScript traces)."""

    def __init__(self, module: torch.nn.Module, cost: bool):
        super().__init__()
        self.module = module
        self.cost = cost

    def forward(self, x_num: torch.Tensor, x_cat: torch.Tensor):
        r, c = self.module.curves(x_num, x_cat)
        return (r, c) if self.cost else (r,)


@dataclass(frozen=True)
class TrainingRecord:
    """What a training run records with its model: the hyper-parameters it was trained with, its
    metrics and its per-epoch history."""

    hparams: dict[str, Any]
    metrics: dict[str, Any]
    history: list[dict[str, Any]]


class TrainedModel:
    """A trained response model with its encoder: `predict(frame) -> (values N x K, costs N x K)`.

    Attributes: `name` (registry name, e.g. 's_learner', 'dipn', 'dipn_bias'), `version` (content
    hash of the artefact, identical to what `save()` returns), `metrics` (dict), `history` (list of
    per-epoch dicts), `config` (CampaignConfig), `encoder` (FeatureEncoder), `module` (torch module),
    `hparams` (the hyper-parameters it was trained with), `estimator` (the registered model's
    parameters and phase, protocol.ResponseModel, or None).
    """

    def __init__(self, name: str, module: torch.nn.Module, encoder: FeatureEncoder, config: CampaignConfig,
                 targets: dict[str, float], record: TrainingRecord, arch_kwargs: dict[str, Any],
                 estimator: dict[str, Any] | None = None):
        self.name = name
        self.module = module.eval()
        self.encoder = encoder
        self.config = config
        self.targets = dict(targets)
        self.hparams = dict(record.hparams)
        self.metrics = dict(record.metrics)
        self.history = [dict(h) for h in record.history]
        self.arch_kwargs = dict(arch_kwargs)
        self.estimator = estimator  # the estimator's parameters and phase (protocol.ResponseModel), stored with it
        self._version: str | None = None
        self._one_row = None  # the traced one-row forward pass (compile)
        self._numpy_one = None  # the network's one-user pass in NumPy float64 (compile; False: none)

    @property
    def n_levels(self) -> int:
        return self.config.n_levels

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_one_row"] = None  # a TorchScript module is not pickled (a Dask worker scores batches eagerly)
        state["_numpy_one"] = None  # (a closure)
        return state

    # -------------------------------------------------------------- scoring
    def predict_raw(self, frame: pd.DataFrame, batch_size: int = 65536) -> tuple[np.ndarray, np.ndarray | None]:
        """Link-scale outputs (response_raw N x K, cost_raw N x K or None) for the users of `frame`."""
        return self._raw(*self.encoder.transform(frame), batch_size=batch_size)

    def _raw(self, x_num: np.ndarray, x_cat: np.ndarray, batch_size: int = 65536) -> tuple[np.ndarray, np.ndarray | None]:
        with torch.inference_mode():  # (a `with`: the decorator builds a new context manager per call)
            return self._raw_in(x_num, x_cat, batch_size)

    def _raw_in(self, x_num: np.ndarray, x_cat: np.ndarray, batch_size: int = 65536) -> tuple[np.ndarray, np.ndarray | None]:
        if self.module.training:  # (eval() walks every submodule: a tenth of a one-user prediction)
            self.module.eval()
        n = x_num.shape[0]
        if n == 1 and self._one_row is not None:
            out = self._one_row(torch.from_numpy(x_num), torch.from_numpy(x_cat))
            return out[0].numpy(), (out[1].numpy() if len(out) == 2 else None)
        resp, cost = [], []
        for s in range(0, n, batch_size):
            r, c = self.module.curves(torch.from_numpy(x_num[s:s + batch_size]),
                                      torch.from_numpy(x_cat[s:s + batch_size]))
            resp.append(r)
            if c is not None:
                cost.append(c)
        k = self.n_levels
        r = (resp[0] if len(resp) == 1 else torch.cat(resp)).numpy() if resp else np.zeros((0, k), np.float32)
        if cost:
            c = (cost[0] if len(cost) == 1 else torch.cat(cost)).numpy()
        elif not resp and getattr(self.module, "has_cost_head", False):
            c = np.zeros((0, k), np.float32)
        else:
            c = None
        return r, c

    def predict(self, frame: pd.DataFrame) -> Coefficients:
        """Expected response and expected cost per user x level (float64 N x K each).

        `frame` needs the raw feature columns only (unseen categories use the unknown bucket).
        Costs: 'redeemed' incentive x predicted response; 'assigned' the incentive; 'column' the
        cost head."""
        return self.predict_encoded(*self.encoder.transform(frame))

    def predict_encoded(self, x_num: np.ndarray, x_cat: np.ndarray) -> Coefficients:
        """`predict` of users already encoded by `encoder` (`FeatureEncoder.transform`'s pair): one
        forward pass over every level (per 65,536 users), without autograd. One user, with the cost
        rule 'redeemed' or 'assigned', goes through the network's NumPy pass when `compile` kept one
        (`_one_user_numpy`)."""
        if x_num.shape[0] == 1 and self._numpy_one and self.config.cost in ("redeemed", "assigned"):
            return self._one_user_numpy(x_num, x_cat)
        with torch.inference_mode():
            raw, cost_raw = self._raw_in(x_num, x_cat)
            kind = self.config.response
            mean = response_mean(torch.from_numpy(raw), kind)
            if raw.shape[0] == 1 and self.config.cost in ("redeemed", "assigned"):
                return self._one_user(mean)
            response = mean.numpy().astype(np.float64)
            response = response * self.targets["response_scale"] + self.targets["response_mean"]
            if self.config.cost == "column" and cost_raw is None:
                raise ModelInputError(f"model {self.name!r} has no cost head but the campaign's cost rule is 'column'")
            return Coefficients(response, rule_costs(self.config, response, lambda: F.softplus(
                torch.from_numpy(cost_raw)).numpy().astype(np.float64) * self.targets["cost_scale"]))

    def _one_user(self, mean: torch.Tensor) -> Coefficients:
        """`predict_encoded`'s scale, shift and cost rule ('redeemed' / 'assigned') for one user in Python
        floats: the same float64 arithmetic as on arrays (the float32 means widened exactly)."""
        scale, shift = self.targets["response_scale"], self.targets["response_mean"]
        response = [v * scale + shift for v in mean[0].tolist()]
        incentives = [float(i) for i in self.config.incentives]
        cost = [r * i for r, i in zip(response, incentives)] if self.config.cost == "redeemed" else incentives
        return Coefficients(np.array([response], dtype=np.float64), np.array([cost], dtype=np.float64))

    def _one_user_numpy(self, x_num: np.ndarray, x_cat: np.ndarray) -> Coefficients:
        """`predict_encoded` of one user through the network's NumPy pass (`numpy_curves`: float64, a
        few small NumPy calls instead of a torch graph's dispatch): the link, the scale and the cost
        rule in float64. Within ONE_USER_TOLERANCE of the eager float32 pass on the link scale (checked
        by `compile` on probe rows before it is used)."""
        raw = self._numpy_one(x_num[0], x_cat[0])[0]
        kind = self.config.response
        mean = 1.0 / (1.0 + np.exp(-raw)) if kind == "binary" else np.exp(np.minimum(raw, 30.0)) if kind == "count" \
            else raw
        response = mean * self.targets["response_scale"] + self.targets["response_mean"]
        incentives = np.asarray(self.config.incentives, dtype=np.float64)
        cost = response * incentives if self.config.cost == "redeemed" else incentives
        return Coefficients(response.reshape(1, -1), cost.reshape(1, -1))

    def _numpy_pass(self):
        """The network's one-user pass in NumPy (its `numpy_curves()`), or False when it has none or it
        is not within ONE_USER_TOLERANCE of the eager pass on probe rows (zeros, a spread, 64 random rows
        with every category code)."""
        make = getattr(self.module, "numpy_curves", None)
        card = self.encoder.cardinalities
        if not callable(make):
            return False
        try:
            fn = make()
            if fn is None:
                return False
            rng = np.random.default_rng(0)
            n, p = 66, self.encoder.n_numeric
            x_num = np.concatenate([np.zeros((1, p)), np.linspace(-3.0, 3.0, p).reshape(1, -1),
                                    rng.normal(0.0, 2.0, (n - 2, p))]).astype(np.float32)
            x_cat = np.column_stack([rng.integers(0, c, n) for c in card]).astype(np.int64) if card \
                else np.zeros((n, 0), dtype=np.int64)
            for i in range(n):
                with torch.inference_mode():
                    want = [t for t in self.module.curves(torch.from_numpy(x_num[i:i + 1]),
                                                          torch.from_numpy(x_cat[i:i + 1]))]
                got = fn(x_num[i], x_cat[i])
                for w, g in zip(want, got):
                    if (w is None) != (g is None):
                        return False
                    if w is not None:
                        w = w[0].double().numpy()
                        if g.shape != w.shape or not np.all(np.abs(g - w) <= ONE_USER_TOLERANCE * (1.0 + np.abs(w))):
                            return False
        except Exception:  # noqa: BLE001 (the torch pass serves)
            return False
        return fn

    def compile(self) -> "TrainedModel":
        """Ready to score one user fast (what a scoring plan calls before it serves): the network in
        evaluation mode, and its forward pass for one row traced once with TorchScript (the same
        operations without Python's per-module calls: half the time of a one-user prediction). The
        traced pass is kept only when it gives exactly the eager pass's numbers on probe rows. A network
        with a NumPy pass (`numpy_curves`: the small MLPs) also gets it for one user, kept when it is
        within ONE_USER_TOLERANCE of the eager pass (`_numpy_pass`). Returns self."""
        import warnings

        self.module.eval()
        if self._numpy_one is None and self.encoder.means is not None:
            self._numpy_one = self._numpy_pass()
        if self._one_row is not None or self.encoder.means is None:
            return self
        card = self.encoder.cardinalities
        probes = [(torch.zeros((1, self.encoder.n_numeric)), torch.zeros((1, len(card)), dtype=torch.int64)),
                  (torch.linspace(-2.0, 2.0, self.encoder.n_numeric).reshape(1, -1),
                   torch.tensor([[c - 1 for c in card]], dtype=torch.int64))]
        try:
            with torch.inference_mode():
                cost = self.module.curves(*probes[0])[1] is not None
            with warnings.catch_warnings(record=True) as said, torch.no_grad():
                warnings.simplefilter("always")
                traced = torch.jit.trace(_Curves(self.module, cost).eval(), probes[0], check_trace=False)
                traced = frozen_for_scoring(traced)
            if any(issubclass(w.category, torch.jit.TracerWarning) for w in said):
                # a value the trace would freeze (e.g. a NumPy kernel inside): the network's own split around
                # it (DIPN: its networks traced, its chain kernel between them), else the eager pass serves
                split = getattr(self.module, "traced_curves", None)
                with warnings.catch_warnings(record=True) as said, torch.no_grad():
                    warnings.simplefilter("always")
                    traced = split(*probes[0]) if callable(split) else None
                if traced is None or any(issubclass(w.category, torch.jit.TracerWarning) for w in said):
                    return self
            with torch.inference_mode():
                for a, b in probes + probes:  # twice: TorchScript optimizes a graph at its second run
                    want, got = [t for t in self.module.curves(a, b) if t is not None], traced(a, b)
                    if len(want) != len(got) or not all(torch.equal(w, g) for w, g in zip(want, got)):
                        return self
        except Exception:  # noqa: BLE001 (a network TorchScript cannot trace: the eager pass serves)
            return self
        self._one_row = traced
        return self

    # -------------------------------------------------------------- artefact
    def payload(self) -> dict[str, Any]:
        """Everything needed to rebuild the model; wall-clock timings are left out so that the
        version depends only on what was learned."""
        return {
            "format": PAYLOAD_FORMAT,
            "name": self.name,
            "architecture": self.module.architecture,
            "architecture_version": int(getattr(type(self.module), "architecture_version", 1)),
            "arch_kwargs": self.arch_kwargs,
            "state_dict": {k: v.detach().clone() for k, v in self.module.state_dict().items()},
            "encoder": self.encoder.to_state(),
            "config": self.config.to_dict(),
            "targets": self.targets,
            "hparams": self.hparams,
            "metrics": {k: v for k, v in self.metrics.items() if k not in TIMING_KEYS},
            "history": [{k: v for k, v in h.items() if k not in TIMING_KEYS} for h in self.history],
            **({"estimator": self.estimator} if self.estimator is not None else {}),
        }

    @property
    def version(self) -> str:
        """Content hash of the artefact (the version `save()` stores it under)."""
        if self._version is None:
            self._version = artifacts.content_version(artifacts.to_bytes(self.payload()))
        return self._version

    def save(self, root=None) -> str:
        """Store the artefact (kind 'model') in the content-addressed store; return its version."""
        version, _ = artifacts.save_object(self.payload(), "model", root)
        self._version = version
        return version

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> "TrainedModel":
        if not isinstance(payload, dict) or payload.get("format") != PAYLOAD_FORMAT:
            raise ModelInputError("not a promo_assets model artefact")
        arch = payload["architecture"]
        if arch not in ARCHITECTURES:  # the architectures register themselves when their model's module loads

            registry.import_all()
        if arch not in ARCHITECTURES:
            raise ModelInputError(f"unknown model architecture {arch!r} in artefact")
        saved, current = int(payload.get("architecture_version", 1)), int(getattr(ARCHITECTURES[arch], "architecture_version", 1))
        if saved != current:
            raise ModelInputError(
                f"model artefact {payload.get('name')!r} was saved by version {saved} of the {arch!r} architecture; "
                f"this code reads version {current}: re-materialize the model's asset (or retrain the model)")
        try:
            module = build_network(arch, payload["arch_kwargs"])
            module.load_state_dict(payload["state_dict"])
            config = CampaignConfig.from_record(payload["config"])
            record = TrainingRecord(payload["hparams"], payload["metrics"], payload["history"])
            return cls(payload["name"], module, FeatureEncoder.from_state(payload["encoder"]), config,
                       payload["targets"], record, payload["arch_kwargs"], payload.get("estimator"))
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise ModelInputError(f"model artefact {payload.get('name')!r} is damaged ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0][:200] if str(exc) else ''}): re-materialize the "
                                  "model's asset") from None

    def __repr__(self) -> str:
        return f"TrainedModel(name={self.name!r}, campaign={self.config.campaign!r}, K={self.n_levels})"


def load_model(version: str, root=None) -> TrainedModel:
    """Load a model artefact saved by `TrainedModel.save()`; its predictions are identical. The file's
    bytes are checked against `version` first (artifacts.ArtifactMissingError when they differ) and
    parsed as data, never unpickled (ModelInputError for anything that is not a model artefact)."""
    try:
        payload = artifacts.load_object("model", version, root)
    except artifacts.ArtifactFormatError as exc:
        raise ModelInputError(str(exc)) from None
    model = TrainedModel.from_payload(payload)
    model._version = version
    return model


class TorchResponseModel(ResponseModel):
    """The registered models whose fitted object is a `TrainedModel` (a torch network with its
    encoder): loaded with `load_model`, refused when the artefact holds another model's network."""

    @classmethod
    def _load(cls, version: str, root=None) -> TrainedModel:
        fitted = load_model(version, root)
        phase = (fitted.estimator or {}).get("phase") or cls._phase_of(fitted)
        if phase not in cls.phases or (phase == cls.phases[-1] and fitted.name != cls.name):
            raise ModelInputError(f"model artefact {version!r} holds model {fitted.name!r}, not {cls.name!r}")
        return fitted


def fit_metrics(fit, prep: PreparedFrame, module: torch.nn.Module, weighted: bool, t0: float, **extra) -> dict:
    """The metrics every torch response model stores about its fit (`fit`: the FitResult of
    `fit_torch_model`, `t0`: perf_counter() before it), plus `extra` model-specific ones."""
    import time

    return {
        "validation_loss": fit.best_validation_loss,
        "best_epoch": fit.best_epoch,
        "epochs": fit.epochs,
        "stopped_early": fit.stopped_early,
        "seconds_per_epoch": fit.seconds_per_epoch,
        "train_seconds": time.perf_counter() - t0,
        **extra,
        "n_train": prep.n_train,
        "n_validation": prep.n_validation,
        "n_parameters": count_parameters(module),
        "weighted": bool(weighted),
    }


def count_parameters(module: torch.nn.Module) -> int:
    return int(sum(p.numel() for p in module.parameters()))


def resolve_max_epochs(default: int, override: int | None = None) -> int:
    """`override` if given, else `default`; then capped by settings.max_epochs() (PROMO_MAX_EPOCHS)."""
    epochs = int(override) if override is not None else int(default)
    cap = settings.max_epochs()
    if cap is not None:
        epochs = min(epochs, cap)
    if epochs < 1:
        raise ModelInputError(f"max_epochs must be >= 1, got {epochs}")
    return epochs


def summed_embedding_input(cardinalities: list[int]) -> torch.Tensor:
    """Offsets that map per-field indices into one shared embedding table (for summed embeddings)."""
    offsets = np.concatenate([[0], np.cumsum(cardinalities)[:-1]]) if cardinalities else np.zeros(0)
    return torch.as_tensor(offsets, dtype=torch.int64)
