"""Whether a process is still running on this host, told apart from a later process that got its
pid (its start time from /proc). No dagster here (domain code): `promo_assets/defs/recovery.py` tags
`promo run`'s runs with them and recovers the runs whose process is gone.
"""

from __future__ import annotations

import os
from pathlib import Path


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
