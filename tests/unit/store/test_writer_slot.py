"""The warehouse's writer slot (warehouse._WriterSlot): one promo_assets process writes the DuckDB file
at a time, for as long as its connection is open and no longer; readers share it; a killed holder
frees it; a connection outside a run waits PROMO_WAREHOUSE_BUSY_SECONDS, a run's step as long as it
takes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from promo_assets.store import warehouse

REPO = Path(__file__).resolve().parents[3]


def _holder(path: Path, seconds: float, read_only: bool = False) -> subprocess.Popen:
    """Another promo_assets process with a connection open on `path` for `seconds`."""
    code = textwrap.dedent(f"""
        import time
        from promo_assets.store import warehouse
        with warehouse.connect({str(path)!r}, read_only={read_only}):
            print("held", flush=True)
            time.sleep({seconds})
        print("released", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO,
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.fixture
def path(tmp_path, monkeypatch) -> Path:
    target = tmp_path / "w.duckdb"
    with warehouse.connect(target):
        pass
    monkeypatch.setenv("PROMO_WAREHOUSE_BUSY_SECONDS", "0.5")
    return target


@pytest.mark.hostile
def test_a_writer_outside_a_run_gives_up_naming_the_holder(path):
    holder = _holder(path, 30)
    try:
        start = time.monotonic()
        with pytest.raises(warehouse.WarehouseBusyError, match=rf"held by promo_assets \(PID {holder.pid}\)"):
            with warehouse.connect(path):
                pass
        assert 0.4 <= time.monotonic() - start < 5
        with pytest.raises(warehouse.WarehouseBusyError, match="the warehouse is busy"):  # a reader too
            with warehouse.connect(path, read_only=True):
                pass
    finally:
        _stop(holder)


def test_a_step_queues_for_the_slot_and_gets_it_when_the_connection_closes(path):
    holder = _holder(path, 1.5)
    try:
        start = time.monotonic()
        with warehouse.connect(path, queue=True) as con:  # longer than the busy budget of 0.5 s
            waited = time.monotonic() - start
            assert con.execute("select 42").fetchone() == (42,)
        assert waited >= 1.0, waited
        # the holder's process is still alive: only its connection held the slot
        assert holder.stdout.readline().strip() == "released" and holder.poll() is None
        with warehouse.connect(path):
            pass
    finally:
        _stop(holder)


def test_readers_share_the_slot(path):
    holder = _holder(path, 30, read_only=True)
    try:
        with warehouse.connect(path, read_only=True) as con:
            assert con.execute("select 1").fetchone() == (1,)
    finally:
        _stop(holder)


def test_a_killed_holder_frees_the_slot(path):
    holder = _holder(path, 300)
    _stop(holder)  # kill -9 with the connection open
    start = time.monotonic()
    with warehouse.connect(path) as con:
        assert con.execute("select 1").fetchone() == (1,)
    assert time.monotonic() - start < 0.5
