"""Whether a process is still running on this host, told apart from a later process that got its
pid (its start time from /proc), and the tags that name a process (host, pid, start time). No dagster
here (domain code): `promo_assets/defs/recovery.py` tags `promo run`'s runs with them and recovers the
runs whose process is gone.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

HOST_TAG = "promo/host"
PID_TAG = "promo/pid"
PID_START_TAG = "promo/pid_start"  # the process's start time (clock ticks since boot): pid reuse


def process_start(pid: int) -> str | None:
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
        now = process_start(pid)
        return now is not None and (start is None or now == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_tags() -> dict[str, str]:
    """Tags naming this process (host, pid, start time), so that a later process can tell whether it is gone."""
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}
    start = process_start(os.getpid())
    if start is not None:
        tags[PID_START_TAG] = start
    return tags


def tagged_process_alive(tags: dict[str, str]) -> bool:
    """Is the process that `tags` name (`process_tags`, on this host) still running? Tags without a
    readable pid are not ours to judge: alive."""
    try:
        pid = int(tags.get(PID_TAG, "0"))
    except ValueError:
        return True  # not ours to judge
    return process_alive(pid, tags.get(PID_START_TAG))
