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
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x) for x in v)
    return str(v)


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        out.update(_flat(v, f"{name}.") if isinstance(v, dict) else {name: v})
    return out


def kv_table(values: dict, what: str = "value") -> dg.MetadataValue:
    """A dict (nested dicts flattened as 'a.b') as a two-column table for people: name | value, floats
    to 4 significant digits, lists joined; never a JSON string or a dict repr."""
    return md_table([{"name": k, what: v.item() if hasattr(v, "item") else v} for k, v in _flat(dict(values)).items()])


def for_people(value):
    """A metadata value a person can read: scalars as they are (floats rounded to 4 significant
    digits), dicts as a name | value table, lists joined by commas."""
    if hasattr(value, "item") and not isinstance(value, (list, dict)):
        value = value.item()
    if isinstance(value, bool) or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return kv_table(value)
    if isinstance(value, (list, tuple)):
        return _fmt(list(value))
    return str(value)


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
