"""Partitions, resources and small helpers shared by the asset modules (Dagster wiring only)."""


from contextlib import contextmanager
from typing import Iterator

import dagster as dg
import duckdb

from promo_assets.orchestration.resources import (  # noqa: F401  (imported from here by the asset modules)
    ArtifactStoreResource,
    LandingResource,
    OutboxResource,
    WarehouseResource,
    make_resources,
)

WAREHOUSE_POOL = "warehouse"  # every asset that touches the DuckDB file; limit 1 in dagster.yaml
INGESTION_ASSETS = ("rct_events", "payment_edges", "merchant_events")  # a campaign's day files, loaded per run

# A campaign exists once its landing folder does (the landing sensor, the daily schedule and `promo
# run` register it). Only campaigns partition the assets: a campaign's days are its own (the ledger
# `landing_files`, shown in the ingestion assets' `days` table), never a date dimension shared by
# every campaign, whose cross product would show days as missing that no file will ever fill.
campaign_partitions = dg.DynamicPartitionsDefinition(name="campaign")


def register_partitions(instance: dg.DagsterInstance, campaigns: list[str] = ()) -> None:
    """Add campaigns to the dynamic partitions (idempotent)."""
    if campaigns:
        instance.add_dynamic_partitions(campaign_partitions.name, sorted(set(campaigns)))


@contextmanager
def connect(warehouse: WarehouseResource) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the resource's warehouse (`WarehouseResource.connect`: schema in place; retried
    briefly while another process holds the file, then WarehouseBusyError), closed however the
    block ends (a connection left open keeps the file locked for every other process)."""
    with warehouse.connect() as con:
        yield con


def md_table(rows: list[dict]) -> dg.MetadataValue:
    if not rows:
        return dg.MetadataValue.md("(none)")
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r[c]) for c in cols) + " |")
    return dg.MetadataValue.md("\n".join(lines))


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


@dg.logger(
    config_schema={"log_level": dg.Field(str, default_value="INFO")},
    description="Compact progress lines for `promo run`: '  [asset] message'.",
)
def progress_logger(init_context):
    import logging
    import sys

    class _Handler(logging.Handler):
        def emit(self, record):
            meta = getattr(record, "dagster_meta", {}) or {}
            step = meta.get("step_key") or ""
            text = meta.get("orig_message") or record.getMessage()
            print(f"  [{step}] {text}" if step else f"  {text}", file=sys.stdout, flush=True)

    log = logging.getLogger("promo.progress")
    log.setLevel(init_context.logger_config["log_level"])
    log.handlers = [_Handler()]
    log.propagate = False
    return log
