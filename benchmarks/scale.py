"""Scale benchmark: the chunked exact allocator out-of-core and on Dask.

Parts (each in a fresh subprocess, so that its peak RSS is its own; prints what it measured, then
one JSON line per part):

- ``exact``: 10^7 x 16 (float32) from the deterministic chunk source, gathered in memory for
  `solve`; then `solve_chunked` in this process (out-of-core: one chunk at a time) and on a Dask
  LocalCluster of 2 worker processes: λ*, value, dual bound and their relative differences;
- ``big``: 10^8 x 16 out-of-core from the chunk source (chunk i generated from seed i, standing in
  for a scoring stream; never stored): wall time, peak RSS, bytes read, passes;
- ``curve``: the sizes of --curve (default 10^6, 10^7, 10^8) the same way, one after the other in one
  process (after an untimed warm-up solve of one chunk, 2^20 users): a table of wall and CPU time per user, passes,
  peak RSS (the process's, so far: the largest size last) and load, and max/min of the time per user;
- ``parquet``: 2 x 10^7 x 16 written to Parquet files under --tmp (deleted afterwards), then read
  back row group by row group: time per user against the chunk source at the same size;
- ``e2e``: `promo run` on a demo campaign whose population file is replaced by 10^6 users
  (resampled from the simulated population's features: the simulator's events for 10^6 users would
  take hours), with PROMO_DASK_SCHEDULER=local:2 and the models s_learner and lgbm_s: wall time, exit
  code, peak RSS and the slowest Dagster steps;
- ``scoring``: the population's scoring step (`predict_chunk` over frames of 2^16 users, as `promo run`) on
  --e2e-users users resampled from the campaign of --scoring-dir (default the ``e2e`` part's): per model
  CPU seconds with the compiled LightGBM forests and with LightGBM's C API, and whether they agree bitwise;
- ``online``: `OnlinePolicy.decide_stream` throughput (users/s on one core) of the fitted models of
  the ``e2e`` part (its warehouse and artefact store, kept under --tmp).

Usage: python benchmarks/scale.py [--parts exact,curve,big,parquet,e2e,online,scoring] [--workers 0|2]
       [--tmp DIR] [--big-users 100000000] [--e2e-users 1000000] [--scoring-dir DIR] [--json-out FILE] [--tag TAG]
Peak RSS: the process's own (getrusage of the child) plus, with Dask workers, the sampled maximum
of the worker processes' summed RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promo_assets.allocation import solve  # noqa: E402
from promo_assets.allocation.chunked import ParquetSource, solve_chunked, write_parquet  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

K = 16
CHUNK = 1 << 20
SHARE = 0.3  # budget = SHARE x the cost of every user at the dearest level (expected, from the generator)


@dataclass
class GeneratedSource:
    """n_users x K coefficients (float32) generated chunk by chunk: chunk i from seed i. Concave
    increasing responses v = a + b x (2 - q x) over incentives x in [0, 1], plus a little noise (so that
    some rows are not concave and go through the full hull), cost = x v."""

    n_users: int
    n_levels: int = K
    rows: int = CHUNK

    def chunks(self):
        return [(i, min(self.rows, self.n_users - s)) for i, s in enumerate(range(0, self.n_users, self.rows))]

    def load(self, ref):
        seed, m = ref
        k = self.n_levels
        rng = np.random.default_rng(seed)
        x = np.linspace(0.0, 1.0, k, dtype=np.float32)
        a = rng.uniform(0.05, 0.5, (m, 1)).astype(np.float32)
        b = rng.uniform(0.0, 0.4, (m, 1)).astype(np.float32)
        q = rng.uniform(0.0, 1.0, (m, 1)).astype(np.float32)
        v = np.empty((m, k), dtype=np.float32)
        c = np.empty((m, k), dtype=np.float32)
        step = 1 << 14  # blocks that stay in cache, written in place (no chunk-sized temporaries)
        noise = np.empty((step, k), dtype=np.float32)
        for s in range(0, m, step):
            vb, nb, sl = v[s:s + step], noise[:min(step, m - s)], slice(s, s + step)
            np.multiply(q[sl], -x, out=vb)
            vb += 2.0
            vb *= x
            vb *= b[sl]
            vb += a[sl]
            rng.random(out=nb, dtype=np.float32)
            nb *= np.float32(0.004)
            vb += nb
            np.multiply(vb, x, out=c[sl])
        return v, c

    def describe(self, ref):
        return f"generated chunk {ref[0]}"

    def budget(self) -> float:
        # E[v at x=1] = 0.275 + 0.2 x 1.5 + 0.002
        return SHARE * self.n_users * (0.275 + 0.3 + 0.002)


def uptime() -> str:
    return Path("/proc/loadavg").read_text().split()[:3].__str__()


def peak_rss_self() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class WorkerRss:
    """Samples the summed RSS of the Dask worker processes (children of this process) every 0.2 s."""

    def __init__(self):
        import psutil

        self.proc, self.peak, self._stop = psutil.Process(), 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, sum(p.memory_info().rss for p in self.proc.children(recursive=True)))
            except Exception:
                pass
            time.sleep(0.2)

    def stop(self) -> int:
        self._stop.set()
        self.thread.join()
        return self.peak


def cluster(workers: int):
    from distributed import Client, LocalCluster

    lc = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit="4GiB")
    return lc, Client(lc)


def run_chunked(source, budget, workers: int) -> dict:
    lc = client = rss = None
    if workers:
        lc, client = cluster(workers)
        rss = WorkerRss()
    levels = np.zeros(source.n_levels, dtype=np.int64)

    def sink(i, first, lv):  # stands in for the warehouse writer: a histogram of the levels written
        levels[:] += np.bincount(lv, minlength=source.n_levels)

    t0, p0 = time.perf_counter(), time.process_time()
    res = solve_chunked(source, budget, client=client, levels=sink)
    wall, cpu = time.perf_counter() - t0, time.process_time() - p0
    out = {"n_users": source.n_users, "wall_s": wall, "per_user_ns": wall / source.n_users * 1e9,
           "cpu_s_this_process": cpu, "cpu_per_user_ns": cpu / source.n_users * 1e9,
           "lambda_": res.lambda_, "value": res.response, "dual_bound": res.dual_bound, "relative_gap": res.relative_gap,
           "passes": res.info["passes"], "bytes_read": res.info["bytes_read"], "chunks": res.info["chunks"],
           "active_users": res.info["active_users"], "band_segments": res.info["band_segments"],
           "widenings": res.info["widenings"], "workers": workers, "levels_written": int(levels.sum()),
           "fractional_user": res.fractional_user, "sampled_users": res.info["sampled_users"],
           "step_cpu_per_user_ns": {k: x / source.n_users * 1e9 for k, x in res.info["cpu_seconds"].items()},
           "step_wall_s": res.info["seconds"]}
    if workers:
        out["peak_rss_workers"] = rss.stop()
        client.close()
        lc.close()
    out["peak_rss_client"] = peak_rss_self()
    out["peak_rss_total"] = out["peak_rss_client"] + out.get("peak_rss_workers", 0)
    out["loadavg"] = uptime()
    return out


def part_exact(args) -> dict:
    source = GeneratedSource(args.exact_users)
    n = source.n_users
    v = np.empty((n, K), dtype=np.float32)
    c = np.empty((n, K), dtype=np.float32)
    s = 0
    for ref in source.chunks():
        vv, cc = source.load(ref)
        v[s:s + len(vv)], c[s:s + len(vv)] = vv, cc
        s += len(vv)
    budget = source.budget()
    t0 = time.perf_counter()
    ref = solve(v, c, budget)
    t_mem = time.perf_counter() - t0
    del v, c
    out = {"n_users": n, "in_memory": {"wall_s": t_mem, "lambda_": ref.lambda_, "value": ref.response,
                                       "dual_bound": ref.dual_bound, "gap": ref.gap}}
    for name, workers in (("out_of_core", 0), ("dask_2_workers", 2)):
        got = run_chunked(source, budget, workers)
        got.update(same_lambda=got["lambda_"] == ref.lambda_,
                   value_rel_diff=abs(got["value"] - ref.response) / abs(ref.response),
                   dual_rel_diff=abs(got["dual_bound"] - ref.dual_bound) / abs(ref.dual_bound),
                   same_fractional_user=got["fractional_user"] == ref.fractional_user)
        out[name] = got
    out["loadavg"] = uptime()
    return out


def part_sizes(sizes, workers) -> dict:
    warm = GeneratedSource(CHUNK)  # untimed, one full chunk: the process's first allocations of chunk-sized
    solve_chunked(warm, warm.budget())  # arrays are slower (seen: 0.4 against 0.15 us per user to generate)
    return {str(n): run_chunked(GeneratedSource(n), GeneratedSource(n).budget(), workers) for n in sizes}


def curve_table(points: dict) -> str:
    """The scaling curve as a table, and max/min of the time per user (wall and CPU)."""
    head = (f"{'users':>12} {'chunks':>6} {'passes':>6} {'sampled':>8} {'active':>9} {'wall s':>8} "
            f"{'wall us/user':>12} {'CPU us/user':>11} {'peak RSS MB':>11}  load (1/5/15 min)")
    lines = [head]
    for n, r in points.items():
        lines.append(f"{int(n):>12,} {r['chunks']:>6} {r['passes']:>6} {r['sampled_users']:>8} {r['active_users']:>9} "
                     f"{r['wall_s']:>8.1f} {r['per_user_ns'] / 1e3:>12.3f} {r['cpu_per_user_ns'] / 1e3:>11.3f} "
                     f"{r['peak_rss_total'] / 2**20:>11.0f}  {r['loadavg']}")
        lines.append("             CPU us/user by step: " + ", ".join(
            f"{k} {x / 1e3:.3f}" for k, x in r["step_cpu_per_user_ns"].items()))
    for key, name in (("per_user_ns", "wall"), ("cpu_per_user_ns", "CPU")):
        xs = [r[key] for r in points.values()]
        lines.append(f"{name} time per user, max/min over the sizes: {max(xs) / min(xs):.2f}")
    return "\n".join(lines)


def part_parquet(args) -> dict:
    n = 20_000_000
    folder = Path(args.tmp) / "scale_parquet"
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    try:
        gen = GeneratedSource(n)
        t0 = time.perf_counter()
        paths = []
        for i, ref in enumerate(gen.chunks()):  # one file per 2^20 users, row groups of 2^18
            v, c = gen.load(ref)
            paths.append(folder / f"coef_{i:05d}.parquet")
            write_parquet(paths[-1], v, c, rows_per_group=1 << 18)
        t_write = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in paths)
        got = run_chunked(ParquetSource(paths, K), gen.budget(), args.workers)
        got.update(write_s=t_write, files=len(paths), bytes_on_disk=size, disk_free_before=free)
        ref = run_chunked(gen, gen.budget(), args.workers)
        got.update(chunk_source_per_user_ns=ref["per_user_ns"], chunk_source_wall_s=ref["wall_s"],
                   same_lambda_as_chunk_source=got["lambda_"] == ref["lambda_"],
                   parquet_over_chunk_source=got["per_user_ns"] / ref["per_user_ns"])
        return got
    finally:
        shutil.rmtree(folder, ignore_errors=True)


E2E_MODELS = ("s_learner", "lgbm_s", "gnn_hazard")  # gnn_hazard skips on the demo (no graph)


def _restricted_main(argv):
    """`promo` with the registry restricted to E2E_MODELS (what the subprocess of part e2e runs)."""
    from promo_assets.cli.main import main
    from promo_assets.models import registry

    registry.BUILTIN = {m: registry.BUILTIN[m] for m in E2E_MODELS}
    return main(argv)


def part_e2e(args) -> dict:
    import pandas as pd

    work = Path(args.tmp) / "scale_e2e"
    shutil.rmtree(work, ignore_errors=True)
    (work / "dagster_home").mkdir(parents=True)
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", work / "dagster_home")
    env = {**os.environ, "PROMO_LANDING_DIR": str(work / "landing"), "PROMO_WAREHOUSE": str(work / "w.duckdb"),
           "PROMO_ARTIFACTS_DIR": str(work / "artifacts"), "DAGSTER_HOME": str(work / "dagster_home"),
           "PROMO_MAX_EPOCHS": os.environ.get("PROMO_MAX_EPOCHS", "3"), "PYTHONPATH": str(ROOT)}
    promo = [sys.executable, "-c", "import sys; sys.path.insert(0, %r); from benchmarks.scale import _restricted_main;"
             " sys.exit(_restricted_main(sys.argv[1:]))" % str(ROOT)]
    subprocess.run(promo + ["simulate", "--preset", "demo", "--campaign", "demo", "--days", "6", "--users", "5000",
                            "--seed", "0",
                                "--start", REFERENCE_START.isoformat()], env=env, check=True, capture_output=True)
    pop_file = max((work / "landing" / "demo" / "population").iterdir())
    pop = pd.read_parquet(pop_file)
    rng = np.random.default_rng(0)
    big = pop.iloc[rng.integers(0, len(pop), args.e2e_users)].reset_index(drop=True)
    big["user_id"] = [f"p{i:07d}" for i in range(len(big))]
    big.to_parquet(pop_file)
    out = {"population_users": len(big), "models": list(E2E_MODELS), "dask": "local:2"}
    for name, extra in (("dask", {"PROMO_DASK_SCHEDULER": "local:2"}),):
        t0 = time.perf_counter()
        proc = subprocess.Popen(promo + ["run", "--no-progress"], env={**env, **extra}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        rss = WorkerRss()
        text, _ = proc.communicate()
        out[name] = {"rc": proc.returncode, "wall_s": time.perf_counter() - t0, "peak_rss_tree": rss.stop(),
                     "loadavg": uptime(), "tail": text.strip().splitlines()[-3:]}
    import duckdb

    with duckdb.connect(str(work / "w.duckdb"), read_only=True) as con:
        out["allocation_rows"] = con.execute("SELECT model, count(*) FROM allocation GROUP BY model").fetchall()
    out["slowest_steps"] = step_seconds(work / "dagster_home")[:12]
    return out


def step_seconds(home: Path) -> list[tuple[str, float]]:
    """(step, seconds) of every step of the runs stored under the Dagster home `home`, slowest first."""
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home))
    steps = [(s.step_key, (s.end_time or 0) - (s.start_time or 0)) for run in instance.get_runs()
             for s in instance.get_run_step_stats(run.run_id) if s.start_time]
    return sorted(steps, key=lambda x: -x[1])


def part_online(args) -> dict:
    import duckdb
    import pandas as pd

    os.environ.update(PROMO_ARTIFACTS_DIR=str(Path(args.tmp) / "scale_e2e" / "artifacts"))
    import torch

    torch.set_num_threads(1)
    from promo_assets.decisions import OnlinePolicy
    from promo_assets.models import registry

    work = Path(args.tmp) / "scale_e2e"
    with duckdb.connect(str(work / "w.duckdb"), read_only=True) as con:
        duals = con.execute("SELECT model, model_version, lambda_ FROM budget_dual WHERE budget_per_capita = "
                            "(SELECT min(budget_per_capita) FROM budget_dual) ORDER BY model").fetchall()
    pop = pd.read_parquet(max((work / "landing" / "demo" / "population").iterdir()))
    frame = pop.iloc[:200_000]
    out = {}
    for model, version, lam in duals:
        policy = OnlinePolicy(registry.get(model).load(version), lam)
        t0, p0 = time.perf_counter(), time.process_time()
        n = sum(len(b) for b in policy.decide_stream((frame.iloc[s:s + 1000] for s in range(0, len(frame), 1000)),
                                                     batch_size=1 << 16))
        wall, cpu = time.perf_counter() - t0, time.process_time() - p0
        t1 = time.perf_counter()
        single = sum(len(policy.decide(dict(r))) for r in frame.iloc[:300].to_dict("records"))
        t_single = time.perf_counter() - t1
        out[model] = {"users": n, "wall_s": wall, "cpu_s": cpu, "users_per_s": n / wall,
                      "users_per_cpu_s": n / cpu, "one_at_a_time_users_per_s": single / t_single}
    out["loadavg"] = uptime()
    return out


def part_scoring(args) -> dict:
    """The population's scoring step (`promo run`'s `predict_chunk` over frames of 2^16 users) on --e2e-users
    users, per model of the campaign in --scoring-dir (default: the e2e part's): the compiled LightGBM
    forests against LightGBM's C API (the forests switched off), CPU seconds each, and whether the two
    gave the same numbers (bitwise)."""
    import duckdb
    import pandas as pd

    work = Path(args.scoring_dir) if args.scoring_dir else Path(args.tmp) / "scale_e2e"
    os.environ.update(PROMO_ARTIFACTS_DIR=str(work / "artifacts"))
    import torch

    torch.set_num_threads(1)
    from promo_assets.allocation.chunked import predict_chunk
    from promo_assets.models import registry
    from promo_assets.models.lgbm import LGBMFitted

    warehouse = next(p for p in (work / "w.duckdb", work / "wh.duckdb") if p.exists())
    with duckdb.connect(str(warehouse), read_only=True) as con:
        models = con.execute("SELECT DISTINCT model, model_version FROM budget_dual ORDER BY model").fetchall()
    pop = pd.read_parquet(max((work / "landing" / "demo" / "population").iterdir()))
    rng = np.random.default_rng(0)
    pop = pop.iloc[rng.integers(0, len(pop), args.e2e_users)].reset_index(drop=True)
    frames = [pop.iloc[s:s + (1 << 16)] for s in range(0, len(pop), 1 << 16)]
    out = {"users": len(pop), "frame_users": 1 << 16}
    for name, version in models:
        if registry.get(name).needs_graph:
            continue
        model = registry.get(name).load(version)
        fitted = getattr(model, "model_", model)
        runs = {}
        for path in (("forest", "lightgbm") if isinstance(fitted, LGBMFitted) else ("model",)):
            if path == "lightgbm":  # the forests switched off: LightGBM's C API scores, as before them
                for part in ("response", "cost"):
                    fitted._live[f"forest/{part}"] = None
            predict_chunk(model, frames[0].iloc[:1000])  # warm-up (boosters, forests, kernels built)
            p0 = time.process_time()
            values = [predict_chunk(model, f)[0] for f in frames]
            runs[path] = (time.process_time() - p0, np.concatenate(values))
        row = {f"{path}_cpu_s": cpu for path, (cpu, _) in runs.items()}
        row.update({f"{path}_users_per_cpu_s": len(pop) / cpu for path, (cpu, _) in runs.items()})
        if "lightgbm" in runs:
            row["speedup"] = runs["lightgbm"][0] / runs["forest"][0]
            row["bitwise_equal"] = bool(np.array_equal(runs["forest"][1], runs["lightgbm"][1]))
        out[name] = row
        print(f"  scoring {name}: {row}", flush=True)
    out["loadavg"] = uptime()
    return out


def child(part: str, args) -> dict:
    if part == "scoring":
        return part_scoring(args)
    if part == "exact":
        return part_exact(args)
    if part == "curve":
        return part_sizes([int(x) for x in args.curve.split(",")], args.workers)
    if part == "big":
        return part_sizes([args.big_users], args.workers)
    if part == "parquet":
        return part_parquet(args)
    if part == "e2e":
        return part_e2e(args)
    if part == "online":
        return part_online(args)
    raise SystemExit(f"unknown part {part!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="exact,curve,big,parquet,e2e,online")
    ap.add_argument("--workers", type=int, default=0, help="Dask worker processes for curve/big/parquet (0: in-process)")
    ap.add_argument("--tmp", default="/tmp", help="where the Parquet files and the e2e campaign go (deleted / kept)")
    ap.add_argument("--big-users", type=int, default=100_000_000)
    ap.add_argument("--e2e-users", type=int, default=1_000_000)
    ap.add_argument("--curve", default="1000000,10000000,100000000", help="sizes of part curve")
    ap.add_argument("--exact-users", type=int, default=10_000_000)
    ap.add_argument("--scoring-dir", default=None,
                    help="part scoring: a decided campaign's folder (landing/, artifacts/, w.duckdb or wh.duckdb, e.g. "
                    "benchmarks/serve.py --workdir's) [the e2e part's]")
    ap.add_argument("--tag", default=None,
                    help="write benchmarks/results/scale--TAG.json [the parts joined by '-'; none for the default parts]")
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args), default=str), flush=True)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _results import Recorder

    rec = Recorder("scale")
    results = {"loadavg_start": uptime(), "cpus": os.cpu_count()}
    for part in args.parts.split(","):
        t0 = time.perf_counter()
        cmd = [sys.executable, __file__, "--child", part, "--workers", str(args.workers), "--tmp", args.tmp,
               "--big-users", str(args.big_users), "--e2e-users", str(args.e2e_users), "--curve", args.curve,
               "--exact-users", str(args.exact_users)] + (["--scoring-dir", args.scoring_dir] if args.scoring_dir else [])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        text, _ = proc.communicate()
        line = [x for x in text.splitlines() if x.startswith("RESULT ")]
        results[part] = json.loads(line[-1][7:]) if line else {"error": text[-2000:], "rc": proc.returncode}
        results[part]["part_wall_s"] = time.perf_counter() - t0
        print(f"[{part}] {json.dumps(results[part], default=str)}", flush=True)
        if part == "curve" and "error" not in results[part]:
            print(curve_table({n: r for n, r in results[part].items() if n.isdigit()}), flush=True)
    results["loadavg_end"] = uptime()
    print(json.dumps(results, default=str))
    headline = {f"part {p}: seconds": round(r["part_wall_s"], 1) for p, r in results.items() if isinstance(r, dict) and "part_wall_s" in r}
    headline |= {f"part {p}: FAILED": r["error"][-200:] for p, r in results.items() if isinstance(r, dict) and "error" in r}
    for model, r in (results.get("online") or {}).items():
        if isinstance(r, dict) and "users_per_cpu_s" in r:
            headline[f"decide_stream {model}: users per CPU-second"] = round(r["users_per_cpu_s"])
    default = args.parts == "exact,curve,big,parquet,e2e,online"
    rec.write(results, headline=headline,
              tag=args.tag if args.tag is not None else None if default else args.parts.replace(",", "-"))


if __name__ == "__main__":
    main()
