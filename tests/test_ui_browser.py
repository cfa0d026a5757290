"""The Dagster UI in a real browser (issue #12 item 15).

Debian's `chromium`, driven by the `playwright` Python package with `executable_path` set (no
browser download): `promo run` prepares a tiny demo campaign, `dagster dev` serves it (its own
process group on a free port, killed by group at the end), and the browser opens the asset graph,
an asset description, the `policy_evaluation` leaderboard and a plot, and launches a 3-day backfill
from `rct_events`'s page, which the instance then holds.

Install: `PROMO_UI_TESTS=1 bash scripts/setup.sh` (apt-get chromium + the playwright wheel). Without
them the tests are skipped with the reason; with PROMO_UI_TESTS=1 set (CI) a missing browser fails.
Screenshots: `$PROMO_UI_SCREENSHOTS` (default `<tmp>/promo-ui-test/`).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from promo_assets.devserver import DagsterDev, demo_env, promo

pytestmark = [pytest.mark.ui, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("PROMO_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(os.environ.get("PROMO_UI_SCREENSHOTS") or Path(tempfile.gettempdir()) / "promo-ui-test")
TIMEOUT_MS = 120_000  # one page on a loaded 2-core machine; a healthy page takes a few seconds
DAYS = 4


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    if CHROMIUM is None or not os.access(CHROMIUM, os.X_OK):
        return "no chromium binary (apt-get install chromium, or set PROMO_CHROMIUM)"
    return None


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    missing = _missing()
    if missing:
        if os.environ.get("PROMO_UI_TESTS") == "1":
            pytest.fail(f"PROMO_UI_TESTS=1 but {missing}: run PROMO_UI_TESTS=1 bash scripts/setup.sh")
        pytest.skip(f"UI browser test skipped: {missing}; PROMO_UI_TESTS=1 bash scripts/setup.sh installs both")
    tmp = tmp_path_factory.mktemp("ui")
    env = demo_env(tmp, ROOT, max_epochs=3)
    promo(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", str(DAYS), "--users", "300", "--seed", "0")
    promo(env, "run", "--campaign", "demo", "--no-progress")
    days = sorted(p.stem for p in (tmp / "landing" / "demo" / "events").iterdir())
    assert len(days) == DAYS
    with DagsterDev(ROOT, env, tmp / "dagster_dev.log") as server:
        server.graphql("mutation { setNuxSeen }")  # no newsletter dialog over the first page
        yield server, days


@pytest.fixture(scope="module")
def browser(ui):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        # --no-sandbox: chromium refuses its sandbox as root (CI containers)
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"])
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


def shot(page, name: str) -> Path:
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def test_asset_graph_shows_the_pipeline(ui, page):
    server, _ = ui
    page.goto(f"{server.url}/assets/leaderboard?view=lineage&lineageScope=upstream&lineageDepth=10")
    page.get_by_text("rct_events", exact=True).first.wait_for()
    for asset in ("rct_events", "propensity", "training_frame", "bias_net", "uplift_net", "budget_dual", "allocation",
                  "policy_evaluation", "leaderboard"):
        assert page.get_by_text(asset, exact=True).first.is_visible(), f"asset {asset} not drawn in the graph"
    for group in ("ingestion", "causal", "s_learner", "dipn", "evaluation"):
        assert page.get_by_text(group, exact=True).first.is_visible(), f"group {group} not drawn in the graph"
    shot(page, "asset-graph")


def test_description_keeps_the_landing_path(ui, page):
    server, _ = ui
    page.goto(f"{server.url}/assets/rct_events")
    description = page.get_by_text("Validated RCT events of one campaign, loaded from its day files")
    description.wait_for()
    assert description.is_visible()
    # rendered as Markdown with HTML: unquoted, <landing> etc. vanished as unknown tags
    assert "<landing>/<campaign>/events/<day>.parquet|csv" in description.inner_text()
    shot(page, "rct-events-description")


def _open_metadata_markdown(page, key: str):
    page.locator("tr", has_text=key).first.get_by_text("[Show Markdown]").click()
    dialog = page.get_by_role("dialog").filter(has_text=key)
    dialog.wait_for()
    return dialog


def test_policy_evaluation_leaderboard_and_plot(ui, page):
    server, _ = ui
    page.goto(f"{server.url}/assets/leaderboard?partition=demo")
    # the leaderboard is table metadata (MetadataValue.table): it renders inline in its metadata row
    row = page.locator("tr").filter(has=page.get_by_text("leaderboard", exact=True)).first
    table = row.locator("table").first
    table.wait_for()
    header = [h.strip() for h in table.locator("th").all_inner_texts()]
    for column in ("budget", "rank", "model", "% oracle", "spend ratio"):
        assert column in header, f"leaderboard column {column!r} missing from {header}"
    models = {r.locator("td").nth(header.index("model")).inner_text().strip() for r in table.locator("tbody tr").all()}
    assert {"s_learner", "dipn", "random"} <= models, models
    ranks = [r.locator("td").nth(header.index("rank")).inner_text().strip() for r in table.locator("tbody tr").all()]
    assert "1" in ranks, ranks
    shot(page, "policy-evaluation-leaderboard")

    plot = _open_metadata_markdown(page, "frontier_plot")
    image = plot.locator("img[src^='data:image/png']")
    image.wait_for()
    width, height = image.evaluate("img => [img.naturalWidth, img.naturalHeight]")
    assert width > 300 and height > 200, f"frontier plot decoded to {width}×{height}"
    assert plot.get_by_text("Cost–response frontier").first.is_visible()
    shot(page, "policy-evaluation-frontier-plot")


def _pick_partitions(page, dialog, keys: list[str], listed: int) -> None:
    """Tick `keys` in the multi-select partition picker of the launch dialog.

    A dynamically partitioned asset gets a "Select a partition or create one" picker: a popover menu
    with a filter box, "Add partition", "Select all" and one checkbox item per key; the chosen keys
    show as chips in the picker. `listed`: how many keys the menu must offer ("Select all (n)").
    """
    picker = dialog.locator("[aria-haspopup]").first
    picker.click()
    menu = page.get_by_role("menu").filter(has=page.get_by_placeholder("Filter partitions")).first
    menu.wait_for()
    menu.get_by_role("menuitem").filter(has=page.get_by_text(f"Select all ({listed})", exact=True)).wait_for()
    for key in keys:
        menu.get_by_role("menuitem").filter(has=page.get_by_text(key, exact=True)).click()
    shot(page, "rct-events-backfill-campaign-picker")
    dialog.get_by_text("Launch runs to materialize", exact=False).first.click()  # a click outside closes the menu
    menu.wait_for(state="hidden")


def test_backfill_of_the_campaign_from_rct_events_page(ui, page):
    """The only partitions are the campaigns (docs/automation.md, "Partitions"): the picker lists the
    campaign, no day dimension; one run loads its day files."""
    server, days = ui
    page.goto(f"{server.url}/assets/rct_events")
    page.get_by_role("button", name="Materialize…").first.click()
    dialog = page.get_by_role("dialog").filter(has_text="Launch runs to materialize rct_events")
    dialog.wait_for()
    _pick_partitions(page, dialog, ["demo"], listed=1)
    shot(page, "rct-events-backfill-dialog")
    before = time.time()
    dialog.get_by_role("button", name=re.compile(r"^Launch (backfill|1 run|run)")).first.click()
    dialog.wait_for(state="hidden")
    shot(page, "rct-events-backfill-launched")

    query = """{ partitionBackfillsOrError(limit: 10) { __typename ... on PartitionBackfills { results {
                 id timestamp isAssetBackfill partitionNames assetSelection { path } } } } }"""
    backfills = server.graphql(query)["partitionBackfillsOrError"]["results"]
    ours = [b for b in backfills if b["timestamp"] >= before - 5 and ["rct_events"] in [a["path"] for a in b["assetSelection"]]]
    if ours:  # launched as an asset backfill of the one partition
        assert len(ours) == 1 and ours[0]["isAssetBackfill"] and ours[0]["partitionNames"] == ["demo"], ours
    else:  # or as one run of it
        runs = server.graphql("""{ runsOrError(limit: 10) { ... on Runs { results { creationTime tags { key value } } } } }""")
        tags = [{t["key"]: t["value"] for t in r["tags"]} for r in runs["runsOrError"]["results"]
                if r["creationTime"] >= before - 5]
        assert any(t.get("dagster/partition") == "demo" for t in tags), tags
