"""Write a benchmark's measurements as JSON into benchmarks/results/ with what they were measured on:
the command line, the commit (and whether the tree had uncommitted changes), the date and the machine
load before and after."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def context() -> dict:
    """What the measurement ran on (call at the start; `record` adds the load at the end)."""
    return {"command": " ".join([Path(sys.executable).name, *sys.argv]), "git_commit": _git("rev-parse", "HEAD"),
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()},
            "load_average_start": list(os.getloadavg())}


def record(name: str, started: dict, result: dict) -> Path:
    """benchmarks/results/<name>-<UTC time>.json with `started` (from `context()`), the load now and
    `result`; returns the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"{name}-{stamp}.json"
    body = {**started, "load_average_end": list(os.getloadavg()), "result": result}
    path.write_text(json.dumps(body, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
    return path
