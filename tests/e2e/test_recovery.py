"""Recovery after a killed `promo run`, Dagster's waiting for the warehouse pool, a busy warehouse, and the
domain error's own message in the CLI's failure list (issue #12 items 4, 13, 11-CLI)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest

import promo_assets.cli.main as cli
from promo_assets.config.settings import SettingsError
from promo_assets.core.processes import PID_START_TAG, PID_TAG, process_tags
from promo_assets.defs.common import WAREHOUSE_POOL
from promo_assets.defs.recovery import recover_dead_runs
from promo_assets.store import warehouse
from tests.conftest import PLUMBING_MODELS, train_only
from promo_assets.simulation import REFERENCE_START

REPO = Path(__file__).resolve().parents[2]


@dg.op(pool=WAREHOUSE_POOL)
def _writes_warehouse():
    return None


@dg.job
def _pool_job():
    _writes_warehouse()


def _started_run_holding_slot(instance: dg.DagsterInstance, tags: dict[str, str], slots: int = 1) -> str:
    """A run as a killed `promo run` leaves it: STARTED, holding `slots` of the pool's slots."""
    run = instance.create_run_for_job(_pool_job, status=dg.DagsterRunStatus.STARTED, tags=tags)
    storage = instance.event_log_storage
    storage.initialize_concurrency_limit_to_default(WAREHOUSE_POOL)
    for i in range(slots):
        assert storage.claim_concurrency_slot(WAREHOUSE_POOL, run.run_id, f"_writes_warehouse_{i}").is_claimed
    return run.run_id


def _all_slots(instance: dg.DagsterInstance) -> int:
    """The pool's limit (dagster_home/dagster.yaml's default_limit)."""
    instance.event_log_storage.initialize_concurrency_limit_to_default(WAREHOUSE_POOL)
    return instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL).slot_count


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_dead_run_is_marked_failed_and_its_pool_slot_freed(promo_env):
    instance = dg.DagsterInstance.get()
    dead = _sleeper()
    tags = {**process_tags(), PID_TAG: str(dead.pid)}
    tags.pop(PID_START_TAG, None)
    _stop(dead)  # its process is gone (and reaped): what kill -9 of `promo run` leaves
    run_id = _started_run_holding_slot(instance, tags)
    assert instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL).claimed_slots

    said = recover_dead_runs(instance)

    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
    info = instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL)
    assert not info.claimed_slots and not info.pending_steps
    assert any(run_id[:8] in line and "process is gone" in line and str(dead.pid) in line for line in said), said
    failure = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    assert failure and "is gone" in failure[-1].message


def test_reused_pid_counts_as_gone(promo_env):
    """The run's pid is alive but belongs to a process that started at another time (pid reuse)."""
    instance = dg.DagsterInstance.get()
    other = _sleeper()
    try:
        run_id = _started_run_holding_slot(instance, {**process_tags(), PID_TAG: str(other.pid), PID_START_TAG: "1"})
        lines = recover_dead_runs(instance)
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
        assert any(run_id[:8] in line for line in lines)
    finally:
        _stop(other)


def test_a_run_waits_for_the_pool_slot_of_a_live_run(promo_env):
    """`promo run` leaves the waiting to Dagster: an in-process run's `warehouse` step waits while
    live runs hold all the pool's slots, and runs once a slot is free; the holder is left alone."""
    import threading

    instance = dg.DagsterInstance.get()
    live = _sleeper()
    try:
        tags = {**process_tags(), PID_TAG: str(live.pid)}
        tags.pop(PID_START_TAG, None)
        run_id = _started_run_holding_slot(instance, tags, slots=_all_slots(instance))
        assert recover_dead_runs(instance) == []  # alive: not ours to recover
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED
        release = threading.Timer(2.0, instance.event_log_storage.free_concurrency_slots_for_run, [run_id])
        release.start()
        start = time.monotonic()
        result = _pool_job.execute_in_process(instance=instance)
        waited = time.monotonic() - start
        release.join()
        assert result.success
        assert waited >= 2.0, waited  # the step did not start before the slot was freed
    finally:
        _stop(live)


def test_finished_run_still_holding_a_slot_is_freed(promo_env):
    instance = dg.DagsterInstance.get()
    run_id = _started_run_holding_slot(instance, {"promo/trigger": "ui"})
    instance.report_run_failed(instance.get_run_by_id(run_id), "failed elsewhere")
    lines = recover_dead_runs(instance)
    assert any(run_id[:8] in line and "freed" in line for line in lines)
    assert not instance.event_log_storage.get_concurrency_info(WAREHOUSE_POOL).claimed_slots


# ---------------------------------------------------------------------------------------------
# a busy warehouse (item 13)


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen:
    """Another process writing the warehouse: holds DuckDB's file lock for `seconds`."""
    code = textwrap.dedent(f"""
        import duckdb, sys, time
        con = duckdb.connect({str(path)!r})
        print("locked", flush=True)
        time.sleep({seconds})
        con.close()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.hostile
@pytest.mark.parametrize("command", [["report"], ["report", "--campaign", "demo"]],
                         ids=["error-report-while-a-run-writes", "error-report-campaign-while-a-run-writes"])
def test_report_on_a_busy_warehouse_says_busy(promo_env, monkeypatch, capsys, command):
    duckdb.connect(str(promo_env["warehouse"])).close()
    monkeypatch.setenv("PROMO_WAREHOUSE_BUSY_SECONDS", "0.3")
    holder = _hold_lock(promo_env["warehouse"], 30)
    try:
        start = time.monotonic()
        assert cli.main(command) == cli.EXIT_USAGE
        assert time.monotonic() - start < 10
    finally:
        _stop(holder)
    err = capsys.readouterr().err
    assert "the warehouse is busy (a run is writing it); try again" in err
    assert str(promo_env["warehouse"]) in err and f"PID {holder.pid}" in err
    assert "Traceback" not in err


def test_connect_retries_until_the_lock_is_released(promo_env, monkeypatch):
    duckdb.connect(str(promo_env["warehouse"])).close()
    monkeypatch.setenv("PROMO_WAREHOUSE_BUSY_SECONDS", "20")
    holder = _hold_lock(promo_env["warehouse"], 1.0)
    try:
        with warehouse.connect(promo_env["warehouse"], read_only=True) as con:  # waits ~1 s, then opens
            assert con.execute("select 42").fetchone() == (42,)
        assert holder.wait(timeout=10) == 0
    finally:
        _stop(holder)


@pytest.mark.hostile
@pytest.mark.parametrize("value", ["ten", "-1", "inf", "nan"],
                         ids=["error-busy-seconds-word", "error-busy-seconds-negative", "error-busy-seconds-inf",
                              "error-busy-seconds-nan"])
def test_bad_busy_seconds_setting_is_named(promo_env, monkeypatch, capsys, value):
    monkeypatch.setenv("PROMO_WAREHOUSE_BUSY_SECONDS", value)
    with pytest.raises(SettingsError, match=f"PROMO_WAREHOUSE_BUSY_SECONDS='{value}'"):
        with warehouse.connect(promo_env["warehouse"]):
            pass
    duckdb.connect(str(promo_env["warehouse"])).close()
    assert cli.main(["report"]) == cli.EXIT_USAGE
    assert "PROMO_WAREHOUSE_BUSY_SECONDS" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# the domain error's own message in `promo run`'s failure list (item 11, CLI part)

def _domain_errors():
    from promo_assets.allocation.errors import InfeasibleBudgetError
    from promo_assets.models.errors import ModelInputError
    from promo_assets.simulation.truth import TruthError

    return [
        InfeasibleBudgetError("budget 0.01 per capita is below the cheapest allocation (0.5 per capita)", 0.5),
        ModelInputError("no rows with split == 'train' for campaign 'c1'"),
        TruthError("truth/ has no response for 12 holdout users of campaign 'c1'"),
        duckdb.ConstraintException("Constraint Error: NOT NULL constraint failed: response_coefficients.response"),
    ]


def test_failure_messages_show_every_failed_steps_own_error(promo_env):
    errors = _domain_errors()

    def failing(name, exc, wrap):
        @dg.op(name=name)
        def _op():
            if wrap:  # a domain error raised while handling a lower-level one
                try:
                    raise KeyError("split")
                except KeyError as low:
                    raise exc from low
            raise exc
        return _op

    ops = [failing(f"step_{i}", exc, wrap=i % 2 == 0) for i, exc in enumerate(errors)]

    @dg.op
    def step_failure():
        raise dg.Failure("nothing was loaded for campaign 'c1' day 2026-01-02")

    @dg.job
    def many():
        for op in ops:
            op()
        step_failure()

    result = many.execute_in_process(raise_on_error=False)
    messages = cli._failure_messages(result)
    assert len(messages) == len(errors) + 1
    for i, exc in enumerate(errors):
        own = str(exc).removeprefix("Constraint Error: ")
        assert any(m.startswith(f"step_{i}: ") and own in m for m in messages), (own, messages)
    assert "step_0: " in messages[0] and "(caused by KeyError: 'split')" in messages[0]
    assert "step_failure: nothing was loaded for campaign 'c1' day 2026-01-02" in messages
    assert not any("Error occurred while executing op" in m for m in messages)


def test_promo_run_ingest_failure_line_has_the_domain_error(promo_env, monkeypatch, capsys):
    import promo_assets.defs.ingestion.assets as ingest_assets
    from promo_assets.simulation import SimulationRequest, simulate
    from promo_assets.simulation.truth import TruthError

    simulate("demo", SimulationRequest("c1", promo_env["landing"], 1, 100, 0, REFERENCE_START))
    day = next((promo_env["landing"] / "c1" / "events").iterdir()).stem

    def ingest(con, config, day, path):
        raise TruthError(f"truth file of campaign 'c1' day {day} has 3 users twice")

    monkeypatch.setattr(ingest_assets, "ingest_events_day", ingest)
    assert cli.main(["run", "--no-progress", "--ingest-only"]) == cli.EXIT_FAILED
    out, err = capsys.readouterr()
    assert f"FAILED c1 {day}: rct_events: truth file of campaign 'c1' day {day} has 3 users twice" in out
    assert f"  c1 {day}: rct_events: truth file of campaign 'c1' day {day} has 3 users twice" in err
    assert "Error occurred while executing op" not in out + err


@pytest.mark.slow  # ~15 s alone, ~40 s on a busy 2-core machine
def test_promo_run_prints_the_domain_errors_of_every_failed_step(promo_env, monkeypatch, capsys):
    """An ingestion day and two models fail with domain errors: each message reaches the output. The
    campaign trains the two failing models and one LightGBM model that succeeds beside them."""
    import promo_assets.defs.ingestion.assets as ingest_assets
    import promo_assets.models.dipn as dipn
    import promo_assets.models.s_learner as s_learner
    from promo_assets.models.errors import ModelInputError
    from promo_assets.simulation import SimulationRequest, simulate

    # 3 days: the first fails to load, the second trains, the third is the holdout (with the second
    # failing too, no training day would be left and the data checks would skip every model instead)
    summary = simulate("demo", SimulationRequest("c1", promo_env["landing"], 3, 200, 0, REFERENCE_START))
    assert "3 day(s)" in str(summary)
    train_only(promo_env["landing"] / "c1" / "campaign.yaml", ("s_learner", "dipn", "lgbm_s"))
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")
    days = sorted(p.stem for p in (promo_env["landing"] / "c1" / "events").iterdir())
    real_ingest = ingest_assets.ingest_events_day

    def ingest(con, config, day, path):
        if day.isoformat() == days[0]:
            raise duckdb.ConstraintException("Constraint Error: NOT NULL constraint failed: rct_events.response")
        return real_ingest(con, config, day, path)

    def no_train(*args, **kwargs):
        raise ModelInputError("no rows with split == 'train' for campaign 'c1'")

    def bad_features(*args, **kwargs):
        raise ModelInputError("feature columns missing: 'age'")

    monkeypatch.setattr(ingest_assets, "ingest_events_day", ingest)
    monkeypatch.setattr(s_learner, "train_s_learner", no_train)
    monkeypatch.setattr(dipn, "train_dipn_bias", bad_features)

    assert cli.main(["run", "--no-progress"]) == cli.EXIT_FAILED
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    assert f"FAILED c1 {days[0]}: rct_events: Constraint Error: NOT NULL constraint failed: rct_events.response" in out
    failures = err[err.index("failures:"):]
    assert f"c1 {days[0]}: rct_events: Constraint Error: NOT NULL constraint failed: rct_events.response" in failures
    assert "c1: s_learner/model: no rows with split == 'train' for campaign 'c1'" in failures
    assert "c1: dipn/bias_net: feature columns missing: 'age'" in failures
    assert "Error occurred while executing op" not in out + err


# ---------------------------------------------------------------------------------------------
# kill -9 during ingestion, then `promo run` (item 4, end to end)


@pytest.mark.slow  # two `promo run` subprocesses: ~40 s alone, longer on a busy machine
def test_promo_run_after_kill_during_ingestion_completes(tmp_path):
    """benchmarks/kill_recovery.py kills `promo run` in its rct_events step; the next run must
    complete (the script gives up on it after --timeout: a hang fails this test, never blocks it).
    The campaign trains two LightGBM models: the recovery is the point, not the models."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "kill_recovery.py"), "--phases", "ingestion", "--no-baseline",
         "--days", "2", "--users", "150", "--epochs", "1", "--timeout", "300", "--json", "--models", *PLUMBING_MODELS],
        capture_output=True, text=True, timeout=900, env={**os.environ, "TMPDIR": str(tmp_path)},
        start_new_session=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))
    assert row["marker"] and "rct_events" in row["marker"]  # killed inside the ingestion step
    assert row["recovered"], row.get("output_tail")
    assert list(row["dead_runs"].values()) == ["refresh_job FAILURE"]  # the one run of ingestion and models
    assert any("its process is gone; marked failed, pool slot freed" in line for line in row["recovered_runs"])
    assert row["pool_slots_left"] == 0
