"""Fixtures of the browser tests of the UI (tests/e2e/browser.py): one chromium per module, one page
per test. Both wait for the module's own `ui` fixture (the `dagster dev` it serves)."""

from __future__ import annotations

import os

import pytest

from tests.e2e.browser import CHROMIUM, SHOTS, TIMEOUT_MS


@pytest.fixture(scope="module")
def browser(ui):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        # --no-sandbox: chromium refuses its sandbox as root (CI containers)
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"],
                              env=_browser_env())
        yield b
        b.close()


@pytest.fixture
def page(browser, ui):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    # should the newsletter dialog show up all the same, skip it before the next action
    page.add_locator_handler(page.get_by_text("Join the Dagster community"),
                             lambda _: page.get_by_role("button", name="Skip").click())
    yield page
    page.close()


def _browser_env() -> dict[str, str]:
    """The browser's environment: the tests' own, less libfaketime's preload when scripts/test_at_date.sh moved the
    date. Chromium does not load pages under libfaketime (its navigations time out); the browser stands for the
    user's machine, while the code under test (the Dagster server) keeps the moved date."""
    env = dict(os.environ)
    if env.get("FAKETIME"):
        env["LD_PRELOAD"] = ":".join(p for p in env.get("LD_PRELOAD", "").split(":") if p and "faketime" not in p)
        for name in [n for n in env if n.startswith("FAKETIME")]:
            del env[name]
    return env
