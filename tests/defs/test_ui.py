"""Every description the Dagster UI shows renders as written.

The UI renders asset, check, job, schedule and sensor descriptions as Markdown with raw HTML
allowed, so `<landing>/<campaign>/events/<day>` outside a code span vanishes as an unknown HTML tag
(issue #12 item 14). Rendering each description with a CommonMark renderer (raw HTML on, as the UI)
and comparing the visible text with the source catches that and any other Markdown that eats text
(emphasis from `*` or `_`, link syntax, ...).
"""

from __future__ import annotations

import html
import re

import markdown_it  # ships with dagster (rich → markdown-it-py): missing, this module fails, it never skips


def visible_text(markdown: str) -> str:
    """What a reader sees: the rendered HTML without its tags, entities decoded, spaces collapsed."""
    rendered = markdown_it.MarkdownIt("commonmark", {"html": True}).render(markdown)
    return " ".join(html.unescape(re.sub(r"<[^>]*>", "", rendered)).split())


def expected_text(markdown: str) -> str:
    """The source as it should read: code spans lose their backticks and nothing else changes."""
    return " ".join(re.sub(r"`([^`]*)`", r"\1", markdown).split())


def all_descriptions() -> list[tuple[str, str]]:
    from promo_assets.definitions import defs

    found = []
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        found.append((f"asset {key.to_user_string()}", graph.get(key).description))
    for check_key in graph.asset_check_keys:
        found.append((f"check {check_key.asset_key.to_user_string()}:{check_key.name}", graph.get(check_key).description))
    for job in defs.resolve_all_job_defs():
        found.append((f"job {job.name}", job.description))
    for schedule in defs.schedules or []:
        found.append((f"schedule {schedule.name}", schedule.description))
    for sensor in defs.sensors or []:
        found.append((f"sensor {sensor.name}", sensor.description))
    return [(name, text) for name, text in found if text]


def test_visible_text_drops_html_like_placeholders():
    # the failure the test guards against, so that a passing test means something
    raw = "loaded from <landing>/<campaign>/events/<day>.parquet"
    assert visible_text(raw) != expected_text(raw)
    assert "<landing>/<campaign>/events/<day>.parquet" in visible_text(f"loaded from `{raw[12:]}`")


def test_every_description_renders_as_written():
    described = all_descriptions()
    names = {name for name, _ in described}
    # every asset of the graph is covered, among them the ones that had the placeholders
    for asset in ("asset rct_events", "asset payment_edges", "asset merchant_events", "asset leaderboard",
                  "asset s_learner/policy_evaluation"):
        assert asset in names
    broken = [
        f"{name}: renders as {visible_text(text)!r}, written {expected_text(text)!r}"
        for name, text in described
        if visible_text(text) != expected_text(text)
    ]
    assert not broken, "\n".join(broken)


def test_runs_execute_in_process_and_warehouse_steps_stay_single_writer():
    """Runs the UI / daemon launch execute every step in the run's process (no process per step);
    every asset is in the `warehouse` pool, whose limit (4 per step, granularity op, so `promo run`'s
    in-process runs and the daemon's runs count together) caps the warehouse steps running at once;
    one run per campaign at a time in the queue. The single writer of the DuckDB file is the
    warehouse's writer slot (tests/unit/test_warehouse_slot.py)."""
    from pathlib import Path

    import yaml

    from promo_assets.definitions import defs

    jobs = {job.name: job for job in defs.resolve_all_job_defs()}
    for name in ("campaign_job", "ingest_job", "simulate_demo_job", "__ASSET_JOB"):
        assert jobs[name].executor_def.name == "in_process", f"{name} runs with {jobs[name].executor_def.name}"
    graph = defs.resolve_asset_graph()
    outside = [k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).pools != {"warehouse"}]
    assert not outside, f"assets outside the warehouse pool: {outside}"
    instance = yaml.safe_load((Path(__file__).resolve().parents[2] / "dagster_home" / "dagster.yaml").read_text())
    assert instance["concurrency"]["pools"] == {"default_limit": 4, "granularity": "op"}
    assert instance["concurrency"]["runs"]["tag_concurrency_limits"] == [
        {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]
    # the automation sensor (declarative automation) runs in the daemon, on by default, every 30 s
    import dagster as dg

    from promo_assets.defs.automation.jobs import automation_sensor

    assert automation_sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert automation_sensor.minimum_interval_seconds == 30

