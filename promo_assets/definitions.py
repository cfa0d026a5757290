"""The one Definitions object of the promo_assets code location (loaded by the UI and by `promo`).

`build_defs()` builds it from the model registry (one chain of assets per registered model), so a
model registered at run time (a test model, a plug-in) before the call is part of it; `defs` is what
the UI's workspace loads. `defs` is built on first use (a module `__getattr__`, which Dagster's loader
reaches through `dir()` like any module attribute): `promo`, which builds its own Definitions with the
chains it runs, does not pay for building every chain once more on import.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import dagster as dg

from promo_assets.defs.automation import jobs as automation
from promo_assets.defs.campaign import assets as campaign_assets
from promo_assets.defs.common import make_resources, progress_logger
from promo_assets.defs.decisions import assets as decision_assets
from promo_assets.defs.graph import assets as graph_assets
from promo_assets.defs.ingestion import assets as ingest_assets
from promo_assets.defs.models.assets import model_assets
from promo_assets.defs.monitoring import assets as monitoring_assets
from promo_assets.defs.simulation import jobs as simulation


def build_defs(models: Sequence[str] | None = None) -> dg.Definitions:
    """The Definitions with a chain per registered model, or per model of `models` (a subset of the
    registry: the automation tests evaluate the conditions on fewer chains, the same factory)."""
    return dg.Definitions(
        assets=[*dg.load_assets_from_modules([ingest_assets, campaign_assets, graph_assets, decision_assets,
                                                 monitoring_assets]),
                *model_assets(models)],
        asset_checks=dg.load_asset_checks_from_modules([campaign_assets, graph_assets]),
        jobs=[automation.ingest_job, automation.campaign_job, automation.refresh_job, automation.leaderboard_job,
              automation.decision_job,
              simulation.simulate_demo_job],
        schedules=[automation.daily_campaign_refresh],
        sensors=[automation.landing_sensor, automation.automation_sensor],
        resources=make_resources(),
        loggers={"console": dg.colored_console_logger, "progress": progress_logger},
        # Every job (campaign_job, ingest_job, the UI's materializations and backfills) runs its steps in
        # the run's own process: the default multiprocess executor started one process per step (each
        # importing torch, ~5-10 s); campaigns refreshed at once run side by side, a run each.
        # benchmarks/ui_refresh.py measures a UI refresh against promo run.
        executor=dg.in_process_executor,
    )


@functools.cache
def _full_defs() -> dg.Definitions:
    return build_defs()


def __getattr__(name: str):
    if name == "defs":
        return _full_defs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "defs"])
