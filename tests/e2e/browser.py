"""What the browser tests of the UI share (test_ui_browser.py, test_ui_markup.py): Debian's chromium
driven by the playwright package with `executable_path` set (no browser download), where the
screenshots go, and the check that both are there. Their `browser` and `page` fixtures are in
tests/e2e/conftest.py; each test module brings the `ui` fixture (its `dagster dev`) they wait for."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PROMO_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(os.environ.get("PROMO_UI_SCREENSHOTS") or ROOT / "test-output" / "screenshots")
TIMEOUT_MS = 120_000  # one page on a loaded 2-core machine; a healthy page takes a few seconds


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    if CHROMIUM is None or not os.access(CHROMIUM, os.X_OK):
        return "no chromium binary (apt-get install chromium, or set PROMO_CHROMIUM)"
    return None


def require_browser() -> None:
    """Skip with the reason when chromium or playwright is missing; fail instead when PROMO_UI_TESTS=1
    asked for them (CI)."""
    why = missing()
    if why:
        if os.environ.get("PROMO_UI_TESTS") == "1":
            pytest.fail(f"PROMO_UI_TESTS=1 but {why}: run PROMO_UI_TESTS=1 bash scripts/setup.sh")
        pytest.skip(f"UI browser test skipped: {why}; PROMO_UI_TESTS=1 bash scripts/setup.sh installs both")
