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
INGESTION_ASSETS = ("rct_events", "payment_edges", "merchant_events")  # the date x campaign assets

# Both dimensions are dynamic: a campaign or a day exists once a landing file for it does (the
# landing sensor, the daily schedule and `promo run` register them), so the partitions start where
# the landing data starts and the UI lists only days that have files (docs/automation.md, "Partitions").
campaign_partitions = dg.DynamicPartitionsDefinition(name="campaign")
day_partitions = dg.DynamicPartitionsDefinition(name="day")
day_campaign_partitions = dg.MultiPartitionsDefinition({"date": day_partitions, "campaign": campaign_partitions})


def partition_key(day: str, campaign: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"date": day, "campaign": campaign})


def register_partitions(instance: dg.DagsterInstance, campaigns: list[str] = (), days: list[str] = ()) -> None:
    """Add campaigns and days (YYYY-MM-DD) to the dynamic partitions (idempotent; days sorted, so
    the UI's date picker lists them in order when they arrive in order)."""
    if campaigns:
        instance.add_dynamic_partitions(campaign_partitions.name, sorted(set(campaigns)))
    if days:
        instance.add_dynamic_partitions(day_partitions.name, sorted(set(days)))


def unmaterialize_partition(instance: dg.DagsterInstance, campaign: str, day: str, keep_day: bool) -> list[str]:
    """Make the date|campaign partition of the ingestion assets show as not materialized: delete the
    finished runs of that partition (with their events: OSS Dagster has no per-partition wipe,
    `wipe_asset_partitions` raises NotImplementedError outside Dagster+), refresh the assets'
    cached partition status, and drop the day from the day partitions unless `keep_day` (another
    campaign still has a file for it). Returns notes on what could not be undone."""
    key = str(partition_key(day, campaign))
    notes = []
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": key}))
    for run in runs:
        if not run.is_finished:
            notes.append(f"run {run.run_id} of partition {key} is still {run.status.value}: not deleted")
            continue
        instance.delete_run(run.run_id)
    asset_keys = [dg.AssetKey(a) for a in INGESTION_ASSETS]
    instance.wipe_asset_cached_status(asset_keys)
    for asset_key in asset_keys:
        if key in instance.get_materialized_partitions(asset_key):
            notes.append(f"{asset_key.to_user_string()} {key} still has a materialization outside a run of that partition")
    if not keep_day:
        instance.delete_dynamic_partition(day_partitions.name, day)
    return notes


@contextmanager
def connect(warehouse: WarehouseResource) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the resource's warehouse (`WarehouseResource.connect`: schema in place; retried
    briefly while another process holds the file, then WarehouseBusyError), closed however the
    block ends (a connection left open keeps the file locked for every other process)."""
    with warehouse.connect() as con:
        yield con


def day_and_campaign(context: dg.AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    if not isinstance(key, dg.MultiPartitionKey):
        raise dg.Failure(f"expected a date|campaign partition key, got {key!r}")
    dims = key.keys_by_dimension
    return dims["date"], dims["campaign"]


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
