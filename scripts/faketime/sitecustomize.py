"""Loaded (through PYTHONPATH) by every Python process of ``scripts/test_at_date.sh``, and only there.

Debian's libfaketime 0.9.10 cannot run CPython unchanged with the clock moved:

* with the monotonic clock faked, ``threading.Event.wait`` and ``Lock.acquire(timeout=...)`` never return
  (``pthread_cond_timedwait`` on CLOCK_MONOTONIC), so the script leaves the monotonic clock real
  (``FAKETIME_DONT_FAKE_MONOTONIC=1``);
* then ``time.sleep`` fails with ``OSError: [Errno 22]``: CPython sleeps with
  ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ...)`` and libfaketime shifts that absolute deadline by the fake
  offset anyway, which makes it negative.

So ``time.sleep`` here waits on ``select`` (which libfaketime passes through) until the real monotonic deadline.
Everything else (``time.time``, ``date.today``, DuckDB's and git's clocks) sees the moved date.
"""
import os
import select
import time

if os.environ.get("FAKETIME") and os.environ.get("FAKETIME_DONT_FAKE_MONOTONIC") == "1":
    _monotonic = time.monotonic

    def _sleep(seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        deadline = _monotonic() + seconds
        while (left := deadline - _monotonic()) > 0:
            select.select([], [], [], left)

    time.sleep = _sleep
