"""benchmarks/_results.py: every benchmark script records its result through it, with the provenance
the docs page shows (command, commit, date, load, cores)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recorder, load_results  # noqa: E402

SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))


def test_every_benchmark_script_records_through_the_helper():
    assert len(SCRIPTS) >= 19
    missing = [p.name for p in SCRIPTS if "Recorder(" not in p.read_text() or ".write(" not in p.read_text()]
    assert not missing, f"benchmark scripts that do not write their result with _results.Recorder: {missing}"


def test_result_carries_its_provenance_and_plain_json(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMO_BENCH_RESULTS", str(tmp_path))
    rec = Recorder("demo_bench", argv=["--users", "10"])
    path = rec.write({"mae": np.float32(0.25), "per_level": np.array([1.0, math.nan]), "n": np.int64(3)},
                     headline={"MAE": 0.25}, tag="quick")
    assert path == tmp_path / "demo_bench--quick.json"
    doc = json.loads(path.read_text())
    assert doc["command"].endswith("--users 10") and doc["benchmark"] == "demo_bench" and doc["tag"] == "quick"
    assert len(doc["git_commit"]) == 40 and isinstance(doc["modified_code"], bool)
    assert len(doc["load_start"]) == 3 and len(doc["load_end"]) == 3 and doc["cpu_count"] >= 1
    assert doc["date"].endswith("+00:00") and doc["seconds"] >= 0
    assert doc["figures"] == {"mae": 0.25, "per_level": [1.0, None], "n": 3}  # NaN stored as null
    # the campaigns' start date (part of a simulated campaign's identity) and the packages it ran on
    from promo_assets.simulation import REFERENCE_START

    assert doc["simulation_start"] == REFERENCE_START.isoformat()
    assert doc["packages"]["numpy"] == np.__version__ and doc["packages"]["duckdb"]
    assert [r["_file"] for r in load_results(tmp_path)] == ["demo_bench--quick.json"]


def test_a_script_run_by_a_test_writes_nothing_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("PROMO_BENCH_RESULTS", raising=False)
    before = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    assert Recorder("never_written").write({"x": 1}) is None  # PYTEST_CURRENT_TEST is set here
    assert sorted((ROOT / "benchmarks" / "results").glob("*.json")) == before
