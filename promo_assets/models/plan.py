"""A champion's compiled scoring plan: what `promo serve`, `OnlinePolicy` and `decide_stream` score
users with.

Built once per champion (its member models and weights) and never changed afterwards:

- **Encoding without pandas.** Each member's `FeatureEncoder` becomes NumPy lookups: the positions
  of its numeric columns in the plan's numeric block, their means and standard deviations as
  arrays, the positions of its missing-value indicators, and one dict {text: code} per categorical
  column (0, the unknown bucket, for a missing or never-seen value). Users are given as a float64
  matrix of the plan's numeric features (NaN: missing) and an object matrix of its categorical
  features (text, or None: missing); `coefficients_rows` encodes them exactly as
  `FeatureEncoder.transform` would (the same float64 arithmetic, the same float32 rounding).
- **One prediction call per member** on the encoded arrays (`predict_encoded`): a torch model runs
  one forward pass over every level under `torch.inference_mode` (one user of a small network: its
  NumPy float64 pass, within 1e-5 of the eager pass, `TrainedModel._one_user_numpy`), a LightGBM
  model its compiled forest (`models.forest`) or LightGBM's C API (`lgbm.FastBooster`). `compile()`
  on each member builds what it would otherwise build at its first prediction (the LightGBM
  boosters and forests, the traced and NumPy one-user passes), so a plan answers its first request
  as fast as its thousandth.
- **The blend** is the members' weighted sum of response and cost in the champion's order, as
  `CampaignState` always computed it; the decision is `allocation.decide` (its tie rule).

A member that cannot be compiled (a model without a `FeatureEncoder` or without `predict_encoded`,
e.g. a test's stand-in) is scored by its own `predict` on a pandas frame built from the same rows:
the plan is then as fast as that member allows, and its answers the same.

`coefficients(frame)` scores a pandas frame (the population, `decide_stream`'s batches): each
member's `encoder.transform` (vectorized) then `predict_encoded`, i.e. exactly `model.predict(frame)`.

No dagster here (domain code).
"""

from __future__ import annotations

import math
from itertools import repeat
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.core.coefficients import Coefficients
from promo_assets.models.encoder import FeatureEncoder
from promo_assets.models.errors import ModelInputError


def fitted_of(model: Any) -> Any:
    """The fitted object of a registry estimator (its `model_`), else the model itself."""
    return getattr(model, "model_", model)


def model_features(models: Sequence[Any]) -> dict[str, str]:
    """{feature: 'numeric' | 'categorical'} the models read (their encoders' columns), sorted."""
    kinds: dict[str, str] = {}
    for model in models:
        enc = getattr(fitted_of(model), "encoder", None)
        for name in getattr(enc, "numeric", ()):
            kinds[str(name)] = "numeric"
        for name in getattr(enc, "categorical", ()):
            kinds[str(name)] = "categorical"
    return dict(sorted(kinds.items()))


class _Member:
    """One member of a plan: its weight and, when compiled, its encoder as lookups."""

    def __init__(self, model: Any, weight: float, numeric: Sequence[str], categorical: Sequence[str]):
        self.model = model
        self.weight = float(weight)
        fitted = fitted_of(model)
        enc = getattr(fitted, "encoder", None)
        self.compiled = (isinstance(enc, FeatureEncoder) and enc.fitted
                         and callable(getattr(fitted, "predict_encoded", None)))
        if not self.compiled:
            return
        if callable(getattr(fitted, "compile", None)):
            fitted.compile()
        self.fitted = fitted
        num_pos = {n: i for i, n in enumerate(numeric)}
        cat_pos = {n: i for i, n in enumerate(categorical)}
        missing = [c for c in enc.numeric if c not in num_pos] + [c for c in enc.categorical if c not in cat_pos]
        if missing:
            raise ModelInputError(f"a scoring plan lacks the feature(s) {missing} that model "
                                  f"{getattr(fitted, 'name', '?')!r} reads")
        self.num_idx = np.asarray([num_pos[c] for c in enc.numeric], dtype=np.intp)
        self.means = np.asarray(enc.means, dtype=np.float64)
        self.stds = np.asarray(enc.stds, dtype=np.float64)
        self.ind_idx = np.asarray([enc.numeric.index(c) for c in enc.indicator_columns], dtype=np.intp)
        self.n_numeric = enc.n_numeric
        self.cat_idx = [cat_pos[c] for c in enc.categorical]
        self.vocabs = [{v: i + 1 for i, v in enumerate(enc.vocabularies[c])} for c in enc.categorical]
        # encode's lookups as Python lists, for one row (None: a std of 0, which NumPy divides by and Python does not)
        self._one = ((self.num_idx.tolist(), self.means.tolist(), self.stds.tolist(), self.ind_idx.tolist())
                     if bool(np.all(self.stds != 0)) else None)
        # members whose encoders were fitted alike (the same rows) share one encoding per call
        self.key = (self.num_idx.tobytes(), self.means.tobytes(), self.stds.tobytes(), self.ind_idx.tobytes(),
                    self.n_numeric, tuple(self.cat_idx), tuple(tuple(enc.vocabularies[c]) for c in enc.categorical))

    def encode(self, num: np.ndarray, cat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`FeatureEncoder.transform` of the rows (num: N x P float64, NaN missing; cat: N x Q object,
        None missing)."""
        n = num.shape[0]
        if n == 1 and self._one is not None:
            return self._encode_one(num, cat)
        values = num[:, self.num_idx]
        missing = ~np.isfinite(values)
        z = (values - self.means) / self.stds
        z[missing] = 0.0
        x_num = np.empty((n, self.n_numeric), dtype=np.float32)
        d = len(self.num_idx)
        x_num[:, :d] = z
        if len(self.ind_idx):
            x_num[:, d:] = missing[:, self.ind_idx]
        x_cat = np.empty((n, len(self.cat_idx)), dtype=np.int64)
        for j, (q, vocab) in enumerate(zip(self.cat_idx, self.vocabs)):
            get = vocab.get
            x_cat[:, j] = list(map(get, cat[:, q].tolist(), repeat(0))) if n != 1 else get(cat[0, q], 0)
        return x_num, x_cat

    def _encode_one(self, num: np.ndarray, cat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`encode` of one row in Python floats: the same float64 arithmetic ((v - mean) / std, 0 for a
        missing or infinite value), the same rounding to float32 when the row is made an array."""
        idx, means, stds, ind = self._one
        values = num[0].tolist()
        isfinite = math.isfinite
        z, missing = [], []
        for i, mean, std in zip(idx, means, stds):
            v = values[i]
            ok = isfinite(v)
            z.append((v - mean) / std if ok else 0.0)
            missing.append(0.0 if ok else 1.0)
        z += [missing[i] for i in ind]
        row = cat[0]
        return (np.array([z], dtype=np.float32).reshape(1, self.n_numeric),
                np.array([[vocab.get(row[q], 0) for q, vocab in zip(self.cat_idx, self.vocabs)]], dtype=np.int64)
                .reshape(1, len(self.cat_idx)))


def _add_one(response: list | None, cost: list | None, w: float, v, c) -> tuple[list, list]:
    """`ScoringPlan._add` for one user (1 x K arrays) in Python floats: w * v added to the sum so far."""
    v, c = np.asarray(v, dtype=np.float64), np.asarray(c, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] != 1 or c.shape != v.shape or (response is not None and v.shape[1] != len(response)):
        raise ModelInputError(f"a model of the plan returned response {v.shape} and cost {c.shape} for one user")
    v, c = v[0].tolist(), c[0].tolist()
    if response is None:
        return [w * x for x in v], [w * x for x in c]
    return [a + w * x for a, x in zip(response, v)], [a + w * x for a, x in zip(cost, c)]


class ScoringPlan:
    """The compiled scoring plan of a champion (module docstring). `numeric` / `categorical`: the
    plan's input columns (default: the features the models read, sorted; a caller may add others,
    e.g. the service's constraint groups)."""

    def __init__(self, models: Sequence[Any], weights: Sequence[float] | None = None,
                 numeric: Sequence[str] | None = None, categorical: Sequence[str] | None = None):
        models = list(models)
        if not models:
            raise ModelInputError("a scoring plan needs at least one model")
        weights = [1.0] * len(models) if weights is None else [float(w) for w in weights]
        if len(weights) != len(models):
            raise ModelInputError(f"{len(models)} models but {len(weights)} weights")
        kinds = model_features(models)
        self.numeric = list(numeric) if numeric is not None else [n for n, k in kinds.items() if k == "numeric"]
        self.categorical = (list(categorical) if categorical is not None
                            else [n for n, k in kinds.items() if k != "numeric"])
        self.members = tuple(_Member(m, w, self.numeric, self.categorical) for m, w in zip(models, weights))
        self.compiled = all(m.compiled for m in self.members)

    @property
    def features(self) -> dict[str, str]:
        """{feature: kind} of the plan's inputs, sorted."""
        return dict(sorted([(n, "numeric") for n in self.numeric] + [(n, "categorical") for n in self.categorical]))

    # ------------------------------------------------------------------ inputs
    def frame_of(self, num: np.ndarray, cat: np.ndarray) -> pd.DataFrame:
        """The rows as the pandas frame a model's `predict` reads (numeric float64, categorical object)."""
        frame = pd.DataFrame(num, columns=self.numeric)
        for j, name in enumerate(self.categorical):
            frame[name] = pd.Series(cat[:, j], dtype=object)
        return frame

    def rows_of(self, users: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray] | None:
        """(num, cat) of users given as dicts of raw features, or None when a value is of a kind the
        pandas path would read differently (then the caller scores a frame instead): numbers (and
        None / NaN) for numeric features, text for categorical ones (None / NaN missing)."""
        num = np.empty((len(users), len(self.numeric)), dtype=np.float64)
        cat = np.empty((len(users), len(self.categorical)), dtype=object)
        for i, user in enumerate(users):
            for j, name in enumerate(self.numeric):
                if name not in user:
                    return None
                v = user[name]
                if v is None:
                    num[i, j] = math.nan
                elif type(v) is float or isinstance(v, np.floating) or (
                        (type(v) is int or isinstance(v, np.integer)) and -2 ** 63 <= v < 2 ** 63):
                    num[i, j] = v
                else:
                    return None
            for j, name in enumerate(self.categorical):
                if name not in user:
                    return None
                v = user[name]
                if type(v) is str:
                    cat[i, j] = v
                elif v is None or (isinstance(v, (float, np.floating)) and v != v):
                    cat[i, j] = None
                else:  # a number as a category: pandas' column type decides its text
                    return None
        return num, cat

    # ------------------------------------------------------------------ scoring
    def coefficients_rows(self, num: np.ndarray, cat: np.ndarray) -> Coefficients:
        """The champion's response and cost (N x K, float64) for rows of the plan's inputs."""
        frame = None
        response = cost = None
        encoded: dict = {}
        one = num.shape[0] == 1 and len(self.members) > 1
        for m in self.members:
            if m.compiled:
                x = encoded.get(m.key)
                if x is None:
                    x = encoded[m.key] = m.encode(num, cat)
                v, c = m.fitted.predict_encoded(*x)
            else:
                frame = self.frame_of(num, cat) if frame is None else frame
                v, c = m.model.predict(frame)
            if one:  # one user: the blend in Python floats (the same float64 products and sums, in the same order)
                response, cost = _add_one(response, cost, m.weight, v, c)
            else:
                response, cost = self._add(response, cost, m.weight, v, c)
        if one:
            return Coefficients(np.array([response], dtype=np.float64), np.array([cost], dtype=np.float64))
        return Coefficients(response, cost)

    def coefficients(self, frame: pd.DataFrame) -> Coefficients:
        """The champion's response and cost for the users of a pandas frame (each member's
        `encoder.transform`, then its prediction: what its `predict(frame)` returns)."""
        response = cost = None
        for m in self.members:
            if m.compiled:
                v, c = m.fitted.predict_encoded(*m.fitted.encoder.transform(frame))
            else:
                v, c = m.model.predict(frame)
            response, cost = self._add(response, cost, m.weight, v, c)
        return Coefficients(response, cost)

    def _add(self, response, cost, w: float, v, c):
        if len(self.members) == 1 and w == 1.0:  # one model: its own arrays, as `model.predict` returns them
            return v, c
        v, c = w * np.asarray(v, dtype=np.float64), w * np.asarray(c, dtype=np.float64)
        return (v, c) if response is None else (response + v, cost + c)

    def __repr__(self) -> str:
        return (f"ScoringPlan({len(self.members)} member(s), {len(self.numeric)} numeric and "
                f"{len(self.categorical)} categorical features, compiled={self.compiled})")
