"""The campaign report's size and load time in chromium, and the time from a backfill's launch to a
refreshed leaderboard and report against `promo run` on the same data.

Part `report` (default): for the demo campaign and for `dipn_synthetic_2` (100 levels), `promo
simulate` + `promo run` write the campaign and its `campaign_report` asset; `promo report --html`
writes the report again (timed); Debian's chromium (playwright, `executable_path`, every request
other than the file itself refused: the report must open offline) loads it `--repeat` times, each
timed from `goto` to every Plotly chart drawn (an SVG of non-zero size per chart).

Part `backfill`: a small demo campaign after `promo run`; `dagster dev` (own process group, free
port) with its sensors running; a 3-day backfill of `rct_events` is launched through the GraphQL
mutation the UI's "Launch backfill" button sends; timed from that launch until `leaderboard` and
`campaign_report` of the campaign have a newer materialization (the automation's refresh), with
the final status of every backfill. `promo run` on the same landing folder is timed before and after.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/report_page.py [--part report|backfill|both]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recorder  # noqa: E402

from promo_assets.devserver import DagsterDev, demo_env, promo  # noqa: E402
from promo_assets.ingestion import load_config  # noqa: E402

CHROMIUM = os.environ.get("PROMO_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def load_times(path: Path, repeat: int) -> dict:
    """Seconds from `goto` to every chart drawn, `repeat` times in a fresh page, offline."""
    from playwright.sync_api import sync_playwright

    times, errors, plots = [], [], None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"])
        for _ in range(repeat):
            context = browser.new_context(viewport={"width": 1600, "height": 1000})
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                          else route.abort())
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            start = time.perf_counter()
            page.goto(path.as_uri(), timeout=300_000)
            page.wait_for_function(
                "() => { const want = Number(document.getElementById('plot-count').dataset.plots);"
                " const got = [...document.querySelectorAll('.plotly-graph-div .main-svg')]"
                ".filter(s => s.getBoundingClientRect().width > 0 && s.getBoundingClientRect().height > 0)"
                ".map(s => s.closest('.plotly-graph-div').id); return new Set(got).size >= want; }", timeout=300_000)
            times.append(time.perf_counter() - start)
            plots = page.evaluate("Number(document.getElementById('plot-count').dataset.plots)")
            context.close()
        browser.close()
    return {"load_s": [round(t, 2) for t in times], "load_s_median": round(statistics.median(times), 2),
            "plots": plots, "console_errors": errors}


def report_part(args) -> dict:
    out = {}
    for campaign, preset, days, users in (("demo", "demo", args.days, args.users),
                                          ("dipn_synthetic_2", "dipn_synthetic_2", args.days, args.users)):
        tmp = Path(tempfile.mkdtemp(prefix=f"promo-report-{campaign}-"))
        env = demo_env(tmp, ROOT, args.epochs)
        promo(env, "simulate", "--preset", preset, "--campaign", campaign, "--days", str(days), "--users", str(users),
              "--seed", "0")
        start = time.perf_counter()
        promo(env, "run", "--campaign", campaign, "--no-progress")
        run_s = time.perf_counter() - start
        asset_file = tmp / "reports" / f"{campaign}.html"
        start = time.perf_counter()
        done = promo(env, "report", "--campaign", campaign, "--html", str(tmp / "cli.html"))
        cli_s = time.perf_counter() - start
        html = (tmp / "cli.html").read_text(encoding="utf-8")
        levels = load_config(tmp / "landing", campaign).n_levels
        out[campaign] = {
            "preset": preset, "days": days, "users": users, "levels": levels, "promo_run_s": round(run_s, 1),
            "campaign_report_asset_written": asset_file.exists(),
            "promo_report_html_s": round(cli_s, 1), "cli_output": done.stdout.strip(),
            "report_bytes": len(html.encode()), "report_mb": round(len(html.encode()) / 1e6, 2),
            **load_times(tmp / "cli.html", args.repeat),
        }
        print(campaign, out[campaign], file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _latest(ui: DagsterDev, asset: str, partition: str) -> float | None:
    """Timestamp (s) of the asset partition's latest materialization, or None."""
    q = """query($key: AssetKeyInput!, $p: [String!]) { assetOrError(assetKey: $key) { ... on Asset {
             assetMaterializations(partitions: $p, limit: 1) { timestamp } } } }"""
    got = ui.graphql(q, {"key": {"path": [asset]}, "p": [partition]})["assetOrError"]
    mats = (got or {}).get("assetMaterializations") or []
    return float(mats[0]["timestamp"]) / 1000 if mats else None


def backfill_part(args) -> dict:
    import dagster as dg

    tmp = Path(tempfile.mkdtemp(prefix="promo-report-backfill-"))
    env = demo_env(tmp, ROOT, args.epochs)
    promo(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", "4", "--users", "300", "--seed", "0")

    def promo_run() -> float:
        start = time.perf_counter()
        promo(env, "run", "--campaign", "demo", "--no-progress")
        return round(time.perf_counter() - start, 1)

    result = {"days": 4, "users": 300, "backfilled_days": 3, "promo_run_s": [promo_run()]}
    days = sorted(p.stem for p in (tmp / "landing" / "demo" / "events").iterdir())[-3:]
    with DagsterDev(ROOT, env, tmp / "dagster_dev.log") as ui:
        before = {a: _latest(ui, a, "demo") for a in ("leaderboard", "campaign_report")}
        mutation = """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
                        __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
        names = [str(dg.MultiPartitionKey({"date": d, "campaign": "demo"})) for d in days]
        t0 = time.time()
        launched = ui.graphql(mutation, {"p": {"partitionNames": names, "assetSelection": [{"path": ["rct_events"]}]}})
        backfill_id = launched["launchPartitionBackfill"].get("backfillId")
        if backfill_id is None:
            raise SystemExit(f"backfill not launched: {launched}")
        seen = {}
        while len(seen) < 2 and time.time() - t0 < args.timeout:
            for asset in ("leaderboard", "campaign_report"):
                ts = _latest(ui, asset, "demo")
                if asset not in seen and ts is not None and ts > max(before[asset] or 0, t0):
                    seen[asset] = round(ts - t0, 1)
            time.sleep(5)
        # leave the server only once every run it launched has ended: a run killed while starting would
        # keep the warehouse pool's slot, and the `promo run` after it would wait for it
        runs = """query($after: Float) { runsOrError(filter: {createdAfter: $after}) { ... on Runs { results {
                    runId status } } } }"""
        while time.time() - t0 < args.timeout:
            later = ui.graphql(runs, {"after": t0 - 5})["runsOrError"]["results"]
            if all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in later):
                break
            time.sleep(5)
        result["runs_after_click"] = [r["status"] for r in later]
        q = """{ partitionBackfillsOrError(limit: 20) { ... on PartitionBackfills { results {
                 id status timestamp assetSelection { path } } } } }"""
        backfills = ui.graphql(q)["partitionBackfillsOrError"]["results"]
    result.update({
        "click_to_refreshed_leaderboard_s": seen.get("leaderboard"),
        "click_to_refreshed_report_s": seen.get("campaign_report"),
        "backfills": [{"id": b["id"], "status": b["status"], "assets": len(b["assetSelection"] or []),
                       "is_ours": b["id"] == backfill_id} for b in backfills if float(b["timestamp"]) >= t0 - 5],
    })
    result["promo_run_s"].append(promo_run())
    shutil.rmtree(tmp, ignore_errors=True)
    print(result, file=sys.stderr)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("report", "backfill", "both"), default="both")
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=3, help="PROMO_MAX_EPOCHS")
    ap.add_argument("--repeat", type=int, default=3, help="chromium loads of each report")
    ap.add_argument("--timeout", type=float, default=1500, help="seconds to wait for the refresh after the backfill")
    args = ap.parse_args()
    rec = Recorder("report_page")
    figures, headline = {}, {}
    if args.part in ("report", "both"):
        figures["report"] = report_part(args)
        for c, r in figures["report"].items():
            headline[f"{c} ({r['levels']} levels): report MB"] = r["report_mb"]
            headline[f"{c}: load in chromium, s (median)"] = r["load_s_median"]
    if args.part in ("backfill", "both"):
        b = figures["backfill"] = backfill_part(args)
        headline["backfill click -> refreshed leaderboard, s"] = b["click_to_refreshed_leaderboard_s"]
        headline["backfill click -> refreshed report, s"] = b["click_to_refreshed_report_s"]
        headline["promo run on the same data, s"] = b["promo_run_s"]
    rec.write(figures, headline=headline, tag=None if args.part == "both" else args.part)


if __name__ == "__main__":
    main()
