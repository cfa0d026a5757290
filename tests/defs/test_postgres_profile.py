"""The Postgres instance profile (dagster_home/postgres/dagster.yaml) without a server: it is the
embedded profile plus Postgres storage, and it resolves to dagster-postgres's storages on the psycopg2
driver. tests/e2e/test_postgres.py runs it against a real server."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
EMBEDDED = REPO / "dagster_home" / "dagster.yaml"
POSTGRES = REPO / "dagster_home" / "postgres" / "dagster.yaml"
SETTINGS = {"DAGSTER_PG_HOST": "db.internal", "DAGSTER_PG_PORT": "6543", "DAGSTER_PG_USER": "dagster",
            "DAGSTER_PG_PASSWORD": "p@ss word/", "DAGSTER_PG_DB": "promo"}


def test_the_postgres_profile_is_the_embedded_one_plus_postgres_storage():
    embedded = yaml.safe_load(EMBEDDED.read_text())
    postgres = yaml.safe_load(POSTGRES.read_text())
    assert set(postgres) - set(embedded) == {"storage"}
    assert {k: v for k, v in postgres.items() if k != "storage"} == embedded  # pools, monitoring, logs alike


def test_the_profile_resolves_to_dagster_postgres_on_psycopg2(monkeypatch):
    from dagster._config import process_config
    from dagster._core.instance.ref import InstanceRef
    from dagster_postgres.storage import DagsterPostgresStorage
    from dagster_postgres.utils import pg_url_from_config
    from sqlalchemy.engine import make_url

    for var, value in SETTINGS.items():
        monkeypatch.setenv(var, value)
    ref = InstanceRef.from_dir(str(POSTGRES.parent))
    assert [(d.module_name, d.class_name) for d in (ref.run_storage_data, ref.event_storage_data,
                                                     ref.schedule_storage_data)] == [
        ("dagster_postgres", "PostgresRunStorage"), ("dagster_postgres", "PostgresEventLogStorage"),
        ("dagster_postgres", "PostgresScheduleStorage")]
    config = process_config(DagsterPostgresStorage.config_type(), ref.storage_data.config_dict)
    assert config.success, config.errors
    url = make_url(pg_url_from_config(config.value))
    assert (url.drivername, url.host, url.port, url.username, url.password, url.database) == (
        "postgresql+psycopg2", "db.internal", 6543, "dagster", "p@ss word/", "promo")
    assert url.get_dialect().driver == "psycopg2"
    # what the scheme is there for: SQLAlchemy's default PostgreSQL driver is psycopg 3, which binds
    # dagster-postgres's NOTIFY parameter on the server and fails ("syntax error at or near $1")
    assert make_url(str(url).replace("+psycopg2", "")).get_dialect().driver != "psycopg2"
