"""The one module of Dagster helpers the asset modules share (Dagster wiring only): the campaign
partitions, the resources, the connection and the results transaction, the
upstream materialization an asset reads, project errors as Dagster failures, progress logging, and
metadata tables. Every other function in `promo_assets/defs/` is a Dagster definition, or one of the
few wiring helpers `tests/unit/test_architecture.py` names with its reason."""


from contextlib import contextmanager
from typing import Iterator

import dagster as dg
import duckdb

from promo_assets.config import settings
from promo_assets.core.display import flatten, shown_text
from promo_assets.core.errors import DomainError
from promo_assets.core.text import markdown_text
from promo_assets.defs.recovery import WAREHOUSE_POOL  # noqa: F401  (imported from here by the asset modules)
from promo_assets.defs.resources import (  # noqa: F401  (imported from here by the asset modules)
    ArtifactStoreResource,
    LandingResource,
    OutboxResource,
    WarehouseResource,
    make_resources,
)
from promo_assets.evaluation.inputs import EvaluationInputs, read_evaluation_inputs
from promo_assets.simulation import truth_arrays
from promo_assets.store import results
from promo_assets.store.warehouse import transaction

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
    """A connection to the resource's warehouse (`WarehouseResource.connect`: schema in place; it
    waits for the warehouse's writer slot, which it holds until the block ends), closed however the
    block ends: read, close, compute, then write, so that other runs' steps can use the file while
    this one computes."""
    with warehouse.connect() as con:
        yield con


OPTIONAL_PREFIX = "optional"  # the key prefix of the chains of the models off by default (docs/automation.md)


def model_key(model: str, step: str) -> dg.AssetKey:
    """The asset key of `step` of `model`'s chain: `<model>/<step>`, or `optional/<model>/<step>` for a
    model off by default (registry `default = False`): the UI's catalog, sorted by key, then shows the
    default models' and the campaign's assets first and the optional chains in one folder."""
    from promo_assets.models import registry

    return dg.AssetKey([*([] if registry.get(model).default else [OPTIONAL_PREFIX]), model, step])


def model_of_key(asset_key: dg.AssetKey) -> str | None:
    """The registered model whose chain `asset_key` belongs to (`model_key`'s inverse), else None."""
    from promo_assets.models import registry

    path = list(asset_key.path)
    if path and path[0] == OPTIONAL_PREFIX:
        path = path[1:]
    return path[0] if len(path) == 2 and path[0] in registry.names() else None


@contextmanager
def domain_errors() -> Iterator[None]:
    """Run the block; a project error (`promo_assets.core.errors.DomainError`: bad input, configuration or
    stored state) fails the asset with its message alone, and anything else (a bug here or in numpy,
    pandas, torch, even a ValueError) propagates with its stack trace, which Dagster shows. A domain
    error that wraps another exception (a chunk whose task failed) keeps that cause and its stack."""
    try:
        yield
    except DomainError as exc:
        raise dg.Failure(str(exc)) from exc.__cause__


def log_to(context):
    """A progress callback for domain code (`log=`): each message is a Dagster info log line."""
    return lambda msg: context.log.info(msg)


def table_metadata(columns: list[tuple[str, ...]], records: list[dict]) -> dg.MetadataValue:
    """Dagster table metadata (renders inline in the UI) from records and their columns: (name, type)
    or (name, type, description)."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord(r) for r in records],
        schema=dg.TableSchema(columns=[dg.TableColumn(*column) for column in columns]),
    )


def described_table(columns, records: list[dict]) -> dg.MetadataValue:
    """Dagster table metadata with typed, described columns (objects with `name`, `type` and
    `description`, such as `promo_assets.evaluation.board_view.Column`)."""
    return table_metadata([(c.name, c.type, c.description) for c in columns], records)


def rows_table(rows: list[dict]) -> dg.MetadataValue:
    """Dagster table metadata of plain rows (numbers as float columns, NaN or None as an empty cell,
    the rest as text): the UI shows every value as text, never as Markdown."""
    if not rows:
        return dg.MetadataValue.md("(none)")
    cols = list(rows[0])

    def missing(v) -> bool:
        return v is None or (isinstance(v, float) and v != v)

    kinds = {c: "float" if all(missing(r.get(c)) or (isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool))
                               for r in rows) else "string" for c in cols}
    records = [{c: (None if missing(r.get(c)) else float(f"{r[c]:.4g}")) if kinds[c] == "float"
                else ("" if missing(r.get(c)) else str(r[c])) for c in cols} for r in rows]
    return table_metadata([(str(c), kinds[c]) for c in cols], records)


def md_table(rows: list[dict]) -> dg.MetadataValue:
    """Rows as a Markdown table: every name and text value escaped (`promo_assets.core.text.markdown_text`:
    a label, category or column name from data renders as text, never as a link, image or tag)."""
    if not rows:
        return dg.MetadataValue.md("(none)")
    cols = list(rows[0])
    lines = ["| " + " | ".join(markdown_text(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(shown_text(r[c]) for c in cols) + " |")
    return dg.MetadataValue.md("\n".join(lines))


def kv_table(entries: dict, what: str = "value") -> dg.MetadataValue:
    """A dict (nested dicts flattened as 'a.b') as a two-column table for people: name | value, floats
    to 4 significant digits, lists joined; never a JSON string or a dict repr."""
    return md_table([{"name": k, what: v.item() if hasattr(v, "item") else v} for k, v in flatten(dict(entries)).items()])


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
        return shown_text(list(value), str)  # plain text metadata: nothing to escape
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


# --------------------------------------------------------------------------------------------
# upstream reads and results writes every asset module uses


def upstream(context, asset_key) -> tuple[str, dict, str | None]:
    """(run id, metadata values, data version) of the latest materialization of `asset_key` for this
    campaign: the upstream this materialization reads (real lineage, never "the latest" row of a
    table). Fails naming the asset when there is none."""
    asset_key = dg.AssetKey.from_coercible(asset_key)
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[context.partition_key]), limit=1).records
    if not records:
        raise dg.Failure(f"{asset_key.to_user_string()} has no materialization for campaign "
                         f"'{context.partition_key}': materialize it first")
    mat = records[0].asset_materialization
    meta = {k: v.value for k, v in mat.metadata.items()}
    return records[0].run_id, meta, (mat.tags or {}).get("dagster/data_version")


_RUN_ENDED = {dg.DagsterRunStatus.SUCCESS: True, dg.DagsterRunStatus.FAILURE: False, dg.DagsterRunStatus.CANCELED: False}


def failed_models(step_keys) -> list[str] | None:
    """The models whose chain a run's failed steps belong to (step key: the asset key's parts joined by
    '__', '<model>__<asset>' or 'optional__<model>__<asset>'), or None when a step outside every
    model's chain failed (then the whole run counts as failed)."""
    out = set()
    for step in step_keys:
        model = model_of_key(dg.AssetKey(step.split("__")))
        if model is None:
            return None
        out.add(model)
    return sorted(out)


def ended_runs(instance: dg.DagsterInstance, run_ids) -> dict[str, bool | tuple[bool, list[str] | None]]:
    """Dagster's own verdict on runs: run id -> succeeded, for the runs that have ended (a run this
    instance does not know counts as failed); runs still queued or in progress are left out. A run
    whose failed steps all belong to model chains gives (False, those models): promo_assets.store.results."""
    out = {}
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        if run is None or run.status in _RUN_ENDED:
            out[run_id] = run is not None and _RUN_ENDED[run.status]
            if run is not None and not out[run_id]:
                steps = [e.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)]
                out[run_id] = (False, failed_models(steps) if steps else None)
    return out


@contextmanager
def results_write(context, con, campaign: str, *tables: str):
    """One transaction for all of an asset's results rows (all or none): the campaign's earlier runs
    that have ended are marked from their Dagster status (a failed run's rows deleted), this run is
    recorded in result_runs, and the retention rule (PROMO_KEEP_RUNS) is applied to `tables`."""
    try:
        keep = settings.keep_runs()
    except settings.SettingsError as exc:
        raise dg.Failure(str(exc)) from None
    with transaction(con):
        results.reconcile(con, campaign, ended_runs(context.instance, results.unfinished(con, campaign, context.run_id)))
        results.start(con, campaign, context.run_id)
        yield con
        results.retain(con, campaign, context.run_id, tables, keep)


@contextmanager
def writing(context, warehouse: WarehouseResource, *tables: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the warehouse inside the results transaction of this run's campaign
    (`results_write`): what an asset writes its rows with, after computing them."""
    with connect(warehouse) as con, results_write(context, con, context.partition_key, *tables):
        yield con


def evaluation_inputs(context, con, landing: LandingResource, campaign: str, config) -> EvaluationInputs:
    """The evaluation inputs (`promo_assets.evaluation.inputs`) of the outcome_model materialization
    this run reads, with the truth of a simulated campaign (its landing folder's truth/ files)."""
    _, _, outcome_version = upstream(context, "outcome_model")
    campaign_dir = landing.path / campaign
    truth = ((lambda ids: truth_arrays(campaign_dir, ids)) if (campaign_dir / "truth" / "response.parquet").exists()
             else None)
    with domain_errors():
        return read_evaluation_inputs(con, campaign, config, outcome_version, truth)
