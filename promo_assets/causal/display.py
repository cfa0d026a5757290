"""What the causal assets show (the propensity, the training frame's data checks), as plain values
(promo_assets.core.display: numbers, text, Markdown, check outcomes); `promo_assets.defs` turns them
into Dagster metadata. No dagster here (domain code)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from promo_assets.causal.checks import frame_checks
from promo_assets.causal.frame import EventPropensity
from promo_assets.causal.weights import ips_weights, propensity_diagnostics, propensity_plot
from promo_assets.config.campaign import CampaignConfig
from promo_assets.core.display import CheckResult, for_people, jsonable, kv_table, png_markdown


def propensity_metadata(events: pd.DataFrame, prop: EventPropensity, config: CampaignConfig, version: str) -> dict:
    """The propensity asset's metadata; an estimated propensity adds its diagnostics and plot."""
    p, levels = prop.propensity, events["level"].to_numpy()
    metadata = {"events": len(events)}
    if prop.proba is not None:
        diag = propensity_diagnostics(prop.proba, levels, ips_weights(p, clip=config.ips_clip))
        metadata["diagnostics"] = kv_table(jsonable(diag))
        metadata["plot"] = png_markdown(propensity_plot(prop.proba, levels), "Estimated propensities per level")
    metadata.update(
        {
            "propensity_version": version,
            "source": kv_table({str(k): int(v) for k, v in pd.Series(prop.source).value_counts().items()}, "events"),
            "min_propensity": for_people(float(np.min(p))),
            "mean_propensity": for_people(float(np.mean(p))),
        }
    )
    return metadata


def frame_check_results(events: pd.DataFrame, split, config: CampaignConfig,
                         warn: Callable[[str], None] | None = None) -> list[CheckResult]:
    """The data checks of promo_assets.causal.checks on the events (level, response) and their split
    (ERROR when no model can learn, else WARN); each failure also told to `warn`."""
    checks = frame_checks(pd.DataFrame({"level": events["level"], "response": events["response"], "split": split}), config)
    for c in checks:
        if not c.passed and warn is not None:
            warn(f"data check {c.name} failed ({c.severity}): {c.message}")
    return [CheckResult(c.name, c.passed, c.message, c.severity,
                         {"message": c.message, **{k: for_people(jsonable(v)) for k, v in c.metadata.items()}})
            for c in checks]


def frame_metadata(version: str, split, weights: np.ndarray, days: list[str], holdout_days: int, change_day) -> dict:
    """The training frame asset's metadata: its version, rows per split, the holdout days and the
    weights' effective sample size."""
    counts = pd.Series(split).value_counts().to_dict()
    ess = float(weights.sum() ** 2 / np.square(weights).sum())
    return {
        "frame_version": version,
        "rows_per_split": kv_table({k: int(v) for k, v in counts.items()}, "rows"),
        "holdout_days": ", ".join(days[-holdout_days:]),
        "effective_sample_size": for_people(ess),
        "ess_fraction": for_people(ess / len(weights)),
        "max_ips_weight": for_people(float(weights.max())), "change_day": str(change_day or "none"),
    }
