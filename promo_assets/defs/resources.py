"""The code location's resources: the warehouse, the landing folder, the artefact store and Dask.

Each has an optional location field; left unset, it is resolved from the settings (PROMO_WAREHOUSE,
PROMO_LANDING_DIR, PROMO_ARTIFACTS_DIR, with their documented defaults) when a run, sensor tick or
schedule tick starts (`setup_for_execution`), never when the code location is imported, and nothing
here changes `os.environ`. The work itself is done by the domain modules (`promo_assets.store.warehouse`,
`promo_assets.store.artifacts`); these classes only carry the location into Dagster.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

import dagster as dg
from pydantic import Field, PrivateAttr

from promo_assets.config import settings
from promo_assets.defs.recovery import settle_warehouse_pool
from promo_assets.store import artifacts, warehouse

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from promo_assets.config.campaign import CampaignConfig


class _LocatedResource(dg.ConfigurableResource):
    """A resource whose location is its configured field, or a setting read when a run starts."""

    _resolved: Optional[Path] = PrivateAttr(default=None)

    def _configured(self) -> Optional[str]:
        raise NotImplementedError

    def _default(self) -> Path:
        raise NotImplementedError

    def _locate(self) -> Path:
        configured = self._configured()
        return Path(configured).expanduser().resolve() if configured else self._default()

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._resolved = self._locate()  # fixed for the run: a setting changed mid-run does not move it

    @property
    def location(self) -> Path:
        return self._resolved or self._locate()


class WarehouseResource(_LocatedResource):
    """The DuckDB warehouse (resource key `warehouse`): connections through `warehouse.connect`
    (schema in place; each waits for the warehouse's writer slot as long as it takes and holds it
    while open, `queue=True`), one transaction per block, typed reads and writes of the named
    statements of sql/. Data frames reach SQL only registered under an explicit name."""

    path: Optional[str] = Field(
        default=None, description="The warehouse file; unset: PROMO_WAREHOUSE (default data/warehouse.duckdb) "
        "read when the run starts.")

    def _configured(self) -> Optional[str]:
        return self.path

    def _default(self) -> Path:
        return settings.warehouse_path()

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        super().setup_for_execution(context)
        if context.instance is not None:  # before the run's first step claims a `warehouse` pool slot
            settle_warehouse_pool(context.instance)

    @property
    def database(self) -> str:
        """The warehouse file as a string (what DuckDBResource called `database`)."""
        return str(self.location)

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """An open connection for the block, closed however the block ends (see warehouse.connect)."""
        with warehouse.connect(self.location, read_only=read_only, queue=True) as con:
            yield con

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection whose statements in the block are one transaction: all stored, or, when the
        block raises, none (rolled back)."""
        with self.connect() as con, warehouse.transaction(con):
            yield con

    def _on(self, con: Optional[duckdb.DuckDBPyConnection], work: Callable[[duckdb.DuckDBPyConnection], Any],
            read_only: bool) -> Any:
        if con is not None:
            return work(con)
        if read_only:
            with self.connect() as own:
                return work(own)
        with self.transaction() as own:
            return work(own)

    def read_df(self, family: str, name: str, params: Sequence = (), *,
                con: Optional[duckdb.DuckDBPyConnection] = None, **identifiers: str) -> pd.DataFrame:
        """Statement `name` of sql/<family>.sql as a DataFrame, on `con` or on a connection of its own."""
        return self._on(con, lambda c: warehouse.read_df(c, family, name, params, **identifiers), read_only=True)

    def read_rows(self, family: str, name: str, params: Sequence = (), *,
                  con: Optional[duckdb.DuckDBPyConnection] = None, **identifiers: str) -> list[tuple]:
        """Statement `name` of sql/<family>.sql as a list of tuples."""
        return self._on(con, lambda c: warehouse.read_rows(c, family, name, params, **identifiers), read_only=True)

    def write_df(self, family: str, name: str, frame: pd.DataFrame, params: Sequence = (), *,
                 frame_name: str = "frame_df", con: Optional[duckdb.DuckDBPyConnection] = None,
                 **identifiers: str) -> None:
        """Run statement `name` of sql/<family>.sql, which reads `frame` as the view `frame_name`; in
        a transaction of its own unless `con` is given (then in the caller's)."""
        self._on(con, lambda c: warehouse.write_df(c, family, name, frame, params, frame_name, **identifiers),
                 read_only=False)


class _FolderResource(_LocatedResource):
    root: Optional[str] = Field(
        default=None, description="The folder; unset: the setting (PROMO_LANDING_DIR, default data/landing, for "
        "`landing`; PROMO_ARTIFACTS_DIR, default data/artifacts, for `artifacts`) read when the run or tick starts.")

    def _configured(self) -> Optional[str]:
        return self.root

    @property
    def path(self) -> Path:
        return self.location


class LandingResource(_FolderResource):
    """The landing folder (resource key `landing`): one sub-folder per campaign, and the one place the
    assets get a campaign's typed config from (`config`)."""

    def _default(self) -> Path:
        return settings.landing_dir()

    def config(self, campaign: str) -> CampaignConfig:
        """The campaign's campaign.yaml, parsed and validated once per content (`ingestion.cached_config`:
        every asset of a run reads the same CampaignConfig; the models block checked by the registry).
        A refused campaign.yaml fails the asset with the file's problems (CampaignConfigError)."""
        from promo_assets.config.campaign import CampaignConfigError
        from promo_assets.ingestion import cached_config

        try:
            return cached_config(self.path, campaign)
        except CampaignConfigError as exc:  # its message names the file and every problem
            raise dg.Failure(str(exc)) from None


class ArtifactStoreResource(_FolderResource):
    """The content-addressed artefact store (resource key `artifacts`, see promo_assets.store.artifacts):
    trained models written under the hash of their bytes, stored as data (never pickles) and checked
    against that hash on every load (docs/operations.md, "The artefact store")."""

    def _default(self) -> Path:
        return settings.artifacts_dir()

    # promo_assets.store.artifacts imports torch when an object is stored or loaded: imported when first
    # used, so that sensors and the ingestion assets do not pay for it
    def save_bytes(self, data: bytes, kind: str) -> tuple[str, Path]:
        return artifacts.save_bytes(data, kind, self.location)

    def load_bytes(self, kind: str, version: str) -> bytes:
        return artifacts.load_bytes(kind, version, self.location)

    def save_object(self, obj: Any, kind: str) -> tuple[str, Path]:
        return artifacts.save_object(obj, kind, self.location)

    def load_object(self, kind: str, version: str) -> Any:
        return artifacts.load_object(kind, version, self.location)


class OutboxResource(_FolderResource):
    """The outbox (resource key `outbox`): decisions exported for the systems that send incentives,
    `<outbox>/<campaign>/<date>/<budget>.parquet` and a manifest (promo_assets.decisions.outbox).
    Unset: PROMO_OUTBOX_DIR (default data/outbox) read when the run starts."""

    def _default(self) -> Path:
        return settings.outbox_dir()


class DaskResource(dg.ConfigurableResource):
    """Where the per-user work runs (resource key `dask`): `client()` is a `dask.distributed.Client`
    on the configured scheduler, or None for in-process work (the default). `local:N` starts a
    LocalCluster of N worker processes (one thread each) when first used in a run and closes it when
    the run ends; an address connects to a running scheduler. The chunked functions themselves are in
    `promo_assets.allocation.chunked`; this class only carries the scheduler into Dagster."""

    scheduler: Optional[str] = Field(
        default=None, description="local:N or a scheduler address; unset: PROMO_DASK_SCHEDULER (unset = "
        "in-process) read when the run starts.")

    _spec: Optional[str] = PrivateAttr(default=None)
    _client: Any = PrivateAttr(default=None)
    _cluster: Any = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._spec = self.scheduler or settings.dask_scheduler()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    @property
    def spec(self) -> Optional[str]:
        return self._spec if self._spec is not None else (self.scheduler or settings.dask_scheduler())

    def client(self):
        """The run's Dask client (started on first use), or None when no scheduler is configured."""
        spec = self.spec
        if not spec:
            return None
        if self._client is None:
            from distributed import Client, LocalCluster

            try:
                if spec.startswith("local:"):
                    self._cluster = LocalCluster(n_workers=int(spec[6:]), threads_per_worker=1, processes=True,
                                                 dashboard_address=None)
                    self._client = Client(self._cluster)
                else:
                    self._client = Client(spec, timeout=30)
            except OSError as exc:
                self.close()
                raise dg.Failure(f"PROMO_DASK_SCHEDULER={spec!r}: cannot reach the Dask scheduler: {exc}") from None
        return self._client

    def chunk_rows(self, n_users: int) -> int:
        """Users per chunk for `n_users`: two chunks per worker, 1,000 to 262,144 users each."""
        client = self.client()
        workers = max(1, len(client.scheduler_info().get("workers", {}))) if client is not None else 1
        return int(min(1 << 18, max(1_000, -(-n_users // (2 * workers)))))

    def close(self) -> None:
        for part in (self._client, self._cluster):
            if part is not None:
                part.close()
        self._client = self._cluster = None


def make_resources() -> dict[str, dg.ConfigurableResource]:
    """The resources of the Definitions; locations unset, so each follows the settings of the
    process that runs it (docs/settings.md, "Settings" and "Resources")."""
    return {"warehouse": WarehouseResource(), "landing": LandingResource(), "artifacts": ArtifactStoreResource(),
            "dask": DaskResource(), "outbox": OutboxResource()}
