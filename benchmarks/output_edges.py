"""What leaves the system from hostile data, end to end: formula cells in a CSV export, and a group cap on a missing column.

1. **CSV export.** A simulated demo campaign whose user ids start with `=`, `+`, `-` and `@`
   (`=HYPERLINK("http://x","u…")`, `+cmd|' /C calc'!A0 u…`, `-2+3 u…`, `@SUM(1) u…`; the other ids
   plain) goes through `promo run` (two LightGBM models) and `promo export --format csv`. Every file
   is read back with Python's csv module: the cells that start with a formula character (`= + - @`,
   tab, carriage return) and are not numbers must be 0; the ids written with the leading `'` are
   counted, and `read_decision_file` must give back the exact ids of the Parquet export.
2. **A `constraints` group on a missing column.** The same campaign with a group cap on the feature
   `no_such_column`: `promo run` must exit 2 naming `constraints.groups.<name>.feature`, before anything
   runs: no decisions stored, no outbox written, and `promo export` after it has nothing to export.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/output_edges.py

Records benchmarks/results/output_edges.json.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

FORMULA = ("=", "+", "-", "@", "\t", "\r")
PREFIXES = ['=HYPERLINK("http://x","{u}")', "+cmd|' /C calc'!A0 {u}", "-2+3 {u}", "@SUM(1) {u}"]


def cli(args: list[str], env: dict) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True)
    return proc.returncode, proc.stdout + proc.stderr


def hostile_ids(folder: Path) -> dict[str, str]:
    """Rename every fifth user to a formula-leading id, in the events, population and truth files."""
    ids = sorted(pd.read_parquet(folder / "truth" / "response.parquet", columns=["user_id"])["user_id"].unique())
    mapping = {u: PREFIXES[(i // 5) % len(PREFIXES)].format(u=u) for i, u in enumerate(ids) if i % 5 == 0}
    for path in [*folder.glob("events/*.parquet"), *folder.glob("population/*.parquet"), *folder.glob("truth/*.parquet")]:
        frame = pd.read_parquet(path)
        frame["user_id"] = frame["user_id"].map(lambda u: mapping.get(u, u))
        frame.to_parquet(path, index=False)
    return mapping


def env_for(tmp: Path) -> dict:
    from devtools.devserver import demo_env

    return {**demo_env(tmp, ROOT, max_epochs=1), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}


def csv_export(tmp: Path) -> dict:
    from promo_assets.decisions import read_decision_file

    env = env_for(tmp)
    rc, out = cli(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "4", "--users", "400",
                   "--seed", "3", "--start", REFERENCE_START.isoformat()], env)
    assert rc == 0, out
    folder = tmp / "landing" / "demo"
    mapping = hostile_ids(folder)
    config = yaml.safe_load((folder / "campaign.yaml").read_text())
    config["models"] = {"include": ["lgbm_s", "lgbm_s_mono"]}
    (folder / "campaign.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    t0 = time.perf_counter()
    rc_run, out_run = cli(["run", "--campaign", "demo", "--no-progress"], env)
    run_s = time.perf_counter() - t0
    rc_pq, out_pq = cli(["export", "--campaign", "demo", "--out", str(tmp / "parquet")], env)
    rc_csv, out_csv = cli(["export", "--campaign", "demo", "--format", "csv", "--out", str(tmp / "csv")], env)
    files = sorted((tmp / "csv" / "demo").glob("*/*.csv"))
    cells = unescaped = escaped_ids = escaped_cells = numbers = hostile_rows = 0
    examples: list[str] = []
    exact = True
    for path in files:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        header = rows[0]
        for row in rows[1:]:
            for name, cell in zip(header, row):
                cells += 1
                if cell[:1] in FORMULA:
                    try:
                        float(cell)
                        numbers += 1
                    except ValueError:
                        unescaped += 1
                        examples.append(cell[:60])
                elif cell.startswith("'") and cell[1:2] in (*FORMULA, "'"):
                    escaped_cells += 1
                    escaped_ids += name == "user_id"
            hostile_rows += row[header.index("user_id")].startswith("'")
        twin = tmp / "parquet" / "demo" / path.parent.name / path.name.replace(".csv", ".parquet")
        exact &= read_decision_file(path)["user_id"].tolist() == pd.read_parquet(twin)["user_id"].tolist()
    decided = set(pd.concat([pd.read_parquet(p) for p in (tmp / "parquet" / "demo").glob("*/*.parquet")])["user_id"])
    return {"promo_run_exit": rc_run, "promo_run_seconds": round(run_s, 1), "export_parquet_exit": rc_pq,
            "export_csv_exit": rc_csv, "users_renamed": len(mapping),
            "renamed_users_decided": len(decided & set(mapping.values())), "csv_files": len(files), "cells": cells,
            "cells_starting_with_a_formula_character_unescaped": unescaped, "unescaped_examples": examples[:5],
            "negative_numbers_left_as_numbers": numbers, "cells_escaped_with_a_leading_quote": escaped_cells,
            "user_id_cells_escaped": escaped_ids, "rows_with_an_escaped_user_id": hostile_rows,
            "read_decision_file_gives_the_parquet_ids": exact,
            "run_tail": out_run[-600:] if rc_run else "", "export_tail": (out_csv if rc_csv else "")[-600:]}


def missing_group_column(tmp: Path) -> dict:
    env = env_for(tmp)
    rc, out = cli(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "3", "--users", "300",
                   "--seed", "3", "--start", REFERENCE_START.isoformat()], env)
    assert rc == 0, out
    path = tmp / "landing" / "demo" / "campaign.yaml"
    config = yaml.safe_load(path.read_text())
    config["constraints"] = {"groups": {"big_city": {"feature": "no_such_column", "equals": "x", "budget_per_capita": 0.5}}}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    t0 = time.perf_counter()
    rc_run, out_run = cli(["run", "--campaign", "demo", "--no-progress"], env)
    seconds = time.perf_counter() - t0
    decisions = None
    if (tmp / "warehouse.duckdb").exists():
        import duckdb

        with duckdb.connect(str(tmp / "warehouse.duckdb"), read_only=True) as con:
            decisions = con.execute("SELECT count(*) FROM decisions").fetchone()[0]
    outbox = sorted(str(p.relative_to(tmp)) for p in (tmp / "outbox").rglob("*")) if (tmp / "outbox").exists() else []
    rc_export, out_export = cli(["export", "--campaign", "demo"], env)
    line = next((ln for ln in out_run.splitlines() if "constraints.groups" in ln), "")
    return {"promo_run_exit": rc_run, "promo_run_seconds": round(seconds, 1), "message": line.strip()[:400],
            "names_the_key": "'constraints.groups.big_city.feature'" in out_run,
            "warehouse_written": (tmp / "warehouse.duckdb").exists(), "decision_rows": decisions,
            "outbox_files": outbox, "promo_export_exit_after": rc_export,
            "promo_export_message": out_export.strip().splitlines()[-1][:300] if out_export.strip() else "",
            "traceback": "Traceback" in out_run}


def main() -> int:
    rec = Recorder("output_edges")
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        exported = csv_export(Path(a))
        print({k: v for k, v in exported.items() if not k.endswith("_tail")})
        refused = missing_group_column(Path(b))
        print(refused)
    ok = (exported["export_csv_exit"] == 0 and exported["cells_starting_with_a_formula_character_unescaped"] == 0
          and exported["read_decision_file_gives_the_parquet_ids"] and exported["renamed_users_decided"] > 0
          and refused["promo_run_exit"] == 2 and refused["names_the_key"] and not refused["outbox_files"]
          and not refused["decision_rows"])
    rec.write({"csv_export": exported, "group_cap_on_a_missing_column": refused, "all_held": ok}, headline={
        "CSV cells starting with = + - @ unescaped": exported["cells_starting_with_a_formula_character_unescaped"],
        "CSV cells escaped with a leading '": exported["cells_escaped_with_a_leading_quote"],
        "formula-leading users decided and exported": exported["renamed_users_decided"],
        "CSV read back = Parquet ids": exported["read_decision_file_gives_the_parquet_ids"],
        "missing group column: promo run exit": refused["promo_run_exit"],
        "missing group column: decision rows / outbox files": f"{refused['decision_rows'] or 0} / {len(refused['outbox_files'])}",
    })
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
