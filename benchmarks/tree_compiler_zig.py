"""tl2cgen's generated C, compiled by the C compiler of PyPI's `ziglang` (no system compiler needed),
against the compiled forest of `promo_assets.models.forest` (numba) on an S-learner's booster.

Measures, for the response booster of --model (a LightGBM S-learner of a decided campaign, e.g. the
folder of `benchmarks/serve.py --workdir`): the seconds tl2cgen + `zig cc` take to build the shared
library (what a service would pay per champion, before serving), whether its predictions on --users
users x every level are bitwise LightGBM's, and CPU microseconds per user (every level) for
tl2cgen's predictor (the N x K grid built outside the timing) and for the numba forest (one walk per
user for every level).

ziglang, treelite and tl2cgen are not dependencies of the project: install them apart, e.g.
`pip install --target DIR ziglang treelite tl2cgen`, and pass `--site DIR` (appended to sys.path, so
that the project's own numpy stays first). The library is built in a private temporary folder from
the verified model text and deleted afterwards (nothing of the artefact store is executed).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tree_compiler_zig.py --site DIR --workdir DIR
        [--model lgbm_s] [--users 20000] [--repeats 3] [--tag TAG]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _results import Recorder  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--site", required=True, help="folder where ziglang, treelite and tl2cgen are installed")
    ap.add_argument("--workdir", required=True, help="a decided campaign (benchmarks/serve.py --workdir's folder)")
    ap.add_argument("--model", default="lgbm_s", help="a LightGBM S-learner of the campaign [lgbm_s]")
    ap.add_argument("--users", type=int, default=20_000, help="users scored (the population resampled) [20000]")
    ap.add_argument("--repeats", type=int, default=3, help="timings of each path (the best is kept) [3]")
    ap.add_argument("--tag", default=None, help="write benchmarks/results/tree_compiler_zig--TAG.json")
    args = ap.parse_args()
    rec = Recorder("tree_compiler_zig")
    work = Path(args.workdir).resolve()
    os.environ["PROMO_ARTIFACTS_DIR"] = str(work / "artifacts")
    sys.path.append(str(Path(args.site).resolve()))
    import duckdb
    import lightgbm as lgb
    import pandas as pd
    import tl2cgen
    import treelite

    from promo_assets.models import registry
    from promo_assets.models.lgbm import _features

    warehouse = next(p for p in (work / "wh-first.duckdb", work / "wh.duckdb") if p.exists())
    with duckdb.connect(str(warehouse), read_only=True) as con:
        version = con.execute("SELECT model_version FROM budget_dual WHERE model = ? LIMIT 1", [args.model]).fetchone()[0]
    fitted = registry.get(args.model).load(version)
    fitted = getattr(fitted, "model_", fitted)
    if fitted.variant == "t":
        raise SystemExit(f"{args.model} is a T-learner: give an S-learner")
    pop = pd.read_parquet(max((work / "landing" / "demo" / "population").iterdir()))
    users = pop.iloc[np.random.default_rng(0).integers(0, len(pop), args.users)].reset_index(drop=True)
    x = _features(fitted.encoder, users)
    levels = fitted._level_values()
    k = len(levels)
    forest = fitted.compile()._forest("response")
    booster = lgb.Booster(model_str=fitted.boosters["response"])
    grid = np.column_stack([np.repeat(x, k, axis=0), np.tile(levels, len(x))])
    want = booster.predict(grid, num_threads=1)

    compiler = Path(tempfile.mkdtemp(prefix="zigcc-"))
    try:
        cc = compiler / "cc"
        cache = compiler / "zig-cache"  # a cold compile: zig's own cache (~/.cache/zig) would make a rebuild quick
        cc.write_text(f"#!/bin/sh\nZIG_GLOBAL_CACHE_DIR={cache} ZIG_LOCAL_CACHE_DIR={cache} "
                      f"PYTHONPATH={Path(args.site).resolve()} exec {sys.executable} -m ziglang cc \"$@\"\n")
        cc.chmod(0o700)
        lib = compiler / "forest.so"
        t0 = time.perf_counter()
        c0 = time.process_time()
        tl2cgen.export_lib(treelite.frontend.from_lightgbm(booster), toolchain=str(cc), libpath=str(lib),
                           params={"parallel_comp": 8}, nthread=1)
        compile_s, compile_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        predictor = tl2cgen.Predictor(str(lib), nthread=1)
        got = predictor.predict(tl2cgen.DMatrix(grid, dtype="float64")).reshape(-1)
        timings = {"tl2cgen": [], "numba_forest": []}
        for _ in range(args.repeats):
            p0 = time.process_time()
            predictor.predict(tl2cgen.DMatrix(grid, dtype="float64"))
            timings["tl2cgen"].append(time.process_time() - p0)
            p0 = time.process_time()
            mine = forest.predict(x, levels)
            timings["numba_forest"].append(time.process_time() - p0)
    finally:
        shutil.rmtree(compiler, ignore_errors=True)
    fig = {"model": args.model, "users": len(x), "levels": k, "trees": int(len(forest.tree_leaf)),
           "compile_wall_s": compile_s, "compile_cpu_s_this_process": compile_cpu_s,
           "tl2cgen_bitwise_equal_lightgbm": bool(np.array_equal(got, want)),
           "numba_forest_bitwise_equal_lightgbm": bool(np.array_equal(mine.reshape(-1), want)),
           "us_per_user": {name: min(t) / len(x) * 1e6 for name, t in timings.items()},
           "versions": {"treelite": treelite.__version__, "tl2cgen": tl2cgen.__version__}}
    head = {"compile_wall_s": round(compile_s, 1), **{f"{n}_us_per_user": round(v, 3) for n, v in fig["us_per_user"].items()},
            "tl2cgen_bitwise_equal_lightgbm": fig["tl2cgen_bitwise_equal_lightgbm"]}
    print(head)
    rec.write(fig, headline=head, tag=args.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
