"""What a fitted model's asset shows (its version, metrics, training time, epochs and its own
`report`), as plain values (promo_assets.core.display: numbers, text, Markdown); `promo_assets.defs`
turns them into Dagster metadata. No dagster here (domain code)."""

from __future__ import annotations

from promo_assets.core.display import for_people, jsonable, kv_table, md_table, png_markdown
from promo_assets.models.protocol import ResponseModel


def fitted_metadata(fitted: ResponseModel, seconds: float) -> dict:
    """A fitted model's metadata: its version, metrics, training time, epochs and its own `report`
    (rows, PNG bytes, values)."""
    trained = fitted.model_
    history = getattr(trained, "history", None) or []
    meta = {"model_version": trained.version, "metrics": kv_table(jsonable(trained.metrics)),
            "training_seconds": round(seconds, 2)}  # seconds, two decimals
    if history:
        meta["epochs"] = md_table([jsonable(h) if isinstance(h, dict) else {"epoch": i, "loss": h} for i, h in enumerate(history)])
    for k, v in (fitted.report_ or {}).items():
        if isinstance(v, bytes):
            meta[k] = png_markdown(v, k.replace("_", " "))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            meta[k] = md_table(jsonable(v))
        elif v is not None:
            meta[k] = for_people(jsonable(v))
    return meta
