"""The Dagster UI and the campaign report in a real browser.

Debian's `chromium`, driven by the `playwright` Python package with `executable_path` set (no
browser download): `promo run` prepares a tiny demo campaign (two LightGBM models, one epoch),
`dagster dev` serves it (its own process group on a free port, killed by group at the end), and the
browser opens the asset graph,
the catalog's first screen (the default models' chains and the campaign's assets, none of the
`optional/` chains of the models off by default), an asset description, the compact leaderboard (every column visible at 1600 × 1000 without
scrolling) and a plot, a skipped model's asset page (its reason), the campaign report offline
(every plot drawn, no console error), and launches a 3-day backfill from `rct_events`'s page, which
ends in success with the automation's refresh after it.

Install: `PROMO_UI_TESTS=1 bash scripts/setup.sh` (apt-get chromium + the playwright wheel). Without
them the tests are skipped with the reason; with PROMO_UI_TESTS=1 set (CI) a missing browser fails.
Screenshots: `$PROMO_UI_SCREENSHOTS` (default `test-output/screenshots/` in the repository; CI keeps
`test-output/` as its artefacts).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from devtools.devserver import DagsterDev, demo_env
from tests.conftest import promo_here, set_models
from tests.e2e.browser import SHOTS, TIMEOUT_MS, require_browser
from promo_assets.simulation import REFERENCE_START

pytestmark = [pytest.mark.ui, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DAYS = 4
# The campaign trains two LightGBM models: the pages and plots are drawn the same whatever models
# ran, and the automation's refresh in the backfill test trains them again in the daemon's runs. The
# other default models are left out through campaign.yaml `models.exclude`, not `models.include`:
# the optional models stay skipped as "off by default" and gnn_hazard as not applying (no
# `merchants:` block), the reasons the skipped model's pages must show.
TRAINED = ("lgbm_s", "lgbm_s_mono")
EXCLUDED = ("s_learner", "dipn", "lgbm_t")
BACKFILL_TIMEOUT_S = 1200  # the backfill, then the automation's refresh of the whole campaign, on 2 loaded cores


def _exclude(campaign_yaml: Path, models) -> None:
    """campaign.yaml `models.exclude` = `models`; the campaign then trains the default models but
    those, i.e. TRAINED."""
    from promo_assets.models import registry

    set_models(campaign_yaml, "exclude", models)
    assert tuple(m.name for m in registry.models() if m.default and m.name not in (*models, "gnn_hazard")) == TRAINED


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    require_browser()
    tmp = tmp_path_factory.mktemp("ui")
    env = demo_env(tmp, ROOT, max_epochs=1)  # the UI shows what a run leaves, whatever its models learned
    promo_here(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", str(DAYS), "--users", "300", "--seed", "0",
               "--start", REFERENCE_START.isoformat())
    _exclude(tmp / "landing" / "demo" / "campaign.yaml", EXCLUDED)
    promo_here(env, "run", "--campaign", "demo", "--no-progress")
    days = sorted(p.stem for p in (tmp / "landing" / "demo" / "events").iterdir())
    assert len(days) == DAYS
    with DagsterDev(ROOT, env, tmp / "dagster_dev.log") as server:
        server.graphql("mutation { setNuxSeen }")  # no newsletter dialog over the first page
        yield server, days, tmp


def shot(page, name: str) -> Path:
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def test_asset_graph_shows_the_pipeline(ui, page):
    server, *_ = ui
    page.goto(f"{server.url}/assets/leaderboard?view=lineage&lineageScope=upstream&lineageDepth=10")
    page.get_by_text("rct_events", exact=True).first.wait_for()
    for asset in ("rct_events", "propensity", "training_frame", "bias_net", "uplift_net", "budget_dual", "allocation",
                  "policy_evaluation", "leaderboard"):
        assert page.get_by_text(asset, exact=True).first.is_visible(), f"asset {asset} not drawn in the graph"
    for group in ("ingestion", "causal", "s_learner", "dipn", "evaluation"):
        assert page.get_by_text(group, exact=True).first.is_visible(), f"group {group} not drawn in the graph"
    shot(page, "asset-graph")


def test_description_keeps_the_landing_path(ui, page):
    server, *_ = ui
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


# every scroll container between the element and the page, and the viewport: what a person sees
_VISIBLE = """el => { let r = {left: 0, top: 0, right: window.innerWidth, bottom: window.innerHeight};
  const scrolled = [];
  for (let a = el.parentElement; a; a = a.parentElement) {
    const st = getComputedStyle(a);
    if (st.overflowX !== 'visible' || st.overflowY !== 'visible') {
      const b = a.getBoundingClientRect();
      r = {left: Math.max(r.left, b.left), top: Math.max(r.top, b.top), right: Math.min(r.right, b.right),
           bottom: Math.min(r.bottom, b.bottom)};
      if (a.scrollLeft > 0) scrolled.push(a.tagName);
    }
  }
  return {visible: r, scrolled: scrolled}; }"""


def test_compact_leaderboard_fits_and_the_frontier_plot_opens(ui, page):
    server, *_ = ui
    page.goto(f"{server.url}/assets/leaderboard?partition=demo")
    # the compact leaderboard: one table per budget (MetadataValue.table), rendered inline in its row
    row = page.locator("tr").filter(has=page.get_by_text("leaderboard at budget", exact=False)).first
    table = row.locator("table").first
    table.wait_for()
    table.evaluate("t => t.scrollIntoView({block: 'center', inline: 'nearest'})")
    header = [h.strip() for h in table.locator("th").all_inner_texts()]
    assert header == ["rank", "model", "% oracle", "spend", "gain", "★", "note"], header
    seen = table.evaluate(_VISIBLE)
    assert not seen["scrolled"], f"scrolled sideways to show the table: {seen}"
    view = seen["visible"]
    for th in table.locator("th").all():
        box = th.bounding_box()
        assert box["width"] > 0 and view["left"] - 1 <= box["x"] and box["x"] + box["width"] <= view["right"] + 1, \
            f"column {th.inner_text()!r} at {box} is outside what is visible {view} (1600 × 1000)"
    models = {r.locator("td").nth(header.index("model")).inner_text().strip() for r in table.locator("tbody tr").all()}
    assert {*TRAINED, "random"} <= models, models
    ranks = [r.locator("td").nth(header.index("rank")).inner_text().strip() for r in table.locator("tbody tr").all()]
    assert "1" in ranks, ranks
    # the ★ column marks the champion deployed when the leaderboard was assembled: none yet at the first run
    stars = [r.locator("td").nth(header.index("★")).inner_text().strip() for r in table.locator("tbody tr").all()]
    assert all(x == "" or x.startswith("★") for x in stars), stars
    shot(page, "leaderboard-compact")

    plot = _open_metadata_markdown(page, "frontier_plot")
    image = plot.locator("img[src^='data:image/png']")
    image.wait_for()
    width, height = image.evaluate("img => [img.naturalWidth, img.naturalHeight]")
    assert width > 300 and height > 200, f"frontier plot decoded to {width}×{height}"
    assert plot.get_by_text("Cost–response frontier").first.is_visible()
    shot(page, "leaderboard-frontier-plot")


OPTIONAL = ("cmnn", "coman", "dfcl_pl", "dfcl_mer", "dfcl_ifd", "dnn_m", "fpm", "e2e_fd", "e2e_nes", "logistic_s")


def test_the_catalogs_first_screen_lists_the_default_models_not_the_optional_ones(ui, page):
    """The catalog sorts by asset key: the chains of the models off by default sit under `optional/`
    (docs/automation.md), so the first screen is the campaign's assets and the default models'; the
    `optional` folder lists the optional models."""
    server, *_ = ui
    page.goto(f"{server.url}/assets")
    page.get_by_text("campaign_report", exact=True).first.wait_for()
    time.sleep(2)
    first = []  # the asset pages linked from what a person sees without scrolling (1600 × 1000)
    for link in page.locator("a[href^='/assets/']").all():
        box = link.bounding_box()
        if box and box["height"] > 0 and 0 <= box["y"] and box["y"] + box["height"] <= 1000:
            first.append(link.get_attribute("href").removeprefix("/assets/").split("?")[0])
    assert len(first) >= 8, first
    assert {"campaign_report", "champion", "decisions", "dipn/bias_net", "dipn/policy_evaluation"} <= set(first), first
    assert not [k for k in first if k.startswith("optional") or k.split("/")[0] in OPTIONAL], first
    shot(page, "catalog-first-screen")
    page.goto(f"{server.url}/assets/optional")  # the folder of the optional chains
    for model in OPTIONAL:
        page.get_by_text(f"{model}/", exact=True).first.wait_for()
    shot(page, "catalog-optional-folder")


def test_a_skipped_models_reason_is_on_its_asset_pages_after_promo_run(ui, page):
    server, *_ = ui
    for asset, reason in (("optional/cmnn/model", "off by default"), ("optional/cmnn/policy_evaluation", "off by default"),
                          ("gnn_hazard/model", "needs a customer–merchant campaign")):
        page.goto(f"{server.url}/assets/{asset}?partition=demo")
        found = page.get_by_text(reason, exact=False).first
        found.wait_for()
        assert found.is_visible(), f"{asset}: the skip's reason is not shown"
        assert page.get_by_text("skipped_reason", exact=True).first.is_visible()
    page.goto(f"{server.url}/assets/optional/cmnn/model?partition=demo")
    page.get_by_text("off by default", exact=False).first.wait_for()
    assert page.get_by_text("optional_models", exact=True).first.is_visible()  # its group says it is optional
    shot(page, "skipped-model-reason")


def test_the_campaign_report_draws_every_plot_offline(ui, browser):
    _, _, tmp = ui
    report = tmp / "reports" / "demo.html"
    assert report.exists(), "promo run did not write the campaign report"
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    requested = []

    def only_the_file(route):
        requested.append(route.request.url)
        return route.continue_() if route.request.url.startswith("file:") else route.abort()

    context.route("**/*", only_the_file)
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    want = int(page.locator("#plot-count").get_attribute("data-plots"))
    assert want >= 4  # evidence, frontier, response per level, decisions
    page.wait_for_function("n => document.querySelectorAll('.plotly-graph-div .main-svg').length >= n", arg=want,
                           timeout=TIMEOUT_MS)
    plots = page.locator(".plotly-graph-div")
    assert plots.count() == want
    for i in range(want):
        svg = plots.nth(i).locator("svg.main-svg").first
        box = svg.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 100, f"plot {i} drawn at {box}"
        assert plots.nth(i).locator("path, rect").count() > 5, f"plot {i} has nothing drawn in it"
    assert not errors, errors
    assert all(u.startswith("file:") for u in requested), [u for u in requested if not u.startswith("file:")]
    for section in ("Leaderboard", "Cost–response frontier", "Response per level", "Decisions exported"):
        assert page.get_by_role("heading", name=section).first.is_visible()
    page.screenshot(path=str(SHOTS / "campaign-report.png"), full_page=True)
    context.close()


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
    campaign, no day dimension; one run loads its day files. It ends in success, and so does the
    automation's refresh of the campaign after it, which leaves out the chains of the models the
    campaign does not train (skips are not failures)."""
    server, days, _ = ui
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
    # it ends in success, and so does the automation's refresh of the campaign after it (runs, or a
    # backfill when it requests several partitions at once; the chains of the models the campaign
    # does not train are not in it: skips are not failures)
    board = """{ assetOrError(assetKey: {path: ["leaderboard"]}) { ... on Asset {
                 assetMaterializations(partitions: ["demo"], limit: 1) { timestamp } } } }"""
    runs = """query($after: Float) { runsOrError(filter: {createdAfter: $after}) { ... on Runs { results {
                runId status assetSelection { path } } } } }"""
    status = """{ partitionBackfillsOrError(limit: 20) { ... on PartitionBackfills { results {
                  id status timestamp assetSelection { path } } } } }"""
    deadline = time.time() + BACKFILL_TIMEOUT_S
    while time.time() < deadline:
        found = server.graphql(status)["partitionBackfillsOrError"]["results"]
        mine = next((b for b in found if b["id"] == ours[0]["id"]), {"status": "MISSING"}) if ours else {"status": "NONE"}
        later = server.graphql(runs, {"after": before})["runsOrError"]["results"]
        mats = server.graphql(board)["assetOrError"]["assetMaterializations"]
        refreshed = bool(mats) and float(mats[0]["timestamp"]) / 1000 > before
        settled = all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in later)
        if mine["status"] != "REQUESTED" and refreshed and settled:
            break
        time.sleep(5)
    assert mine["status"] in ("COMPLETED_SUCCESS", "NONE"), mine  # NONE: launched as one run, not a backfill
    assert refreshed, f"the leaderboard was not refreshed within {BACKFILL_TIMEOUT_S} s after the backfill"
    assert later and all(r["status"] == "SUCCESS" for r in later), [(r["runId"], r["status"]) for r in later]
    others = [b for b in found if b["timestamp"] > (mine.get("timestamp") or before)]
    assert all(b["status"] == "COMPLETED_SUCCESS" for b in others), others
    targeted = {tuple(a["path"]) for r in later for a in r["assetSelection"] or []}
    # no chain the campaign does not train: none of the optional/ ones, nor gnn_hazard (no merchants),
    # nor those its campaign.yaml excludes
    assert ("leaderboard",) in targeted and not {t for t in targeted if t[0] in ("optional", "gnn_hazard", *EXCLUDED)}
    if ours:
        page.goto(f"{server.url}/runs/b/{mine['id']}?tab=partitions")
        page.get_by_text(mine["id"], exact=False).first.wait_for()
        time.sleep(2)
        shot(page, "rct-events-backfill-success")
    page.goto(f"{server.url}/runs")
    page.get_by_text("Success", exact=False).first.wait_for()
    time.sleep(2)
    shot(page, "refresh-runs-success")
