"""LightGBM baselines (issue #14, item 7): the peer baselines users compare the project's models with.

Three registered models, one gradient-boosted tree model (LightGBM) each, trained on the 'train' rows
of the training frame with the IPS weights (`ips_weight`) as sample weights and early-stopped on the
'validation' rows:

- `lgbm_s` (S-learner): one model over the user features plus the level. Ordered campaigns (`levels:`)
  give the level's incentive amount as a numeric feature; arms campaigns (`arms:`) the arm as a
  categorical feature.
- `lgbm_s_mono`: the same with a monotone-increasing constraint on the level (LightGBM's
  `monotone_constraints`): every user's predicted response never decreases with the incentive.
  Ordered campaigns only; for an arms campaign `applies_to` gives the reason.
- `lgbm_t` (T-learner): one model per level or arm, each on the rows logged at that level; skipped
  (ModelSkipped, with the level named) when a configured level has no training rows.

Objective by `config.response`: 'binary' -> cross-entropy (labels in [0, 1]), 'count' -> Poisson,
'continuous' -> squared error. Costs follow the campaign's cost rule exactly as
`models.base.TrainedModel.predict`: 'redeemed' incentive x predicted response, 'assigned' the
incentive, 'column' a LightGBM regressor (squared error, clipped at 0) on the cost column, built the
same way as the response model (S: one model with the level as a feature, unconstrained; T: one per
level).

Features go through the project's `FeatureEncoder` (fitted on the 'train' rows): numeric columns
standardized, a missing value at the training mean plus a 0/1 missing indicator; categorical
columns as vocabulary codes (0 = the unknown bucket for missing and never-seen values) handled by
LightGBM's categorical splits. So NaN features and categories unseen at training predict like a
missing value. LightGBM sees the columns as f0, f1, ... (data column names never reach it).

Hyper-parameters (constructor arguments, `models.params.<model>` in campaign.yaml): learning rate
0.05, 15 leaves, at least 40 rows per leaf, L2 0.1, up to 1000 rounds with early stopping after 30
rounds without improvement of the weighted validation loss (200 fixed rounds when there are no
validation rows), 63 bins, one thread, `deterministic=True`, `seed` 0, IPS weights on. Training
rounds are not epochs: `max_epochs` / PROMO_MAX_EPOCHS do not apply.

Artefact: one JSON document (the booster texts from `model_to_string` at the best iteration, the
encoder state, what prediction needs of the campaign config, the parameters, metrics and history),
stored in the content-addressed store under kind 'model'; `version` is its content hash, which
includes `ARCHITECTURE_VERSION`. lightgbm is imported only inside fit / predict / load.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.coefficients import Coefficients
from promo_assets.models.base import TIMING_KEYS, check_frame, rule_costs
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.models.errors import ModelInputError
from promo_assets.models.forest import Forest, from_boosters
from promo_assets.models.protocol import (
    COUNT, FLAG, NON_NEGATIVE, POSITIVE, SEED, Log, ModelSkipped, ResponseModel, TrainingData, is_int,
)
from promo_assets.store import artifacts

ARTEFACT_FORMAT = "promo_assets.lgbm"
ARCHITECTURE = "lightgbm"
ARCHITECTURE_VERSION = 1

DEFAULTS: dict[str, Any] = {
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 40,
    "lambda_l2": 0.1,
    "max_bin": 63,
    "num_boost_round": 1000,
    "early_stopping_rounds": 30,
    "rounds_without_validation": 200,
    "num_threads": 1,
}
OBJECTIVES = {"binary": ("cross_entropy", "cross_entropy"), "count": ("poisson", "poisson"),
              "continuous": ("regression", "l2")}
PREDICT_ROWS = 1 << 20  # rows (users x levels) scored per LightGBM call
ORDERED_ONLY = "needs ordered incentive levels (a monotone constraint on the level); campaign {c!r} has {kind}"


# ------------------------------------------------------------------------------------ the models
@dataclass(frozen=True)
class LGBMParams:
    """The LightGBM models' hyper-parameters (campaign.yaml `models.params.lgbm_s`, `lgbm_s_mono`, `lgbm_t`)."""

    learning_rate: float = 0.05
    num_leaves: int = 15
    min_data_in_leaf: int = 40
    lambda_l2: float = 0.1
    max_bin: int = 63
    num_boost_round: int = 1000
    early_stopping_rounds: int = 30
    rounds_without_validation: int = 200
    num_threads: int = 1
    seed: int = 0
    ips_weighting: bool = True


class _LGBMModel(ResponseModel):
    """The LightGBM baselines as estimators. Hyper-parameters: LightGBM's `learning_rate`,
    `num_leaves`, `min_data_in_leaf`, `lambda_l2`, `max_bin`, `num_threads`; `num_boost_round` (the
    most rounds), `early_stopping_rounds`, `rounds_without_validation` (rounds when there are no
    validation rows); `seed`; `ips_weighting` (the IPS weights as sample weights)."""

    variant: ClassVar[str]  # 's', 's_mono' or 't'
    source = "baseline"
    kinds = frozenset({"lightgbm"})
    rules = {"learning_rate": POSITIVE, "num_leaves": (lambda x: is_int(x) and x >= 2, "an integer >= 2"),
             "min_data_in_leaf": COUNT, "lambda_l2": NON_NEGATIVE,
             "max_bin": (lambda x: is_int(x) and x >= 2, "an integer >= 2"), "num_boost_round": COUNT,
             "early_stopping_rounds": COUNT, "rounds_without_validation": COUNT, "num_threads": COUNT,
             "seed": SEED, "ips_weighting": FLAG}

    Params = LGBMParams

    def _fit_phase(self, data: TrainingData, phase: str, previous, log: Log | None) -> "LGBMFitted":
        params = {k: v for k, v in self.get_params().items() if k in DEFAULTS}
        return _train(self.name, self.variant, data, data.config, params, seed=self.params.seed,
                      weighted=self.params.ips_weighting, log=log)

    @classmethod
    def _load(cls, version: str, root=None) -> "LGBMFitted":
        return load_lgbm(version, root, expect=cls.name)


class LGBMSLearner(_LGBMModel):
    name = "lgbm_s"
    title = "LightGBM S-learner: one model over the features and the level (or arm)"
    variant = "s"


class LGBMSLearnerMonotone(_LGBMModel):
    name = "lgbm_s_mono"
    title = "LightGBM S-learner with a monotone-increasing constraint on the level"
    applies = "ordered incentive levels (`treatments: levels`)"
    variant = "s_mono"
    monotone = True

    @classmethod
    def applies_to(cls, config: CampaignConfig) -> str | None:
        return None if config.ordered else ORDERED_ONLY.format(c=config.campaign, kind=config.level_kind)


class LGBMTLearner(_LGBMModel):
    name = "lgbm_t"
    title = "LightGBM T-learner: one model per level (or arm)"
    variant = "t"


# ------------------------------------------------------------------------------------ fitted
@dataclass(repr=False, eq=False)
class LGBMFitted:
    """A fitted LightGBM baseline: `predict(users) -> (values N x K, costs N x K)` (float64), `save()`,
    `version` (content hash of the artefact), `metrics`, `history`, `config`, `encoder`, `boosters`
    (role -> LightGBM model text: 'response' / 'cost' for S, 'response/<k>' / 'cost/<k>' for T)."""

    name: str
    variant: str
    config: CampaignConfig
    encoder: FeatureEncoder
    boosters: dict[str, str]
    params: dict[str, Any]
    metrics: dict[str, Any]
    history: list[dict[str, Any]]
    estimator: dict[str, Any] | None = None  # the estimator's parameters and phase (protocol.ResponseModel)
    _live: dict[str, Any] = field(default_factory=dict)
    _version: str | None = None

    # -------------------------------------------------------------- scoring
    def _booster(self, role: str) -> "FastBooster":
        if role not in self._live:
            import lightgbm as lgb

            self._live[role] = FastBooster(lgb.Booster(model_str=self.boosters[role]), int(self.params["num_threads"]))
        return self._live[role]

    def _forest(self, part: str) -> Forest | None:
        """The `part` ('response' / 'cost') boosters compiled for scoring (`models.forest`: one booster
        for S, the K boosters side by side for T), or None when the kernel does not reproduce them
        exactly (LightGBM then scores)."""
        key = f"forest/{part}"
        if key not in self._live:
            roles = [part] if self.variant != "t" else [f"{part}/{lv}" for lv in range(self.config.n_levels)]
            if not all(r in self.boosters for r in roles):
                return None
            self._live[key] = from_boosters([self._booster(r).booster for r in roles], [self.boosters[r] for r in roles],
                                            self._level_values() if self.variant != "t" else None)
        return self._live[key]

    def _level_values(self) -> np.ndarray:
        """The level column's value at each level (`_level_feature`), made once."""
        if "levels" not in self._live:
            self._live["levels"] = _level_feature(self.config, np.arange(self.config.n_levels))
        return self._live["levels"]

    def compile(self) -> "LGBMFitted":
        """Build every booster and its compiled forest now (they are otherwise built at their first
        prediction): what a scoring plan does before it serves. Returns self."""
        for role in self.boosters:
            self._booster(role)
        for part in {r.split("/")[0] for r in self.boosters}:
            self._forest(part)
        return self

    def _score(self, part: str, x: np.ndarray) -> np.ndarray:
        """N x K predictions of the `part` ('response' or 'cost') models: S scores each user at every
        level with its one model, T each level with that level's model."""
        k, n = self.config.n_levels, x.shape[0]
        if n == 0:
            return np.zeros((n, k), dtype=np.float64)
        # the compiled forest (models.forest): an S-learner's trees at every level, a T-learner's K boosters
        # side by side, in one call (the demo's lgbm_t, 20,000 users: 0.5 us per user against 2.2 for
        # LightGBM's batch call; lgbm_s 0.55 against 5.9 for its N x K grid)
        trees = self._forest(part)
        if trees is not None:
            return trees.predict(x, self._level_values() if self.variant != "t" else None)
        out = np.zeros((n, k), dtype=np.float64)
        if self.variant == "t":
            for lv in range(k):
                out[:, lv] = self._booster(f"{part}/{lv}").predict(x)
            return out
        booster = self._booster(part)
        level_values = _level_feature(self.config, np.arange(k))
        step = max(1, PREDICT_ROWS // k)
        for s in range(0, n, step):
            xb = x[s:s + step]
            grid = np.empty((len(xb) * k, xb.shape[1] + 1), dtype=np.float64)
            grid[:, :-1] = np.repeat(xb, k, axis=0)
            grid[:, -1] = np.tile(level_values, len(xb))
            out[s:s + len(xb)] = booster.predict(grid).reshape(len(xb), k)
        return out

    def predict(self, users: pd.DataFrame) -> Coefficients:
        """Expected response and expected cost per user x level (float64 N x K each) for the users of
        `users` (the raw feature columns; NaN / unseen categories are scored as missing)."""
        return self.predict_encoded(*self.encoder.transform(users))

    def predict_encoded(self, x_num: np.ndarray, x_cat: np.ndarray) -> Coefficients:
        """`predict` of users already encoded by `encoder` (`FeatureEncoder.transform`'s pair)."""
        x = np.empty((x_num.shape[0], x_num.shape[1] + x_cat.shape[1]), dtype=np.float64)
        x[:, :x_num.shape[1]] = x_num  # float32 and int64 values widened to float64, as np.hstack of their astype
        x[:, x_num.shape[1]:] = x_cat
        response = self._score("response", x)
        return Coefficients(response, rule_costs(self.config, response,
                                                 lambda: np.clip(self._score("cost", x), 0.0, None)))

    # -------------------------------------------------------------- artefact
    def payload(self) -> dict[str, Any]:
        """The artefact's content (plain JSON); wall-clock timings are left out so that the version
        depends only on what was learned."""
        c = self.config
        return {
            "format": ARTEFACT_FORMAT,
            "architecture": ARCHITECTURE,
            "architecture_version": ARCHITECTURE_VERSION,
            "name": self.name,
            "variant": self.variant,
            "config": {"campaign": c.campaign, "incentives": list(c.incentives), "labels": list(c.labels),
                       "ordered": c.ordered, "cost": c.cost, "response": c.response},
            "encoder": self.encoder.to_state(),
            "boosters": self.boosters,
            "params": self.params,
            "metrics": {k: v for k, v in self.metrics.items() if k not in TIMING_KEYS},
            "history": [{k: v for k, v in h.items() if k not in TIMING_KEYS} for h in self.history],
            **({"estimator": self.estimator} if self.estimator is not None else {}),
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.payload(), sort_keys=True, separators=(",", ":"), allow_nan=False).encode()

    @property
    def version(self) -> str:
        """Content hash of the artefact (the version `save()` stores it under)."""
        if self._version is None:
            self._version = artifacts.content_version(self.to_bytes())
        return self._version

    def save(self, root=None) -> str:
        """Store the artefact (kind 'model') in the content-addressed store; return its version."""
        self._version, _ = artifacts.save_bytes(self.to_bytes(), "model", root)
        return self._version

    def __repr__(self) -> str:
        return f"LGBMFitted(name={self.name!r}, campaign={self.config.campaign!r}, K={self.config.n_levels})"


def load_lgbm(version: str, root=None, expect: str | None = None) -> LGBMFitted:
    """The LightGBM baseline stored under `version` (kind 'model'); ModelInputError naming the artefact
    when it is missing, not a LightGBM baseline, saved by another architecture version, or (with
    `expect`) another model's."""
    where = f"model artefact {version!r}"
    try:
        data = artifacts.load_bytes("model", version, root)
    except FileNotFoundError as exc:  # absent, or bytes that do not match the version (artifacts.ArtifactMissingError)
        raise ModelInputError(f"{where}: {exc}") from None
    try:
        payload = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        payload = None
    if not isinstance(payload, dict) or payload.get("format") != ARTEFACT_FORMAT:
        raise ModelInputError(f"{where} is not a LightGBM baseline artefact"
                              + (f" (model {expect!r} cannot load it)" if expect else ""))
    saved = payload.get("architecture_version")
    if saved != ARCHITECTURE_VERSION:
        raise ModelInputError(
            f"{where} ({payload.get('name')!r}) was saved by version {saved} of the {ARCHITECTURE!r} architecture; "
            f"this code reads version {ARCHITECTURE_VERSION}: re-materialize the model's asset (or retrain the model)")
    if expect is not None and payload.get("name") != expect:
        raise ModelInputError(f"{where} holds model {payload.get('name')!r}, not {expect!r}")
    c = payload["config"]
    config = CampaignConfig.from_record(c)
    model = LGBMFitted(payload["name"], payload["variant"], config, FeatureEncoder.from_state(payload["encoder"]),
                       payload["boosters"], payload["params"], payload["metrics"], payload["history"],
                       payload.get("estimator"))
    model._version = version
    return model


class FastBooster:
    """One LightGBM booster's prediction through LightGBM's C API on a float64 row-major matrix,
    without `Booster.predict`'s per-call set-up (parameter parsing, input conversion, a predictor
    object per call): `LGBM_BoosterPredictForMat` (the call `Booster.predict` ends in, with the same
    parameters: normal prediction, every iteration, `num_threads`) for several rows, and LightGBM's
    single-row fast path (`LGBM_BoosterPredictForMatSingleRowFast`, its configuration made once) for
    one row. The same numbers as `Booster.predict`, in a few microseconds instead of tens."""

    def __init__(self, booster, num_threads: int = 1):
        import ctypes

        from lightgbm import basic

        self.booster = booster  # owns the handle
        self.num_threads = int(num_threads)
        self._lib, self._check = basic._LIB, basic._safe_call
        self._params = basic._c_str(f"num_threads={int(num_threads)}")
        self.num_feature = booster.num_feature()
        self._fast = ctypes.c_void_p()
        self._check(self._lib.LGBM_BoosterPredictForMatSingleRowFastInit(
            booster._handle, ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(-1),  # normal, every iteration
            ctypes.c_int(1), ctypes.c_int32(self.num_feature), self._params, ctypes.byref(self._fast)))  # float64

    def __reduce__(self):  # pickled as its booster (a Dask worker rebuilds the fast configuration)
        return (FastBooster, (self.booster, self.num_threads))

    def __del__(self):
        fast = getattr(self, "_fast", None)
        if fast is not None and fast.value:
            self._lib.LGBM_FastConfigFree(fast)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """float64 prediction per row of `x` (N x num_feature)."""
        import ctypes

        x = np.ascontiguousarray(x, dtype=np.float64)
        n = x.shape[0]
        if x.ndim != 2 or x.shape[1] != self.num_feature:
            raise ModelInputError(f"LightGBM booster reads {self.num_feature} features, got an array of shape {x.shape}")
        out = np.empty(n, dtype=np.float64)
        if n == 0:
            return out
        got = ctypes.c_int64(0)
        ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        if n == 1:
            self._check(self._lib.LGBM_BoosterPredictForMatSingleRowFast(
                self._fast, x.ctypes.data_as(ctypes.c_void_p), ctypes.byref(got), ptr))
        else:
            self._check(self._lib.LGBM_BoosterPredictForMat(
                self.booster._handle, x.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(1), ctypes.c_int32(n),
                ctypes.c_int32(x.shape[1]), ctypes.c_int(1), ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(-1),
                self._params, ctypes.byref(got), ptr))  # float64, row major, normal prediction, every iteration
        if got.value != n:
            raise ModelInputError(f"LightGBM returned {got.value} predictions for {n} rows")
        return out


# ------------------------------------------------------------------------------------ training
def _level_feature(config: CampaignConfig, levels: np.ndarray) -> np.ndarray:
    """The level as LightGBM sees it: the incentive amount (ordered) or the arm index (categorical)."""
    levels = np.asarray(levels, dtype=np.int64)
    if config.ordered:
        return np.asarray(config.incentives, dtype=np.float64)[levels]
    return levels.astype(np.float64)


def _finite(v) -> float | None:
    """A float for the artefact's JSON: None when missing or not finite."""
    return None if v is None or not math.isfinite(float(v)) else float(v)


def _features(encoder: FeatureEncoder, frame: pd.DataFrame) -> np.ndarray:
    """Encoded user features as one float64 matrix: numeric (+ missing indicators), then the codes."""
    x_num, x_cat = encoder.transform(frame)
    return np.hstack([x_num.astype(np.float64), x_cat.astype(np.float64)])


@dataclass(frozen=True)
class _Rows:
    """The rows one booster learns from (or validates on): features `x`, target `y`, weights `w`."""

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray


def _boost(params: dict[str, Any], rows: _Rows, validation: _Rows, categorical: list[int], monotone: list[int] | None,
           objective: tuple[str, str], seed: int) -> tuple[str, dict[str, Any]]:
    """Train one LightGBM model on `rows`, early-stopping on `validation`; returns (model text at the
    best iteration, summary)."""
    import lightgbm as lgb

    x, y, w, xv, yv, wv = rows.x, rows.y, rows.w, validation.x, validation.y, validation.w

    obj, metric = objective
    p = {"objective": obj, "metric": metric, "learning_rate": params["learning_rate"],
         "num_leaves": params["num_leaves"], "min_data_in_leaf": params["min_data_in_leaf"],
         "lambda_l2": params["lambda_l2"], "max_bin": params["max_bin"], "num_threads": params["num_threads"],
         "seed": seed, "deterministic": True, "force_row_wise": True, "verbosity": -1,
         "feature_pre_filter": False}
    if monotone is not None:
        p["monotone_constraints"] = monotone
        p["monotone_constraints_method"] = "basic"
    names = [f"f{j}" for j in range(x.shape[1])]
    train = lgb.Dataset(x, y, weight=w, feature_name=names, categorical_feature=categorical or "auto",
                        free_raw_data=True, params={"max_bin": params["max_bin"], "verbosity": -1})
    evals: dict[str, Any] = {}
    if len(yv):
        valid = lgb.Dataset(xv, yv, weight=wv, reference=train)
        booster = lgb.train(p, train, num_boost_round=params["num_boost_round"], valid_sets=[valid],
                            valid_names=["validation"],
                            callbacks=[lgb.early_stopping(params["early_stopping_rounds"], verbose=False),
                                       lgb.record_evaluation(evals)])
        best = int(booster.best_iteration) or booster.current_iteration()
        curve = evals["validation"][metric]
        loss = float(curve[best - 1])
    else:
        booster = lgb.train(p, train, num_boost_round=params["rounds_without_validation"])
        best, curve, loss = booster.current_iteration(), [], None
    return booster.model_to_string(num_iteration=best), {"rounds": best, "validation_loss": loss, "curve": curve}


def _train(name: str, variant: str, data: TrainingData, config: CampaignConfig, params: dict[str, Any], *,
           seed: int, weighted: bool = True, log: Log | None) -> LGBMFitted:
    frame = data.frame
    check_frame(frame, config, weighted=weighted)
    split = frame["split"].astype(str).to_numpy()
    tr, va = frame.loc[split == "train"], frame.loc[split == "validation"]
    if tr.empty:
        raise ModelInputError(f"{name}: the training frame of campaign {config.campaign!r} has no rows with "
                              "split == 'train'")
    t0 = time.perf_counter()
    encoder = FeatureEncoder(list(data.numeric), list(data.categorical)).fit(tr)
    x, xv = _features(encoder, tr), _features(encoder, va)
    lv, lvv = tr["level"].to_numpy(dtype=np.int64), va["level"].to_numpy(dtype=np.int64)
    w, wv = ((p["ips_weight"].to_numpy(dtype=np.float64) if weighted else np.ones(len(p))) for p in (tr, va))
    targets = {"response": (OBJECTIVES[config.response], tr["response"], va["response"])}
    if config.cost == "column":
        targets["cost"] = (("regression", "l2"), tr["cost"], va["cost"])
    params = {**DEFAULTS, **params}
    n_cat = len(encoder.categorical)
    cat_cols = list(range(x.shape[1] - n_cat, x.shape[1]))
    boosters, history, rounds = {}, [], {}
    for part, (objective, y_tr, y_va) in targets.items():
        y, yv = y_tr.to_numpy(dtype=np.float64), y_va.to_numpy(dtype=np.float64)
        if variant == "t":
            for k in range(config.n_levels):
                m, mv = lv == k, lvv == k
                if not m.any():  # skipped, not failed: the other models still predict that level
                    raise ModelSkipped(f"level {config.labels[k]!r} (index {k}) of campaign {config.campaign!r} has no "
                                       "training events (never logged in the training days); a T-learner needs events "
                                       "at every level")
                text, info = _boost(params, _Rows(x[m], y[m], w[m]), _Rows(xv[mv], yv[mv], wv[mv]), cat_cols, None,
                                    objective, seed)
                boosters[f"{part}/{k}"] = text
                rounds[f"{part}/{k}"] = info["rounds"]
                history.append({"model": f"{part}/{k}", "rounds": info["rounds"],
                                "validation_loss": _finite(info["validation_loss"])})
            continue
        xs = np.column_stack([x, _level_feature(config, lv)])
        xsv = np.column_stack([xv, _level_feature(config, lvv)]) if len(xv) else xv.reshape(0, x.shape[1] + 1)
        cats = cat_cols + ([x.shape[1]] if not config.ordered else [])
        mono = ([0] * x.shape[1] + [1]) if variant == "s_mono" and part == "response" else None
        text, info = _boost(params, _Rows(xs, y, w), _Rows(xsv, yv, wv), cats, mono, objective, seed)
        boosters[part] = text
        rounds[part] = info["rounds"]
        history.extend({"model": part, "round": i + 1, "validation_loss": _finite(v)} for i, v in enumerate(info["curve"]))
        if part == "response":
            best_loss = info["validation_loss"]
    seconds = time.perf_counter() - t0
    if variant == "t":
        losses = [h["validation_loss"] for h in history if h["model"].startswith("response/")]
        best_loss = (None if any(v is None for v in losses) else
                     float(np.average(losses, weights=[(lvv == k).sum() for k in range(config.n_levels)]))
                     if len(va) else None)
    metric = OBJECTIVES[config.response][1]
    metrics = {"validation_loss": _finite(best_loss),
               "validation_metric": metric, "rounds": rounds, "n_train": int(len(tr)),
               "n_validation": int(len(va)), "n_features": int(x.shape[1]), "train_seconds": seconds}
    fitted = LGBMFitted(name, variant, config, encoder, boosters, params, metrics, history)
    if log is not None:
        total = sum(rounds.values())
        log(f"{name}: {len(boosters)} LightGBM model(s), {total} rounds in all, validation {metric} "
            f"{metrics['validation_loss'] if metrics['validation_loss'] is not None else '-'}, "
            f"{len(tr)} training rows, {seconds:.1f} s")
    return fitted
