"""Shared by benchmarks/leaderboard.py and benchmarks/eom_coverage.py: one simulated campaign through
the production pipeline, down to its `policy_evaluation` rows.

For a (preset, seed), in a fresh temporary folder (its own landing root, warehouse, artefact store and
DAGSTER_HOME with the repository's dagster.yaml):
  python -m promo_assets.cli simulate --preset P --campaign C --days D --users U --seed S --start 2026-03-01
  python -m promo_assets.cli run --campaign C --no-progress        (PROMO_MAX_EPOCHS=max_epochs)
then the `policy_evaluation` rows of the latest succeeded run of every model (the query
`results.latest_evaluation_per_model`: per model, so it does not matter whether the pipeline
evaluates every model and the random reference in one run or in several). The benchmark depends
only on the CLI and that table: every model the pipeline runs (the registry's) appears by itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _checkout import cli_command  # noqa: E402

from promo_assets.store.warehouse import connect, sql  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

PRESET_SIZES = {  # (days, users): a holdout day of ~2,500 events (5,000 for K = 100)
    "demo": (8, 5000),
    "dipn_synthetic_2": (8, 10000),
    "e2e_synthetic": (8, 2500),
    "bipartite": (8, 8000),
}
START = REFERENCE_START.isoformat()
TAIL = 2000  # characters of a failed command's output kept in the report


def folder_env(tmp: Path) -> dict:
    """The environment of a `promo` subprocess whose landing folder, warehouse, artefact store, outbox
    and DAGSTER_HOME (with this checkout's dagster.yaml) all lie under `tmp`, running this checkout."""
    home = tmp / "dagster_home"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home)
    return {**os.environ, "PROMO_LANDING_DIR": str(tmp / "landing"), "PROMO_WAREHOUSE": str(tmp / "warehouse.duckdb"),
            "PROMO_ARTIFACTS_DIR": str(tmp / "artifacts"), "PROMO_OUTBOX_DIR": str(tmp / "outbox"),
            "DAGSTER_HOME": str(home),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def add_arguments(ap, presets) -> None:
    """The command-line options both benchmarks share."""
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--presets", nargs="+", default=list(presets))
    ap.add_argument("--days", type=int, default=None, help="days per campaign (default: PRESET_SIZES)")
    ap.add_argument("--users", type=int, default=None, help="user pool (default: PRESET_SIZES)")
    ap.add_argument("--max-epochs", type=int, default=20, help="PROMO_MAX_EPOCHS for `promo run` [20]")


def _cli(args: list[str], env: dict, cwd: Path, code: Path | None = None) -> tuple[int, str, float]:
    start = time.perf_counter()
    command = [sys.executable, "-m", "promo_assets.cli", *args] if code is None else cli_command(code, *args)
    proc = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start


def evaluate_campaign(preset: str, seed: int, *, days: int | None = None, users: int | None = None,
                      max_epochs: int | None = 20, keep: Path | None = None,
                      models: dict | None = None, code: Path | None = None) -> tuple[pd.DataFrame, dict]:
    """policy_evaluation rows of one simulated campaign run through `promo simulate` + `promo run`,
    and what was measured: sizes, the exit code of `promo run`, its wall time and (when it failed)
    the tail of its output. `keep`: a folder to keep the campaign's files in (default: a temporary
    one, removed afterwards). `models`: a campaign.yaml `models:` block (include / exclude / params)
    written into the simulated campaign's campaign.yaml before `promo run`. `code`: another checkout
    whose `promo simulate` and `promo run` to run (`_checkout.cli_command`; default: this one)."""
    d0, u0 = PRESET_SIZES.get(preset, (8, 5000))
    days, users = days or d0, users or u0
    campaign = f"{preset}-{seed}".replace("_", "-")
    info: dict = {"preset": preset, "seed": seed, "days": days, "users": users, "campaign": campaign}
    tmp = Path(tempfile.mkdtemp(prefix=f"leaderboard-{campaign}-", dir=keep))
    try:
        home = tmp / "dagster_home"
        home.mkdir()
        shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home)
        env = {**os.environ, "PROMO_LANDING_DIR": str(tmp / "landing"), "PROMO_WAREHOUSE": str(tmp / "warehouse.duckdb"),
               "PROMO_ARTIFACTS_DIR": str(tmp / "artifacts"), "DAGSTER_HOME": str(home),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        if max_epochs:
            env["PROMO_MAX_EPOCHS"] = str(max_epochs)
        rc, out, secs = _cli(["simulate", "--preset", preset, "--campaign", campaign, "--days", str(days),
                              "--users", str(users), "--seed", str(seed), "--start", START], env, tmp, code)
        info["simulate_seconds"] = round(secs, 1)
        if rc != 0:
            raise RuntimeError(f"promo simulate --preset {preset} --seed {seed} failed (exit {rc}): {out[-TAIL:]}")
        if models is not None:
            path = tmp / "landing" / campaign / "campaign.yaml"
            path.write_text(path.read_text() + yaml.safe_dump({"models": models}, sort_keys=False))
            info["models_block"] = models
        rc, out, secs = _cli(["run", "--campaign", campaign, "--no-progress"], env, tmp, code)
        info.update(run_exit_code=rc, run_seconds=round(secs, 1))
        if rc != 0:
            info["run_output_tail"] = out[-TAIL:]
        if (tmp / "warehouse.duckdb").exists():
            with connect(tmp / "warehouse.duckdb", read_only=True) as con:
                rows = con.execute(sql("results", "latest_evaluation_per_model"), [campaign]).df()
        else:
            rows = pd.DataFrame({"model": pd.Series(dtype=str), "n_users": pd.Series(dtype=int)})
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    rows["preset"] = preset
    rows["seed"] = seed
    info["models"] = sorted(set(rows["model"]))
    info["holdout_events"] = int(rows["n_users"].max()) if len(rows) else 0
    return rows, info
