"""Shared fixtures: every test gets its own landing folder, warehouse, artefact store and DAGSTER_HOME."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

# CI (CI=true) replays the same examples on every run, so a submission's result does not depend on
# the draw; local runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def promo_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    paths = {
        "landing": tmp_path / "landing",
        "warehouse": tmp_path / "warehouse.duckdb",
        "artifacts": tmp_path / "artifacts",
        "dagster_home": tmp_path / "dagster_home",
        "outbox": tmp_path / "outbox",
    }
    paths["landing"].mkdir()
    paths["dagster_home"].mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "dagster_home" / "dagster.yaml", paths["dagster_home"])
    monkeypatch.setenv("PROMO_LANDING_DIR", str(paths["landing"]))
    monkeypatch.setenv("PROMO_WAREHOUSE", str(paths["warehouse"]))
    monkeypatch.setenv("PROMO_ARTIFACTS_DIR", str(paths["artifacts"]))
    monkeypatch.setenv("DAGSTER_HOME", str(paths["dagster_home"]))
    monkeypatch.setenv("PROMO_OUTBOX_DIR", str(paths["outbox"]))
    monkeypatch.setenv("PROMO_REPORT_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("PROMO_MAX_EPOCHS", os.environ.get("PROMO_MAX_EPOCHS", "3"))
    return paths


@pytest.fixture(autouse=True)
def _no_stale_defs_state_storage():
    """Dagster keeps the defs-state storage of an entered DagsterInstance in a context variable; an
    instance that a test (e.g. one driving the automation daemon's code) leaves entered after it was
    disposed would make every later Definitions load in this process fail with "Attempted to resolve
    undefined DagsterInstance weakref" (the CLI builds its Definitions per call). Each test starts
    and ends without one, as a fresh `promo` process does."""
    from dagster._core.storage.defs_state.base import _current_storage

    _current_storage.set(None)
    yield
    _current_storage.set(None)
