"""The Postgres instance profile (dagster_home/postgres/dagster.yaml) against a real PostgreSQL server.

One throw-away server (Debian's `postgresql`, devtools.pgserver: initdb into a temporary folder,
pg_ctl on 127.0.0.1 and a free port, stopped at the end) and one instance for the module; the tests
run in order on it, each starting from what the one before left: `promo run` on a tiny campaign, a
`promo run` killed with kill -9 and recovered by the next, the deployment of docs/deploy.md (code
server, webserver, daemon) whose landing sensor and automation refresh a second campaign and which
runs a backfill launched as the UI does, and `promo report --history` reading the runs back.

Without the server binaries the module is skipped with the reason; with PROMO_PG_TESTS=1 (CI) a
missing server fails it. The session's header names the server's version (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools import pgserver
from devtools.devserver import Deployment, demo_env, promo
from tests.conftest import PLUMBING_MODELS, promo_here, train_only
from promo_assets.simulation import REFERENCE_START

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "dagster_home" / "postgres" / "dagster.yaml"
START = REFERENCE_START.isoformat()


@pytest.fixture(scope="module")
def pg():
    why = pgserver.missing()
    if why:
        if os.environ.get("PROMO_PG_TESTS") == "1":
            pytest.fail(f"PROMO_PG_TESTS=1 but {why}: run PROMO_PG_TESTS=1 bash scripts/setup.sh")
        pytest.skip(f"Postgres tests skipped: {why}; PROMO_PG_TESTS=1 bash scripts/setup.sh installs Debian's postgresql")
    with pgserver.PgServer() as server:
        yield _Queries(server)


@pytest.fixture(scope="module")
def site(pg, tmp_path_factory):
    """The instance: landing folder, warehouse, artefact store, and DAGSTER_HOME holding the Postgres
    profile; the campaign `demo` (2 days, 300 users, two LightGBM models) after one `promo run`."""
    tmp = tmp_path_factory.mktemp("pg")
    env = demo_env(tmp, REPO, max_epochs=1)
    shutil.copy(PROFILE, Path(env["DAGSTER_HOME"]) / "dagster.yaml")
    env.update(pg.env())
    promo_here(env, "simulate", "--campaign", "demo", "--days", "2", "--users", "300", "--seed", "0", "--start", START)
    train_only(tmp / "landing" / "demo" / "campaign.yaml")
    promo_here(env, "run", "--no-progress")
    return tmp, env


class _Queries:
    """`pg.query(statement, params)`: the rows of a statement on the Dagster database."""

    def __init__(self, server: pgserver.PgServer):
        self.server = server

    def query(self, statement: str, params: tuple = ()) -> list[tuple]:
        con = self.server.connect()
        try:
            with con.cursor() as cur:
                cur.execute(statement, params)
                return cur.fetchall() if cur.description else []
        finally:
            con.close()

    def __getattr__(self, name: str):
        return getattr(self.server, name)


def _runs(pg) -> list[tuple[str, str, str]]:
    """(run id, job, status) of every run in Postgres, oldest first."""
    return pg.query("SELECT run_id, pipeline_name, status FROM runs ORDER BY id")


def test_the_server_is_the_installed_postgresql(pg):
    binary = subprocess.run([str(pgserver.find_bin_dir() / "postgres"), "--version"], capture_output=True,
                            text=True, check=True).stdout
    number = re.search(r"\d+\.\d+", binary).group(0)
    assert pg.version.startswith(f"PostgreSQL {number} "), (pg.version, binary)


def test_promo_run_keeps_its_runs_in_postgres(pg, site):
    tmp, env = site
    runs = _runs(pg)
    assert runs and all(status == "SUCCESS" for _, _, status in runs), runs
    materialized = {key for (key,) in pg.query(
        "SELECT DISTINCT asset_key FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")}
    for asset in ("rct_events", "leaderboard", *(f"{m}/model" for m in PLUMBING_MODELS)):
        assert json.dumps(asset.split("/")) in materialized, (asset, sorted(materialized)[:10])
    # nothing of the instance went to SQLite files in DAGSTER_HOME
    home = Path(env["DAGSTER_HOME"])
    assert not [p for p in home.rglob("*.db")], sorted(home.rglob("*.db"))


def test_the_pool_limit_is_set_before_a_step_claims_a_slot(pg, site, monkeypatch):
    """promo_assets sets the `warehouse` pool's limit itself when a run starts (defs.recovery.
    settle_warehouse_pool): Dagster's own setting of a default limit fails on Postgres once another
    process has set it (campaigns started together on a new instance; every run after the default
    changed), as the last assertion shows."""
    import dagster as dg

    tmp, env = site
    for var in ("DAGSTER_HOME", *pg.env()):
        monkeypatch.setenv(var, env[var])
    with dg.DagsterInstance.get() as instance:
        storage = instance.event_log_storage
        info = storage.get_concurrency_info("warehouse")
        assert (info.slot_count, info.using_default_limit) == (instance.global_op_concurrency_default_limit, False)
        with pytest.raises(Exception, match="current transaction is aborted"):
            storage.initialize_concurrency_limit_to_default("warehouse")


def test_a_killed_promo_run_is_recovered_by_the_next(pg, site, capsys):
    tmp, env = site
    day = tmp / "landing" / "demo" / "events" / f"{START}.parquet"
    os.utime(day)  # a changed day file: the next `promo run` ingests it again
    proc = subprocess.Popen([sys.executable, "-m", "promo_assets.cli", "run", "--no-progress", "--verbose"],
                            env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    seen = None
    try:
        for line in proc.stdout:
            if 'Started execution of step "rct_events"' in line:
                seen = line
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
        proc.wait()
    assert seen, "the run ended before its rct_events step started"
    dead = pg.query("SELECT r.run_id, r.status FROM runs r JOIN run_tags t ON t.run_id = r.run_id "
                    "WHERE t.key = 'promo/pid' AND t.value = %s", (str(proc.pid),))
    assert [status for _, status in dead] == ["STARTED"], dead
    assert pg.query("SELECT count(*) FROM concurrency_slots WHERE run_id IS NOT NULL") == [(1,)]

    promo_here(env, "run", "--no-progress")

    said = capsys.readouterr().out
    assert f"{dead[0][0][:8]}" in said and "its process is gone; marked failed, pool slot freed" in said, said[-3000:]
    assert pg.query("SELECT status FROM runs WHERE run_id = %s", (dead[0][0],)) == [("FAILURE",)]
    assert pg.query("SELECT count(*) FROM concurrency_slots WHERE run_id IS NOT NULL") == [(0,)]
    assert _runs(pg)[-1][2] == "SUCCESS"


def _materialized(pg, asset: str, partition: str) -> int:
    """How many materializations of the asset's partition Postgres holds."""
    return pg.query("SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' "
                    "AND asset_key = %s AND partition = %s", (json.dumps([asset]), partition))[0][0]


def _wait(what: str, check, timeout: float, logs: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(2)
    pytest.fail(f"{what} not seen after {timeout:.0f} s; logs in {logs}")


def _unfinished(pg) -> int:
    return pg.query("SELECT count(*) FROM runs WHERE status IN ('QUEUED', 'NOT_STARTED', 'STARTING', 'STARTED', "
                    "'CANCELING')")[0][0]


def test_the_daemon_refreshes_a_landed_campaign_and_runs_a_backfill(pg, site):
    """The deployment's daemon on Postgres: the landing sensor registers the new campaign `c2` and
    ingests it, the automation refreshes its chains to the leaderboard and the decisions; then a
    backfill launched as the UI's "Launch backfill" does completes."""
    tmp, env = site
    promo(env, "simulate", "--campaign", "c2", "--days", "2", "--users", "300", "--seed", "1", "--start", START)
    train_only(tmp / "landing" / "c2" / "campaign.yaml")
    with Deployment(REPO, env, tmp / "deploy.log") as ui:
        _wait("the leaderboard of c2, every run ended",
              lambda: _materialized(pg, "leaderboard", "c2") and not _unfinished(pg), 600, tmp)
        ui.stop_sensor("automation")  # the backfill below would start another refresh of c2
        by_sensor = pg.query("SELECT t.value, r.status FROM runs r JOIN run_tags t ON t.run_id = r.run_id "
                             "WHERE t.key = 'dagster/sensor_name' ORDER BY r.id")
        assert by_sensor == [("landing_sensor", "SUCCESS"), ("automation", "SUCCESS")], by_sensor
        assert pg.query("SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'campaign' "
                        "ORDER BY partition") == [("c2",), ("demo",)]

        launched = ui.graphql(
            """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
                 __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
            {"p": {"partitionNames": ["c2"], "assetSelection": [{"path": ["rct_events"]}]}})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        status = lambda: ui.graphql(  # noqa: E731
            "query($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } } }",
            {"id": launched["backfillId"]})["partitionBackfillOrError"]["status"]
        final = _wait("the backfill's end", lambda: (s := status()) not in ("REQUESTED", "CANCELING") and s, 300, tmp)
        assert final == "COMPLETED_SUCCESS", final
    assert pg.query("SELECT status FROM bulk_actions WHERE key = %s", (launched["backfillId"],)) == \
        [("COMPLETED_SUCCESS",)]
    assert _materialized(pg, "rct_events", "c2") == 2  # the landing sensor's run, then the backfill's


def test_report_history_reads_the_runs_from_postgres(pg, site, capsys):
    """`promo report --history` names every kept run of both campaigns, the daemon's run of c2 included:
    the warehouse marks a UI or daemon run started, and Dagster's run storage (Postgres) says it ended."""
    tmp, env = site
    capsys.readouterr()
    promo_here(env, "report", "--history", "--format", "json")
    out = capsys.readouterr().out
    records = json.loads(out)
    runs = {r["campaign"]: [run["run_id"] for run in r["runs"]] for r in records["campaigns"]}
    assert set(runs) == {"demo", "c2"}, out[:2000]
    # demo: the first run and the one after the kill (the killed one is not kept as succeeded)
    succeeded = {run_id for (run_id,) in pg.query("SELECT run_id FROM runs WHERE status = 'SUCCESS'")}
    assert len(runs["demo"]) == 2 and set(runs["demo"]) <= succeeded, (runs, succeeded)
    # c2: the automation's run of the daemon, known as ended only from Postgres's run storage
    automation = pg.query("SELECT r.run_id FROM runs r JOIN run_tags t ON t.run_id = r.run_id "
                          "WHERE t.key = 'dagster/sensor_name' AND t.value = 'automation'")
    assert runs["c2"] == [automation[0][0]], (runs, automation)
