"""A simulated demo campaign decided by `promo run` in a temporary folder, with its champion pinned to
one model, and that champion's predicted response and cost for the population file's users (the
setup of benchmarks/pacing.py and benchmarks/multi_budget.py)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from promo_assets.simulation import REFERENCE_START

ROOT = Path(__file__).resolve().parents[1]


def promo(env: dict, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "promo_assets.cli", *args], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"promo {' '.join(args)} failed: {done.stderr[-3000:]}")


def decided_campaign(tmp: Path, *, users: int, days: int, seed: int, model: str, start: dt.date = REFERENCE_START,
                     yaml_extra: str = ""):
    """(champion state, population frame, champion values N x K, costs N x K) of campaign 'demo' under
    `tmp` (landing/demo, wh.duckdb, artifacts, outbox, dagster_home), after `promo run`."""
    from promo_assets.store import warehouse
    from promo_assets.serve import read_campaign

    (tmp / "dagster_home").mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", tmp / "dagster_home")
    env = {**os.environ, "PROMO_LANDING_DIR": str(tmp / "landing"), "PROMO_WAREHOUSE": str(tmp / "wh.duckdb"),
           "PROMO_ARTIFACTS_DIR": str(tmp / "artifacts"), "DAGSTER_HOME": str(tmp / "dagster_home"),
           "PROMO_OUTBOX_DIR": str(tmp / "outbox")}
    os.environ["PROMO_ARTIFACTS_DIR"] = env["PROMO_ARTIFACTS_DIR"]  # the models are read from it here too
    promo(env, "simulate", "--preset", "demo", "--campaign", "demo", "--days", str(days), "--users", str(users),
          "--seed", str(seed), "--start", start.isoformat())
    with open(tmp / "landing" / "demo" / "campaign.yaml", "a") as f:
        f.write(f"models:\n  include: [{model}]\nchampion:\n  pin: {model}\n{yaml_extra}")
    promo(env, "run", "--campaign", "demo", "--no-progress")
    with warehouse.connect(tmp / "wh.duckdb", read_only=True) as con:
        state = read_campaign(con, tmp / "landing", "demo")
    pop = pd.read_parquet(sorted((tmp / "landing" / "demo" / "population").glob("*.parquet"))[-1])
    frame = pop[list(state.features)].copy()
    for f, kind in state.features.items():
        frame[f] = frame[f].astype(np.float64 if kind == "numeric" else object)
    values, costs = state.coefficients(frame)
    return state, pop, values, costs
