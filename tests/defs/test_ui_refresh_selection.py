"""The selection docs/automation.md gives for refreshing a campaign from the UI in one run is what
`promo run` refreshes in its one run for the demo campaign: the ingestion, the chains of the models the
campaign trains and the leaderboard. A chain it does not train in the selection would skip and keep
Dagster from executing the leaderboard in that run (benchmarks/report_page.py --part backfill)."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg

import promo_assets.cli.main as cli
from promo_assets.definitions import build_defs
from promo_assets.defs.common import INGESTION_ASSETS, model_of_key
from promo_assets.simulation import REFERENCE_START

DOC = Path(__file__).resolve().parents[2] / "docs" / "automation.md"


def test_the_documented_selection_is_what_promo_run_refreshes(promo_env):
    found = re.search(r"\n\s*```\n\s*(not group:decisions[^\n]*)\n\s*```", DOC.read_text(encoding="utf-8"))
    assert found, "docs/automation.md gives no selection starting `not group:decisions`"
    assert cli.main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "2", "--users", "50",
                     "--start", REFERENCE_START.isoformat()]) == cli.EXIT_OK
    defs = build_defs()
    selected = dg.AssetSelection.from_string(found.group(1)).resolve(defs.resolve_asset_graph())

    left_out = cli._models_left_out("demo")
    assert "gnn_hazard" in left_out  # the demo has no merchants: block, which the selection's last clause is for
    chains = defs.resolve_job_def("campaign_job").asset_layer.executable_asset_keys
    refreshed = ({dg.AssetKey(a) for a in INGESTION_ASSETS} | {dg.AssetKey("leaderboard")}
                 | {k for k in chains if model_of_key(k) not in left_out})
    assert selected == refreshed
