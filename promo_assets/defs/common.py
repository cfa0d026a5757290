"""Partitions, resources and small helpers shared by the asset modules (Dagster wiring only)."""


from contextlib import contextmanager
from typing import Iterator

import dagster as dg
import duckdb

from promo_assets.core.errors import DomainError
from promo_assets.core.text import markdown_text
from promo_assets.ingestion import constraint_feature_problems, day_files
from promo_assets.ingestion.frames import PopulationFile
from promo_assets.store.frames import loaded_features

from promo_assets.defs.resources import (  # noqa: F401  (imported from here by the asset modules)
    ArtifactStoreResource,
    LandingResource,
    OutboxResource,
    WarehouseResource,
    make_resources,
)

from promo_assets.defs.recovery import WAREHOUSE_POOL  # noqa: F401  (imported from here by the asset modules)
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
        lines.append("| " + " | ".join(_fmt(r[c]) for c in cols) + " |")
    return dg.MetadataValue.md("\n".join(lines))


def _fmt(v, text=markdown_text) -> str:
    """A value as table text: floats to 4 significant digits, dicts and lists joined, text through
    `text` (escaped for Markdown by default)."""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{text(k)}: {_fmt(x, text)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_fmt(x, text) for x in v)
    return text(v)


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        out.update(_flat(v, f"{name}.") if isinstance(v, dict) else {name: v})
    return out


def kv_table(entries: dict, what: str = "value") -> dg.MetadataValue:
    """A dict (nested dicts flattened as 'a.b') as a two-column table for people: name | value, floats
    to 4 significant digits, lists joined; never a JSON string or a dict repr."""
    return md_table([{"name": k, what: v.item() if hasattr(v, "item") else v} for k, v in _flat(dict(entries)).items()])


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
        return _fmt(list(value), str)  # plain text metadata: nothing to escape
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
# reads and tables more than one domain's assets use


def population(con, landing: LandingResource, campaign: str, features) -> PopulationFile | None:
    """The latest population/ file, read in chunks when scored (None when there is none)."""
    files = day_files(landing.path, campaign, "population")
    return PopulationFile(con, files[max(files)], features) if files else None


def use_table(rows: list[dict]) -> list[dict]:
    """The budget_multipliers rows of an evaluation as a small table: use over budget per budget."""
    def ratio(x, t):
        return None if x is None else round(x / t, 4) if t > 0 else 0.0

    return [{"budget_per_capita": r["budget_per_capita"], "budget": r["constraint_name"],
             "multiplier": float(f"{r['multiplier']:.6g}"), "predicted use / budget": ratio(r["predicted_use"], r["budget"]),
             "true use / budget": ratio(r["true_use"], r["budget"]),
             "at matched true spend": ratio(r["matched_true_use"], r["budget"])} for r in rows]


def group_features(con, campaign: str, config) -> list[str]:
    """The feature columns campaign.yaml `constraints.groups` cap on; dg.Failure naming a group whose
    column the loaded events lack (a cap on a column that is not there: never a query on it, no
    decision at all)."""
    features = sorted({g.feature for g in config.constraints.groups.values()}) if config.constraints else []
    if features:
        missing = constraint_feature_problems(config, loaded_features(con, campaign),
                                              f"the loaded events of campaign '{campaign}'")
        if missing:
            raise dg.Failure("campaign.yaml: " + "; ".join(missing))
    return features
