"""The suite's own set-up (tests/conftest.py): which test files pytest-xdist keeps together."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import DEMO_RUN_FILES, pytest_xdist_make_scheduler

ROOT = Path(__file__).resolve().parents[2]


class _Options:
    """The command-line options the scheduler reads: `-n 2 --dist <dist>`."""

    def __init__(self, dist: str):
        self.values = {"dist": dist, "numprocesses": 2, "tx": ["2*popen"]}

    def getoption(self, name, default=None):
        return self.values.get(name, default)

    getvalue = getoption


def test_the_files_kept_together_are_the_ones_reading_the_demo_run():
    readers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                     if re.search(r"\bdemo_run\b", p.read_text()))
    assert readers == sorted(DEMO_RUN_FILES)


def test_loadfile_scheduling_puts_the_demo_run_files_in_one_unit_and_no_other():
    scheduler = pytest_xdist_make_scheduler(_Options("loadfile"), None)
    scopes = {scheduler._split_scope(f"{path}::test_x") for path in DEMO_RUN_FILES}
    assert len(scopes) == 1
    others = ["tests/e2e/test_serve.py::test_a", "tests/e2e/test_serve.py::test_b", "tests/e2e/test_scale_pipeline.py::t"]
    assert [scheduler._split_scope(n) for n in others] == ["tests/e2e/test_serve.py"] * 2 + ["tests/e2e/test_scale_pipeline.py"]
    assert pytest_xdist_make_scheduler(_Options("load"), None) is None  # another --dist: xdist's own
