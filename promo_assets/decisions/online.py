"""Online decisions for unseen users with a stored multiplier (DIPN §3.2, Eq. 6-7)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from promo_assets.allocation.errors import AllocationInputError
from promo_assets.allocation.decision import decide
from promo_assets.allocation.solver import Allocation


class OnlinePolicy:
    """Decide levels for new users from a response model and a stored lambda_.

    ``model`` is any object with ``predict(frame) -> (response N x K, cost N x K)`` taking raw
    feature columns (promo_assets.models' trained models), or a ``ScoringPlan`` (e.g. a champion
    blend's). A registered model is scored through its compiled scoring plan
    (``promo_assets.models.plan``: the same numbers, without pandas for one user given as a dict).
    The decision is the per-user
    argmax of DIPN Eq. 7, level = argmax_j v_ij - lambda_*c_ij (ties to the cheapest level), or
    for the ratio form (GNN/hazard Eq. 16/19) argmax_j v_ij - lambda_*(c_ij - ratio*v_ij).
    It equals the offline allocation at the same lambda_ for every user except a fractional one.
    """

    def __init__(self, model: Any, lambda_: float, ratio: float | None = None):
        lam = float(lambda_)
        if math.isnan(lam) or lam < 0:
            raise AllocationInputError(f"lambda_ must be >= 0, got {lambda_!r}")
        if ratio is not None and not (math.isfinite(float(ratio)) and float(ratio) >= 0):
            raise AllocationInputError(f"ratio must be a finite number >= 0, got {ratio!r}")
        from promo_assets.models.plan import ScoringPlan

        if not isinstance(model, ScoringPlan) and not callable(getattr(model, "predict", None)):
            raise AllocationInputError("model must have a predict(frame) -> (response, cost) method")
        self.model = model
        self.lambda_ = lam
        self.ratio = None if ratio is None else float(ratio)
        # the model's compiled scoring plan (promo_assets.models.plan): its encoder as NumPy lookups
        # and one prediction call; a model the plan cannot compile is called through its `predict`;
        # a ScoringPlan given as the model (e.g. a champion blend's, `CampaignState.plan`) is used as is
        if isinstance(model, ScoringPlan):
            plan = model
        else:
            try:
                plan = ScoringPlan([model])
            except Exception:  # noqa: BLE001 (any model with a predict(frame) is served, compiled or not)
                plan = None
        self.plan = plan if plan is not None and plan.compiled else None
        if isinstance(model, ScoringPlan) and self.plan is None:
            self.model = _PlanModel(model)

    @classmethod
    def from_allocation(cls, model: Any, allocation: Allocation) -> OnlinePolicy:
        """Reuse the lambda* (and ratio, for the ratio form) of an offline allocation."""
        return cls(model, allocation.lambda_, allocation.ratio if allocation.kind == "ratio" else None)

    def decide(self, frame) -> np.ndarray:
        """Levels (int32 array, one per row) for a DataFrame of users, or for one user given as a
        dict of features / a one-row frame (returns an array of length 1)."""
        import pandas as pd

        if isinstance(frame, Mapping):
            rows = self.plan.rows_of([frame]) if self.plan is not None else None
            if rows is not None:  # one user without pandas
                return self._decide(*self.plan.coefficients_rows(*rows), 1)
            frame = pd.DataFrame([dict(frame)])
        elif isinstance(frame, pd.Series):
            frame = frame.to_frame().T
        if len(frame) == 0:
            return np.zeros(0, dtype=np.int32)
        values, costs = self.plan.coefficients(frame) if self.plan is not None else self.model.predict(frame)
        return self._decide(values, costs, len(frame))

    def _decide(self, values, costs, n: int) -> np.ndarray:
        values = np.asarray(values)
        costs = np.asarray(costs)
        if values.ndim != 2 or values.shape[0] != n:
            raise AllocationInputError(
                f"model.predict returned values of shape {values.shape} for {n} rows"
            )
        return decide(values, costs, self.lambda_, ratio=self.ratio)

    def decide_stream(self, users: Iterable, batch_size: int = 1 << 16) -> Iterator[np.ndarray]:
        """Levels for a stream of users, vectorized: the items (one-user dicts or Series, or frames of
        users) are gathered into batches of about `batch_size` users, each scored by one call of the
        model's compiled plan (or `model.predict`) and decided at once; yields one int32 array per batch, in input order
        (their concatenation is `decide` of all users)."""
        import pandas as pd

        if int(batch_size) < 1:
            raise AllocationInputError(f"batch_size must be >= 1, got {batch_size!r}")
        pending, rows, count = [], [], 0
        for item in users:
            if isinstance(item, Mapping):
                rows.append(dict(item))
                count += 1
            else:
                if rows:
                    pending.append(pd.DataFrame(rows))
                    rows = []
                frame = item.to_frame().T if isinstance(item, pd.Series) else item
                pending.append(frame)
                count += len(frame)
            if count >= batch_size:
                yield self.decide(pd.concat(pending + ([pd.DataFrame(rows)] if rows else []), ignore_index=True))
                pending, rows, count = [], [], 0
        if count:
            yield self.decide(pd.concat(pending + ([pd.DataFrame(rows)] if rows else []), ignore_index=True))

    def decide_coefficients(self, response, cost) -> np.ndarray:
        """The same decision from precomputed coefficients (N x K, or K for one user)."""
        return decide(response, cost, self.lambda_, ratio=self.ratio)

    def to_dict(self) -> dict:
        """JSON-friendly state (the model is stored separately; its name/version are recorded)."""
        return {
            "lambda_": self.lambda_,
            "ratio": self.ratio,
            "model_name": getattr(self.model, "name", None),
            "model_version": getattr(self.model, "version", None),
        }

    @classmethod
    def from_dict(cls, data: Mapping, model: Any) -> OnlinePolicy:
        """Rebuild from :meth:`to_dict` output and the (separately loaded) model."""
        if "lambda_" not in data:
            raise AllocationInputError("policy dict has no 'lambda_'")
        expected = data.get("model_version")
        actual = getattr(model, "version", None)
        if expected is not None and actual is not None and expected != actual:
            raise AllocationInputError(
                f"policy was stored for model version {expected!r}, got model version {actual!r}"
            )
        return cls(model, data["lambda_"], data.get("ratio"))

    def __repr__(self) -> str:
        return f"OnlinePolicy(lambda_={self.lambda_!r}, ratio={self.ratio!r})"


class _PlanModel:
    """A plan with a member it cannot compile, as a model: `predict(frame)` is its `coefficients`."""

    def __init__(self, plan):
        self.plan = plan

    def predict(self, frame):
        return self.plan.coefficients(frame)
