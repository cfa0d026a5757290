"""A simulated campaign that changes from a day on: shifted true curves, a shifted population, and a
coupon system that applies only part of the decisions.

    Change(day, response_shift, population_shift, compliance)                (checked, SimulationError)
    Change.from_stored(block) / change.stored()                              campaign.yaml `simulation.change`
    apply_change(pool, change, seed, cheapest, cost_rule) -> Pool             the pool, changed from `change.day`

Specifications (text, as on the command line; several terms separated by commas):

response shift   TERM := [FEATURE=VALUE:]EFFECT[:EFFECT]   EFFECT := uplift=F | base=F
                 the users of the segment (all users without one) answer, from the change day,
                 p'(level) = clip(base x (p(cheapest) + uplift x (p(level) - p(cheapest))), 0, 1):
                 uplift=0 collapses their response to the incentive, uplift=-1 flips it, base scales
                 their response at every level (the base rate). Terms apply in the order given.
population shift TERM := FEATURE=VALUE[:share=S]            a share S [1] of the users takes category
                                                            VALUE of a categorical feature (a value the
                                                            preset never draws is a new category)
                       | FEATURE:scale=F[:add=A][:share=S]  a numeric feature becomes x * F + A
                 The shifted users are a seeded draw per term, the same every day from the change day.
                 Where the preset describes its curves as a function of the features (`Pool.truth_of`:
                 demo), the shifted users' truth is recomputed from their new features (a category the
                 preset does not know has no effect of its own); otherwise their curves stay as drawn.
compliance       C in (0, 1]: for a share 1 - C of the decided users (a seeded draw per day), the coupon
                 system gives the cheapest level instead of the decided one; from the change day when one
                 is given, otherwise on every answered day (RCT days are not affected).

No dagster import here (domain package).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from promo_assets.core.text import control_characters
from promo_assets.ingestion.ids import MAX_NUMBER
from promo_assets.simulation.landing import Pool, SimulationError

_RESPONSE_EFFECTS = ("uplift", "base")
_POPULATION_KEYS = ("share", "scale", "add")


@dataclass(frozen=True)
class ResponseTerm:
    feature: str | None
    value: str | None
    uplift: float = 1.0
    base: float = 1.0


@dataclass(frozen=True)
class PopulationTerm:
    feature: str
    value: str | None  # categorical: the category taken; None: a numeric shift
    share: float = 1.0
    scale: float = 1.0
    add: float = 0.0


@dataclass(frozen=True)
class Change:
    """A planted change: `day` (None: compliance on every answered day; a date or YYYY-MM-DD text), the
    two shifts' specification texts and the coupon system's compliance (None: 1), as on the command
    line. Checked when made (SimulationError naming the option); `response_terms` and
    `population_terms` are the shifts parsed."""

    day: dt.date | None = None
    response_shift: str | None = None
    population_shift: str | None = None
    compliance: float | None = None
    response_terms: tuple[ResponseTerm, ...] = field(init=False, repr=False)
    population_terms: tuple[PopulationTerm, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        day, response_shift, population_shift, compliance = (self.day, self.response_shift, self.population_shift,
                                                              self.compliance)
        if day is None and response_shift is None and population_shift is None and compliance is None:
            raise SimulationError("a planted change needs something to change: --response-shift, --population-shift "
                                  "or --compliance")
        if day is not None and not isinstance(day, dt.date):
            try:
                day = dt.date.fromisoformat(str(day))
            except ValueError:
                raise SimulationError(f"--change-day must be a date (YYYY-MM-DD), got {day!r}") from None
        if isinstance(day, dt.datetime):
            day = day.date()
        if (response_shift is not None or population_shift is not None) and day is None:
            raise SimulationError("--response-shift and --population-shift need --change-day (the first day the "
                                  "change is in force)")
        if day is not None and response_shift is None and population_shift is None and compliance is None:
            raise SimulationError("--change-day needs something to change: --response-shift, --population-shift "
                                  "or --compliance")
        if compliance is not None:
            c = _number(compliance, "--compliance", str(compliance))
            if not 0.0 < c <= 1.0:
                raise SimulationError(f"--compliance must be in (0, 1] (the share of decisions the coupon system "
                                      f"applies), got {compliance!r}")
            compliance = c
        object.__setattr__(self, "day", day)
        object.__setattr__(self, "compliance", compliance)
        object.__setattr__(self, "response_terms", _response_terms(response_shift))
        object.__setattr__(self, "population_terms", _population_terms(population_shift))

    @classmethod
    def parse(cls, day: Any = None, response_shift: str | None = None, population_shift: str | None = None,
              compliance: Any = None) -> "Change | None":
        """A Change, or None when nothing is asked (every argument None). Raises SimulationError naming the option."""
        if day is None and response_shift is None and population_shift is None and compliance is None:
            return None
        return cls(day, response_shift, population_shift, compliance)

    @classmethod
    def from_stored(cls, block: Any) -> "Change | None":
        """The Change kept in campaign.yaml's `simulation.change` block (None: no block)."""
        if block is None:
            return None
        if not isinstance(block, dict) or set(block) - {"day", "response_shift", "population_shift", "compliance"}:
            raise SimulationError(f"campaign.yaml simulation.change must be a mapping of day, response_shift, "
                                  f"population_shift, compliance; got {block!r}")
        return cls.parse(block.get("day"), block.get("response_shift"), block.get("population_shift"),
                         block.get("compliance"))

    def stored(self) -> dict[str, Any]:
        """The block kept in campaign.yaml (`simulation.change`): only what was given."""
        out: dict[str, Any] = {}
        if self.day is not None:
            out["day"] = self.day.isoformat()
        for key in ("response_shift", "population_shift", "compliance"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def apply(self, pool: Pool, seed: int, cheapest: int, cost_rule: str) -> Pool:
        """`pool` changing from this change's day (`apply_change`); what the landing writer calls, so
        it never imports this module."""
        return apply_change(pool, self, seed, cheapest, cost_rule)

    def in_force(self, day: dt.date) -> bool:
        return self.day is None or day >= self.day


def _number(text: Any, option: str, spec: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise SimulationError(f"{option} {spec!r}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise SimulationError(f"{option} {spec!r}: {text!r} is not a finite number")
    return value


def _terms(spec: Any, option: str) -> list[list[tuple[str, str | None]]]:
    if not isinstance(spec, str) or not spec.strip():
        raise SimulationError(f"{option} must be a non-empty specification text, got {spec!r}")
    if control_characters(spec):
        raise SimulationError(f"{option} {spec!r}: holds control character(s) {', '.join(control_characters(spec))}: a "
                              "feature or category name with them would be written into the campaign, and every "
                              "`promo run` refuses such a campaign.yaml")
    out = []
    for term in spec.split(","):
        parts = []
        for part in term.strip().split(":"):
            key, eq, value = part.strip().partition("=")
            if not key.strip():
                raise SimulationError(f"{option} {spec!r}: empty part in term {term.strip()!r}")
            parts.append((key.strip(), value.strip() if eq else None))
        out.append(parts)
    return out


def _keyed_numbers(parts, allowed, option: str, spec: str, expected: str) -> dict[str, float]:
    """KEY=NUMBER terms as a mapping: each key once, among `allowed`; else SimulationError saying `expected`."""
    out: dict[str, float] = {}
    for key, text in parts:
        if key not in allowed or text is None or key in out:
            shown = key + ("=" + text if text is not None else "")
            raise SimulationError(f"{option} {spec!r}: {expected}, got {shown!r}")
        out[key] = _number(text, option, spec)
    return out


def _response_terms(spec: str | None) -> tuple[ResponseTerm, ...]:
    if spec is None:
        return ()
    option, terms = "--response-shift", []
    for parts in _terms(spec, option):
        feature = value = None
        if parts[0][0] not in _RESPONSE_EFFECTS:
            feature, value = parts.pop(0)
            if not value:
                raise SimulationError(f"{option} {spec!r}: a segment is FEATURE=VALUE, got {feature!r}")
        effects = _keyed_numbers(parts, _RESPONSE_EFFECTS, option, spec,
                                 "expected [FEATURE=VALUE:]uplift=F and/or base=F")
        if not effects:
            raise SimulationError(f"{option} {spec!r}: the segment {feature}={value} needs uplift=F and/or base=F")
        if effects.get("base", 1.0) < 0:
            raise SimulationError(f"{option} {spec!r}: base must be >= 0, got {effects['base']}")
        terms.append(ResponseTerm(feature, value, **effects))
    return tuple(terms)


def _population_terms(spec: str | None) -> tuple[PopulationTerm, ...]:
    if spec is None:
        return ()
    option, terms = "--population-shift", []
    for parts in _terms(spec, option):
        (feature, value), rest = parts[0], parts[1:]
        if feature in _POPULATION_KEYS:
            raise SimulationError(f"{option} {spec!r}: a term starts with the feature (FEATURE=VALUE or "
                                  f"FEATURE:scale=F), got {feature!r}")
        if value == "":
            raise SimulationError(f"{option} {spec!r}: empty category for {feature!r}")
        keys = _keyed_numbers(rest, _POPULATION_KEYS, option, spec,
                              f"expected share=S, scale=F or add=A after {feature!r}")
        if not 0.0 < keys.get("share", 1.0) <= 1.0:
            raise SimulationError(f"{option} {spec!r}: share must be in (0, 1], got {keys['share']}")
        if value is not None and ({"scale", "add"} & set(keys)):
            raise SimulationError(f"{option} {spec!r}: {feature}={value} moves users to a category; scale/add are "
                                  "for numeric features (FEATURE:scale=F:add=A)")
        if value is None and not ({"scale", "add"} & set(keys)):
            raise SimulationError(f"{option} {spec!r}: {feature!r} needs =VALUE (a category) or scale=F / add=A "
                                  "(a numeric shift)")
        terms.append(PopulationTerm(feature, value, **keys))
    return tuple(terms)


def check_against(change: Change, pool: Pool, cost_rule: str) -> None:
    """Refuse a change the pool cannot carry (unknown features, kind mismatch, a cost rule without
    a response-proportional cost), naming the option."""
    new_values: dict[str, set[str]] = {}
    for t in change.population_terms:
        if t.feature not in pool.features:
            raise SimulationError(f"--population-shift {change.population_shift!r}: no feature {t.feature!r}; the "
                                  f"preset's features: {sorted(pool.features)}")
        categorical = t.feature in pool.categories
        if categorical and t.value is None:
            raise SimulationError(f"--population-shift {change.population_shift!r}: {t.feature!r} is categorical "
                                  f"({pool.categories[t.feature]}); give {t.feature}=VALUE")
        if not categorical and t.value is not None:
            raise SimulationError(f"--population-shift {change.population_shift!r}: {t.feature!r} is numeric; give "
                                  f"{t.feature}:scale=F and/or :add=A")
        if t.value is not None:
            new_values.setdefault(t.feature, set()).add(t.value)
    if change.response_terms and cost_rule not in ("redeemed", "column", "assigned"):
        raise SimulationError(f"--response-shift: this preset's cost is a label of its own (cost rule {cost_rule!r}); "
                              "a response shift is supported for presets whose cost follows the response")
    for t in change.response_terms:
        if t.feature is None:
            continue
        if t.feature not in pool.categories:
            raise SimulationError(f"--response-shift {change.response_shift!r}: a segment needs a categorical "
                                  f"feature; {t.feature!r} is not one (categorical: {sorted(pool.categories)})")
        known = set(pool.categories[t.feature]) | new_values.get(t.feature, set())
        if t.value not in known:
            raise SimulationError(f"--response-shift {change.response_shift!r}: {t.feature} has no value {t.value!r} "
                                  f"(values: {sorted(known)})")


def _shift(pool: Pool, change: Change, seed: int, cheapest: int, cost_rule: str) -> Pool:
    """The pool as it is once the change is in force."""
    n = pool.n_users
    features = {k: np.array(v, copy=True) for k, v in pool.features.items()}
    categories = {k: list(v) for k, v in pool.categories.items()}
    response, cost = pool.expected_response, pool.expected_cost
    if change.population_terms:
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 3]))
        for t in change.population_terms:
            moved = rng.random(n) < t.share
            if t.value is not None:
                if t.value not in categories[t.feature]:
                    categories[t.feature].append(t.value)
                code = categories[t.feature].index(t.value)
                features[t.feature] = np.where(moved, code, features[t.feature]).astype(pool.features[t.feature].dtype)
            else:
                x = features[t.feature].astype(np.float64)
                with np.errstate(over="ignore", invalid="ignore"):  # checked just below
                    features[t.feature] = np.where(moved, x * t.scale + t.add, x)
                bad = ~(np.abs(features[t.feature]) <= MAX_NUMBER)  # NaN and inf included
                if bad.any():
                    raise SimulationError(
                        f"--population-shift {change.population_shift!r}: {t.feature} shifted is not a finite number "
                        f"of at most {MAX_NUMBER:g} in size for {int(bad.sum())} user(s) (e.g. "
                        f"{features[t.feature][bad][0]:g}); ingestion refuses such values")
        if pool.truth_of is not None:
            with np.errstate(invalid="ignore", divide="ignore"):  # checked just below
                response, cost = pool.truth_of(features)
            if not (np.all(np.isfinite(response)) and np.all(np.isfinite(cost))):
                raise SimulationError(f"--population-shift {change.population_shift!r}: the shifted features give "
                                      "undefined true curves (e.g. a feature the preset needs positive made <= 0)")
    if change.response_terms:
        old = response
        response = np.array(response, dtype=np.float64, copy=True)
        for t in change.response_terms:
            rows = (np.ones(n, dtype=bool) if t.feature is None
                    else features[t.feature] == categories[t.feature].index(t.value))
            p = response[rows]
            p0 = p[:, [cheapest]]
            response[rows] = np.clip(t.base * (p0 + t.uplift * (p - p0)), 0.0, 1.0)
        if cost_rule != "assigned":  # redeemed / column: the cost is proportional to the response
            with np.errstate(divide="ignore", invalid="ignore"):
                unit = np.where(old > 0, cost / old, 0.0)
            cost = unit * response
    return dataclasses.replace(pool, features=features, categories=categories, expected_response=response,
                               expected_cost=cost, by_day=None)


def apply_change(pool: Pool, change: Change, seed: int, cheapest: int, cost_rule: str) -> Pool:
    """`pool` with the change in force from `change.day` (`Pool.on(day)`); checked first (check_against).
    The pool itself (as of any day before the change) is unchanged."""
    check_against(change, pool, cost_rule)
    if not change.response_terms and not change.population_terms:
        return pool
    day0 = change.day
    cache = {day0: _shift(pool.on(day0), change, seed, cheapest, cost_rule)}  # a bad shift is refused now

    def on(day: dt.date) -> Pool:
        if day < day0:
            return pool.on(day)
        if day not in cache:
            cache.clear()
            cache[day] = _shift(pool.on(day), change, seed, cheapest, cost_rule)
        return cache[day]

    return dataclasses.replace(pool, by_day=on)
