"""`campaign.yaml`: what a campaign's treatments, cost rule, response type and budgets are, and the
one rule for campaign names.

A campaign is a folder under the landing root (see DESIGN.md, "Data contract"). This module only
parses and validates its configuration; it never touches the warehouse.

The file is checked against one typed schema (pydantic models, strict: no coercion) before anything
runs: an unknown key is refused naming the closest valid key ("did you mean 'holdout_days'?"), a
wrong type or an out-of-range value naming the key, the value and what is expected. A string is
never read as a number or a boolean, a float never truncated to an integer. Every problem of the
file is reported at once, in one `CampaignConfigError`.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import logging
import math
import re
import reprlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from promo_assets.core import files
from promo_assets.core.errors import DomainError
from promo_assets.core.text import control_characters

COST_RULES = ("redeemed", "assigned", "column")
# Limits of a campaign.yaml, checked while it is parsed and before it is validated (the landing
# folder is written by other systems; docs/operations.md): its size, how deep mappings and lists
# nest, how many aliases (*name) it uses and how many values it holds once its aliases are expanded.
YAML_MAX_BYTES = 256 * 1024
YAML_MAX_DEPTH = 32
YAML_MAX_ALIASES = 100
YAML_MAX_VALUES = 100_000
# At most this many incentive levels (or arms, or merchant commission levels): the allocation builds
# every user's convex hull over the levels one level at a time, so its time grows with the square of
# the number of levels (800 users: 0.25 s per solve at 256 levels, 1.5 s at 1,000, minutes at 10,000).
MAX_LEVELS = 256
# the mean response the data check `response_rate` accepts for a binary response when campaign.yaml
# gives no `plausible_response_rate` (promo_assets.causal.checks)
DEFAULT_RESPONSE_RATE = (0.001, 0.95)
MONOTONE_DIRECTIONS = ("increasing", "decreasing", "none")
RESPONSE_TYPES = ("binary", "count", "continuous")
FEATURE_KINDS = ("numeric", "categorical")

log = logging.getLogger(__name__)


class CampaignConfigError(DomainError, ValueError):
    """campaign.yaml is missing, unreadable or says something impossible."""


class CampaignNameError(CampaignConfigError):
    """A campaign name (landing folder name, --campaign) breaks CAMPAIGN_NAME_RULE."""


# --------------------------------------------------------------------------------------------
# campaign names

CAMPAIGN_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
CAMPAIGN_NAME_RULE = (
    "1 to 64 characters, only letters A-Z a-z, digits, '_', '.' and '-', starting with a letter or digit "
    "(no spaces, quotes, path separators or '|')"
)
_CAMPAIGN_NAME = re.compile(CAMPAIGN_NAME_PATTERN)


def check_campaign_name(name: Any) -> str:
    """`name` when it follows CAMPAIGN_NAME_RULE (the one rule for campaign ids: landing folder
    names, `promo simulate/run --campaign`, Dagster partition keys); otherwise CampaignNameError
    naming the value and the rule."""
    if not isinstance(name, str) or not _CAMPAIGN_NAME.fullmatch(name):
        shown = repr(name) if not isinstance(name, str) or len(name) <= 80 else f"{name[:60]!r}… ({len(name)} characters)"
        raise CampaignNameError(f"invalid campaign name {shown}: a campaign name must be {CAMPAIGN_NAME_RULE}")
    return name


def usable_campaign_folder(folder: Path) -> bool:
    """True when the landing folder's name is a valid campaign name; otherwise logs a warning
    naming the folder and the rule (discovery skips it; the other campaigns proceed)."""
    try:
        check_campaign_name(folder.name)
    except CampaignNameError as exc:
        log.warning("%s: skipped: %s", folder, exc)
        return False
    return True


# --------------------------------------------------------------------------------------------
# the campaign.yaml schema

class _Block(BaseModel):
    """Strict: no unknown keys, no coercion (a string is not a number or a boolean, 2.7 is not an
    integer), finite numbers only."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _one_or_more(value: Any) -> Any:
    """A single number stands for a one-element list."""
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _text_keys(value: Any) -> Any:
    """Arm labels written as numbers (`arms: {0: 0, 1: 1}`) are labels '0', '1'."""
    if isinstance(value, dict):
        return {(str(k) if isinstance(k, (int, float)) and not isinstance(k, bool) else k): v for k, v in value.items()}
    return value


def _ascending(levels: list[float]) -> list[float]:
    if any(b <= a for a, b in zip(levels, levels[1:])):
        raise ValueError("the levels must be strictly ascending")
    return levels


def _unique(names: list[str]) -> list[str]:
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repr(n) for n in repeated)} given more than once")
    return names


def _ascending_pair(pair: list[float]) -> list[float]:
    if pair[0] > pair[1]:
        raise ValueError("low must not be above high")
    return pair


def _inside_campaign_folder(text: str) -> str:
    if not text or Path(text).is_absolute() or ".." in Path(text).parts:
        raise ValueError("the path must be relative to the campaign folder and stay inside it")
    return text


Amount = Annotated[float, Field(ge=0)]
Levels = Annotated[list[Amount], Field(min_length=2, max_length=MAX_LEVELS), AfterValidator(_ascending)]
Budgets = Annotated[list[Annotated[float, Field(gt=0)]], BeforeValidator(_one_or_more), Field(min_length=1)]
LEVELS = (f"a list of 2 to {MAX_LEVELS} amounts (numbers >= 0), strictly ascending (at most {MAX_LEVELS}: the time "
          "of every allocation grows with the square of the number of levels)")


AttributeValue = Annotated[float, Field()]
LevelRow = dict[str, AttributeValue]
LEVEL_ROWS = (f"a list of 2 to {MAX_LEVELS} mappings {{attribute: number}}, one per incentive level, every level "
              "giving every attribute declared under 'treatments.attributes'")
# tags of the `levels` union (levels: [amounts] | levels: [{attribute: value}]); _schema_messages skips them
_LEVEL_TAGS = ("amounts", "attribute_rows")


def _levels_kind(value: Any) -> str:
    """'attribute_rows' when `levels` lists mappings (a multi-attribute campaign), else 'amounts'."""
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return "attribute_rows"
    return "amounts"


class AttributeBlock(_Block):
    monotone: Literal[MONOTONE_DIRECTIONS] = Field(description=" | ".join(MONOTONE_DIRECTIONS))
    """How the response moves when this attribute grows: `increasing`, `decreasing` or `none`. The
    monotone models are constrained to it by construction."""


class LevelCostBlock(_Block):
    attribute: str = Field(description="the name of the attribute whose value is the level's cost amount")
    """The attribute whose value is the level's cost amount (the `incentive` of the events)."""


class TreatmentsBlock(_Block):
    levels: Annotated[
        Annotated[Levels, Tag("amounts")]
        | Annotated[Annotated[list[LevelRow], Field(min_length=2, max_length=MAX_LEVELS)], Tag("attribute_rows")],
        Discriminator(_levels_kind),
    ] | None = Field(None, description=f"{LEVELS}, or {LEVEL_ROWS}")
    """The incentive levels the allocator chooses from, ascending amounts (`[0, 1, 2, 5, 10]`), or one
    mapping per level for multi-attribute incentives (`{amount: 8, threshold: 30}`). Events name a
    level by its amount, or by its index when the levels are mappings. Give `levels` or `arms`."""
    arms: Annotated[dict[str, Amount] | None, BeforeValidator(_text_keys)] = Field(
        None, min_length=2, max_length=MAX_LEVELS,
        description=f"a mapping of 2 to {MAX_LEVELS} arm labels to a unit cost (a number >= 0)")
    """Unordered treatment arms, each label with its unit cost (`{"No E-Mail": 0, "Mens E-Mail": 1}`);
    events name the arm by its label. Models that need ordered levels (`dipn`, `lgbm_s_mono`) are
    skipped for such a campaign."""
    attributes: dict[str, AttributeBlock] | None = Field(
        None, min_length=1, description="a mapping of attribute name to {monotone: increasing | decreasing | none} "
                                        "(only with levels given as mappings)")
    """Required when `levels` are mappings: every attribute and its monotone direction, the direction
    in which it moves the response (a coupon's amount `increasing`, its threshold `decreasing`)."""
    cost: LevelCostBlock | None = Field(
        None, description="{attribute: NAME}: the attribute whose value is a level's cost amount "
                          "(default: the attribute 'amount')")
    """With levels given as mappings: which attribute is the level's cost amount (default `amount`)."""

    @model_validator(mode="after")
    def _levels_or_arms(self) -> "TreatmentsBlock":
        if (self.levels is None) == (self.arms is None):
            raise ValueError("give exactly one of 'levels: [amounts...]' or 'arms: {label: unit_cost}'")
        return self


def _attribute_problems(t: TreatmentsBlock) -> list[str]:
    """Cross-key problems of a multi-attribute `treatments` block (levels given as mappings), each
    naming the dotted key, the value and what is expected; [] when fine or not multi-attribute."""
    rows = t.levels if t.levels is not None and _levels_kind(t.levels) == "attribute_rows" else None
    if rows is None:
        out = []
        if t.attributes is not None:
            out.append("'treatments.attributes' is only allowed with levels given as mappings "
                       "(levels: [{amount: 0, threshold: 0}, ...])")
        if t.cost is not None:
            out.append("'treatments.cost' is only allowed with levels given as mappings "
                       "(levels: [{amount: 0, threshold: 0}, ...])")
        return out
    if t.attributes is None:
        return ["missing required key 'treatments.attributes': levels given as mappings need "
                "'attributes: {NAME: {monotone: increasing | decreasing | none}, ...}' naming every attribute"]
    declared = list(t.attributes)
    out = []
    for i, row in enumerate(rows):
        for name in row:
            if name not in t.attributes:
                close = difflib.get_close_matches(name, declared, n=1, cutoff=0.6)
                hint = f"did you mean '{close[0]}'?" if close else f"declared attributes: {', '.join(declared)}"
                out.append(f"unknown attribute 'treatments.levels[{i}].{name}' ({hint})")
        missing = [a for a in declared if a not in row]
        if missing:
            out.append(f"'treatments.levels[{i}]' = {short_repr(row)}: missing attribute(s) {', '.join(repr(a) for a in missing)}; "
                       f"expected a value for every attribute declared under 'treatments.attributes' ({', '.join(declared)})")
    cost_attr = t.cost.attribute if t.cost is not None else "amount"
    if cost_attr not in t.attributes:
        key = "treatments.cost.attribute" if t.cost is not None else "treatments.cost"
        shown = f" = {cost_attr!r}" if t.cost is not None else ""
        out.append(f"'{key}'{shown}: {'unknown attribute' if t.cost is not None else 'missing (no attribute named amount)'}; "
                   f"expected {{attribute: NAME}} with NAME one of {', '.join(declared)}")
    elif not out:
        for i, row in enumerate(rows):
            if row[cost_attr] < 0:
                out.append(f"'treatments.levels[{i}].{cost_attr}' = {row[cost_attr]!r}: the cost attribute must be >= 0")
    if not out:
        seen: dict[tuple, int] = {}
        for i, row in enumerate(rows):
            key = tuple(float(row[a]) for a in declared)
            if key in seen:
                out.append(f"'treatments.levels[{i}]' = {short_repr(row)}: the same attributes as treatments.levels[{seen[key]}]; "
                           "expected every level to differ in at least one attribute")
            seen.setdefault(key, i)
    return out


class MerchantTreatmentsBlock(_Block):
    levels: Levels = Field(description=LEVELS)
    """The merchants' commission levels, ascending."""


class MerchantsBlock(_Block):
    treatments: MerchantTreatmentsBlock = Field(description="a mapping with 'levels: [commission amounts...]'")
    """The merchant-side treatments: `levels`, the commission amounts."""
    response: Literal[RESPONSE_TYPES] = Field("count", description=" | ".join(RESPONSE_TYPES))
    """The merchants' response type (the sharing count by default)."""
    cost: Literal[COST_RULES] = Field("redeemed", description=" | ".join(COST_RULES))
    """The merchants' cost rule, as the campaign's `cost`."""
    normalizer: str | None = Field("prev_shares", description="a merchant column name (or null)")
    """A merchant column that divides the merchant response (the shares of the previous days), or null."""
    # the folder layout is fixed (docs/data-contract.md); `promo simulate` writes it down
    events: Literal["merchants/"] = Field("merchants/", description="'merchants/' (the folder is fixed)")
    """The folder of the merchant RCT day files (fixed)."""
    population: Literal["merchant_population/"] = Field(
        "merchant_population/", description="'merchant_population/' (the folder is fixed)")
    """The folder of the merchants to allocate for (fixed)."""
    truth: Annotated[str, AfterValidator(_inside_campaign_folder)] = Field(
        "truth/merchant_response.parquet", description="a relative file path inside the campaign folder (no '..')")
    """Simulated campaigns: the merchants' true response, inside the campaign folder."""


class GraphBlock(_Block):
    """Written by `promo simulate` as a record of the layout; edges are read from `edges/` and their
    weight from the first of the columns weight | n_payments | amount that the file has."""

    edges: Literal["edges/"] = Field("edges/", description="'edges/' (the folder is fixed)")
    """The folder of the customer-merchant interaction day files (fixed)."""
    weight: Literal["weight", "n_payments", "amount"] = Field("n_payments", description="weight | n_payments | amount")
    """The edge column recorded as the weight (the loader takes the first of these columns a file has)."""


class ModelsBlock(_Block):
    include: list[str] | None = Field(
        None, description="a list of registered model names (default: every model whose `default` is true)")
    """The models trained for this campaign (default: every model trained by default). A model left
    out is skipped with the reason, and the leaderboard lists it."""
    exclude: list[str] = Field(default_factory=list, description="a list of registered model names")
    """Models not to train, applied after `include`."""
    params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="a mapping of model name to a mapping of its hyper-parameters")
    """Per model, hyper-parameters over its defaults (`{e2e_fd: {gamma: 0.5}}`): the model's
    constructor arguments. Checked against the model's own parameters and rules by the model
    registry when the pipeline loads the file."""


class ChampionBlock(_Block):
    """How the campaign's champion (the policy deployed) is chosen: docs/decisions.md."""

    confidence: float = Field(0.9, gt=0.5, lt=1, description="a number in (0.5, 1): the confidence a challenger "
                              "must be better at to replace the champion (paired comparison at equal spend)")
    """How sure the paired comparison (same holdout users, equal spend) must be that a challenger
    beats the champion before it replaces it."""
    pin: str | None = Field(None, description="a registered model name: deploy that model, whatever the evidence")
    """Deploy this model whatever the evidence says (the evidence is still computed and shown)."""
    candidates: list[str] | None = Field(
        None, min_length=1, description="a list of registered model names the champion is chosen among (default: every "
                                        "evaluated model)")
    """The models the champion is chosen among (default: every model evaluated for the campaign)."""
    blends: bool = Field(True, description="true or false: may the champion be a blend (weighted mean of the "
                                           "models' coefficients)")
    """`true`: the proposal is the stacked blend (weights >= 0 summing to 1 that minimize the decision
    loss); `false`: the single model with the lowest decision loss."""
    guard: Literal["none", "shrink", "members", "drop_worse", "bag", "equal"] = Field(
        "bag", description="none, shrink, members, drop_worse, bag or equal: how the stacked blend is kept from "
                            "leaning on the wrong model (docs: decisions)")
    """What protects the worst case: `none` (the stacked weights), `shrink` (pull the weights toward the
    single model of lowest decision loss by `guard_level`), `members` (the blend only when, with weights
    fitted on other events, it beats every member by more than `guard_level` standard errors, else the
    single model of lowest loss), `drop_worse` (models worse than the best single one at `confidence`
    get no weight), `bag` (the mean of the stacked weights over bootstrap resamples of the events) or
    `equal` (pull the weights toward equal weights by `guard_level`)."""
    guard_level: float = Field(0.25, ge=0, le=5, description="a number in [0, 5]: the guard's strength (shrink, equal: "
                               "the share moved, at most 1; members: standard errors)")
    """`shrink` / `equal`: the share of the weight moved to the best single model / to equal weights
    (0..1); `members`: how many standard errors the blend must beat each member by; unused otherwise."""
    deployed_days: bool = Field(True, description="true or false: do the events of deployed days (decided days whose "
                                                  "outcomes came back) join the evidence, with the decisions' "
                                                  "propensities")
    """`true`: the events of every decided day whose outcomes came back and that is no holdout day join the
    evidence, each candidate scored by the version that existed when the day was decided, with the
    decision's own propensities; `false`: the holdout events only."""
    evidence: Literal["holdout", "cross_fitted"] = Field(
        "cross_fitted", description="holdout or cross_fitted: the events candidates are compared on (cross_fitted adds "
                               "out-of-fold predictions over the training days; docs: decisions)")
    """`holdout`: the holdout days' events only; `cross_fitted`: also every training-day event, scored by
    fits of the refitted models (`refit`) and of the outcome model that did not see it (`folds`, `fold_by`)."""
    folds: int = Field(3, ge=2, le=10, description="an integer in [2, 10]: how many folds the training days' events "
                                                   "are cut into for cross_fitted evidence")
    """How many folds cross-fitting cuts the training days' events into (each fold needs one fit per
    refitted model)."""
    fold_by: Literal["user", "day"] = Field(
        "day", description="user or day: cross_fitted folds by groups of users, or by days (rolling origin)")
    """`day` (default): consecutive blocks of days, each scored by a fit on the days before it (rolling
    origin; the first block is not scored); `user`: folds are groups of users (all days)."""
    refit: list[str] | None = Field(
        None, description="a list of registered model names refitted per fold for cross_fitted evidence (default: "
                          "the LightGBM models)")
    """The models refitted per fold; the others are compared on the holdout only (default: every
    candidate of kind lightgbm)."""
    fold_epochs: Literal["full_fit", "early_stopping"] = Field(
        "full_fit", description="full_fit or early_stopping: how long a refitted torch model trains on a fold")
    """`full_fit` (default): a refitted torch model trains on a fold for as many epochs as its full fit took
    to its best epoch (the `max_epochs` of each phase capped at that phase's best epoch), so the fold
    fit skips the epochs early stopping only spent waiting; `early_stopping`: each fold fit runs to its
    own early stop. LightGBM refits early-stop either way."""


class ExplorationBlock(_Block):
    """The randomized share kept in every exported decision: docs/decisions.md."""

    share: float = Field(0.05, ge=0, lt=1, description="a number in [0, 1): the share of users whose level is drawn "
                                                       "at random")
    """Share of the users whose level is drawn at random (with its propensity written), so the next
    days stay an experiment; 0 turns exploration off."""
    seed: int = Field(0, ge=0, description="an integer >= 0 (with the decision date, it seeds the draws)")
    """Seed of the exploration draws (combined with the decision date: each day draws anew)."""
    mix: list[Annotated[float, Field(ge=0)]] | None = Field(
        None, description="one number >= 0 per incentive level: the weights the explored levels are drawn with "
                          "(default: uniform)")
    """Weights the explored levels are drawn with, one per level in level order (default: uniform)."""
    tolerance: float = Field(0.005, ge=0, le=0.5, description="a number in [0, 0.5]: how far the realized share may "
                                                              "be from `share` before the export is stopped")
    """How far the realized exploration share may be from `share` before the check stops the export."""


class BudgetBlock(_Block):
    """A budget for a period, paced day by day (docs/pacing.md): `total` (or `per_day`) from `start` to
    `end`, both days included."""

    total: float | None = Field(None, gt=0, description="a number > 0: the spend for the whole period")
    """The spend for the whole period (give `total` or `per_day`)."""
    per_day: float | None = Field(None, gt=0, description="a number > 0: the spend per day (total = per_day x days)")
    """The spend per day of the period (give `total` or `per_day`)."""
    start: dt.date = Field(strict=False, description="a date YYYY-MM-DD: the period's first day")
    """The first day of the period (decisions for this day are the first paced ones)."""
    end: dt.date = Field(strict=False, description="a date YYYY-MM-DD, not before start: the period's last day")
    """The last day of the period (included)."""
    controller: Literal["ratio", "dual"] = Field("ratio", description="ratio | dual")
    """How each day's λ is corrected by the spend that came back: `ratio` (λ meets the plan over the
    realized / predicted spend ratio) or `dual` (DIPN's multiplicative dual update)."""
    gain: float = Field(1.0, gt=0, le=5, description="a number in (0, 5]: the step of the dual update")
    """The exponent η of the `dual` controller's step λ_d = λ_{d-1} (realized / plan)^η."""

    @model_validator(mode="after")
    def _one_amount(self) -> "BudgetBlock":
        if (self.total is None) == (self.per_day is None):
            raise ValueError("give exactly one of 'total' and 'per_day'")
        if self.end < self.start:
            raise ValueError(f"'end' ({self.end}) is before 'start' ({self.start})")
        return self


class CostTypeBlock(_Block):
    """A further cost type with a fixed cost per level (e.g. an SMS sent with every incentive)."""

    levels: list[Annotated[float, Field(ge=0)]] = Field(
        min_length=1, description="one number >= 0 per incentive level: this cost of giving the level")
    """This cost of giving each level, one number per level in level order."""
    budget_per_capita: float = Field(gt=0, description="a number > 0: this cost's budget per user decided for")
    """This cost's budget per user decided for."""


class GroupCapBlock(_Block):
    """A cap on the incentive cost of one group of users: those whose `feature` equals `equals`."""

    feature: str = Field(min_length=1, description="a feature column of the users decided for")
    """The feature column that defines the group."""
    equals: str | float | int = Field(description="the value of `feature` that puts a user in the group")
    """The users whose feature has this value form the group (compared as text)."""
    budget_per_capita: float = Field(gt=0, description="a number > 0: the group's incentive cost per member")
    """The group's incentive cost budget per member of the group."""


class ConstraintsBlock(_Block):
    """Budgets next to `budget_per_capita` that the champion's decisions must also keep: further cost types
    and caps on groups of users (solved together by `solve_multi`, docs/decisions.md)."""

    costs: dict[str, CostTypeBlock] = Field(default_factory=dict, description="a mapping of name to "
                                            "{levels: [...], budget_per_capita: ...}")
    """Further cost types, by name: a cost per level and a budget per user."""
    groups: dict[str, GroupCapBlock] = Field(default_factory=dict, description="a mapping of name to "
                                             "{feature: ..., equals: ..., budget_per_capita: ...}")
    """Caps on the incentive cost of groups of users, by name."""

    def cost_types(self, n_levels: int) -> dict[str, tuple[list[float], float]]:
        """{name: (the cost of each of the `n_levels` levels, the budget per user decided for)} of every
        budget on a fixed cost per level, in the order the multipliers are solved and stored: what the
        decisions and the service keep next to the incentive budget (the group caps are on the
        incentive cost)."""
        return {name: (list(c.levels), c.budget_per_capita) for name, c in self.costs.items()}


REACTIONS = ("warn", "retrain", "fallback", "stop_export")
MONITORING_CHECKS = ("realized_vs_predicted", "effect_below_zero", "population_drift", "compliance", "freshness")


class ReactionsBlock(_Block):
    """What a failed monitoring check does (docs/monitoring.md): `warn` (the check fails, nothing else),
    `retrain` (the days before the change are down-weighted and the campaign is refreshed at once, the
    champion chosen afresh), `fallback` (the previous champion decides again) or `stop_export` (nothing
    is exported; the last decision stays, flagged)."""

    realized_vs_predicted: Literal[REACTIONS] = Field("warn", description=" | ".join(REACTIONS))
    """When the realized response or spend falls outside the prediction."""
    effect_below_zero: Literal[REACTIONS] = Field("warn", description=" | ".join(REACTIONS))
    """When the effect's upper bound is below 0 over the last `effect_days` days."""
    population_drift: Literal[REACTIONS] = Field("warn", description=" | ".join(REACTIONS))
    """When the users decided for drift away from the training events."""
    compliance: Literal[REACTIONS] = Field("warn", description=" | ".join(REACTIONS))
    """When the coupon system applied too few decisions."""
    freshness: Literal[REACTIONS] = Field("warn", description=" | ".join(REACTIONS))
    """When a decided day's events are late or the decision is too old."""


class MonitoringBlock(_Block):
    """The outcomes of the deployed decisions and their checks (docs/monitoring.md)."""

    confidence: float = Field(0.9, gt=0.5, lt=1, description="a number in (0.5, 1): the confidence of the effect's "
                              "interval (a confidence sequence: valid under daily looks)")
    """Confidence of the effect's interval and of the realized-against-predicted comparison."""
    planned_events: int = Field(20000, ge=100, description="an integer >= 100: the number of events at which the "
                                "effect's confidence sequence is tightest")
    """The events (over the deployed days) at which the effect's confidence sequence is tightest."""
    budget: float | None = Field(None, gt=0, description="a number > 0: the budget whose decision file the coupon "
                                 "system applies (default: a period budget's paced file, else the only budget)")
    """The per-capita budget whose decision files the coupon system applies, recorded with every export
    (default: the paced file of campaign.yaml `budget:`, else the campaign's only budget; with several
    budgets and none of these, the outcomes refuse each day, naming this key)."""
    realized_tolerance: float = Field(0.15, ge=0, le=5, description="a number in [0, 5]: the relative gap between "
                                      "realized and predicted response or spend tolerated beyond sampling noise")
    """How far (relative) the realized response or spend of a day may be from the prediction, beyond its
    sampling noise, before `realized_vs_predicted` fails."""
    effect_days: int = Field(7, ge=1, description="an integer >= 1: the last N deployed days whose effect is checked")
    """`effect_below_zero` fails when the effect's upper bound over the last `effect_days` deployed days is
    below 0."""
    psi_threshold: float = Field(0.25, gt=0, description="a number > 0: the population-stability index that flags "
                                 "a feature")
    """A feature whose population-stability index (population against the training events) passes this
    is flagged by `population_drift`."""
    out_of_range_share: float = Field(0.02, ge=0, le=1, description="a number in [0, 1]: the share of users outside "
                                      "a numeric feature's training range that flags it")
    """A numeric feature with more than this share of users outside its training range is flagged."""
    new_category_share: float = Field(0.01, ge=0, le=1, description="a number in [0, 1]: the share of users in "
                                      "categories never trained on that flags a feature")
    """A categorical feature with more than this share of users in categories never seen is flagged."""
    min_compliance: float = Field(0.9, ge=0, le=1, description="a number in [0, 1]: the share of decisions the "
                                  "coupon system must apply")
    """`compliance` fails when the share of events at their decided level is below this."""
    grace_days: int = Field(1, ge=0, description="an integer >= 0: days a decided day's events may be late")
    """A decided day's events are late when they have not arrived `grace_days` days after the day ends
    (or after the decision was made, if later)."""
    max_decision_age_days: float = Field(2.0, gt=0, description="a number > 0: the age in days of the decision in "
                                         "force past which `freshness` fails")
    """`freshness` fails when the decision in force (the newest whose export was not stopped: what the outbox
    holds and `promo serve` serves) is older than this."""
    reactions: ReactionsBlock = Field(default_factory=ReactionsBlock, description="a mapping of check name to "
                                      + " | ".join(REACTIONS))
    """What each failed check does (default: warn)."""
    fallback_without_previous: Literal["warn", "retrain", "stop_export"] = Field(
        "warn", description="warn | retrain | stop_export: what a `fallback` reaction does when the campaign has "
        "had no other champion")
    """A `fallback` reaction needs a previous champion to decide again. When the campaign has had only its
    current champion, the failed check says so and reacts with this instead: `warn` (the champion keeps
    deciding), `retrain` or `stop_export`."""
    stale_weight: float = Field(0.1, gt=0, le=1, description="a number in (0, 1]: the weight of the events before a "
                                "detected change when the campaign retrains (0 would leave no weight to train on)")
    """With `retrain`, the training events before the detected change keep this share of their weight."""
    stale_scope: Literal["all", "segments"] = Field("all", description="'all' or 'segments': which events before a "
                                                  "detected change are down-weighted, with retrain")
    """With `retrain`: `all` down-weights every training event before the change day; `segments` only those
    of the segments (values of a categorical feature) whose response was off its prediction during the
    failure of realized_vs_predicted (all events when no segment was)."""
    change_explore_share: float | None = Field(None, gt=0, le=0.5, description="a number in (0, 0.5]: the "
                                               "exploration share on the days after a detected change, with retrain "
                                               "(default: exploration.share)")
    """With `retrain`, the exploration share of the decisions for the `change_explore_days` days after the
    change day (when larger than exploration.share): more users get a random level, so that the changed
    response is learned sooner; each explored user costs value (bounded: at most 0.5)."""
    change_explore_days: int = Field(3, ge=1, le=14, description="an integer in [1, 14]: the days after a "
                                     "detected change that explore with change_explore_share")
    """How many decided days after the change day explore with `change_explore_share`."""
    settle_days: int = Field(3, ge=1, description="an integer >= 1: the passing deployed days in a row that end a "
                             "check's failure (a later failure is a new change)")
    """A failing check that passes on fewer than this many deployed days in a row is still the same failure:
    its change day (the start of the retrain window) stays; after as many passing days, a new failure is a
    new change."""


@dataclass(frozen=True)
class _Levels:
    """The levels of a `treatments` block as the pipeline reads them (`CampaignConfig`'s properties)."""

    incentives: tuple[float, ...]
    labels: tuple[str, ...]
    ordered: bool
    attributes: tuple[str, ...] = ()
    directions: tuple[str, ...] = ()
    level_attributes: tuple[tuple[float, ...], ...] = ()


class CampaignConfig(_Block):
    """A campaign's configuration: the whole of its campaign.yaml (every key, its type, range and
    default; the keys are the file's keys) and the campaign's name (its folder's, never a key of the
    file). Frozen; the validators normalise what the file may write in several ways, once: the
    budgets as a tuple of floats (one number stands for a one-element list), an absent block as its
    defaults, the binary response's default plausible rate.

    Derived, read-only: `incentives[level]` is the amount of incentive level `level` (for unordered
    arms: the arm's unit cost; for multi-attribute levels the value of the cost attribute
    `treatments.cost.attribute`); `labels[level]` is how the events' `treatment` column writes the
    level (the amount, the arm's label, or the level's index for multi-attribute levels). Levels are
    indexed 0..K-1; level 0 is the lowest incentive (the control when it is 0). Multi-attribute
    campaigns (docs/data-contract.md "Multi-attribute incentives"): `attributes`, their `directions`
    and `level_attributes[level]`; `attribute_names`, `attribute_matrix()` and `attribute_signs()` also
    describe a single-amount campaign (one attribute 'amount', increasing).

    This module validates the file's schema only; what the `models:` block names (registered models,
    their hyper-parameters) is checked by the model registry where the pipeline loads the file
    (`promo_assets.ingestion.load_config`)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)
    NOT_IN_FILE: ClassVar[tuple[str, ...]] = ("campaign",)  # fields that are no key of campaign.yaml

    campaign: str = Field(description="the campaign's name: its folder under the landing root (not a key of the file)")
    """The campaign's name, its folder's (set by the loader; campaign.yaml has no such key)."""
    treatments: TreatmentsBlock = Field(
        description="a mapping with 'levels: [amounts...]' or 'arms: {label: unit_cost}'")
    """What the campaign can give each user: ordered incentive levels or unordered arms."""
    cost: Literal[COST_RULES] = Field("redeemed", description=" | ".join(COST_RULES))
    """How a user's cost follows from the events: `redeemed` = incentive x response (paid when
    used), `assigned` = the incentive (paid when given), `column` = the events' `cost` column."""
    randomized: bool = Field(True, description="true or false (a YAML boolean, not a quoted string)")
    """`true`: a randomized experiment (the events' `propensity` column, or the empirical share of
    each level); `false`: observational logs, propensities estimated from the features."""
    response: Literal[RESPONSE_TYPES] = Field("binary", description=" | ".join(RESPONSE_TYPES))
    """The response's type: `binary` (0/1), `count` (0, 1, 2, ...) or `continuous`; picks the
    models' loss."""
    budget_per_capita: Budgets | None = Field(
        (), description="a number > 0 or a non-empty list of numbers > 0")
    """The budgets, per user, that the allocation and the evaluation use (one allocation per budget)."""
    holdout_days: int = Field(1, ge=1, description="an integer >= 1")
    """The last N days are held out: never trained on, used for the offline evaluation."""
    validation_fraction: float = Field(0.2, ge=0, lt=1, description="a number in [0, 1)")
    """Share of the users (by a hash of `user_id`) in the validation split, for early stopping."""
    ips_clip: float = Field(20.0, ge=1, description="a number >= 1 (the cap on 1 / propensity)")
    """Cap on the inverse propensity 1 / p used as the IPS weight."""
    max_rejected_fraction: float = Field(0.0, ge=0, le=1, description="a number in [0, 1]")
    """Share of rejected rows a day file may have and still load (its valid rows); 0: one bad row
    refuses the file. Rejected rows are kept in `rejected_events` with their reason."""
    min_holdout_users: int = Field(100, ge=1, description="an integer >= 1")
    """A holdout with fewer users is still evaluated but flagged "too small to evaluate"."""
    min_events_per_level: int = Field(
        30, ge=1, description="an integer >= 1 (logged events a level or arm needs in the training days before the "
        "data check events_per_level passes)")
    """Logged events a level or arm needs in the training days before the data check `events_per_level`
    passes; a level below it is flagged (fewer than two logged levels at all skips every model)."""
    plausible_response_rate: Annotated[list[Annotated[float, Field(ge=0)]], Field(min_length=2, max_length=2),
                                       AfterValidator(_ascending_pair)] | None = Field(
        None, validate_default=True,
        description="[low, high], two numbers >= 0 with low <= high: the range of the mean response the data "
        f"check response_rate accepts (default {list(DEFAULT_RESPONSE_RATE)} for a binary response, none otherwise)")
    """The range of the mean training response the data check `response_rate` accepts (default
    [0.001, 0.95] for a binary response, no check otherwise); outside it the check warns."""
    features: dict[str, Literal[FEATURE_KINDS]] | None = Field(
        default_factory=dict, description="a mapping of column name to 'numeric' or 'categorical'")
    """Force a feature column's kind; otherwise numbers are numeric, text and booleans categorical."""
    ratio_budget: Budgets | None = Field(
        None, description="a number > 0 or a non-empty list of numbers > 0 (average incentive per response)")
    """Customer-merchant campaigns: ratio budgets for the joint allocation, total incentive / total
    response at most this value."""
    merchants: MerchantsBlock | None = Field(None, description="a mapping (the merchant side of a bipartite campaign)")
    """The merchant side of a customer-merchant campaign (turns on `gnn_hazard` and the joint allocation)."""
    graph: GraphBlock | None = Field(None, description="a mapping with 'edges' and 'weight'")
    """A record of the customer-merchant graph's layout (written by `promo simulate`)."""
    models: ModelsBlock | None = Field(
        default_factory=ModelsBlock, description="a mapping with optional 'include', 'exclude' (model names) and 'params'")
    """Which registered models this campaign trains, and their hyper-parameters."""
    segments: Annotated[list[Annotated[str, Field(min_length=1)]], AfterValidator(_unique)] | None = Field(
        (), description="a list of feature column names (e.g. [period_of_day, city]), each at most once")
    """Feature columns evaluated per value (simulated campaigns: the table `segment_evaluation`)."""
    champion: ChampionBlock | None = Field(
        default_factory=ChampionBlock, description="a mapping with optional 'confidence', 'pin', 'candidates', 'blends'")
    """How the champion is chosen among the models' policies (docs: decisions)."""
    exploration: ExplorationBlock | None = Field(
        default_factory=ExplorationBlock, description="a mapping with optional 'share', 'seed', 'mix', 'tolerance'")
    """The randomized share of the exported decisions that keeps the next days an RCT (docs: decisions)."""
    budget: BudgetBlock | None = Field(
        None, description="a mapping with 'total' or 'per_day', 'start', 'end' and optional 'controller', 'gain'")
    """A budget for a period, paced day by day next to the per-capita budgets (docs: pacing)."""
    constraints: ConstraintsBlock | None = Field(
        None, description="a mapping with optional 'costs' (further cost types) and 'groups' (group caps)")
    """Further budgets the champion's decisions keep: other cost types and group caps (docs: decisions)."""
    monitoring: MonitoringBlock | None = Field(
        default_factory=MonitoringBlock, description="a mapping with optional 'confidence', 'budget', thresholds and 'reactions'")
    """The outcomes of the deployed decisions, their checks and what a failed check does (docs: monitoring)."""
    simulation: dict[str, Any] | None = Field(None, description="a mapping (written by `promo simulate`)")
    """Provenance written by `promo simulate` (preset, seed, sizes); not read by the pipeline."""
    simulator: dict[str, Any] | None = Field(None, description="a mapping (written by `promo simulate`)")
    """The simulator's parameters, written by `promo simulate`; not read by the pipeline."""

    # ---- normalised once, where the file is read
    @field_validator("budget_per_capita", "ratio_budget", mode="after")
    @classmethod
    def _budgets(cls, value: Any, info: ValidationInfo) -> tuple[float, ...] | None:
        if value is None:
            return () if info.field_name == "budget_per_capita" else None
        return tuple(float(x) for x in value)

    @field_validator("segments", mode="after")
    @classmethod
    def _segments(cls, value: Any) -> tuple[str, ...]:
        return () if value is None else tuple(value)

    @field_validator("plausible_response_rate", mode="after")
    @classmethod
    def _rate(cls, value: Any, info: ValidationInfo) -> tuple[float, float] | None:
        if value is None:
            return DEFAULT_RESPONSE_RATE if info.data.get("response", "binary") == "binary" else None
        return (float(value[0]), float(value[1]))

    @field_validator("features", mode="after")
    @classmethod
    def _features(cls, value: Any) -> dict[str, str]:
        return {} if value is None else value

    @field_validator("models", "champion", "exploration", "monitoring", mode="after")
    @classmethod
    def _block_defaults(cls, value: Any, info: ValidationInfo) -> Any:
        return cls.model_fields[info.field_name].default_factory() if value is None else value

    @field_validator("constraints", mode="after")
    @classmethod
    def _constraints(cls, value: Any) -> ConstraintsBlock | None:
        return value if value is not None and (value.costs or value.groups) else None

    @field_serializer("budget_per_capita", "ratio_budget", "segments", "plausible_response_rate")
    def _listed(self, value: Any) -> list | None:
        """As the file writes them (none given: no key, null)."""
        return list(value) if value else None

    # ---- the levels, derived from `treatments`
    @cached_property
    def _levels(self) -> "_Levels":
        """The levels of `treatments`, read once."""
        t = self.treatments
        if t.levels is not None and _levels_kind(t.levels) == "attribute_rows":
            attributes = tuple(t.attributes or ())
            cost_attr = t.cost.attribute if t.cost is not None else "amount"
            return _Levels(tuple(float(row[cost_attr]) for row in t.levels), tuple(str(i) for i in range(len(t.levels))),
                           False, attributes, tuple(a.monotone for a in (t.attributes or {}).values()),
                           tuple(tuple(float(row[a]) for a in attributes) for row in t.levels))
        if t.levels is not None:
            incentives = tuple(float(x) for x in t.levels)
            return _Levels(incentives, tuple(_label(x) for x in incentives), True)
        return _Levels(tuple(float(v) for v in t.arms.values()), tuple(str(k) for k in t.arms), False)

    @property
    def incentives(self) -> tuple[float, ...]:
        return self._levels.incentives

    @property
    def labels(self) -> tuple[str, ...]:
        return self._levels.labels

    @property
    def ordered(self) -> bool:
        """True for ascending amounts (`treatments.levels`), False for arms and multi-attribute levels."""
        return self._levels.ordered

    @property
    def attributes(self) -> tuple[str, ...]:
        return self._levels.attributes

    @property
    def directions(self) -> tuple[str, ...]:
        return self._levels.directions

    @property
    def level_attributes(self) -> tuple[tuple[float, ...], ...]:
        return self._levels.level_attributes

    @property
    def n_levels(self) -> int:
        return len(self.incentives)

    @property
    def level_kind(self) -> str:
        """How the levels are given, in words (for skip reasons): ordered amounts, unordered arms, or
        multi-attribute levels (their attribute names)."""
        if self.attributes:
            return f"multi-attribute levels ({', '.join(self.attributes)})"
        return "ordered incentive amounts" if self.ordered else "unordered arms"

    @property
    def multi_attribute(self) -> bool:
        """True when the levels are given by several attributes (treatments.levels as mappings)."""
        return bool(self.attributes)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        """The incentive attributes a level is made of: the declared ones, ('amount',) for ordered
        single-amount levels, () for unordered arms (no monotone attribute)."""
        if self.attributes:
            return self.attributes
        return ("amount",) if self.ordered else ()

    def attribute_matrix(self) -> "np.ndarray":
        """K x A float64 matrix of each level's attribute values (columns: `attribute_names`)."""
        import numpy as np

        if self.attributes:
            return np.asarray(self.level_attributes, dtype=np.float64).reshape(self.n_levels, len(self.attributes))
        if self.ordered:
            return np.asarray(self.incentives, dtype=np.float64).reshape(-1, 1)
        return np.zeros((self.n_levels, 0))

    def attribute_directions(self) -> tuple[str, ...]:
        """The monotone direction of each of `attribute_names` (increasing | decreasing | none)."""
        if self.attributes:
            return self.directions
        return ("increasing",) if self.ordered else ()

    def attribute_signs(self) -> "np.ndarray":
        """The monotonicity indicator t per attribute: +1 increasing, -1 decreasing, 0 none (int64)."""
        import numpy as np

        sign = {"increasing": 1, "decreasing": -1, "none": 0}
        return np.asarray([sign[d] for d in self.attribute_directions()], dtype=np.int64)

    def level_of(self, treatment: Any) -> int | None:
        """The level index of a treatment value (amount or arm label), or None when unknown."""
        key = _label(treatment)
        try:
            return self.labels.index(key)
        except ValueError:
            return None

    # ---- stored and read back
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (every key, dates as text): what a stored artefact keeps of the config;
        `from_record` reads it back."""
        return self.model_dump(mode="json")

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "CampaignConfig":
        """The config `to_dict` wrote (e.g. into a model artefact). A record of an earlier version
        (levels as `incentives` / `labels` / `ordered`, `budgets_per_capita`, blocks under 'extra') is
        read too."""
        record = dict(record)
        record.update(record.pop("extra", None) or {})
        if "treatments" not in record:
            record = _earlier_record(record)
        known = set(cls.model_fields)
        return cls.model_validate_json(json.dumps({k: v for k, v in record.items() if k in known}, default=str))

    @classmethod
    def load(cls, path: str | Path, campaign: str | None = None) -> "CampaignConfig":
        """Read (`read_campaign_yaml`: a regular file, no link, bounded YAML) and validate a
        campaign.yaml; `path` may also be the campaign's folder."""
        path = Path(path)
        if path.name != "campaign.yaml" and path.is_dir() and not path.is_symlink():
            path = path / "campaign.yaml"
        raw = read_campaign_yaml(path)
        return cls.from_dict({} if raw is None else raw, campaign=campaign or path.parent.name, source=str(path))

    @classmethod
    def from_dict(cls, raw: Any, campaign: str, source: str = "campaign.yaml") -> "CampaignConfig":
        """Validate a parsed campaign.yaml; CampaignConfigError names every problem (key, value,
        expected type or range; the closest valid key for an unknown one)."""
        try:
            check_campaign_name(campaign)
        except CampaignNameError as exc:
            raise CampaignNameError(f"{source}: {exc}") from None
        if not isinstance(raw, dict):
            raise CampaignConfigError(
                f"{source}: expected a mapping of keys (treatments:, cost:, ...) at the top level, "
                f"got a {type(raw).__name__}: {short_repr(raw, 80)}")
        bad_keys = [k for k in raw if not isinstance(k, str)]
        if bad_keys:
            raise CampaignConfigError(f"{source}: top-level keys must be text, got {short_repr(bad_keys[0])}")
        if "campaign" in raw:
            raise CampaignConfigError(f"{source}: unknown key 'campaign' (a campaign is named by its folder, here "
                                      f"{campaign!r})")
        problems = _control_character_problems(raw)
        if problems:
            raise CampaignConfigError(f"{source}: {_counted(problems)}" + " (control characters such as escape, tab "
                                      "or newline are refused in campaign.yaml's keys and text)")
        try:
            config = cls.model_validate({**raw, "campaign": campaign})
        except ValidationError as exc:
            raise CampaignConfigError(f"{source}: {_counted(_schema_messages(exc))}") from None
        problems = _attribute_problems(config.treatments) or _decision_problems(config)
        if problems:
            raise CampaignConfigError(f"{source}: {_counted(problems)}")
        return config


def _counted(problems: list[str]) -> str:
    """The problems joined, headed by their number when there are several."""
    return (f"{len(problems)} problems: " if len(problems) > 1 else "") + "; ".join(problems)


def _earlier_record(record: dict[str, Any]) -> dict[str, Any]:
    """A config record of an earlier version (the levels as incentives, labels, ordered and the
    attribute fields; `budgets_per_capita`) in today's keys."""
    r = dict(record)
    incentives = [float(x) for x in r.pop("incentives")]
    labels = [str(x) for x in r.pop("labels")]
    ordered = r.pop("ordered", True)
    attributes = list(r.pop("attributes", None) or ())
    directions = list(r.pop("directions", None) or ())
    rows = [list(row) for row in r.pop("level_attributes", None) or ()]
    if attributes:
        cost = next((a for i, a in enumerate(attributes) if [row[i] for row in rows] == incentives), "amount")
        r["treatments"] = {"levels": [dict(zip(attributes, row)) for row in rows],
                           "attributes": {a: {"monotone": d} for a, d in zip(attributes, directions)},
                           **({"cost": {"attribute": cost}} if cost != "amount" else {})}
    elif ordered:
        r["treatments"] = {"levels": incentives}
    else:
        r["treatments"] = {"arms": dict(zip(labels, incentives))}
    if "budgets_per_capita" in r:
        r["budget_per_capita"] = list(r.pop("budgets_per_capita")) or None
    return r



def _schema_messages(exc: ValidationError) -> list[str]:
    """One message per schema violation: the key (dotted path), the value, what is expected."""
    out = []
    for err in exc.errors():
        loc = err["loc"]
        model: type[BaseModel] | None = CampaignConfig
        parent_fields: list[str] = []
        path, expected, mapping_of = "", None, None
        for item in loc:
            if item in _LEVEL_TAGS:  # the tag of the levels union is no key of the file
                continue
            if isinstance(item, int):
                path += f"[{item}]"
                continue
            path = f"{path}.{item}" if path else str(item)
            if mapping_of is not None:  # a free key of a mapping of blocks (treatments.attributes.NAME)
                model, mapping_of = mapping_of, None
                parent_fields = list(model.model_fields)
                continue
            fields = model.model_fields if model is not None else {}
            parent_fields = [f for f in fields if f not in getattr(model, "NOT_IN_FILE", ())] or parent_fields  # the keys valid where `item` stands
            if item in fields:
                info = fields[item]
                expected = info.description or expected
                model = _submodel(info.annotation)
                if model is not None and _is_mapping(info.annotation):
                    mapping_of, model = model, None
            else:
                model = None
        value = err.get("input")
        kind = err["type"]
        if kind == "extra_forbidden":
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            name = str(loc[-1])
            close = difflib.get_close_matches(name, parent_fields, n=1, cutoff=0.6)
            where = f" under '{parent}'" if parent else ""
            hint = f"did you mean '{close[0]}'?" if close else f"valid keys{where}: {', '.join(parent_fields)}"
            out.append(f"unknown key '{path}' ({hint})")
        elif kind == "missing":
            out.append(f"missing required key '{path}': expected {expected}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            shown = short_repr(value)
            typ = type(value).__name__
            target = f"'{path}'" if path else "the top level"
            out.append(f"{target} = {shown} ({typ}): {msg[0].lower() + msg[1:]}; expected {expected}")
    return out


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 8, 8, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 80, 80, 40


def short_repr(value: Any, limit: int = 120) -> str:
    """repr of a value from a file, bounded however large or deep the value is (reprlib looks at no
    more than a few items per level and 3 levels: an expanded alias structure is never formatted)."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_mapping(annotation: Any) -> bool:
    """True for `dict[str, Model]` (or `... | None`): its keys are free names, its values blocks."""
    import typing

    for arg in (annotation, *(getattr(annotation, "__args__", ()) or ())):
        if typing.get_origin(arg) is dict:
            return True
    return False


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (`Model`, `Model | None`, `dict[str, Model] | None`), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        inner = _submodel(arg) if getattr(arg, "__args__", None) else None
        if inner is not None:
            return inner
    return None


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently). A YAML
    merge key (`<<: *defaults`) merges as YAML says: the keys written in the mapping override the merged ones."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # SafeLoader's flatten_mapping merges it
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.add(key) if isinstance(key, (str, int, float, bool)) else None
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node):
        """A date that does not exist (`2026-02-30`) stays its text, so that the schema refuses it
        naming its key (PyYAML itself raises a bare ValueError)."""
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError:
            return self.construct_scalar(node)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", _UniqueKeyLoader.construct_yaml_timestamp)


def _control_character_problems(value: Any, path: str = "") -> list[str]:
    """Every key or text value of a parsed campaign.yaml holding a control character (an arm label
    with a terminal escape sequence, a newline in a group's name), named by its dotted key; such
    text would reach a terminal, the outbox and the UI as it is."""
    out: list[str] = []
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack and len(out) < 10:
        item, where = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                key = f"{where}.{k}" if where else str(k)
                if isinstance(k, str) and control_characters(k):
                    out.append(f"key {short_repr(key)} holds control character(s) {', '.join(control_characters(k))}")
                    continue
                stack.append((v, key))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, str) and control_characters(item):
            out.append(f"'{where}' = {short_repr(item)}: holds control character(s) "
                       f"{', '.join(control_characters(item))}")
    return out


# --------------------------------------------------------------------------------------------
# reading campaign.yaml: a regular file, parsed with limits before anything is validated


def read_campaign_yaml(path: Path) -> Any:
    """The parsed YAML of a campaign.yaml. CampaignConfigError naming the file when it is missing,
    a folder, a link, a FIFO or other special file (never opened), larger than YAML_MAX_BYTES, not
    UTF-8, not valid YAML, nested deeper than YAML_MAX_DEPTH, using more than YAML_MAX_ALIASES
    aliases or holding more than YAML_MAX_VALUES values once its aliases are expanded."""
    path = Path(path)
    return parse_campaign_yaml(campaign_yaml_text(path), path)


def campaign_yaml_text(path: Path) -> str:
    """The text of a campaign.yaml (`read_campaign_yaml`'s read: a regular file in its folder, no
    link, at most YAML_MAX_BYTES, UTF-8); CampaignConfigError naming the file otherwise."""
    path = Path(path)
    try:
        text = files.read_text(path, YAML_MAX_BYTES, below=path.parent, what="campaign.yaml")
    except FileNotFoundError:
        raise CampaignConfigError(f"{path}: campaign.yaml not found") from None
    except files.UnsafeFileError as exc:
        raise CampaignConfigError(f"{exc}; campaign.yaml must be a regular file in the campaign folder") from None
    except UnicodeDecodeError as exc:
        raise CampaignConfigError(f"{path}: cannot be read as UTF-8 text (byte {exc.start}: {exc.reason}); "
                                  "save campaign.yaml as UTF-8") from None
    except (OSError, ValueError) as exc:
        raise CampaignConfigError(str(exc) if str(path) in str(exc) else f"{path}: cannot be read: {exc}") from None
    return text


def parse_campaign_yaml(text: str, path: Path) -> Any:
    """The parsed YAML of a campaign.yaml's text (`read_campaign_yaml`'s parse, within the YAML_MAX_*
    limits); CampaignConfigError naming `path` otherwise."""
    try:
        return _bounded_yaml(text, path)
    except yaml.YAMLError as exc:
        raise CampaignConfigError(f"{path}: not valid YAML: {exc}") from None


def _bounded_yaml(text: str, path: Path) -> Any:
    """Parse `text` (PyYAML's safe loader, keys given twice refused) within the YAML_MAX_* limits.
    The events are scanned first (nesting depth, alias count: no recursion, nothing built), then the
    node graph is composed and its expanded size counted (each shared node once) before any Python
    object is constructed, so neither deep nesting nor an alias bomb costs more than the file's size."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=_UniqueKeyLoader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > YAML_MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise CampaignConfigError(f"{path}: mappings and lists nested more than {YAML_MAX_DEPTH} deep "
                                          f"(line {line}); campaign.yaml needs at most a few levels")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > YAML_MAX_ALIASES:
                raise CampaignConfigError(f"{path}: more than {YAML_MAX_ALIASES} YAML aliases (*name); refused")
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, path)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, path: Path) -> None:
    """CampaignConfigError when the node graph, with every alias expanded, holds more than
    YAML_MAX_VALUES nodes, nests deeper than YAML_MAX_DEPTH or refers to itself. Iterative, each
    node counted once (memoized)."""
    size: dict[int, int] = {}
    deep: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        if isinstance(node, yaml.MappingNode):
            return [n for pair in node.value for n in pair]
        return []

    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            deep[key] = 1 + max((deep[id(k)] for k in kids), default=0)
            open_nodes.discard(key)
            if size[key] > YAML_MAX_VALUES:
                raise CampaignConfigError(
                    f"{path}: its aliases (*name) expand to more than {YAML_MAX_VALUES:,} values; refused (an alias "
                    "bomb?); write the values out or use fewer aliases")
            if deep[key] > YAML_MAX_DEPTH + 1:
                raise CampaignConfigError(f"{path}: with its aliases expanded, mappings and lists nest more than "
                                          f"{YAML_MAX_DEPTH} deep; refused")
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise CampaignConfigError(f"{path}: a YAML alias refers to the structure that contains it (a cycle); refused")
        open_nodes.add(key)
        stack.append((node, True))
        for child in children(node):
            if id(child) in open_nodes:
                raise CampaignConfigError(f"{path}: a YAML alias refers to the structure that contains it (a cycle); "
                                          "refused")
            if id(child) not in size:
                stack.append((child, False))


# --------------------------------------------------------------------------------------------
# CampaignConfig


def _decision_problems(config: "CampaignConfig") -> list[str]:
    """Cross-key problems of the `champion:`, `constraints:`, `exploration:` and `monitoring:` blocks: a pin
    outside the candidates, a cost type or a mix without one value per level, a deployed budget that is not
    one of the campaign's. (Whether the names are registered models is the model registry's check,
    `registry.check_champion_block`, run where the pipeline loads the file.)"""
    out = []
    n_levels, champion = config.n_levels, config.champion
    if champion.guard in ("shrink", "equal") and champion.guard_level > 1:
        out.append(f"'champion.guard_level' = {champion.guard_level:g} with guard {champion.guard} must be at most 1 "
                   "(the share of the weight moved)")
    if champion.pin and champion.candidates and champion.pin not in champion.candidates:
        out.append(f"'champion.pin' = {champion.pin!r} is not one of 'champion.candidates' "
                   f"({', '.join(champion.candidates)})")
    for name, cost in (config.constraints.costs if config.constraints else {}).items():
        if len(cost.levels) != n_levels:
            out.append(f"'constraints.costs.{name}.levels' = {cost.levels!r}: expected {n_levels} numbers >= 0 (one "
                       "per incentive level)")
    mix = config.exploration.mix
    if mix is not None and (len(mix) != n_levels or not sum(mix) > 0):
        out.append(f"'exploration.mix' = {mix!r}: expected {n_levels} weights >= 0 (one per incentive level) with a "
                   "positive sum")
    deployed, budgets = config.monitoring.budget, config.budget_per_capita
    if deployed is not None and budgets and not any(math.isclose(deployed, b, rel_tol=1e-9) for b in budgets):
        out.append(f"'monitoring.budget' = {deployed:g} is not one of the campaign's budgets ('budget_per_capita': "
                   f"{', '.join(f'{b:g}' for b in budgets)}): it names the budget whose decisions were deployed")
    if config.cost == "assigned" and budgets and (mix is None or (len(mix) == n_levels and sum(mix) > 0)):
        out += _unaffordable_shares(config, min(budgets), mix)
    return out


def _unaffordable_shares(config: "CampaignConfig", budget: float, mix) -> list[str]:
    """With `cost: assigned` a level's cost is its incentive, known before any event: an exploration share
    (exploration.share, monitoring.change_explore_share) whose explored users' expected cost plus the cheapest
    level of the others exceeds the smallest budget can never be decided, and is refused when the file is
    loaded. (With the other cost rules the cost depends on the response: the decision refuses it, naming the
    same key.)"""
    incentives = [float(x) for x in config.incentives]
    weights = [1.0 / len(incentives)] * len(incentives) if mix is None else [w / sum(mix) for w in mix]
    explored = sum(w * x for w, x in zip(weights, incentives))
    out = []
    for key, share in (("exploration.share", config.exploration.share),
                       ("monitoring.change_explore_share", config.monitoring.change_explore_share)):
        if share and share * explored + (1 - share) * min(incentives) > budget * (1 + 1e-9):
            out.append(f"'{key}' = {share:g} cannot be paid for at budget {budget:g} per capita (cost: assigned): the "
                       f"explored users' levels cost {share * explored:.4g} per capita and the cheapest level of the "
                       f"others {(1 - share) * min(incentives):.4g}; lower it, give exploration.mix more weight on "
                       "cheap levels, or raise budget_per_capita")
    return out


def _label(value: Any) -> str:
    """Canonical text of a treatment value: amounts as the shortest float text ('2', '0.5')."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        f = float(value)
        return str(int(f)) if f.is_integer() else repr(f)
    text = str(value).strip()
    try:
        f = float(text)
    except ValueError:
        return text
    if math.isfinite(f):
        return str(int(f)) if f.is_integer() else repr(f)
    return text


def dump_campaign_yaml(path: Path, body: dict[str, Any]) -> None:
    """Write a campaign.yaml (used by the simulator)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(body, sort_keys=False))
