"""The campaign report: one self-contained HTML file per campaign (plotly.js inlined, so it opens
without network access) with the champion and its evidence, the leaderboard with explanations, the
cost–response frontier of every policy, the response per level, the per-segment results, the
exported decisions and their exploration share, and the spend per day where pacing exists.
Written by the `campaign_report` asset and by `promo report --html PATH` (docs/report.md). No dagster."""

from __future__ import annotations

import os
from pathlib import Path

from promo_assets.report.data import ReportData, ReportError, gather, latest_board_run
from promo_assets.report.html import render

__all__ = ["ReportData", "ReportError", "gather", "latest_board_run", "render", "write_report"]


def write_report(html: str, path: Path) -> Path:
    """Write the report atomically (a temporary file in the same folder, then renamed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)
    return path
