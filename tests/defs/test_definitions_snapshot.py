"""The shape of the asset graph, pinned: asset keys, deps, groups, partitions, automation
conditions, kinds, pools, jobs, schedules and sensors of `promo_assets.definitions.defs`.

A change to the graph's shape shows up here as a diff against tests/defs/snapshots/definitions.json.
The registry generates one chain of assets per model: the snapshot pins those chains as templates
(the model's name as `{model}`, its phase asset's kinds as `{model.kinds}`; each distinct shape a
template takes is listed), and `test_every_registered_model_has_its_chain_and_the_leaderboard_reads_them` checks every model
has its chain, so that adding a model (one module, one registry line) leaves the snapshot as it is.
When a change is intended, regenerate the snapshot and commit it with the change:

    PROMO_UPDATE_SNAPSHOT=1 .venv/bin/python -m pytest tests/defs/test_definitions_snapshot.py

Under CI (CI set and not false / 0) the snapshot is never written, PROMO_UPDATE_SNAPSHOT or not: a
graph that differs from the committed snapshot fails the run, so CI cannot bless its own change.
"""

import json
import os
from pathlib import Path

import dagster as dg
import pytest

SNAPSHOT = Path(__file__).parent / "snapshots" / "definitions.json"


def _partitions(pdef) -> str | None:
    if pdef is None:
        return None
    if isinstance(pdef, dg.MultiPartitionsDefinition):
        return "multi(" + ", ".join(f"{d.name}={_partitions(d.partitions_def)}" for d in pdef.partitions_defs) + ")"
    if isinstance(pdef, dg.DynamicPartitionsDefinition):
        return f"dynamic:{pdef.name}"
    return type(pdef).__name__


def shape(defs: dg.Definitions, templates: bool = True) -> dict:
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        spec = node.to_asset_spec() if hasattr(node, "to_asset_spec") else None
        cond = node.automation_condition
        assets[key.to_user_string()] = {
            "deps": sorted(p.to_user_string() for p in node.parent_keys),
            "group": node.group_name,
            "partitions": _partitions(node.partitions_def),
            "automation_condition": None if cond is None else cond.get_label() or type(cond).__name__,
            "kinds": sorted(spec.kinds) if spec is not None else [],
            "pool": getattr(node, "pools", None) and sorted(node.pools),
        }
    jobs = {}
    for job in sorted(defs.resolve_all_job_defs(), key=lambda j: j.name):
        if job.name.startswith("__"):
            continue
        jobs[job.name] = {
            "partitions": _partitions(job.partitions_def),
            "assets": sorted(k.to_user_string() for k in getattr(job, "asset_layer").executable_asset_keys)
            if job.asset_layer is not None else [],
        }
    return {
        "assets": templated_assets(assets) if templates else assets,
        "checks": sorted({templated(k.to_user_string()) if templates else k.to_user_string()
                          for k in graph.asset_check_keys}),
        "jobs": {name: {**job, "assets": sorted({templated(a) for a in job["assets"]})} for name, job in jobs.items()}
        if templates else jobs,
        "schedules": {s.name: {"cron": s.cron_schedule, "job": s.job_name} for s in defs.schedules or []},
        "sensors": sorted(s.name for s in defs.sensors or []),
        "resources": sorted((defs.resources or {}).keys()),
    }


CHAIN = ("model", "response_coefficients", "budget_dual", "allocation", "policy_evaluation")


def templated(key: str) -> str:
    """`<model>/<step>` of a registered model's generated chain as `{model}/<step>`; other keys (a
    model's own extra assets included) unchanged."""
    from promo_assets.models import registry

    first, sep, rest = key.removeprefix("optional/").partition("/")  # the chains off by default: optional/<model>/
    if sep and first in registry.names() and rest in CHAIN + registry.get(first).phases:
        return f"{{model}}/{rest}"
    return key


def templated_assets(assets: dict) -> dict:
    """The assets with every model chain folded into its template: `{model}/<step>` -> the sorted list
    of the distinct shapes that step takes over the registered models."""
    from promo_assets.models import registry

    out, variants = {}, {}
    for key, spec in assets.items():
        model = key.removeprefix("optional/").partition("/")[0]
        if templated(key) == key:
            out[key] = {**spec, "deps": sorted({templated(d) for d in spec["deps"]})}
            continue
        cls = registry.get(model)
        spec = {**spec, "deps": sorted({templated(d) for d in spec["deps"]}), "group": "{model}",
                "kinds": ["{model.kinds}"] if spec["kinds"] == sorted(cls.kinds) else spec["kinds"]}
        variants.setdefault(templated(key), set()).add(json.dumps(spec, sort_keys=True, default=str))
    out.update({k: [json.loads(v) for v in sorted(vs)] for k, vs in variants.items()})
    return out


def under_ci(environ=os.environ) -> bool:
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def check_snapshot(now: dict, snapshot: Path, environ=os.environ) -> None:
    """Compare the graph's shape `now` with the committed snapshot; rewrite the snapshot first only
    when PROMO_UPDATE_SNAPSHOT=1 and not under CI."""
    ci = under_ci(environ)
    if environ.get("PROMO_UPDATE_SNAPSHOT") == "1" and not ci:
        snapshot.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    refused = (" (PROMO_UPDATE_SNAPSHOT=1 is ignored under CI: the snapshot is never rewritten there)"
               if ci and environ.get("PROMO_UPDATE_SNAPSHOT") == "1" else "")
    if not snapshot.exists():
        pytest.fail(f"{snapshot} is missing: generate it with PROMO_UPDATE_SNAPSHOT=1 outside CI (module docstring)"
                    + refused)
    pinned = json.loads(snapshot.read_text())
    for section in ("assets", "jobs", "schedules", "sensors", "resources", "checks"):
        if now[section] != pinned[section]:
            pytest.fail(
                f"the Definitions' {section} changed; if intended, regenerate with PROMO_UPDATE_SNAPSHOT=1 "
                f"outside CI and commit it (module docstring){refused}: "
                f"{sorted(set(map(str, now[section])) ^ set(map(str, pinned[section])))[:10]}")


def test_definitions_match_the_snapshot():
    from promo_assets.definitions import build_defs

    check_snapshot(json.loads(json.dumps(shape(build_defs()), default=str)), SNAPSHOT)


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_changed_graph_fails_and_the_snapshot_is_not_rewritten(tmp_path, ci):
    pinned = json.loads(SNAPSHOT.read_text())
    changed = {**pinned, "sensors": pinned["sensors"] + ["a_sensor_nobody_committed"]}
    copy = tmp_path / "definitions.json"
    copy.write_text(SNAPSHOT.read_text())
    before = copy.read_bytes()
    with pytest.raises(pytest.fail.Exception, match="a_sensor_nobody_committed.*|sensors changed") as failed:
        check_snapshot(changed, copy, {"CI": ci, "PROMO_UPDATE_SNAPSHOT": "1"})
    assert "ignored under CI" in str(failed.value)
    assert copy.read_bytes() == before  # never written
    with pytest.raises(pytest.fail.Exception, match="is missing"):
        check_snapshot(changed, tmp_path / "absent.json", {"CI": ci, "PROMO_UPDATE_SNAPSHOT": "1"})
    assert not (tmp_path / "absent.json").exists()
    # outside CI the same request rewrites it (what a developer does on purpose), then it matches
    check_snapshot(changed, copy, {"PROMO_UPDATE_SNAPSHOT": "1"})
    assert json.loads(copy.read_text()) == changed


def test_every_registered_model_has_its_chain_and_the_leaderboard_reads_them():
    """The registry generates the graph: each model's phases -> response_coefficients -> budget_dual
    -> allocation -> policy_evaluation, all feeding the leaderboard; nothing else lists models."""
    from promo_assets.definitions import build_defs
    from promo_assets.models import registry

    from promo_assets.defs.common import model_key

    snap = shape(build_defs(), templates=False)["assets"]
    for model in registry.models():
        def k(step: str) -> str:  # optional/<model>/<step> for the models off by default
            return model_key(model.name, step).to_user_string()

        first, last = k(model.phases[0]), k(model.phases[-1])
        assert "training_frame" in snap[first]["deps"] and snap[first]["kinds"] == sorted(model.kinds)
        assert last in snap[k("response_coefficients")]["deps"]
        assert k("budget_dual") in snap[k("allocation")]["deps"]
        assert k("allocation") in snap[k("policy_evaluation")]["deps"]
        assert k("policy_evaluation") in snap["leaderboard"]["deps"]
        assert snap[k("allocation")]["automation_condition"] is not None
        assert (first.split("/")[0] == "optional") == (not model.default)
    assert snap["rct_events"]["partitions"] == "dynamic:campaign"  # a campaign's days are rows, not partitions
