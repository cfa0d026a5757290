"""Runs whose process is gone (Dagster wiring for `promo run`): what Dagster's run monitoring cannot see.

`promo run` executes its jobs in-process; a kill -9 (or an OOM kill) leaves that run STARTED in
DAGSTER_HOME and, when it died inside a step, holding the `warehouse` pool slot, so every later run
waited for ever. Every run `promo run` starts is tagged with the host, pid and process start time of
its process (`core.processes.process_tags`); `recover_dead_runs` marks such a run whose process no longer exists
failed (`instance.report_run_failed`) and frees its pool slots
(`event_log_storage.free_concurrency_slots_for_run`), and frees the slots of every finished run that
still holds one (what the daemon's `run_monitoring.free_slots_after_run_end_seconds` does for the
UI's runs). Run monitoring is a daemon feature that watches runs launched through a run launcher;
an in-process run has no worker it could check, so this is the one thing `promo run` does besides
launching Dagster's jobs. Waiting for the pool is Dagster's: a step of the `warehouse` pool waits
for its slot (dagster_home/dagster.yaml sets the limit). A killed process's warehouse writer slot
(a file lock, promo_assets/store/warehouse.py) is released by the kernel.
"""

from __future__ import annotations

import os
import socket

import dagster as dg
from dagster._core.storage.dagster_run import FINISHED_STATUSES, DagsterRunStatus, RunsFilter

from promo_assets.core.processes import HOST_TAG, PID_TAG, tagged_process_alive

WAREHOUSE_POOL = "warehouse"  # every asset that touches the DuckDB file; its limit (dagster.yaml) caps them at once

UNFINISHED = [DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED,
              DagsterRunStatus.CANCELING]
ACTIVE = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


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
        if run.tags.get(PID_TAG) == str(os.getpid()) or tagged_process_alive(run.tags):
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


def settle_warehouse_pool(instance: dg.DagsterInstance, attempts: int = 5) -> None:
    """Set the `warehouse` pool's limit to dagster.yaml's `concurrency.pools.default_limit` before a
    run's first step claims a slot. Dagster sets a pool's default limit when a step first claims one
    (and again whenever the configured default changed) with an INSERT that, on Postgres, fails when
    another process inserted it first, and the rest of that transaction then fails too: campaigns
    started together on a new instance, or every run after the default changed, failed with
    "InFailedSqlTransaction". Set explicitly here (an upsert), the limit is no longer "from default",
    so the steps leave it alone. Retried a few times against the same race."""
    import time

    storage = instance.event_log_storage
    limit = instance.global_op_concurrency_default_limit
    if limit is None or not storage.supports_global_concurrency_limits:
        return
    for attempt in range(attempts):
        try:
            info = storage.get_concurrency_info(WAREHOUSE_POOL)
            if info.slot_count == limit and not info.using_default_limit:
                return
            storage.set_concurrency_slots(WAREHOUSE_POOL, limit)
            return
        except Exception:  # noqa: BLE001 - the storage's own error of a concurrent insert; retried
            if attempt == attempts - 1:
                raise
            time.sleep(0.1 * (attempt + 1))
