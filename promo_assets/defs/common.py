"""The one module of Dagster helpers the asset modules share (Dagster wiring only): the campaign
partitions, the resources, the results transaction, the upstream materialization an asset reads,
project errors as Dagster failures, and what an asset shows (built in the domain rooms as plain
values, promo_assets.core.display) as Dagster metadata and check results. Every other function in
`promo_assets/defs/` is a Dagster definition, or one of the few wiring helpers
`tests/unit/test_architecture.py` names with its reason."""


from contextlib import contextmanager
from typing import Iterator

import dagster as dg
import duckdb

from promo_assets.config import settings
from promo_assets.core.display import CheckResult, Markdown, Table
from promo_assets.core.errors import DomainError
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


def metadata(shown: dict) -> dict:
    """What an asset shows (plain values built in the domain rooms, promo_assets.core.display) as Dagster
    metadata: a `Table` as table metadata (typed, described columns), `Markdown` as a Markdown value,
    anything else (numbers, text, a Dagster metadata value) as it is."""

    def value(v):
        if isinstance(v, Table):
            return dg.MetadataValue.table(records=[dg.TableRecord(r) for r in v.records],
                                          schema=dg.TableSchema(columns=[dg.TableColumn(*c) for c in v.columns]))
        return dg.MetadataValue.md(str(v)) if isinstance(v, Markdown) else v

    return {k: value(v) for k, v in shown.items()}


def check_results(checks: list[CheckResult], asset_key: str | None = None) -> list[dg.AssetCheckResult]:
    """Domain check results (promo_assets.core.display.CheckResult) as Dagster asset check results
    (of `asset_key` where the asset function materializes several)."""
    return [dg.AssetCheckResult(check_name=c.name, passed=c.passed, description=c.description,
                                metadata=metadata(c.metadata), **({"asset_key": asset_key} if asset_key else {}),
                                **({"severity": dg.AssetCheckSeverity(c.severity)} if c.severity else {}))
            for c in checks]


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
        results.reconcile(con, campaign, ended_runs(context.instance, results.unfinished(con, campaign, context.run.run_id)))
        results.start(con, campaign, context.run.run_id)
        yield con
        results.retain(con, campaign, context.run.run_id, tables, keep)


@contextmanager
def writing(context, warehouse: WarehouseResource, *tables: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the warehouse inside the results transaction of this run's campaign
    (`results_write`): what an asset writes its rows with, after computing them."""
    with warehouse.connect() as con, results_write(context, con, context.partition_key, *tables):
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
