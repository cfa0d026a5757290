"""Campaigns refreshed at once against one after another: `promo run --campaign cK` processes.

N fresh demo campaigns (--days × --users, --models each, seeds 1..N) in one landing folder; for each
arrangement a fresh warehouse, artefact store and instance (the Postgres profile on a throw-away
server when Debian's postgresql is installed, else the embedded SQLite one; recorded as
`instance`), then:

  - sequential:   `promo run --campaign c1`, then c2, ... (one process at a time);
  - at_once:      the N `promo run --campaign cK` processes started together;
  - at_once_pool1 (--old-pool, the smallest count only): the same with the `warehouse` pool's limit set back to 1, the previous
    arrangement, where a step kept the pool's one slot for its whole computation.

Each figure is the wall time from the first start to the last exit. `ratio_2` = at_once / sequential
for 2 campaigns (the target is <= 0.65 where each campaign's work is CPU-bound on one core). With
--counts 2 4 the 4-campaign arrangements are measured too. `cpu_s` is the user + system time of
the `promo` processes. `projection` in the JSON does the arithmetic for 16 cores (_projection).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/parallel_campaigns.py [--counts 2 4] [--days 3]
        [--users 1500] [--models lgbm_s lgbm_s_mono lgbm_t] [--epochs 3] [--old-pool] [--sqlite]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recorder  # noqa: E402

from devtools import pgserver  # noqa: E402
from devtools.devserver import demo_env, promo  # noqa: E402
from tests.conftest import set_models  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _instance(tmp: Path, name: str, campaigns: list[str], args, pg) -> dict[str, str]:
    """A fresh warehouse, artefact store and DAGSTER_HOME under tmp/name sharing the landing folder."""
    root = tmp / name
    env = demo_env(root, ROOT, args.epochs)
    env["PROMO_LANDING_DIR"] = str(tmp / "landing")
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    home = Path(env["DAGSTER_HOME"])
    if pg is not None:
        shutil.copy(ROOT / "dagster_home" / "postgres" / "dagster.yaml", home / "dagster.yaml")
        env.update(pg.env())
    if args.old_pool and name.endswith("pool1"):
        text = (home / "dagster.yaml").read_text()
        text, n = re.subn(r"(pools:\n(?:\s+#.*\n)*\s+default_limit:) \d+", r"\1 1", text)
        assert n == 1, "default_limit not found in dagster.yaml"
        (home / "dagster.yaml").write_text(text)
    return env


def _run_all(env: dict[str, str], campaigns: list[str], at_once: bool) -> dict:
    cpu0, start = _children_cpu(), time.perf_counter()
    cmd = [sys.executable, "-m", "promo_assets.cli", "run", "--no-progress", "--campaign"]
    outs = []
    if at_once:
        procs = [subprocess.Popen(cmd + [c], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for c in campaigns]
        for c, p in zip(campaigns, procs):
            out, _ = p.communicate()
            outs.append((c, p.returncode, out))
    else:
        for c in campaigns:
            done = subprocess.run(cmd + [c], env=env, capture_output=True, text=True)
            outs.append((c, done.returncode, done.stdout + done.stderr))
    wall = time.perf_counter() - start
    failed = [f"{c}: exit {rc}\n{out[-2000:]}" for c, rc, out in outs if rc != 0]
    if failed:
        raise SystemExit("promo run failed:\n" + "\n".join(failed))
    return {"wall_s": round(wall, 1), "cpu_s": round(_children_cpu() - cpu0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", type=int, nargs="+", default=[2, 4], help="campaigns refreshed together [2 4]")
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--users", type=int, default=1500)
    ap.add_argument("--models", nargs="+", default=["lgbm_s", "lgbm_s_mono", "lgbm_t"])
    ap.add_argument("--epochs", type=int, default=3, help="PROMO_MAX_EPOCHS")
    ap.add_argument("--old-pool", action="store_true",
                    help="also measure at once with the pool's limit set to 1 (the smallest count only)")
    ap.add_argument("--sqlite", action="store_true", help="the embedded SQLite instance even when Postgres is there")
    args = ap.parse_args()
    rec = Recorder("parallel_campaigns")
    tmp = Path(tempfile.mkdtemp(prefix="promo-parallel-"))
    pg = None
    if not args.sqlite and pgserver.missing() is None:
        pg = pgserver.PgServer()
        pg.start()
    figures: dict = {"days": args.days, "users": args.users, "models": args.models, "max_epochs": args.epochs,
                     "cores": os.cpu_count(), "instance": pg.version if pg else "sqlite (dagster_home/dagster.yaml)",
                     "counts": {}}
    try:
        campaigns = [f"c{i}" for i in range(1, max(args.counts) + 1)]
        env0 = demo_env(tmp / "sim", ROOT, args.epochs)
        env0["PROMO_LANDING_DIR"] = str(tmp / "landing")
        for i, c in enumerate(campaigns, 1):
            promo(env0, "simulate", "--preset", "demo", "--campaign", c, "--days", str(args.days),
                  "--users", str(args.users), "--seed", str(i), "--start", REFERENCE_START.isoformat())
            set_models(tmp / "landing" / c / "campaign.yaml", "include", args.models)
        for n in args.counts:
            chosen = campaigns[:n]
            row = {}
            arrangements = ["sequential", "at_once"] + (["at_once_pool1"] if args.old_pool and n == min(args.counts) else [])
            for name in arrangements:
                env = _instance(tmp, f"n{n}-{name}", chosen, args, pg)
                if pg is not None:  # a fresh database per arrangement
                    env["DAGSTER_PG_DB"] = f"bench_{n}_{name}"
                    pg.create_database(env["DAGSTER_PG_DB"])
                row[name] = _run_all(env, chosen, at_once=name != "sequential")
                print(f"{n} campaigns, {name}: {row[name]}", file=sys.stderr)
            row["ratio"] = round(row["at_once"]["wall_s"] / row["sequential"]["wall_s"], 3)
            if "at_once_pool1" in row:
                row["ratio_pool1"] = round(row["at_once_pool1"]["wall_s"] / row["sequential"]["wall_s"], 3)
            figures["counts"][str(n)] = row
        figures["projection"] = _projection(figures)
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    headline = {f"ratio_{n}": figures["counts"][str(n)]["ratio"] for n in args.counts}
    rec.write(figures, headline=headline)


def _projection(figures: dict) -> dict:
    """The arithmetic for more cores. A campaign's refresh alone takes `per_campaign_s` (the
    sequential wall time / N) and works on one core; N campaigns at once on C cores keep
    min(N, C) cores busy, so their ideal wall time is per_campaign_s * N / min(N, C). `efficiency`
    is that ideal over the measured at-once time on this machine (1 = the cores fully used; the
    writes, held one at a time, the Dagster and process overheads and other load lower it). The
    projection for 16 cores assumes the same efficiency: per_campaign_s * ceil(K / 16) / efficiency
    for K campaigns."""
    cores = figures["cores"]
    out = {}
    for n, row in figures["counts"].items():
        n = int(n)
        per = row["sequential"]["wall_s"] / n
        ideal = per * n / min(n, cores)
        eff = ideal / row["at_once"]["wall_s"]
        out[n] = {"per_campaign_s": round(per, 1), "ideal_at_once_s": round(ideal, 1), "efficiency": round(eff, 3),
                  **{f"16_cores_{k}_campaigns_s": round(per * -(-k // 16) / eff, 1) for k in (n, 16, 30)},
                  **{f"16_cores_{k}_campaigns_one_after_another_s": round(per * k, 1) for k in (16, 30)}}
    return out


if __name__ == "__main__":
    main()
