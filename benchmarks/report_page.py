"""The campaign report's size and load time in chromium, and the time from a backfill's launch to a
refreshed leaderboard and report against `promo run` on the same data.

Part `report` (default): for the demo campaign and for `dipn_synthetic_2` (100 levels), `promo
simulate` + `promo run` write the campaign and its `campaign_report` asset; `promo report --html`
writes the report again (timed); Debian's chromium (playwright, `executable_path`, every request
other than the file itself refused: the report must open offline) loads it `--repeat` times, each
timed from `goto` to every Plotly chart drawn (an SVG of non-zero size per chart).

Part `backfill`: a UI refresh of a small demo campaign (4 days) against `promo run` on the same data,
after a first `promo run`; alternating (A B A B, `--rounds` of each, so that both see the same
machine load): A, `dagster dev` (own process group, free port) with its sensors running, settled,
then each UI action of `--ui` through the GraphQL mutation the UI sends, each timed from the launch
until `leaderboard` (and then `campaign_report`) of the campaign has a newer materialization, with a
timeline of every run it caused (created, enqueued, launching, its process up, first step, steps,
end), and waited out until no run is left; B, `promo run` on the same landing folder. The actions:
`materialize`, the assets `promo run` refreshes (every asset but the decisions and the chains of the
models the campaign does not train) materialized for the campaign, which the UI's dialog launches as
one run; `backfill`, the same selection as a backfill; `automation`, a backfill of `rct_events`
alone, the automation refreshing the rest.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/report_page.py [--part report|backfill|both]
"""

from __future__ import annotations

import argparse
import os
import re
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

from devtools.devserver import LOCATION, REPOSITORY, DagsterDev, demo_env, promo  # noqa: E402
from promo_assets.ingestion import load_config  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

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
              "--seed", "0", "--start", REFERENCE_START.isoformat())
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


_RUNS = """query($after: Float) { runsOrError(filter: {createdAfter: $after}) { ... on Runs { results {
            runId status } } } }"""
_ENDED = ("SUCCESS", "FAILURE", "CANCELED")


def _settle(ui: DagsterDev, since: float, timeout: float, quiet: float = 75.0) -> list[str]:
    """Until every run created after `since` has ended and no new run was created for `quiet` seconds
    (the automation sensor ticks every 30 s): the statuses of those runs."""
    deadline, seen, last_new = time.time() + timeout, set(), time.time()
    while time.time() < deadline:
        later = ui.graphql(_RUNS, {"after": since})["runsOrError"]["results"]
        ids = {r["runId"] for r in later}
        if ids - seen:
            seen, last_new = ids, time.time()
        if all(r["status"] in _ENDED for r in later) and time.time() - last_new >= quiet:
            return [r["status"] for r in later]
        time.sleep(5)
    return [r["status"] for r in later]


_TIMELINE = """query($after: Float) { runsOrError(filter: {createdAfter: $after}) { ... on Runs { results {
                runId status creationTime startTime endTime assetSelection { path } tags { key value }
                stepStats { stepKey status startTime endTime } } } } }"""
_EVENTS = """query($id: ID!) { runOrError(runId: $id) { ... on Run { eventConnection(limit: 20000) { events {
               __typename ... on MessageEvent { timestamp } } } } } }"""
_MILESTONES = {"RunEnqueuedEvent": "enqueued", "RunDequeuedEvent": "dequeued", "RunStartingEvent": "launching",
               "RunStartEvent": "worker_up"}


def _timeline(ui: DagsterDev, t0: float) -> list[dict]:
    """Where the time after the launch went, run by run (seconds since the launch): created (queued),
    dequeued by the run queue, launching (handed to the code server, which spawns the run's process),
    worker_up (that process imported the code and started the run), the first step, the steps' own
    time (summed), the last step's end, the run's end."""
    runs = ui.graphql(_TIMELINE, {"after": t0 - 5})["runsOrError"]["results"]
    out = []
    rel = lambda x: None if x is None else round(float(x) - t0, 1)  # noqa: E731
    for r in sorted(runs, key=lambda r: r["creationTime"]):
        steps = [s for s in r["stepStats"] if s["startTime"] and s["endTime"]]
        tags = {t["key"]: t["value"] for t in r["tags"]}
        events = ui.graphql(_EVENTS, {"id": r["runId"]})["runOrError"]["eventConnection"]["events"]
        marks = {}
        for e in events:
            name = _MILESTONES.get(e["__typename"])
            if name and name not in marks:
                marks[name] = rel(float(e["timestamp"]) / 1000)
        out.append({
            "status": r["status"], "assets": len(r["assetSelection"] or []), "steps": len(r["stepStats"]),
            "from": "backfill" if tags.get("dagster/backfill") else tags.get("dagster/sensor_name") or "launch",
            "created": rel(r["creationTime"]), **marks,
            "first_step": rel(min((s["startTime"] for s in steps), default=None)),
            "last_step_end": rel(max((s["endTime"] for s in steps), default=None)),
            "ended": rel(r["endTime"]),
            "steps_s": round(sum(s["endTime"] - s["startTime"] for s in steps), 1),
        })
    return out


_BACKFILL = """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
                 __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
_LAUNCH = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
               ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
               ... on InvalidSubsetError { message } ... on RunConfigValidationInvalid { errors { message } } } }"""
_NODES = "{ assetNodes { assetKey { path } groupName } }"


def refresh_selection(ui: DagsterDev, landing: Path) -> list[dict]:
    """The assets `promo run` refreshes for the campaign in its one run, as a user selects them in the
    UI: every asset but the `decisions` group (`promo run` decides in a run after the leaderboard, the
    automation after a refresh from the UI) and the chains of the models the campaign does not train
    (off by default, `optional_models`; not applicable, e.g. `gnn_hazard` without a `merchants:`
    block): in a run, a chain that skips keeps Dagster from executing the leaderboard."""
    from promo_assets.defs.common import model_of_key
    from promo_assets.models import registry

    import dagster as dg

    config = load_config(landing, "demo")
    left_out = {n for n in registry.names() if registry.skip_reason(n, config) is not None}
    nodes = ui.graphql(_NODES)["assetNodes"]
    return [{"path": n["assetKey"]["path"]} for n in nodes if n["groupName"] != "decisions"
            and model_of_key(dg.AssetKey(n["assetKey"]["path"])) not in left_out]


def launch(ui: DagsterDev, action: str, selection: list[dict]) -> str:
    """One UI action on the campaign `demo`, through the GraphQL mutation the UI sends:
    `materialize`: *Materialize selected* on the refresh selection with one partition (the dialog then
    launches one run of the asset job, tagged with the partition); `backfill`: *Launch backfill* of the
    same selection for the partition; `automation`: a backfill of `rct_events` alone, the automation
    refreshing everything downstream (the measurement of earlier versions)."""
    if action == "materialize":
        got = ui.graphql(_LAUNCH, {"p": {
            "selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": "__ASSET_JOB",
                         "assetSelection": selection},
            "runConfigData": {}, "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "demo"}]}}})
        got = got["launchRun"]
        if got["__typename"] != "LaunchRunSuccess":
            raise SystemExit(f"run not launched: {got}")
        return got["run"]["runId"]
    assets = selection if action == "backfill" else [{"path": ["rct_events"]}]
    got = ui.graphql(_BACKFILL, {"p": {"partitionNames": ["demo"], "assetSelection": assets}})["launchPartitionBackfill"]
    if got.get("backfillId") is None:
        raise SystemExit(f"backfill not launched: {got}")
    return got["backfillId"]


def ui_refresh(ui: DagsterDev, action: str, selection: list[dict], args) -> dict:
    """One UI action, timed from the launch until `leaderboard` of the campaign has a newer
    materialization (and `campaign_report`, which the automation refreshes after it); then until
    every run it caused has ended and none started for 40 s, so the next measurement starts quiet."""
    before = {a: _latest(ui, a, "demo") for a in ("leaderboard", "campaign_report")}
    result = {"action": action, "load_at_click": [round(x, 2) for x in os.getloadavg()]}
    t0 = time.time()
    launch(ui, action, selection)
    seen = {}
    while len(seen) < 2 and time.time() - t0 < args.timeout:
        for asset in ("leaderboard", "campaign_report"):
            ts = _latest(ui, asset, "demo")
            if asset not in seen and ts is not None and ts > max(before[asset] or 0, t0):
                seen[asset] = round(ts - t0, 1)
        time.sleep(1)
    # leave only once every run it caused has ended: a run killed while starting would keep the
    # warehouse pool's slot, and the measurement after it would wait for it
    result["runs"] = _settle(ui, t0 - 5, args.timeout, quiet=40.0)
    result["timeline"] = _timeline(ui, t0)
    result["click_to_refreshed_leaderboard_s"] = seen.get("leaderboard")
    result["click_to_refreshed_report_s"] = seen.get("campaign_report")
    return result


def backfill_once(env: dict, tmp: Path, args, round_: int) -> dict:
    """A: `dagster dev` up and settled (the sensors' own runs ended), then each UI action of
    `--ui` in turn (ui_refresh); the server is stopped before `promo run`."""
    result = {}
    start = time.perf_counter()
    with DagsterDev(ROOT, env, tmp / f"dagster_dev-{round_}.log") as ui:
        result["server_start_s"] = round(time.perf_counter() - start, 1)
        result["runs_before_click"] = _settle(ui, time.time() - 5, args.timeout)
        selection = refresh_selection(ui, Path(env["PROMO_LANDING_DIR"]))
        result["selection_assets"] = len(selection)
        chosen = {"/".join(a["path"]) for a in selection}
        result["selection_leaves_out"] = sorted({"/".join(n["assetKey"]["path"][:-1]) or n["assetKey"]["path"][0]
                                                 for n in ui.graphql(_NODES)["assetNodes"]
                                                 if "/".join(n["assetKey"]["path"]) not in chosen})
        for action in args.ui.split(","):
            result[action] = ui_refresh(ui, action, selection, args)
            print(action, round_, result[action], file=sys.stderr)
    return result


def backfill_part(args) -> dict:
    """The UI actions (A) and `promo run` (B) on the same landing folder, alternating A B A B ...
    (`--rounds` of each) so that both see the same machine load; `promo run` once before them all
    (the first run trains every model: not compared)."""
    tmp = Path(tempfile.mkdtemp(prefix="promo-report-backfill-"))
    env = demo_env(tmp, ROOT, args.epochs)
    promo(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", "4", "--users", "300", "--seed", "0",
          "--start", REFERENCE_START.isoformat())

    def promo_run() -> dict:
        load = [round(x, 2) for x in os.getloadavg()]
        start = time.perf_counter()
        done = promo(env, "run", "--campaign", "demo", "--no-progress")
        found = re.search(r"downstream done in (\d+)s", done.stdout)
        return {"promo_run_s": round(time.perf_counter() - start, 1), "load_at_start": load,
                "its_ingestion_models_leaderboard_decisions_s": float(found.group(1)) if found else None}

    actions = args.ui.split(",")
    result = {"days": 4, "users": 300, "ui_actions": actions, "order": "AB" * args.rounds,
              "first_promo_run": promo_run(), "rounds": []}
    for r in range(args.rounds):
        a = backfill_once(env, tmp, args, r)
        b = promo_run()
        print("B", r, b, file=sys.stderr)
        result["rounds"].append({"ui": a, "promo_run": b})
    shutil.rmtree(tmp, ignore_errors=True)
    rounds = result["rounds"]
    result["promo_run_s"] = [x["promo_run"]["promo_run_s"] for x in rounds]
    for action in actions:
        board = [x["ui"][action]["click_to_refreshed_leaderboard_s"] for x in rounds]
        result[f"{action}: click_to_refreshed_leaderboard_s"] = board
        result[f"{action}: click_to_refreshed_report_s"] = [x["ui"][action]["click_to_refreshed_report_s"] for x in rounds]
        result[f"{action}: ratio_to_promo_run"] = [None if t is None else round(t / x["promo_run"]["promo_run_s"], 2)
                                                   for t, x in zip(board, rounds)]
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("report", "backfill", "both"), default="both")
    ap.add_argument("--days", type=int, default=4)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=3, help="PROMO_MAX_EPOCHS")
    ap.add_argument("--repeat", type=int, default=3, help="chromium loads of each report")
    ap.add_argument("--timeout", type=float, default=1500, help="seconds to wait for the refresh after the backfill")
    ap.add_argument("--rounds", type=int, default=2, help="UI / promo run pairs, alternating (A B A B ...)")
    ap.add_argument("--ui", default="materialize,backfill,automation",
                    help="the UI actions of each round, in order (comma-separated: materialize, backfill, automation)")
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
        for action in b["ui_actions"]:
            headline[f"{action}: click -> refreshed leaderboard, s (per round)"] = b[f"{action}: click_to_refreshed_leaderboard_s"]
            headline[f"{action}: UI / promo run (per round)"] = b[f"{action}: ratio_to_promo_run"]
        headline["promo run on the same data, s (per round, after the UI's)"] = b["promo_run_s"]
    rec.write(figures, headline=headline, tag=None if args.part == "both" else args.part)


if __name__ == "__main__":
    main()
