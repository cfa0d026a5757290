"""`campaign.yaml`: what a campaign's treatments, cost rule, response type and budgets are.

A campaign is a folder under the landing root (see DESIGN.md, "Data contract"). This module only
parses and validates its configuration; it never touches the warehouse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Any

import yaml

COST_RULES = ("redeemed", "assigned", "column")
RESPONSE_TYPES = ("binary", "count", "continuous")


class CampaignConfigError(ValueError):
    """campaign.yaml is missing, unreadable or says something impossible."""


@dataclass(frozen=True)
class CampaignConfig:
    """Parsed campaign.yaml.

    `incentives[level]` is the amount of incentive level `level` (for unordered arms: the arm's unit
    cost); `labels[level]` is how the treatment is written in the events' `treatment` column.
    Levels are indexed 0..K-1; level 0 is the lowest incentive (the control when it is 0).
    """

    campaign: str
    incentives: tuple[float, ...]
    labels: tuple[str, ...]
    ordered: bool = True
    cost: str = "redeemed"
    randomized: bool = True
    response: str = "binary"
    budgets_per_capita: tuple[float, ...] = ()
    holdout_days: int = 1
    validation_fraction: float = 0.2
    ips_clip: float = 20.0
    max_rejected_fraction: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_levels(self) -> int:
        return len(self.incentives)

    def level_of(self, treatment: Any) -> int | None:
        """The level index of a treatment value (amount or arm label), or None when unknown."""
        key = _label(treatment)
        try:
            return self.labels.index(key)
        except ValueError:
            return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, path: str | Path, campaign: str | None = None) -> "CampaignConfig":
        path = Path(path)
        if path.is_dir():
            path = path / "campaign.yaml"
        if not path.exists():
            raise CampaignConfigError(f"{path}: campaign.yaml not found")
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise CampaignConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(raw, dict):
            raise CampaignConfigError(f"{path}: expected a mapping at the top level")
        return cls.from_dict(raw, campaign=campaign or path.parent.name, source=str(path))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], campaign: str, source: str = "campaign.yaml") -> "CampaignConfig":
        def fail(msg: str) -> CampaignConfigError:
            return CampaignConfigError(f"{source}: {msg}")

        treatments = raw.get("treatments")
        if not isinstance(treatments, dict) or not ({"levels", "arms"} & set(treatments)):
            raise fail("'treatments' must have 'levels: [amounts...]' or 'arms: {label: unit_cost}'")
        if "levels" in treatments:
            levels = treatments["levels"]
            if not isinstance(levels, list) or len(levels) < 2:
                raise fail("'treatments.levels' must be a list of at least two amounts")
            try:
                incentives = tuple(float(x) for x in levels)
            except (TypeError, ValueError):
                raise fail(f"'treatments.levels' must be numbers, got {levels!r}") from None
            if any(not math.isfinite(x) or x < 0 for x in incentives):
                raise fail(f"'treatments.levels' must be finite and >= 0, got {levels!r}")
            if any(b <= a for a, b in zip(incentives, incentives[1:])):
                raise fail(f"'treatments.levels' must be strictly ascending, got {levels!r}")
            labels = tuple(_label(x) for x in incentives)
            ordered = True
        else:
            arms = treatments["arms"]
            if not isinstance(arms, dict) or len(arms) < 2:
                raise fail("'treatments.arms' must map at least two arm labels to a unit cost")
            try:
                incentives = tuple(float(v) for v in arms.values())
            except (TypeError, ValueError):
                raise fail(f"'treatments.arms' unit costs must be numbers, got {arms!r}") from None
            if any(not math.isfinite(x) or x < 0 for x in incentives):
                raise fail(f"'treatments.arms' unit costs must be finite and >= 0, got {arms!r}")
            labels = tuple(str(k) for k in arms)
            ordered = False

        cost = raw.get("cost", "redeemed")
        if cost not in COST_RULES:
            raise fail(f"'cost' must be one of {COST_RULES}, got {cost!r}")
        response = raw.get("response", "binary")
        if response not in RESPONSE_TYPES:
            raise fail(f"'response' must be one of {RESPONSE_TYPES}, got {response!r}")
        budgets = raw.get("budget_per_capita", [])
        budgets = budgets if isinstance(budgets, list) else [budgets]
        try:
            budgets_t = tuple(float(b) for b in budgets)
        except (TypeError, ValueError):
            raise fail(f"'budget_per_capita' must be a number or a list of numbers, got {budgets!r}") from None
        if any(not math.isfinite(b) or b < 0 for b in budgets_t):
            raise fail(f"'budget_per_capita' must be finite and >= 0, got {budgets!r}")

        known = {
            "treatments", "cost", "randomized", "response", "budget_per_capita", "holdout_days",
            "validation_fraction", "ips_clip", "max_rejected_fraction",
        }
        cfg = cls(
            campaign=campaign,
            incentives=incentives,
            labels=labels,
            ordered=ordered,
            cost=cost,
            randomized=bool(raw.get("randomized", True)),
            response=response,
            budgets_per_capita=budgets_t,
            holdout_days=int(raw.get("holdout_days", 1)),
            validation_fraction=float(raw.get("validation_fraction", 0.2)),
            ips_clip=float(raw.get("ips_clip", 20.0)),
            max_rejected_fraction=float(raw.get("max_rejected_fraction", 0.0)),
            extra={k: v for k, v in raw.items() if k not in known},
        )
        if cfg.holdout_days < 1:
            raise fail("'holdout_days' must be >= 1")
        if not 0.0 <= cfg.validation_fraction < 1.0:
            raise fail("'validation_fraction' must be in [0, 1)")
        if cfg.ips_clip < 1.0:
            raise fail("'ips_clip' must be >= 1 (it caps the inverse propensity)")
        if not 0.0 <= cfg.max_rejected_fraction <= 1.0:
            raise fail("'max_rejected_fraction' must be in [0, 1]")
        return cfg


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
