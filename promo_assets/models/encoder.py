"""Feature encoder fitted on the training window and reused unchanged at scoring time.

Issue 3, item 3: categorical vocabularies with an unknown bucket, numeric standardization and
missing values. The encoder's state is a plain dict (`to_state`) that is stored inside every model
artefact, so a model scores new users with exactly the encoding it was trained with.

Encoding rules
- Categorical column c: the distinct non-missing values seen in the fitting frame, as text, sorted,
  get indices 1..V_c; index 0 is the *unknown bucket*, used for missing values and for any value
  never seen at fit time. `cardinalities[c] = V_c + 1`.
- Numeric column x: z = (x - mean) / std with mean/std from the fitting frame (std 0 or undefined is
  replaced by 1); a missing value becomes 0 after standardization (the training mean). With
  `missing_indicators=True`, every numeric column that had missing values at fit time also gets a
  0/1 indicator column (appended after the standardized columns, in the same order).
- Dense form (`transform_dense`, used by the customer–merchant graph's node features): the numeric
  block followed by a one-hot block per categorical column over its vocabulary (the unknown bucket
  has no column: a missing or unseen value is all zeros).

The one encoder of the project: the response models use `transform` (indices for embeddings),
the graph models `transform_dense`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from promo_assets.models.errors import ModelInputError

STATE_FORMAT = 1


class FeatureEncoder:
    """Encodes raw feature columns into `(x_num float32 N x Dn, x_cat int64 N x Dc)`.

    Parameters: `numeric` and `categorical` are the feature column names (disjoint);
    `missing_indicators` adds a missing-value indicator for numeric columns that had missing values
    in the fitting frame.
    """

    def __init__(self, numeric: Sequence[str], categorical: Sequence[str], missing_indicators: bool = True):
        numeric = [str(c) for c in numeric]
        categorical = [str(c) for c in categorical]
        overlap = sorted(set(numeric) & set(categorical))
        if overlap:
            raise ModelInputError(f"feature columns listed as both numeric and categorical: {overlap}")
        for name, cols in (("numeric", numeric), ("categorical", categorical)):
            if len(set(cols)) != len(cols):
                raise ModelInputError(f"duplicate {name} feature columns: {cols}")
        self.numeric = numeric
        self.categorical = categorical
        self.missing_indicators = bool(missing_indicators)
        self.means: np.ndarray | None = None
        self.stds: np.ndarray | None = None
        self.indicator_columns: list[str] = []
        self.vocabularies: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ fitting
    @property
    def fitted(self) -> bool:
        return self.means is not None

    def fit(self, frame: pd.DataFrame) -> "FeatureEncoder":
        """Learn vocabularies and mean/std from `frame` (the training window only). Returns self."""
        self._check_columns(frame)
        if len(frame) == 0:
            raise ModelInputError("cannot fit the feature encoder on an empty frame")
        means, stds, indicators = [], [], []
        for col in self.numeric:
            values = _numeric_column(frame, col)
            finite = values[np.isfinite(values)]
            mean = float(finite.mean()) if finite.size else 0.0
            std = float(finite.std()) if finite.size > 1 else 1.0
            if not np.isfinite(std) or std <= 1e-12:
                std = 1.0
            means.append(mean)
            stds.append(std)
            if self.missing_indicators and finite.size < values.size:
                indicators.append(col)
        self.means = np.asarray(means, dtype=np.float64)
        self.stds = np.asarray(stds, dtype=np.float64)
        self.indicator_columns = indicators
        self.vocabularies = {}
        for col in self.categorical:
            text, missing = _categorical_text(frame[col])
            self.vocabularies[col] = sorted(set(text[~missing].tolist()))
        return self

    # ------------------------------------------------------------------ encoding
    @property
    def n_numeric(self) -> int:
        """Dn: standardized numeric columns plus missing indicators."""
        return len(self.numeric) + len(self.indicator_columns)

    @property
    def cardinalities(self) -> list[int]:
        """Per categorical column, the number of indices including the unknown bucket 0."""
        return [len(self.vocabularies[c]) + 1 for c in self.categorical]

    def transform(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Encode `frame` -> (x_num float32 N x Dn, x_cat int64 N x Dc); unseen/missing categories -> 0."""
        if not self.fitted:
            raise ModelInputError("FeatureEncoder.transform called before fit")
        self._check_columns(frame)
        n = len(frame)
        x_num = np.zeros((n, self.n_numeric), dtype=np.float32)
        for j, col in enumerate(self.numeric):
            values = _numeric_column(frame, col)
            missing = ~np.isfinite(values)
            z = (values - self.means[j]) / self.stds[j]
            z[missing] = 0.0
            x_num[:, j] = z
        for k, col in enumerate(self.indicator_columns):
            values = _numeric_column(frame, col)
            x_num[:, len(self.numeric) + k] = (~np.isfinite(values)).astype(np.float32)
        x_cat = np.zeros((n, len(self.categorical)), dtype=np.int64)
        for j, col in enumerate(self.categorical):
            text, missing = _categorical_text(frame[col])
            codes = pd.Categorical(text, categories=self.vocabularies[col]).codes.astype(np.int64) + 1
            codes[missing] = 0
            x_cat[:, j] = codes
        return x_num, x_cat

    @property
    def dense_names(self) -> list[str]:
        """Column names of `transform_dense`: numeric columns, indicators, then `column=value`."""
        return (self.numeric + [f"{c} missing" for c in self.indicator_columns]
                + [f"{c}={v}" for c in self.categorical for v in self.vocabularies[c]])

    def transform_dense(self, frame: pd.DataFrame) -> np.ndarray:
        """float32 matrix N x len(dense_names): `transform`'s numeric block, then one 0/1 column
        per (categorical column, known value); the unknown bucket (missing or unseen) is all zeros."""
        x_num, x_cat = self.transform(frame)
        blocks = [x_num]
        for j, col in enumerate(self.categorical):
            blocks.append((x_cat[:, j:j + 1] == np.arange(1, len(self.vocabularies[col]) + 1)[None, :])
                          .astype(np.float32))
        return np.concatenate(blocks, axis=1).astype(np.float32, copy=False)

    def fit_transform(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        return self.fit(frame).transform(frame)

    def unknown_fraction(self, frame: pd.DataFrame) -> dict[str, float]:
        """Per categorical column, the fraction of rows of `frame` that fall in the unknown bucket."""
        _, x_cat = self.transform(frame)
        if len(frame) == 0:
            return {c: 0.0 for c in self.categorical}
        return {c: float((x_cat[:, j] == 0).mean()) for j, c in enumerate(self.categorical)}

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Plain-Python state (lists, floats, strings) from which `from_state` rebuilds the encoder."""
        if not self.fitted:
            raise ModelInputError("FeatureEncoder.to_state called before fit")
        return {
            "format": STATE_FORMAT,
            "numeric": list(self.numeric),
            "categorical": list(self.categorical),
            "missing_indicators": self.missing_indicators,
            "means": [float(v) for v in self.means],
            "stds": [float(v) for v in self.stds],
            "indicator_columns": list(self.indicator_columns),
            "vocabularies": {c: list(v) for c, v in self.vocabularies.items()},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "FeatureEncoder":
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ModelInputError(f"not a FeatureEncoder state (format {STATE_FORMAT}): {type(state).__name__}")
        enc = cls(state["numeric"], state["categorical"], state["missing_indicators"])
        enc.means = np.asarray(state["means"], dtype=np.float64)
        enc.stds = np.asarray(state["stds"], dtype=np.float64)
        enc.indicator_columns = list(state["indicator_columns"])
        enc.vocabularies = {c: list(v) for c, v in state["vocabularies"].items()}
        return enc

    def __repr__(self) -> str:
        return (f"FeatureEncoder(numeric={self.numeric}, categorical={self.categorical}, "
                f"fitted={self.fitted})")

    def _check_columns(self, frame: pd.DataFrame) -> None:
        if not isinstance(frame, pd.DataFrame):
            raise ModelInputError(f"expected a pandas DataFrame, got {type(frame).__name__}")
        missing = [c for c in self.numeric + self.categorical if c not in frame.columns]
        if missing:
            raise ModelInputError(f"feature columns missing from the frame: {missing}")


def _numeric_column(frame: pd.DataFrame, col: str) -> np.ndarray:
    s = frame[col]
    if pd.api.types.is_bool_dtype(s.dtype):
        s = s.astype("float64")
    try:
        return pd.to_numeric(s, errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise ModelInputError(f"numeric feature column {col!r} holds non-numeric values: {exc}") from None


def _categorical_text(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(values as text, missing mask); missing values get an empty text that is never looked up."""
    missing = s.isna().to_numpy()
    text = s.astype(object).where(~missing, "").map(str).to_numpy(dtype=object)
    return text, missing
