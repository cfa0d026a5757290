"""scripts/test_at_date.sh runs the suite with the system date moved: under its environment (libfaketime with the
monotonic clock real, scripts/faketime/sitecustomize.py on PYTHONPATH) a Python process sees the moved date and
can still sleep. Runs where Debian's faketime is installed."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("faketime") is None, reason="Debian's faketime is not installed")

PROBE = """
import datetime, threading, time
start = time.monotonic()
time.sleep(0.05)
threading.Event().wait(0.05)
print(datetime.date.today().isoformat(), round(time.monotonic() - start, 3))
"""


@pytest.mark.skipif(bool(os.environ.get("FAKETIME")), reason="already under faketime (scripts/test_at_date.sh)")
def test_python_under_test_at_date_sees_the_moved_date_and_sleeps() -> None:
    env = dict(os.environ, FAKETIME_DONT_FAKE_MONOTONIC="1",
               PYTHONPATH=str(ROOT / "scripts" / "faketime"))
    before = datetime.date.today()
    done = subprocess.run(["faketime", "-f", "+30d", sys.executable, "-c", PROBE], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    day, elapsed = done.stdout.split()
    assert datetime.date.fromisoformat(day) in {before + datetime.timedelta(days=30),
                                                datetime.date.today() + datetime.timedelta(days=30)}
    assert 0.1 <= float(elapsed) < 5


def test_test_at_date_names_its_usage() -> None:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test_at_date.sh")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "usage: bash scripts/test_at_date.sh OFFSET" in done.stderr
