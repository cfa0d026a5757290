"""Shared fixtures: every test gets its own landing folder, warehouse, artefact store and DAGSTER_HOME."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings
from promo_assets.simulation import REFERENCE_START

# CI (CI=true) replays the same examples on every run, so a submission's result does not depend on
# the draw; local runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


REPO = Path(__file__).resolve().parents[1]
ENV_OF = {"landing": "PROMO_LANDING_DIR", "warehouse": "PROMO_WAREHOUSE", "artifacts": "PROMO_ARTIFACTS_DIR",
          "dagster_home": "DAGSTER_HOME", "outbox": "PROMO_OUTBOX_DIR"}


def lay_out(root: Path) -> dict[str, Path]:
    """The folders of one throw-away instance under `root` (created, with the repository's dagster.yaml)."""
    paths = {"landing": root / "landing", "warehouse": root / "warehouse.duckdb", "artifacts": root / "artifacts",
             "dagster_home": root / "dagster_home", "outbox": root / "outbox"}
    paths["landing"].mkdir(parents=True)
    paths["dagster_home"].mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", paths["dagster_home"])
    return paths


def point_at(paths: dict[str, Path], reports: Path, setenv, max_epochs: str) -> None:
    for key, var in ENV_OF.items():
        setenv(var, str(paths[key]))
    setenv("PROMO_REPORT_DIR", str(reports))
    setenv("PROMO_MAX_EPOCHS", max_epochs)


def pytest_report_header(config):
    """The PostgreSQL server the Postgres tests start (tests/e2e/test_postgres.py), by its version."""
    import subprocess

    from devtools import pgserver

    found = pgserver.find_bin_dir()
    if found is None:
        return f"postgresql: not installed ({pgserver.missing()}); the Postgres tests are skipped"
    version = subprocess.run([str(found / "postgres"), "--version"], capture_output=True, text=True).stdout.strip()
    return f"postgresql: {version} ({found}) for tests/e2e/test_postgres.py" + \
        (f"; cannot start it: {pgserver.missing()}" if pgserver.missing() else "")


@pytest.fixture
def promo_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    paths = lay_out(tmp_path)
    point_at(paths, tmp_path / "reports", monkeypatch.setenv, os.environ.get("PROMO_MAX_EPOCHS", "3"))
    return paths


class SavedRun:
    """A small simulated campaign taken through `promo run` once (per module or per session) and kept
    as the run left it. `restore()` lays a fresh copy of it at the very paths the run used (so what
    the warehouse and the Dagster instance recorded stays true) and points the environment there:
    each test starts from the run as it was, whatever an earlier test wrote, for the price of a copy
    instead of a run."""

    def __init__(self, root: Path, paths: dict[str, Path], max_epochs: str):
        self.root, self.paths, self.max_epochs = root, paths, max_epochs
        self.live, self.pristine = root / "live", root / "pristine"

    def restore(self, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
        shutil.rmtree(self.live)
        shutil.copytree(self.pristine, self.live, symlinks=True)
        point_at(self.paths, self.live / "reports", monkeypatch.setenv, self.max_epochs)
        return dict(self.paths)


@pytest.fixture(scope="session")
def run_once(tmp_path_factory):
    """`run_once(name, build, max_epochs="3")` -> SavedRun: `build(paths)` (simulate, edit, `promo run`)
    runs once per test session in a throw-away instance; later calls with the same name reuse it."""
    saved: dict[str, SavedRun] = {}

    def make(name: str, build, max_epochs: str = "3") -> SavedRun:
        if name not in saved:
            root = tmp_path_factory.mktemp(name)
            paths = lay_out(root / "live")
            with pytest.MonkeyPatch.context() as mp:
                point_at(paths, root / "live" / "reports", mp.setenv, max_epochs)
                build(paths)
            shutil.copytree(root / "live", root / "pristine", symlinks=True)
            saved[name] = SavedRun(root, paths, max_epochs)
        return saved[name]

    return make


def promo_here(env: dict[str, str], *args: str) -> None:
    """`promo ARGS` in this process, in the instance `env` points at (its PROMO_* settings and
    DAGSTER_HOME), for a module fixture's setup steps: a `promo` process would first spend about 8 s
    importing the definitions (torch, scikit-learn, Dagster). A failure names the command."""
    from promo_assets.cli.main import main

    with pytest.MonkeyPatch.context() as mp:
        for var, value in env.items():
            if var.startswith(("PROMO_", "DAGSTER_")) or var == "OMP_NUM_THREADS":  # DAGSTER_PG_*: Postgres
                mp.setenv(var, value)
        rc = main(list(args))
    assert rc == 0, f"promo {' '.join(args)} exited {rc}"


PLUMBING_MODELS = ("lgbm_s", "lgbm_s_mono")


def set_models(campaign_yaml: Path, key: str, models) -> tuple[str, ...]:
    """campaign.yaml's `models.<key>` (include / exclude) = `models`, the rest of the file kept;
    returns them."""
    import yaml

    config = yaml.safe_load(campaign_yaml.read_text()) or {}
    config.setdefault("models", {})[key] = list(models)
    campaign_yaml.write_text(yaml.safe_dump(config, sort_keys=False))
    return tuple(models)


def train_only(campaign_yaml: Path, models=PLUMBING_MODELS) -> tuple[str, ...]:
    """Limit the campaign of `campaign_yaml` to `models` (its `models.include`) and return them. For
    the tests of the pipeline's plumbing (results, runs, files, services) that need trained models but
    not every default one: each model chain costs a `promo run` about 2 s of CPU even at
    PROMO_MAX_EPOCHS=1. Two LightGBM models train in a fraction of a second; the tests that are about
    the models themselves keep the defaults."""
    return set_models(campaign_yaml, "include", models)


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


DEMO_START = REFERENCE_START.isoformat()


def _demo_campaign(paths) -> None:
    from promo_assets.cli.main import main

    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "4", "--users", "1500",
                 "--seed", "1", "--start", DEMO_START]) == 0
    assert main(["run", "--no-progress"]) == 0


# The test files that read the session's demo run (`demo_run`). Under pytest-xdist (scripts/test.sh:
# `-n 2 --dist loadfile`) they are one unit of work, so one worker makes that run (~15 s of CPU) and
# the others never do: with a file per unit, two workers often both made it.
DEMO_RUN_FILES = ("tests/e2e/test_pipeline.py", "tests/unit/evaluation/test_evaluation_honest.py",
                  "tests/unit/report/test_report.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with the DEMO_RUN_FILES as one unit of work (every other file its own)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DemoRunTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "demo_run" if path in DEMO_RUN_FILES else path

    return DemoRunTogether(config, log)


@pytest.fixture
def demo_run(run_once, monkeypatch) -> dict[str, Path]:
    """The demo campaign (4 RCT days from 2026-03-01, 1,500 users, seed 1) after one `promo run` with
    the default models (PROMO_MAX_EPOCHS=3): run once per session, shared by the tests that read what
    a real run leaves (warehouse, instance, report); each gets a fresh copy at the run's own paths."""
    return run_once("demo_run", _demo_campaign).restore(monkeypatch)
