"""Runs whose process is gone, and waiting for the `warehouse` pool (Dagster wiring for `promo run`).

`promo run` executes its jobs in-process; a kill -9 (or an OOM kill) leaves that run STARTED in
DAGSTER_HOME and, when it died inside a step, holding the `warehouse` pool slot, so every later run
waited for ever. Every run `promo run` starts is tagged with the host, pid and process start time of
its process (`process_tags`); `recover_dead_runs` marks such a run whose process no longer exists
failed (`instance.report_run_failed`) and frees its pool slots
(`event_log_storage.free_concurrency_slots_for_run`), and frees the slots of every finished run that
still holds one (what the daemon's `run_monitoring.free_slots_after_run_end_seconds` does for the
UI's runs). `wait_for_pool` is what `promo run` does before each job: it waits in plain Python (so
Ctrl-C / SIGTERM stop it) while another live run uses the pool, saying which run that is.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
from dagster._core.storage.dagster_run import FINISHED_STATUSES, DagsterRunStatus, RunsFilter

from promo_assets.orchestration.common import WAREHOUSE_POOL

HOST_TAG = "promo/host"
PID_TAG = "promo/pid"
PID_START_TAG = "promo/pid_start"  # the process's start time (clock ticks since boot): pid reuse

UNFINISHED = [DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED,
              DagsterRunStatus.CANCELING]
ACTIVE = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


def _proc_start(pid: int) -> str | None:
    """The start time of process `pid` from /proc (None when gone, a zombie, or no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
    if fields[0] in ("Z", "X"):  # zombie / dead: the process has ended
        return None
    return fields[19]


def process_alive(pid: int, start: str | None = None) -> bool:
    """Is process `pid` (started at `start`, when known) still running on this host?"""
    if pid <= 0:
        return False
    if Path("/proc/self/stat").exists():
        now = _proc_start(pid)
        return now is not None and (start is None or now == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_tags() -> dict[str, str]:
    """Run tags naming this process, so that a later `promo run` can tell whether it is gone."""
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}
    start = _proc_start(os.getpid())
    if start is not None:
        tags[PID_START_TAG] = start
    return tags


def _owner_alive(run: dg.DagsterRun) -> bool:
    try:
        pid = int(run.tags.get(PID_TAG, "0"))
    except ValueError:
        return True  # not ours to judge
    return process_alive(pid, run.tags.get(PID_START_TAG))


def describe_run(run: dg.DagsterRun) -> str:
    partition = run.tags.get("dagster/partition")
    where = f"{run.job_name}" + (f" {partition}" if partition else "")
    if PID_TAG in run.tags:
        who = f"promo run, pid {run.tags[PID_TAG]} on {run.tags.get(HOST_TAG, '?')}"
    else:
        who = "launched from the Dagster UI / daemon"
    return f"run {run.run_id[:8]} ({where}; {who})"


def recover_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed every unfinished `promo run` run of this host whose process is gone, and free the
    pool slots of those and of any finished run still holding one. Returns one line per run."""
    lines: list[str] = []
    host = socket.gethostname()
    records = instance.get_run_records(filters=RunsFilter(statuses=UNFINISHED, tags={HOST_TAG: host}))
    for record in records:
        run = record.dagster_run
        if run.tags.get(PID_TAG) == str(os.getpid()) or _owner_alive(run):
            continue
        instance.report_run_failed(
            run, f"the process of this run (pid {run.tags.get(PID_TAG)} on {host}) is gone (killed?); "
                 f"marked failed and its '{WAREHOUSE_POOL}' pool slots freed by promo run pid {os.getpid()}")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        lines.append(f"{describe_run(run)}: its process is gone; marked failed, pool slot freed")
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        for run_id in storage.get_concurrency_run_ids():
            run = instance.get_run_by_id(run_id)
            if run is None or run.status in FINISHED_STATUSES:
                storage.free_concurrency_slots_for_run(run_id)
                if run is not None:
                    lines.append(f"{describe_run(run)}: {run.status.value.lower()} but still held a pool slot; freed")
    return lines


def pool_holders(instance: dg.DagsterInstance, pool: str = WAREHOUSE_POOL) -> list[dg.DagsterRun]:
    """Other live runs that hold a slot of `pool` or are in progress with a step in it."""
    run_ids: set[str] = set()
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        info = storage.get_concurrency_info(pool)
        run_ids |= {slot.run_id for slot in info.claimed_slots}
        run_ids |= {step.run_id for step in info.pending_steps if step.assigned_timestamp is not None}
    for record in instance.get_run_records(filters=RunsFilter(statuses=ACTIVE)):
        concurrency = record.dagster_run.run_op_concurrency
        if concurrency and pool in (concurrency.all_pools or ()):
            run_ids.add(record.dagster_run.run_id)
    runs = [instance.get_run_by_id(run_id) for run_id in sorted(run_ids)]
    return [r for r in runs if r is not None and r.status not in FINISHED_STATUSES
            and r.tags.get(PID_TAG) != str(os.getpid())]


def wait_for_pool(instance: dg.DagsterInstance, say: Callable[[str], None], pool: str = WAREHOUSE_POOL,
                  poll_seconds: float = 1.0, remind_seconds: float = 30.0) -> float:
    """Recover dead runs, then wait (interruptibly) until no other live run uses `pool`, telling
    `say` which runs hold it. Returns the seconds waited."""
    start = time.monotonic()
    told: tuple[str, ...] = ()
    last_told = 0.0
    while True:
        for line in recover_dead_runs(instance):
            say(f"recovered {line}")
        holders = pool_holders(instance, pool)
        if not holders:
            if told:
                say(f"the '{pool}' pool is free after {time.monotonic() - start:.0f}s; going on")
            return time.monotonic() - start
        ids = tuple(r.run_id for r in holders)
        now = time.monotonic()
        if ids != told or now - last_told >= remind_seconds:
            since = dt.datetime.now().strftime("%H:%M:%S")
            say(f"waiting for the '{pool}' pool (DuckDB allows one writer), held by "
                + "; ".join(describe_run(r) for r in holders)
                + f" [{since}, waited {now - start:.0f}s; Ctrl-C stops]")
            told, last_told = ids, now
        time.sleep(poll_seconds)
