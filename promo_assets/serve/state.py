"""What the decision service knows about one campaign, and how it decides for users it is sent.

A `CampaignState` is built once from the warehouse (read-only) and the artefact store, and is never
changed afterwards: a reload builds a new one and swaps it in (`promo_assets.serve.registry`).

- **The policy** is the champion of the campaign's latest visible decisions run (the decisions the
  outbox exported): its members' models loaded from the artefact store at the versions the champion
  was chosen with, blended with its weights (the weighted mean of their predicted response and cost).
- **λ per budget** is the multiplier those decisions were made with (decision_budgets' manifest
  entry): a user's champion level is argmax_j v_j − λ c_j (ties to the cheapest level), the same rule
  as the allocation for the population (`promo_assets.allocation.decide`).
- **Exploration** follows campaign.yaml `exploration:` as the export does: a user explores with
  probability `share` and then gets a level drawn from `mix`; the propensity written is
  p = (1 − s) 1{level = champion's level} + s mix[level]. Online users arrive one by one, so who
  explores is a draw per user (not exactly round(s N) users as in a file): a hash of the seed, the
  decision date and the user id, so the same user gets the same answer all day.

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.allocation import decide
from promo_assets.coefficients import Coefficients
from promo_assets.errors import DomainError

MAX_BATCH = 10_000
MAX_USER_ID = 200
REQUEST_KEYS = ("user", "users", "budget")
USER_KEYS = ("user_id", "features")


class RequestError(DomainError, ValueError):
    """A request the service refuses (HTTP 422): `field` names the offending part of the body."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Unavailable:
    """A campaign the service knows but cannot decide for (HTTP 409), with the reason."""

    campaign: str
    reason: str

    def describe(self) -> dict:
        return {"campaign": self.campaign, "ready": False, "reason": self.reason}


@dataclass(frozen=True)
class CampaignState:
    """Everything needed to decide for one campaign (immutable; see the module docstring).

    features: {name: 'numeric' | 'categorical'} the champion's models read; lambdas: {budget per
    capita: λ or None (no finite multiplier: everyone at the cheapest level)}; models: the loaded
    members (same order as members / weights)."""

    campaign: str
    champion: str
    champion_version: str
    members: tuple[str, ...]
    weights: tuple[float, ...]
    versions: tuple[str, ...]
    models: tuple[Any, ...]
    lambdas: Mapping[float, float | None]
    features: Mapping[str, str]
    labels: tuple[str, ...]
    incentives: tuple[float, ...]
    share: float
    seed: int
    mix: np.ndarray
    decision_date: dt.date
    decided_at: str
    decisions_run_id: str
    champion_run_id: str
    lambda_source: str = "decisions"
    paced_budget: float | None = None
    pacing: Mapping[str, Any] | None = None
    multipliers: Mapping[float, Mapping[str, float]] | None = None  # campaign.yaml constraints: per budget
    constraints: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ description
    def describe(self) -> dict:
        """`GET /v1/campaigns/{campaign}`: the champion, its version, λ per budget, when it was decided."""
        return {
            "campaign": self.campaign, "ready": True, "champion": self.champion,
            "champion_version": self.champion_version,
            "members": [{"model": m, "weight": w, "model_version": v}
                        for m, w, v in zip(self.members, self.weights, self.versions)],
            "budgets": [{"budget_per_capita": b, "lambda_": lam, "period": b == self.paced_budget}
                        for b, lam in sorted(self.lambdas.items())],
            "pacing": None if self.pacing is None else dict(self.pacing),
            "multipliers": None if not self.multipliers else [{"budget_per_capita": b, **m}
                                                              for b, m in sorted(self.multipliers.items())],
            "lambda_source": self.lambda_source,
            "decision_date": self.decision_date.isoformat(), "decided_at": self.decided_at,
            "decisions_run_id": self.decisions_run_id, "champion_run_id": self.champion_run_id,
            "features": dict(self.features),
            "levels": [{"level": i, "label": lab, "incentive": inc}
                       for i, (lab, inc) in enumerate(zip(self.labels, self.incentives))],
            "exploration": {"share": self.share, "seed": self.seed, "mix": [float(x) for x in self.mix]},
            **dict(self.extra),
        }

    # ------------------------------------------------------------------ validation
    def parse(self, body: Any) -> tuple[float, list[str], pd.DataFrame]:
        """(budget, user ids, feature frame) of a decide request; RequestError naming the field."""
        if not isinstance(body, dict):
            raise RequestError("body", "must be a JSON object with 'user' (one user) or 'users' (a list of users)")
        unknown = [k for k in body if k not in REQUEST_KEYS]
        if unknown:
            raise RequestError(str(unknown[0]), f"unknown key (allowed: {', '.join(REQUEST_KEYS)})")
        if ("user" in body) == ("users" in body):
            raise RequestError("body", "give exactly one of 'user' (one user) or 'users' (a list of users)")
        budget = self._budget(body.get("budget"))
        if "user" in body:
            users, where = [body["user"]], lambda i: "user"
        else:
            users = body["users"]
            if not isinstance(users, list) or not users:
                raise RequestError("users", "must be a non-empty list of users")
            if len(users) > MAX_BATCH:
                raise RequestError("users", f"at most {MAX_BATCH} users per request, got {len(users)}")
            where = lambda i: f"users[{i}]"  # noqa: E731
        names = list(self.features)
        numeric = [n for n in names if self.features[n] == "numeric"]
        categorical = [n for n in names if self.features[n] != "numeric"]
        expected = set(names)
        ids = []
        num_rows, cat_rows = [], []
        for i, user in enumerate(users):
            # the common case checked in bulk; anything unusual goes through the checks that name the field
            feats = user.get("features") if type(user) is dict else None
            uid = user.get("user_id") if type(user) is dict else None
            if (type(feats) is dict and feats.keys() == expected and len(user) == 2 and type(uid) is str
                    and 0 < len(uid) <= MAX_USER_ID):
                nums = [feats[n] for n in numeric]
                cats = [feats[n] for n in categorical]
                if all(type(v) is float and math.isfinite(v) or type(v) is int or v is None for v in nums) and \
                        all(type(v) is str or v is None for v in cats):
                    ids.append(uid)
                    num_rows.append(nums)
                    cat_rows.append(cats)
                    continue
            ids.append(self._user_id(user, where(i)))
            row = dict(zip(names, self._features(user.get("features"), f"{where(i)}.features", names)))
            num_rows.append([row[n] for n in numeric])
            cat_rows.append([row[n] for n in categorical])
        frame = pd.DataFrame(np.array(num_rows, dtype=np.float64).reshape(len(ids), len(numeric)), columns=numeric)
        cats = np.array(cat_rows, dtype=object).reshape(len(ids), len(categorical))
        for j, name in enumerate(categorical):
            frame[name] = pd.Series(cats[:, j], dtype=object)
        return budget, ids, frame[names]

    def _budget(self, value: Any) -> float:
        shown = ", ".join(f"{b:g}" for b in sorted(self.lambdas) if b != self.paced_budget)
        if self.paced_budget is not None:
            shown += (", " if shown else "") + "'period'"
        if value is None or value == "period":
            if self.paced_budget is not None:  # campaign.yaml `budget:`: today's paced λ
                return self.paced_budget
            if value is None and len(self.lambdas) == 1:
                return next(iter(self.lambdas))
            if value is None:
                raise RequestError("budget", f"campaign '{self.campaign}' decides at several budgets per capita "
                                   f"({shown}): give one")
            raise RequestError("budget", f"campaign '{self.campaign}' has no period budget today ({shown})")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RequestError("budget", f"must be a number or 'period' (one of {shown}), got {type(value).__name__}")
        if float(value) not in self.lambdas:
            raise RequestError("budget", f"budget {value:g} is not one campaign '{self.campaign}' decides at ({shown})")
        return float(value)

    @staticmethod
    def _user_id(user: Any, where: str) -> str:
        if not isinstance(user, dict):
            raise RequestError(where, "must be an object with 'user_id' and 'features'")
        unknown = [k for k in user if k not in USER_KEYS]
        if unknown:
            raise RequestError(f"{where}.{unknown[0]}", f"unknown key (allowed: {', '.join(USER_KEYS)})")
        uid = user.get("user_id")
        if uid is None:
            raise RequestError(f"{where}.user_id", "missing (a string or an integer)")
        if isinstance(uid, bool) or not isinstance(uid, (str, int)):
            raise RequestError(f"{where}.user_id", f"must be a string or an integer, got {type(uid).__name__}")
        uid = str(uid)
        if not uid or len(uid) > MAX_USER_ID:
            raise RequestError(f"{where}.user_id", f"must have 1 to {MAX_USER_ID} characters")
        return uid

    def _features(self, given: Any, where: str, names: Sequence[str]) -> list:
        if not isinstance(given, dict):
            raise RequestError(where, f"must be an object of the campaign's features ({', '.join(names)})")
        for key in given:
            if key not in self.features:
                raise RequestError(f"{where}.{key}", f"unknown feature (campaign '{self.campaign}' has "
                                   f"{', '.join(names) or 'no features'})")
        row = []
        for name in names:
            if name not in given:
                raise RequestError(f"{where}.{name}", "missing required feature (give null when it is unknown)")
            value = given[name]
            if value is None:
                row.append(None)
            elif self.features[name] == "numeric":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise RequestError(f"{where}.{name}", f"numeric feature: must be a finite number or null, got "
                                       f"{type(value).__name__} {_short(value)}")
                row.append(float(value))
            else:
                if isinstance(value, bool) or not isinstance(value, (str, int)):
                    raise RequestError(f"{where}.{name}", f"categorical feature: must be a string (or an integer) or "
                                       f"null, got {type(value).__name__} {_short(value)}")
                row.append(str(value))
        return row

    # ------------------------------------------------------------------ deciding
    def coefficients(self, frame: pd.DataFrame) -> Coefficients:
        """The champion's predicted response and cost (N x K): its members' weighted mean."""
        response = cost = None
        for model, w in zip(self.models, self.weights):
            v, c = model.predict(frame)
            v, c = w * np.asarray(v, dtype=np.float64), w * np.asarray(c, dtype=np.float64)
            response, cost = (v, c) if response is None else (response + v, cost + c)
        return Coefficients(response, cost)

    def explore_draws(self, user_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(explores, level drawn) per user: a deterministic draw from the seed, the decision date and
        the user id (two uniforms from BLAKE2b)."""
        salt = f"{self.seed}|{self.decision_date.isoformat()}|".encode()
        digests = b"".join(hashlib.blake2b(salt + uid.encode(), digest_size=16).digest() for uid in user_ids)
        u = np.frombuffer(digests, dtype="<u8").reshape(len(user_ids), 2) / 2.0 ** 64
        explores = u[:, 0] < self.share
        drawn = np.minimum(np.searchsorted(np.cumsum(self.mix), u[:, 1], side="right"), len(self.mix) - 1)
        return explores, drawn

    def decide(self, budget: float, user_ids: Sequence[str], frame: pd.DataFrame) -> dict:
        """The response body of a decide request (validated by `parse`)."""
        values, costs = self.coefficients(frame)
        lam = self.lambdas[budget]
        mu = (self.multipliers or {}).get(budget)
        if mu and self.constraints:  # several budgets: the decisions' rule at their multipliers
            from promo_assets.allocation.budgets import reduced_levels

            mats, mus = [costs], [mu["budget"]]
            for name, block in self.constraints["costs"].items():
                mats.append(np.broadcast_to(np.asarray(block["levels"], dtype=np.float64), costs.shape))
                mus.append(mu[name])
            for name, block in self.constraints["groups"].items():
                member = (frame[block["feature"]].astype(str) == str(block["equals"])).to_numpy()
                mats.append(costs * member[:, None])
                mus.append(mu[f"group:{name}"])
            policy = reduced_levels(values, costs, mats, mus)
        else:
            policy = decide(values, costs, lam) if lam is not None else costs.argmin(axis=1)
        explores, drawn = self.explore_draws(user_ids)
        levels = np.where(explores, drawn, policy).astype(np.int64)
        s = self.share
        propensity = (1.0 - s) * (levels == policy) + s * self.mix[levels]
        rows = np.arange(len(levels))
        value, cost = values[rows, levels], costs[rows, levels]
        decisions = [
            {"user_id": uid, "level": int(lv), "label": self.labels[lv], "incentive": self.incentives[lv],
             "predicted_response": float(v), "predicted_cost": float(c), "policy": "explore" if e else "champion",
             "propensity": float(p)}
            for uid, lv, v, c, e, p in zip(user_ids, levels.tolist(), value, cost, explores, propensity)]
        return {"campaign": self.campaign, "budget_per_capita": budget, "period": budget == self.paced_budget,
                "lambda_": lam, "lambda_source": "pacing" if budget == self.paced_budget else self.lambda_source,
                **({"multipliers": dict(mu)} if mu else {}),
                "champion": self.champion, "champion_version": self.champion_version,
                "model_version": dict(zip(self.members, self.versions)), "decision_date": self.decision_date.isoformat(),
                "decisions": decisions}


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
