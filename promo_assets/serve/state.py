"""What the decision service knows about one campaign, and how it decides for users it is sent.

A `CampaignState` is built once from the warehouse (read-only) and the artefact store, and is never
changed afterwards: a reload builds a new one and swaps it in (`promo_assets.serve.registry`).

- **The policy** is the champion of the decision in force: the campaign's newest visible decisions run
  whose export monitoring did not stop (what the outbox holds; promo_assets.monitoring.exported). While a
  `stop_export` reaction keeps newer decisions out of the outbox, the service goes on serving the
  exported decision and says so (`/health` and `GET /v1/campaigns/{campaign}`: `export: stopped`, since
  when, why); with no exported decision at all it serves nothing (409, with the reason). Its members' models loaded from the artefact store at the versions the champion
  was chosen with, blended with its weights (the weighted mean of their predicted response and cost).
- **λ per budget** is the multiplier those decisions were made with (decision_budgets' manifest
  entry): a user's champion level is argmax_j v_j − λ c_j (ties to the cheapest level), the same rule
  as the allocation for the population (`promo_assets.allocation.decide`).
- **The scoring plan** (`promo_assets.models.plan.ScoringPlan`) is compiled when the state is built,
  in the reload, before the state is swapped in: no request meets a half-built plan.
- **Exploration** is the one the stored decisions used (their manifest: share, mix and seed; the
  seed of older decisions from campaign.yaml), as the export drew it: a user explores with
  probability `share` and then gets a level drawn from `mix`; the propensity written is
  p = (1 − s) 1{level = champion's level} + s mix[level]. Online users arrive one by one, so who
  explores is a draw per user (not exactly round(s N) users as in a file): a hash of the seed, the
  decision date and the user id, so the same user gets the same answer all day.

No dagster here (domain code).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from promo_assets.allocation import decide
from promo_assets.allocation.budgets import reduced_levels
from promo_assets.core.coefficients import Coefficients
from promo_assets.config.campaign import ConstraintsBlock
from promo_assets.core.errors import DomainError
from promo_assets.monitoring.exported import ExportState
from promo_assets.ingestion.ids import ID_TRIM, MAX_NUMBER  # |a numeric feature| at most this: ingestion's bound
from promo_assets.models.plan import ScoringPlan

MAX_BATCH = 10_000
MAX_USER_ID = 200
MAX_TEXT = 200  # characters of a category
# the ingestion's rules for ids and text values (sql/ingest.sql): surrounding spaces, tabs and line
# ends are trimmed from an id; a control character inside an id or a text value refuses it
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
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
    constraints: ConstraintsBlock | None = None  # campaign.yaml `constraints:`
    extra: Mapping[str, Any] = field(default_factory=dict)
    export: ExportState | None = None  # the campaign's export state when loaded (a stop, since when, why)
    plan: ScoringPlan | None = None  # compiled here (in the reload, before the state serves) when not given

    def __post_init__(self):
        if self.plan is None:
            names = list(self.features)
            object.__setattr__(self, "plan", ScoringPlan(
                self.models, self.weights, numeric=[n for n in names if self.features[n] == "numeric"],
                categorical=[n for n in names if self.features[n] != "numeric"]))

    # ------------------------------------------------------------------ description
    def freshness(self, now: dt.datetime | None = None) -> dict:
        """The decision served (the decision in force: the newest whose export monitoring did not stop,
        promo_assets.monitoring.exported): its day, when it was decided, its age in days at the time asked and
        whether it is older than campaign.yaml monitoring.max_decision_age_days (`stale`); while the export
        is stopped, since when, why and the newest decision kept out (`export_stopped_*`)."""
        try:
            decided = dt.datetime.fromisoformat(self.decided_at)
        except (TypeError, ValueError):  # not a time: nothing to say of its age
            return {"decision_date": self.decision_date.isoformat(), "decided_at": self.decided_at,
                    "decision_age_days": None, "stale": None}
        now = now or (dt.datetime.now(decided.tzinfo) if decided.tzinfo else dt.datetime.now())
        age = max(0.0, (now - decided).total_seconds() / 86400.0)
        limit = float(self.extra.get("max_decision_age_days", 2.0))
        export = {} if self.export is None else self.export.describe(now.replace(tzinfo=None))
        return {"decision_date": self.decision_date.isoformat(), "decided_at": self.decided_at,
                "decision_age_days": round(age, 3), "stale": age > limit, **export}

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
            "exploration": {"share": self.share, "mix": [float(x) for x in self.mix]},  # the seed is not shown
            **dict(self.extra), **self.freshness(),
        }

    # ------------------------------------------------------------------ validation
    def parse(self, body: Any) -> tuple[float, list[str], tuple[np.ndarray, np.ndarray]]:
        """(budget, user ids, rows) of a decide request, rows = (numeric N x P float64 with NaN for
        unknown, categorical N x Q object with None for unknown) in the plan's column order;
        RequestError naming the field."""
        if not isinstance(body, dict):
            raise RequestError("body", "must be a JSON object with 'user' (one user) or 'users' (a list of users)")
        unknown = [k for k in body if k not in REQUEST_KEYS]
        if unknown:
            raise RequestError(_key(unknown[0]), f"unknown key (allowed: {', '.join(REQUEST_KEYS)})")
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
        numeric, categorical = self.plan.numeric, self.plan.categorical
        if len(users) > 1:
            bulk = self._bulk(users, numeric, categorical)
            if bulk is not None:
                return (budget, *bulk)
        expected = set(self.features)
        n = len(users)
        ids = []
        num = np.empty((n, len(numeric)), dtype=np.float64)
        cat = np.empty((n, len(categorical)), dtype=object)
        for i, user in enumerate(users):
            # the common case checked in bulk; anything unusual goes through the checks that name the field
            feats = user.get("features") if type(user) is dict else None
            uid = user.get("user_id") if type(user) is dict else None
            if (type(feats) is dict and feats.keys() == expected and len(user) == 2 and type(uid) is str
                    and 0 < len(uid) <= MAX_USER_ID and uid.isprintable() and uid.strip(ID_TRIM) == uid
                    and uid.isascii()):
                nums = [feats[k] for k in numeric]
                cats = [feats[k] for k in categorical]
                if all(v is None or (type(v) is float or type(v) is int) and -MAX_NUMBER <= v <= MAX_NUMBER
                       for v in nums) and \
                        all(v is None or type(v) is str and len(v) <= MAX_TEXT and v.isascii() and v.isprintable()
                            for v in cats):
                    ids.append(uid)
                    num[i] = [math.nan if v is None else v for v in nums]
                    cat[i] = cats
                    continue
            ids.append(self._user_id(user, where(i)))
            row = self._features(user.get("features"), f"{where(i)}.features")
            num[i] = [math.nan if row[k] is None else row[k] for k in numeric]
            cat[i] = [row[k] for k in categorical]
        return budget, ids, (num, cat)

    def _bulk(self, users: list, numeric: list[str], categorical: list[str]):
        """(ids, (num, cat)) of a batch whose every user has the common form (an object of exactly
        user_id, a printable ASCII string, and features, every feature a number or null / an ASCII
        string or null within the limits), checked column by column with C-level loops; None for
        anything else (the per-user checks then name the field)."""
        try:
            if set(map(type, users)) != {dict} or set(map(len, users)) != {2}:
                return None
            ids = list(map(itemgetter("user_id"), users))
            feats = list(map(itemgetter("features"), users))
            if set(map(type, ids)) != {str} or set(map(type, feats)) != {dict}:
                return None
            if set(map(len, feats)) != {len(self.features)}:
                return None
            if (min(map(len, ids)) < 1 or max(map(len, ids)) > MAX_USER_ID or not _printable_ascii("".join(ids))
                    or ids != [u.strip(ID_TRIM) for u in ids]):
                return None
            n = len(users)
            num = np.empty((n, len(numeric)), dtype=np.float64)
            if numeric:
                flat = list(chain.from_iterable(map(_getter(numeric), feats)))  # the numeric values, user by user
                if not set(map(type, flat)) <= {float, int, type(None)}:
                    return None
                num.ravel()[:] = np.array(flat, dtype=np.float64)  # None -> NaN
                if (np.abs(num) > MAX_NUMBER).any():
                    return None
            cat = np.empty((n, len(categorical)), dtype=object)
            if categorical:
                flat = list(chain.from_iterable(map(_getter(categorical), feats)))
                kinds = set(map(type, flat))
                if not kinds <= {str, type(None)}:
                    return None
                text = [v for v in flat if v is not None] if type(None) in kinds else flat
                if text and (max(map(len, text)) > MAX_TEXT or not _printable_ascii("".join(text))):
                    return None
                cat.ravel()[:] = flat
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        return ids, (num, cat)

    def frame(self, rows: tuple[np.ndarray, np.ndarray]) -> pd.DataFrame:
        """The rows of `parse` as a pandas frame of the campaign's features (numeric float64,
        categorical object)."""
        return self.plan.frame_of(*rows)[list(self.features)]

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
        if not -MAX_NUMBER <= value <= MAX_NUMBER:
            raise RequestError("budget", f"budget {_short(value)} is not one campaign '{self.campaign}' decides at ({shown})")
        if float(value) not in self.lambdas:
            raise RequestError("budget", f"budget {value:g} is not one campaign '{self.campaign}' decides at ({shown})")
        return float(value)

    @staticmethod
    def _user_id(user: Any, where: str) -> str:
        if not isinstance(user, dict):
            raise RequestError(where, "must be an object with 'user_id' and 'features'")
        unknown = [k for k in user if k not in USER_KEYS]
        if unknown:
            raise RequestError(f"{where}.{_key(unknown[0])}", f"unknown key (allowed: {', '.join(USER_KEYS)})")
        uid = user.get("user_id")
        if uid is None:
            raise RequestError(f"{where}.user_id", "missing (a string or an integer)")
        if isinstance(uid, bool) or not isinstance(uid, (str, int)):
            raise RequestError(f"{where}.user_id", f"must be a string or an integer, got {type(uid).__name__}")
        if isinstance(uid, int) and not -10 ** MAX_USER_ID < uid < 10 ** MAX_USER_ID:
            raise RequestError(f"{where}.user_id", f"must have 1 to {MAX_USER_ID} characters")
        uid = str(uid).strip(ID_TRIM)  # as ingestion reads an id
        if not uid or len(uid) > MAX_USER_ID:
            raise RequestError(f"{where}.user_id", f"must have 1 to {MAX_USER_ID} characters"
                               + (" (spaces, tabs and line ends around an id are not part of it)" if not uid else ""))
        _check_text(uid, f"{where}.user_id", "user id")
        return uid

    def _features(self, given: Any, where: str) -> dict:
        names = list(self.features)
        if not isinstance(given, dict):
            raise RequestError(where, f"must be an object of the campaign's features ({', '.join(names)})")
        for key in given:
            if key not in self.features:
                raise RequestError(f"{where}.{_key(key)}", f"unknown feature (campaign '{self.campaign}' has "
                                   f"{', '.join(names) or 'no features'})")
        row = {}
        for name in names:
            if name not in given:
                raise RequestError(f"{where}.{name}", "missing required feature (give null when it is unknown)")
            value = given[name]
            if value is None:
                row[name] = None
            elif self.features[name] == "numeric":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise RequestError(f"{where}.{name}", f"numeric feature: must be a finite number or null, got "
                                       f"{type(value).__name__} {_short(value)}")
                if not -MAX_NUMBER <= value <= MAX_NUMBER:
                    raise RequestError(f"{where}.{name}", f"numeric feature: must be between -{MAX_NUMBER:g} and "
                                       f"{MAX_NUMBER:g}, got {_short(value)}")
                row[name] = float(value)
            else:
                if isinstance(value, bool) or not isinstance(value, (str, int)):
                    raise RequestError(f"{where}.{name}", f"categorical feature: must be a string (or an integer) or "
                                       f"null, got {type(value).__name__} {_short(value)}")
                if isinstance(value, int) and not -10 ** MAX_TEXT < value < 10 ** MAX_TEXT:
                    raise RequestError(f"{where}.{name}", f"categorical feature: at most {MAX_TEXT} characters")
                text = str(value)
                if len(text) > MAX_TEXT:
                    raise RequestError(f"{where}.{name}", f"categorical feature: at most {MAX_TEXT} characters, got "
                                       f"{len(text)}")
                _check_text(text, f"{where}.{name}", "categorical feature")
                row[name] = text
        return row

    # ------------------------------------------------------------------ deciding
    def coefficients(self, rows: tuple[np.ndarray, np.ndarray] | pd.DataFrame) -> Coefficients:
        """The champion's predicted response and cost (N x K): its members' weighted mean, through
        the compiled plan (rows of `parse`, or a frame of the features)."""
        if isinstance(rows, pd.DataFrame):
            return self.plan.coefficients(rows)
        return self.plan.coefficients_rows(*rows)

    def explore_draws(self, user_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(explores, level drawn) per user: a deterministic draw from the seed, the decision date and
        the user id (two uniforms from BLAKE2b)."""
        base = hashlib.blake2b(f"{self.seed}|{self.decision_date.isoformat()}|".encode(), digest_size=16)
        parts = []
        for uid in user_ids:  # BLAKE2b(salt + id): the salted state copied, the id added
            h = base.copy()
            h.update(uid.encode())
            parts.append(h.digest())
        digests = b"".join(parts)
        u = np.frombuffer(digests, dtype="<u8").reshape(len(user_ids), 2) / 2.0 ** 64
        explores = u[:, 0] < self.share
        drawn = np.minimum(np.searchsorted(np.cumsum(self.mix), u[:, 1], side="right"), len(self.mix) - 1)
        return explores, drawn

    def decide(self, budget: float, user_ids: Sequence[str], rows: tuple[np.ndarray, np.ndarray]) -> dict:
        """The response body of a decide request (validated by `parse`)."""
        values, costs = self.coefficients(rows)
        lam = self.lambdas[budget]
        mu = (self.multipliers or {}).get(budget)
        if mu and self.constraints:  # several budgets: the decisions' rule at their multipliers
            mats, mus = [costs], [mu["budget"]]
            for name, (levels, _) in self.constraints.cost_types(costs.shape[1]).items():
                mats.append(np.broadcast_to(np.asarray(levels, dtype=np.float64), costs.shape))
                mus.append(mu[name])
            frame = self.frame(rows) if self.constraints.groups else None
            for name, group in self.constraints.groups.items():
                member = (frame[group.feature].astype(str) == str(group.equals)).to_numpy()
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
        labels, incentives = self.labels, self.incentives
        decisions = [  # Python numbers from tolist(): one conversion per column, not per value
            {"user_id": uid, "level": lv, "label": labels[lv], "incentive": incentives[lv],
             "predicted_response": v, "predicted_cost": c, "policy": "explore" if e else "champion",
             "propensity": p}
            for uid, lv, v, c, e, p in zip(user_ids, levels.tolist(), value.tolist(), cost.tolist(), explores.tolist(),
                                           propensity.tolist())]
        return {"campaign": self.campaign, "budget_per_capita": budget, "period": budget == self.paced_budget,
                "lambda_": lam, "lambda_source": "pacing" if budget == self.paced_budget else self.lambda_source,
                **({"multipliers": dict(mu)} if mu else {}),
                "champion": self.champion, "champion_version": self.champion_version,
                "model_version": dict(zip(self.members, self.versions)), "decision_date": self.decision_date.isoformat(),
                "decisions": decisions}


def _printable_ascii(text: str) -> bool:
    """Whether every character is printable ASCII (checked on the values joined: one pass in C)."""
    return text.isascii() and text.isprintable()


def _getter(names: list[str]):
    """f -> (f[name] for each name) as a tuple, in C (`itemgetter` of one name gives the value alone)."""
    if len(names) == 1:
        get = itemgetter(names[0])
        return lambda f: (get(f),)
    return itemgetter(*names)


def _short(value: Any) -> str:
    """A value as the error shows it: JSON text of a scalar, at most 40 characters; a list or an
    object by its kind (never walked: it may be nested thousands deep)."""
    if isinstance(value, dict):
        return "{...}"
    if isinstance(value, list):
        return "[...]"
    if isinstance(value, str):
        text = '"' + CONTROL.sub("?", value[:40]).encode("utf-8", "replace").decode() + '"'
    elif isinstance(value, int) and not isinstance(value, bool) and not -10 ** 40 < value < 10 ** 40:
        text = "a number of more than 40 digits"
    else:
        text = "null" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _key(key: Any) -> str:
    """A key of the body as a field name in an error (shortened, control characters as '?')."""
    text = CONTROL.sub("?", str(key)).encode("utf-8", "replace").decode()
    return text if len(text) <= 40 else text[:37] + "..."


def _check_text(text: str, field: str, what: str) -> None:
    """The ingestion's rule for an id or a text value: no control character (NUL, tab, newline, ...),
    and valid Unicode (no lone UTF-16 surrogate)."""
    bad = CONTROL.search(text)
    if bad:
        raise RequestError(field, f"{what}: a control character inside the value, such as NUL, tab or newline "
                           f"(U+{ord(bad.group()):04X} at position {bad.start()})")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestError(field, f"{what}: not valid Unicode (a lone surrogate at position {exc.start})") from None
