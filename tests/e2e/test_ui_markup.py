"""Markup from data in the Dagster UI, in a real browser: a campaign whose arm labels, category values,
a column name, a rejected raw value and a group cap's name are `<script>`, `![x](http://…)`,
`[x](javascript:…)` and the like. After `promo run`, chromium opens the asset pages that show them
(rct_events, the model's evaluation with `segment_evaluation`, its allocation with `multipliers`, the
leaderboard) and every Markdown metadata value's dialog: nothing of the data renders as a link, an
image or a tag, and the payloads are there as text. Screenshots go to `$PROMO_UI_SCREENSHOTS`
(default `test-output/screenshots/`, `markup-*.png`).

Like e2e/test_ui_browser.py: Debian's chromium through the playwright package (`executable_path`,
no browser download); skipped with the reason without them unless PROMO_UI_TESTS=1.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from devtools.devserver import DagsterDev, demo_env
from tests.conftest import promo_here, set_models
from tests.e2e.browser import SHOTS, TIMEOUT_MS, require_browser
from promo_assets.simulation import REFERENCE_START

pytestmark = [pytest.mark.ui, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

# demo's levels [0, 1, 2, 3, 5, 8] become arms with these labels (the amount as the unit cost)
ARMS = {0: "<script>alert(1)</script>", 1: "![x](http://evil.example/x.png)", 2: "[x](javascript:alert(1))",
        3: "www.evil.example", 5: "<img src=x onerror=alert(1)>", 8: "plain"}
CITIES = ["<script>alert(2)</script>", "![c](http://evil.example/c.png)", "[c](javascript:alert(3))"]
COLUMN = "<i>device</i>"  # the feature column `device`, renamed
GROUP = "<b>cap</b>"  # a group cap's name (the allocation's `multipliers` columns)
REJECTED = "[r](javascript:alert(4))"  # an unknown treatment: rejected, shown as the example of rejections_now
PAYLOADS = [*ARMS.values(), *CITIES, COLUMN, GROUP, REJECTED]


def hostile_campaign(folder: Path) -> None:
    """Turn the simulated demo campaign in `folder` into the hostile one (module docstring)."""
    config = yaml.safe_load((folder / "campaign.yaml").read_text())
    config["treatments"] = {"arms": {ARMS[int(a)]: a for a in config["treatments"]["levels"]}}
    config["segments"] = ["city"]
    config["max_rejected_fraction"] = 0.05
    config["constraints"] = {"groups": {GROUP: {"feature": "city", "equals": CITIES[0], "budget_per_capita": 1.0}}}
    (folder / "campaign.yaml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    cities: dict[str, str] = {}
    for kind in ("events", "population"):
        for path in sorted((folder / kind).glob("*.parquet")):
            frame = pd.read_parquet(path)
            for city in sorted(frame["city"].unique()):
                cities.setdefault(city, CITIES[len(cities) % len(CITIES)])
            frame["city"] = frame["city"].map(cities)
            frame = frame.rename(columns={"device": COLUMN})
            if kind == "events":
                frame["treatment"] = frame["treatment"].map(lambda t: ARMS[int(t)])
                extra = frame.iloc[:1].assign(user_id="rejected-user", treatment=REJECTED)
                frame = pd.concat([frame, extra], ignore_index=True)
            frame.to_parquet(path, index=False)


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    require_browser()
    tmp = tmp_path_factory.mktemp("markup")
    env = demo_env(tmp, ROOT, max_epochs=1)
    promo_here(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", "4", "--users", "300", "--seed", "0",
               "--start", REFERENCE_START.isoformat())
    folder = tmp / "landing" / "demo"
    hostile_campaign(folder)
    set_models(folder / "campaign.yaml", "include", ["lgbm_s"])
    promo_here(env, "run", "--campaign", "demo", "--no-progress")
    with DagsterDev(ROOT, env, tmp / "dagster_dev.log") as server:
        server.graphql("mutation { setNuxSeen }")
        yield server


# links, images and elements a payload could have made, inside an element (a metadata row or a dialog)
_MARKUP = """el => ({
  links: [...el.querySelectorAll('a')].map(a => a.getAttribute('href') || '').filter(h => h !== ''),
  images: [...el.querySelectorAll('img')].map(i => i.getAttribute('src') || '').filter(s => !s.startsWith('data:image/png')),
  tags: [...el.querySelectorAll('script, i, b, iframe')].map(t => t.outerHTML),
  text: el.innerText})"""

_HOSTILE = """el => ({
  links: [...el.querySelectorAll('a')].map(a => a.getAttribute('href') || '').filter(h => /evil|javascript/i.test(h)),
  images: [...el.querySelectorAll('img')].map(i => i.getAttribute('src') || '').filter(s => /evil|^x$/.test(s)),
  scripts: [...el.querySelectorAll('script')].map(t => t.textContent).filter(t => /alert/.test(t))})"""

PAGES = {  # asset page -> {metadata key: the payloads its value must show as text}
    "rct_events": {"treatment_distribution_now": list(ARMS.values()), "rejections_now": [REJECTED],
                   "features": [COLUMN]},
    "lgbm_s/policy_evaluation": {"segment_evaluation": CITIES, "budgets_kept": [GROUP]},
    "lgbm_s/allocation": {"multipliers": [GROUP], "allocations": list(ARMS.values())},
}


@pytest.mark.parametrize("asset", list(PAGES))
def test_markup_from_data_renders_as_text_on_the_asset_page(ui, page, asset):
    """Each metadata value (inline, or in its [Show Markdown] dialog when the UI folds it) holds no
    link, no image but a PNG plot, no element a payload could have made, and shows every payload as
    its text (a zero-width space may sit inside `http`:// and `www`.: invisible, not compared)."""
    keys = PAGES[asset]
    page.goto(f"{ui.url}/assets/{asset}?partition=demo")
    page.get_by_text(next(iter(keys)), exact=True).first.wait_for()
    for key, payloads in keys.items():
        row = page.locator("tr", has_text=key).first
        row.scroll_into_view_if_needed()
        folded = row.get_by_text("[Show Markdown]")
        where = row
        if folded.count():
            folded.first.click()
            where = page.get_by_role("dialog").filter(has_text=key)
            where.wait_for()
        found, text = _rendered(page, where, payloads)
        assert not (found["links"] or found["images"] or found["tags"]), (asset, key, found)
        missing = [p for p in payloads if p not in text]
        assert not missing, f"{asset} {key}: not shown as text: {missing}"
        page.screenshot(path=str(SHOTS / f"markup-{asset.replace('/', '-')}-{key}.png"))
        if folded.count():
            page.keyboard.press("Escape")
            where.wait_for(state="hidden")
    anywhere = page.locator("body").evaluate(_HOSTILE)  # the whole page: the description, the other values
    assert anywhere == {"links": [], "images": [], "scripts": []}, (asset, anywhere)


def _rendered(page, where, payloads: list[str]) -> tuple[dict, str]:
    """The markup and text of `where` once it shows every payload, or as it is when TIMEOUT_MS has passed: the UI
    renders a Markdown value a moment after its row's key (later still on a loaded machine)."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        found = where.evaluate(_MARKUP)
        text = found["text"].replace("\u200b", "")
        if all(p in text for p in payloads) or time.monotonic() > deadline:
            return found, text
        page.wait_for_timeout(200)
